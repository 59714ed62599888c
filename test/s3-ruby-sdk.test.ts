// The S3 door for Ruby programs: the AWS SDK for Ruby v3 as Debian ships it (ruby-aws-sdk-s3 1.117,
// aws-sdk-core 3.168; unmodified), path-style (force_path_style: true), the door's URL as endpoint,
// us-east-1, an access key of the door, drives the door through Aws::S3::Client, the resource
// interface (Aws::S3::Resource, Bucket, Object) and the transfer helpers a Ruby user reaches for
// (what Rails' Active Storage, Shrine or a rake task call), while the AWS SDK for JavaScript v3
// checks through the door, byte for byte, what the bucket holds. Its requests are shaped unlike the
// JavaScript and Python SDKs': this version predates the default CRC checksums, signs the payload (a
// hex x-amz-content-sha256 over plain HTTP), sends Content-MD5 on PutObject and UploadPart by
// default (compute_checksums), Content-MD5 on DeleteObjects (required), an x-amz-checksum-* header
// when asked for a flexible checksum, Expect: 100-continue above 1 MiB, asks ListObjects v1 (not v2)
// for encoding-type=url, and downloads a multipart object by partNumber; the door must take each of
// these as S3 does.
//
// Scenarios, in order (each builds on the ones before): CreateBucket, HeadBucket, ListBuckets,
// GetBucketLocation, Bucket#exists?; put_object (a string with content type, metadata and headers, an
// IO, an empty body, SHA-256 and CRC32 flexible checksums); get_object whole, ranged (first bytes,
// suffix, open-ended), into a response_target file, with response-* overrides, with checksum_mode
// (the SDK validates the checksum the door returns), head_object; list_objects_v2 with prefix and
// delimiter, several pages with max_keys (each_page, with and without a delimiter), start_after, keys
// with a space, '+', '%' and non-ASCII, list_objects v1 by marker (with encoding-type=url, which the
// SDK decodes), the resource collection; versions: a delete marker, GetObject/HeadObject on it,
// list_object_versions (and its pages), get and delete by version_id (removing the marker restores
// the object); delete_objects (a batch, a missing key, by version id, quiet); copy_object (COPY and
// REPLACE metadata, from a version), Object#copy_to to and from a non-ASCII key, and
// copy_to(multipart_copy: true) (UploadPartCopy); Object#upload_file above a 5 MiB
// multipart_threshold (a 12 MiB file in 5 MiB parts, ten threads), under it (one PUT), upload_stream
// (with and without tempfile), a 6 MiB put_object (Expect: 100-continue); download_file in its auto
// mode (by partNumber for a multipart object, by ranges for a large single-PUT one), get_range and
// single_request modes; presigned GET (with a response override and a version id), PUT (with a
// signed content type), HEAD and ListObjectsV2 URLs used with Node's fetch, an altered one and a PUT
// without its signed header refused; errors as the SDK raises them: a wrong secret
// (Aws::S3::Errors::SignatureDoesNotMatch, on a 6 MiB upload too, answered before its body), NoSuchKey,
// NotFound on HEAD, NoSuchBucket, NotModified (304) and PreconditionFailed (412) on conditional GETs
// and HEADs, InvalidRange, BadDigest, NoSuchUpload, BucketNotEmpty; and Bucket#delete!, which deletes
// every version and marker (list_object_versions, delete_objects) and then the bucket.
//
// Each scenario is a small Ruby script (also written to a temporary directory, to read after a
// failure) run in a ruby child process of its own (the server runs in this process), with a timeout,
// no retries (retry_limit: 0: a failing request is not hidden) and HOME in that directory (no ~/.aws
// is read). Loading the SDK costs a ruby one to two seconds, so each ruby is started one scenario
// ahead (it loads the SDK while the scenario before runs) and waits for its script on stdin. A
// handler added to the client records every request it sends, as signed (method, target, the
// checksum and content headers), and its status; the script prints its results and that record as one JSON line. ruby-aws-sdk-s3 is
// installed with apt-get when it can be (root on Debian), else the tests are skipped with the reason.
// Local-disk storage only, as in s3-tools.test.ts: these tests are about the S3 door.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectVersionsCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { assertNoOpenUploads, doorClient, getBytes, listKeys, multipartEtag, newDoorKey, s3Code } from './support/s3-door.js';
import { findOrInstall } from './support/system.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const RUBY = '/usr/bin/ruby';
const GEM = '/usr/lib/ruby/vendor_ruby/aws-sdk-s3.rb';
const PATH = '/usr/bin:/bin:/usr/sbin:/sbin';
const MiB = 1024 * 1024;
/** Not the access key's secret (the door's secrets are random). */
const WRONG_SECRET = 'wrongWRONGwrongWRONGwrongWRONGwrongWRONG';

/** One request the Ruby SDK sent, as its recording handler saw it once signed, and the status it got. */
interface Sent {
  op: string;
  method: string;
  target: string;
  headers: Record<string, string>;
  status?: number;
}

/** An error as the Ruby SDK raised it: its class, code, HTTP status and message. */
interface RubyError {
  error: string | null;
  code?: string;
  status?: number;
  message?: string;
}

/**
 * Loaded by every script: a client on the door with the key from the environment (or another secret),
 * a handler recording what it sends, `error_of` (the error a block raises, by class), `finish`
 * (prints the results and the record as JSON).
 */
const PRELUDE = String.raw`
require 'aws-sdk-s3'
require 'json'
require 'digest'

$requests = []
$requests_lock = Mutex.new

# Placed in the sign step after the signer: sees each request as sent (every retry, every thread).
class DoorRecorder < Seahorse::Client::Handler
  SHOWN = %w[content-md5 x-amz-content-sha256 expect content-encoding content-type content-length
             content-disposition range if-none-match if-match if-modified-since if-unmodified-since
             x-amz-trailer x-amz-decoded-content-length x-amz-sdk-checksum-algorithm x-amz-copy-source
             x-amz-copy-source-range x-amz-metadata-directive].freeze

  def call(context)
    req = context.http_request
    shown = {}
    req.headers.each_pair do |k, v|
      name = k.downcase
      shown[name] = v.to_s if SHOWN.include?(name) || name.start_with?('x-amz-checksum-') || name.start_with?('x-amz-meta-')
    end
    entry = { 'op' => context.operation_name.to_s, 'method' => req.http_method, 'target' => req.endpoint.request_uri, 'headers' => shown }
    $requests_lock.synchronize { $requests << entry }
    resp = @handler.call(context)
    entry['status'] = context.http_response.status_code
    resp
  end
end

BUCKET = ENV.fetch('BUCKET')
WORK = ENV.fetch('WORK')

def door_client(secret: ENV.fetch('DOOR_SECRET'), **extra)
  c = Aws::S3::Client.new(
    endpoint: ENV.fetch('DOOR_ENDPOINT'), region: 'us-east-1', force_path_style: true,
    credentials: Aws::Credentials.new(ENV.fetch('DOOR_KEY'), secret),
    retry_limit: 0, http_open_timeout: 5, http_read_timeout: 20, **extra
  )
  c.handlers.add(DoorRecorder, step: :sign, priority: 0)
  c
end

def error_of
  yield
  { 'error' => nil }
rescue Aws::S3::Errors::ServiceError => e
  { 'error' => e.class.name, 'code' => e.code, 'status' => e.context.http_response.status_code, 'message' => e.message }
end

def b64(s)
  [s].pack('m0')
end

def sha256_file(path)
  Digest::SHA256.file(path).hexdigest
end

def finish(result)
  $stdout.puts JSON.generate(result.merge('requests' => $requests))
end
`;

/**
 * A ruby started ahead of its script: loads the SDK and the prelude, then runs the script it is given
 * on stdin (its name on the first line), at the top level; exits at once when given none.
 */
const RUNNER = String.raw`
require_relative 'prelude'
name = $stdin.gets
exit 0 if name.nil?
eval($stdin.read, TOPLEVEL_BINDING, name.chomp, 1)
`;

function sha256(b: Buffer | string): string {
  return createHash('sha256').update(b).digest('hex');
}

function md5(b: Buffer | string): string {
  return createHash('md5').update(b).digest('hex');
}

function md5b64(b: Buffer | string): string {
  return createHash('md5').update(b).digest('base64');
}

/** "METHOD target -> status" lines, for assertion messages. */
function show(xs: Sent[]): string {
  return xs.map((x) => `${x.method} ${x.target}${x.headers.range ? ` [${x.headers.range}]` : ''} -> ${x.status ?? '?'}`).join('\n');
}

const skipOnS3 = testStorage() === 's3' ? 'local-disk storage only (the S3-storage pass keeps objects in memory)' : false;

describe('the AWS SDK for Ruby v3 (Debian ruby-aws-sdk-s3) on the S3 door', { skip: skipOnS3 }, () => {
  let t: TestServer | undefined;
  let s3: S3Client | undefined;
  let skip: string | false = false;
  let work = '';
  let bucket = '';
  let accessKeyId = '';
  let secret = '';
  /** Bodies the scripts upload (written to the work directory in before()). */
  const small = randomBytes(70_001);
  const big = randomBytes(12 * MiB + 12_345);
  const stream = randomBytes(11 * MiB + 4321);
  const six = randomBytes(6 * MiB + 777);
  const hello = 'Hello from Ruby\n';
  /** The version id of docs/hello.txt, for later scenarios. */
  let helloVersion = '';

  /** A ruby that has loaded the SDK and the prelude and waits for its script on stdin (see RUNNER). */
  let spare: Ruby | undefined;

  /** A ruby child process, its output so far, and its exit status once it has closed. */
  interface Ruby {
    child: ChildProcess;
    out: { stdout: string; stderr: string };
    closed: Promise<number | null>;
  }

  function startRuby(): Ruby {
    const env = {
      PATH,
      HOME: work,
      LC_ALL: 'C.UTF-8',
      AWS_EC2_METADATA_DISABLED: 'true',
      DOOR_ENDPOINT: t!.s3Url,
      DOOR_KEY: accessKeyId,
      DOOR_SECRET: secret,
      BUCKET: bucket,
      WORK: work,
    };
    const child = spawn(RUBY, [join(work, 'runner.rb')], { env, cwd: work, stdio: ['pipe', 'pipe', 'pipe'] });
    const out = { stdout: '', stderr: '' };
    child.stdout!.setEncoding('utf8').on('data', (d: string) => (out.stdout += d));
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (out.stderr += d));
    // A ruby that cannot start closes too (status null), with the reason in stderr.
    child.stdin!.on('error', () => {});
    child.on('error', (e) => (out.stderr += `\n${String(e)}`));
    const closed = new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    return { child, out, closed };
  }

  /**
   * Runs `code` (after the prelude) in a ruby; returns its JSON line. Fails the test with Ruby's
   * stderr when the script fails or is killed at `timeout`. Loading the SDK takes a ruby one to two
   * seconds, so the next script's ruby is started (and loads it) while this one runs.
   */
  async function ruby<R = Record<string, unknown>>(name: string, code: string, timeout = 20_000): Promise<R & { requests: Sent[] }> {
    await writeFile(join(work, `${name}.rb`), `require_relative 'prelude'\n${code}\n`);
    const { child, out, closed } = spare ?? startRuby();
    spare = startRuby();
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, timeout);
    child.stdin!.end(`${name}.rb\n${code}\n`);
    const status = await closed;
    clearTimeout(timer);
    const { stdout, stderr } = out;
    assert.equal(status, 0, `ruby ${name}.rb failed${killed ? ` (killed after ${timeout} ms)` : ''}:\n${stderr.slice(-6000)}\n${stdout.slice(-2000)}`);
    const last = stdout.trim().split('\n').pop() ?? '';
    return JSON.parse(last) as R & { requests: Sent[] };
  }

  const get = (key: string) => getBytes(s3!, bucket, key);

  const keys = (prefix: string) => listKeys(s3!, bucket, prefix);

  const noPendingUploads = () => assertNoOpenUploads(s3!, bucket);

  before(async () => {
    const found = await findOrInstall('ruby-aws-sdk-s3', [GEM]);
    if (found.skip) {
      skip = found.skip;
      console.log(`# Ruby SDK tests skipped: ${skip}`);
      return;
    }
    if (!existsSync(RUBY)) {
      skip = `${RUBY} not found (ruby-aws-sdk-s3 is installed without it)`;
      console.log(`# Ruby SDK tests skipped: ${skip}`);
      return;
    }
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    accessKeyId = k.accessKeyId;
    secret = k.secret;
    s3 = doorClient(t, k);
    bucket = `ruby-${randomBytes(4).toString('hex')}`;
    work = await mkdtemp(join(tmpdir(), 'files-rest-ruby-'));
    await writeFile(join(work, 'prelude.rb'), PRELUDE);
    await writeFile(join(work, 'runner.rb'), RUNNER);
    await writeFile(join(work, 'small.bin'), small);
    await writeFile(join(work, 'big.bin'), big);
    await writeFile(join(work, 'stream.bin'), stream);
    await writeFile(join(work, 'six.bin'), six);
    spare = startRuby();
  });

  after(async () => {
    if (spare) {
      // The ruby waiting for a script: no script, so it exits; killed if it does not within 5 s.
      const { child, closed } = spare;
      child.stdin!.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await closed;
      clearTimeout(timer);
    }
    s3?.destroy();
    await t?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('create_bucket, head_bucket, list_buckets, get_bucket_location and Bucket#exists? (path-style, us-east-1)', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const r = await ruby<{ created: string | null; exists: boolean; missing: boolean; listed: string[]; location: string; again: RubyError }>('bucket', String.raw`
      c = door_client
      s3 = Aws::S3::Resource.new(client: c)
      created = c.create_bucket(bucket: BUCKET)
      c.head_bucket(bucket: BUCKET)
      finish(
        'created' => created.location,
        'exists' => s3.bucket(BUCKET).exists?,
        'missing' => s3.bucket(BUCKET + '-none').exists?,
        'listed' => c.list_buckets.buckets.map(&:name),
        'location' => c.get_bucket_location(bucket: BUCKET).location_constraint,
        'again' => error_of { c.create_bucket(bucket: BUCKET) }
      )
    `);
    assert.equal(r.created, `/${bucket}`);
    assert.equal(r.exists, true);
    assert.equal(r.missing, false);
    assert.ok(r.listed.includes(bucket), r.listed.join(', '));
    assert.equal(r.location, '', 'us-east-1 is the empty LocationConstraint');
    // S3 in us-east-1: creating again a bucket you own is 200 (README).
    assert.deepEqual(r.again, { error: null });
    assert.deepEqual(r.requests.map((x) => `${x.method} ${x.target} ${x.status}`).slice(0, 2), [`PUT /${bucket}/ 200`, `HEAD /${bucket}/ 200`]);
    await s3!.send(new HeadBucketCommand({ Bucket: bucket }));
  });

  it('put_object: a string with content type, metadata and headers, an IO, an empty body; the Content-MD5 and signed payload hash this SDK sends by default, and SHA-256 / CRC32 flexible checksums, are checked and stored', async (ctx) => {
    if (skip) return ctx.skip(skip);
    type Put = { etag: string; version_id: string; checksum_sha256?: string | null; checksum_crc32?: string | null };
    const r = await ruby<{ puts: Record<string, Put> }>('put', String.raw`
      c = door_client
      puts = {}
      r = c.put_object(bucket: BUCKET, key: 'docs/hello.txt', body: "Hello from Ruby\n",
                       content_type: 'text/plain; charset=utf-8', cache_control: 'max-age=60',
                       content_disposition: 'attachment; filename="hello.txt"', content_language: 'en',
                       metadata: { 'author' => 'ruby-sdk', 'run' => 'door test 1' })
      puts['hello'] = { 'etag' => r.etag, 'version_id' => r.version_id }
      r = File.open(File.join(WORK, 'small.bin'), 'rb') { |f| c.put_object(bucket: BUCKET, key: 'docs/small.bin', body: f) }
      puts['small'] = { 'etag' => r.etag, 'version_id' => r.version_id }
      r = c.put_object(bucket: BUCKET, key: 'docs/empty', body: '')
      puts['empty'] = { 'etag' => r.etag, 'version_id' => r.version_id }
      data = File.binread(File.join(WORK, 'small.bin'))
      r = c.put_object(bucket: BUCKET, key: 'docs/sha256.bin', body: data, checksum_algorithm: 'SHA256')
      puts['sha256'] = { 'etag' => r.etag, 'version_id' => r.version_id, 'checksum_sha256' => r.checksum_sha256 }
      r = c.put_object(bucket: BUCKET, key: 'docs/crc32.bin', body: data, checksum_algorithm: 'CRC32')
      puts['crc32'] = { 'etag' => r.etag, 'version_id' => r.version_id, 'checksum_crc32' => r.checksum_crc32 }
      finish('puts' => puts)
    `);
    const p = r.puts;
    helloVersion = p.hello!.version_id;
    assert.equal(p.hello!.etag, `"${md5(hello)}"`);
    assert.equal(p.small!.etag, `"${md5(small)}"`);
    assert.equal(p.empty!.etag, `"${md5('')}"`);
    assert.equal(p.sha256!.checksum_sha256, createHash('sha256').update(small).digest('base64'));
    assert.match(p.crc32!.checksum_crc32 ?? '', /^[A-Za-z0-9+/]{6}==$/);
    for (const v of Object.values(p)) assert.match(v.version_id, /\S/, 'a version id for every put');

    // What this SDK sent: every PUT signed over its payload's SHA-256 (hex, as the door checked it);
    // Content-MD5 by default, a flexible checksum header instead when asked for one.
    const puts = r.requests.filter((x) => x.op === 'put_object');
    assert.equal(puts.length, 5, show(r.requests));
    const bodies = [hello, small, '', small, small];
    puts.forEach((x, i) => {
      assert.equal(x.status, 200, show(r.requests));
      assert.equal(x.headers['x-amz-content-sha256'], sha256(bodies[i]!), `${x.target}: a signed payload`);
    });
    assert.equal(puts[0]!.headers['content-md5'], md5b64(hello));
    assert.equal(puts[1]!.headers['content-md5'], md5b64(small));
    assert.equal(puts[2]!.headers['content-md5'], undefined, 'no Content-MD5 for an empty body');
    assert.equal(puts[3]!.headers['x-amz-checksum-sha256'], createHash('sha256').update(small).digest('base64'));
    assert.equal(puts[3]!.headers['content-md5'], undefined, 'a flexible checksum instead of Content-MD5');
    assert.equal(puts[4]!.headers['x-amz-checksum-crc32'], p.crc32!.checksum_crc32);
    assert.equal(puts[0]!.headers['x-amz-meta-author'], 'ruby-sdk');

    // Through the AWS SDK for JavaScript: the bytes, the headers, the metadata, the checksums.
    assert.equal((await get('docs/hello.txt')).toString(), hello);
    assert.ok((await get('docs/small.bin')).equals(small));
    assert.equal((await get('docs/empty')).length, 0);
    assert.ok((await get('docs/sha256.bin')).equals(small));
    const h = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'docs/hello.txt' }));
    assert.equal(h.ContentType, 'text/plain; charset=utf-8');
    assert.equal(h.CacheControl, 'max-age=60');
    assert.equal(h.ContentDisposition, 'attachment; filename="hello.txt"');
    assert.equal(h.ContentLanguage, 'en');
    assert.deepEqual(h.Metadata, { author: 'ruby-sdk', run: 'door test 1' });
    assert.equal(h.VersionId, helloVersion);
    const hs = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'docs/sha256.bin', ChecksumMode: 'ENABLED' }));
    assert.equal(hs.ChecksumSHA256, p.sha256!.checksum_sha256);
    const hc = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'docs/crc32.bin', ChecksumMode: 'ENABLED' }));
    assert.equal(hc.ChecksumCRC32, p.crc32!.checksum_crc32);
  });

  it('get_object whole, ranged (bytes=100-199, a suffix, open-ended), into a file, with response-* overrides and checksum_mode (validated by the SDK); head_object; Object#exists?', async (ctx) => {
    if (skip) return ctx.skip(skip);
    type Got = { status: number; body: string; length: number; range: string | null; etag: string };
    const r = await ruby<{
      whole: Got; first: Got; suffix: Got; open: Got; file: { sha256: string; etag: string };
      override: { content_type: string; content_disposition: string; body: string };
      checked: { checksum_sha256: string; validated: string | null; body_sha256: string };
      head: { content_type: string; content_length: number; etag: string; metadata: Record<string, string>; cache_control: string; content_disposition: string; version_id: string; last_modified: string };
      exists: boolean; absent: boolean; via_resource: string;
    }>('get', String.raw`
      c = door_client
      s3 = Aws::S3::Resource.new(client: c)
      def got(resp)
        body = resp.body.read
        { 'status' => resp.context.http_response.status_code, 'body' => b64(body), 'length' => resp.content_length,
          'range' => resp.content_range, 'etag' => resp.etag }
      end
      target = File.join(WORK, 'got-small.bin')
      f = c.get_object(bucket: BUCKET, key: 'docs/small.bin', response_target: target)
      o = c.get_object(bucket: BUCKET, key: 'docs/hello.txt', response_content_type: 'application/x-ruby',
                       response_content_disposition: 'inline; filename="x.rb"')
      k = c.get_object(bucket: BUCKET, key: 'docs/sha256.bin', checksum_mode: 'ENABLED')
      kb = k.body.read
      h = c.head_object(bucket: BUCKET, key: 'docs/hello.txt')
      finish(
        'whole' => got(c.get_object(bucket: BUCKET, key: 'docs/small.bin')),
        'first' => got(c.get_object(bucket: BUCKET, key: 'docs/small.bin', range: 'bytes=100-199')),
        'suffix' => got(c.get_object(bucket: BUCKET, key: 'docs/small.bin', range: 'bytes=-50')),
        'open' => got(c.get_object(bucket: BUCKET, key: 'docs/small.bin', range: 'bytes=70000-')),
        'file' => { 'sha256' => sha256_file(target), 'etag' => f.etag },
        'override' => { 'content_type' => o.content_type, 'content_disposition' => o.content_disposition, 'body' => o.body.read },
        'checked' => { 'checksum_sha256' => k.checksum_sha256, 'validated' => k.context[:http_checksum][:validated], 'body_sha256' => Digest::SHA256.hexdigest(kb) },
        'head' => { 'content_type' => h.content_type, 'content_length' => h.content_length, 'etag' => h.etag, 'metadata' => h.metadata,
                    'cache_control' => h.cache_control, 'content_disposition' => h.content_disposition, 'version_id' => h.version_id,
                    'last_modified' => h.last_modified.utc.iso8601 },
        'exists' => s3.bucket(BUCKET).object('docs/hello.txt').exists?,
        'absent' => s3.bucket(BUCKET).object('docs/nothing-here').exists?,
        'via_resource' => s3.bucket(BUCKET).object('docs/hello.txt').get.body.read
      )
    `);
    const bytes = (s: string) => Buffer.from(s, 'base64');
    assert.equal(r.whole.status, 200);
    assert.ok(bytes(r.whole.body).equals(small));
    assert.equal(r.whole.length, small.length);
    assert.equal(r.whole.etag, `"${md5(small)}"`);
    assert.deepEqual([r.first.status, r.first.range, r.first.length], [206, `bytes 100-199/${small.length}`, 100]);
    assert.ok(bytes(r.first.body).equals(small.subarray(100, 200)));
    assert.deepEqual([r.suffix.status, r.suffix.range, r.suffix.length], [206, `bytes ${small.length - 50}-${small.length - 1}/${small.length}`, 50]);
    assert.ok(bytes(r.suffix.body).equals(small.subarray(-50)));
    assert.deepEqual([r.open.status, r.open.range, r.open.length], [206, `bytes 70000-70000/${small.length}`, 1]);
    assert.ok(bytes(r.open.body).equals(small.subarray(70_000)));
    assert.deepEqual(r.file, { sha256: sha256(small), etag: `"${md5(small)}"` });
    assert.deepEqual(r.override, { content_type: 'application/x-ruby', content_disposition: 'inline; filename="x.rb"', body: hello });
    assert.deepEqual(r.checked, { checksum_sha256: createHash('sha256').update(small).digest('base64'), validated: 'SHA256', body_sha256: sha256(small) });
    assert.equal(r.head.content_type, 'text/plain; charset=utf-8');
    assert.equal(r.head.content_length, hello.length);
    assert.equal(r.head.etag, `"${md5(hello)}"`);
    assert.deepEqual(r.head.metadata, { author: 'ruby-sdk', run: 'door test 1' });
    assert.equal(r.head.cache_control, 'max-age=60');
    assert.equal(r.head.content_disposition, 'attachment; filename="hello.txt"');
    assert.equal(r.head.version_id, helloVersion);
    const jsHead = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'docs/hello.txt' }));
    assert.equal(r.head.last_modified, jsHead.LastModified!.toISOString().replace(/\.\d{3}Z$/, 'Z'));
    assert.equal(r.exists, true);
    assert.equal(r.absent, false);
    assert.equal(r.via_resource, hello);
    const ranged = r.requests.filter((x) => x.headers.range);
    assert.deepEqual(ranged.map((x) => `${x.headers.range} ${x.status}`), ['bytes=100-199 206', 'bytes=-50 206', 'bytes=70000- 206']);
  });

  it('list_objects_v2: prefix and delimiter, pages of max_keys (each_page) with and without a delimiter, start_after, odd keys decoded from encoding-type=url; list_objects v1 by marker; Bucket#objects', async (ctx) => {
    if (skip) return ctx.skip(skip);
    type Page = { keys: string[]; prefixes: string[]; truncated: boolean; token: boolean; key_count: number | null };
    const r = await ruby<{
      delimited: { keys: string[]; prefixes: string[] };
      pages: Page[]; delimited_pages: Page[]; after: string[]; v1_pages: Page[]; v1_delimited: Page[]; resource: string[]; count: number;
    }>('list', String.raw`
      c = door_client
      s3 = Aws::S3::Resource.new(client: c)
      keys = (1..5).map { |i| "tree/a/#{i}.txt" } + ['tree/b/1.txt', 'tree/b/deep/x.txt'] +
             (1..12).map { |i| format('tree/top-%02d', i) } + ['tree/space key é+100%.txt']
      keys.each { |k| c.put_object(bucket: BUCKET, key: k, body: k) }
      def page(p, v1 = false)
        { 'keys' => p.contents.map(&:key), 'prefixes' => p.common_prefixes.map(&:prefix), 'truncated' => p.is_truncated,
          'token' => !!(v1 ? p.next_marker : p.next_continuation_token), 'key_count' => v1 ? nil : p.key_count }
      end
      d = c.list_objects_v2(bucket: BUCKET, prefix: 'tree/', delimiter: '/')
      finish(
        'delimited' => { 'keys' => d.contents.map(&:key), 'prefixes' => d.common_prefixes.map(&:prefix) },
        'pages' => c.list_objects_v2(bucket: BUCKET, prefix: 'tree/', max_keys: 7).each_page.map { |p| page(p) },
        'delimited_pages' => c.list_objects_v2(bucket: BUCKET, prefix: 'tree/', delimiter: '/', max_keys: 5).each_page.map { |p| page(p) },
        'after' => c.list_objects_v2(bucket: BUCKET, prefix: 'tree/', start_after: 'tree/top-10').contents.map(&:key),
        'v1_pages' => c.list_objects(bucket: BUCKET, prefix: 'tree/', max_keys: 7).each_page.map { |p| page(p, true) },
        'v1_delimited' => c.list_objects(bucket: BUCKET, prefix: 'tree/', delimiter: '/', max_keys: 6).each_page.map { |p| page(p, true) },
        'resource' => s3.bucket(BUCKET).objects(prefix: 'tree/').map(&:key),
        'count' => keys.size
      )
    `);
    const all = await keys('tree/');
    assert.equal(all.length, r.count);
    assert.ok(all.includes('tree/space key é+100%.txt'), all.join('\n'));
    const top = all.filter((k) => !k.slice('tree/'.length).includes('/'));
    assert.deepEqual(r.delimited, { keys: top, prefixes: ['tree/a/', 'tree/b/'] });
    assert.deepEqual(r.pages.map((p) => p.keys.length), [7, 7, 6]);
    assert.deepEqual(r.pages.map((p) => [p.truncated, p.token, p.key_count]), [[true, true, 7], [true, true, 7], [false, false, 6]]);
    assert.deepEqual(r.pages.flatMap((p) => p.keys), all);
    // With a delimiter a page holds max_keys keys and prefixes together: 2 prefixes and 13 keys.
    assert.deepEqual(r.delimited_pages.map((p) => p.keys.length + p.prefixes.length), [5, 5, 5]);
    assert.deepEqual(r.delimited_pages.flatMap((p) => p.prefixes), ['tree/a/', 'tree/b/']);
    assert.deepEqual(r.delimited_pages.flatMap((p) => p.keys), top);
    assert.deepEqual(r.after, all.filter((k) => k > 'tree/top-10'));
    assert.deepEqual(r.v1_pages.map((p) => p.keys.length), [7, 7, 6]);
    assert.deepEqual(r.v1_pages.flatMap((p) => p.keys), all);
    assert.deepEqual(r.v1_delimited.flatMap((p) => p.prefixes), ['tree/a/', 'tree/b/']);
    assert.deepEqual(r.v1_delimited.flatMap((p) => p.keys), top);
    assert.deepEqual(r.v1_delimited.map((p) => p.truncated), [true, true, false]);
    assert.deepEqual(r.resource, all);
    // This SDK asks ListObjects (v1) for encoding-type=url (and decodes), not v2; v2 pages follow the
    // continuation token, v1 pages the marker.
    const lists = r.requests.filter((x) => x.op === 'list_objects_v2' || x.op === 'list_objects');
    assert.ok(lists.every((x) => x.status === 200), show(lists));
    assert.ok(lists.every((x) => x.target.includes('encoding-type=url') === (x.op === 'list_objects')), show(lists));
    assert.equal(lists.filter((x) => x.target.includes('continuation-token=')).length, 2 + 2, show(lists));
    assert.equal(lists.filter((x) => x.target.includes('marker=')).length, 2 + 2, show(lists));
  });

  it('versions: a delete marker (GetObject NoSuchKey, HeadObject NotFound), list_object_versions and its pages, get by version_id, delete by version_id (the marker: the object is back); delete_objects in a batch, by version id, quiet', async (ctx) => {
    if (skip) return ctx.skip(skip);
    type Version = { key: string; version_id: string; is_latest: boolean; size?: number; etag?: string };
    const r = await ruby<{
      v1: string; v2: string; marker: { delete_marker: boolean; version_id: string };
      deleted_get: RubyError; deleted_head: RubyError; old: string;
      listing: { versions: Version[]; markers: Version[] }; version_pages: number[];
      undelete: { delete_marker: boolean; version_id: string }; now: string; remove_v1: { version_id: string };
      after: { versions: Version[]; markers: Version[] };
      batch: { deleted: { key: string; delete_marker: boolean | null; version_id: string | null }[]; errors: unknown[] };
      by_version: { deleted: { key: string; version_id: string | null }[]; errors: unknown[] };
      quiet: { deleted: unknown[]; errors: unknown[] }; bv1: string; bv2: string;
    }>('versions', String.raw`
      c = door_client
      key = 'ver/doc.txt'
      def versions(c)
        l = c.list_object_versions(bucket: BUCKET, prefix: 'ver/')
        { 'versions' => l.versions.map { |v| { 'key' => v.key, 'version_id' => v.version_id, 'is_latest' => v.is_latest, 'size' => v.size, 'etag' => v.etag } },
          'markers' => l.delete_markers.map { |m| { 'key' => m.key, 'version_id' => m.version_id, 'is_latest' => m.is_latest } } }
      end
      v1 = c.put_object(bucket: BUCKET, key: key, body: 'first').version_id
      v2 = c.put_object(bucket: BUCKET, key: key, body: 'second!').version_id
      m = c.delete_object(bucket: BUCKET, key: key)
      deleted_get = error_of { c.get_object(bucket: BUCKET, key: key) }
      deleted_head = error_of { c.head_object(bucket: BUCKET, key: key) }
      old = c.get_object(bucket: BUCKET, key: key, version_id: v1).body.read
      listing = versions(c)
      version_pages = c.list_object_versions(bucket: BUCKET, prefix: 'ver/', max_keys: 1).each_page.map { |p| p.versions.size + p.delete_markers.size }
      u = c.delete_object(bucket: BUCKET, key: key, version_id: m.version_id)
      now = c.get_object(bucket: BUCKET, key: key).body.read
      g = c.delete_object(bucket: BUCKET, key: key, version_id: v1)
      after = versions(c)
      (1..3).each { |i| c.put_object(bucket: BUCKET, key: "batch/#{i}", body: "batch #{i}") }
      d = c.delete_objects(bucket: BUCKET, delete: { objects: (1..3).map { |i| { key: "batch/#{i}" } } + [{ key: 'batch/missing' }], quiet: false })
      bv1 = c.put_object(bucket: BUCKET, key: 'batch/v', body: 'one').version_id
      bv2 = c.put_object(bucket: BUCKET, key: 'batch/v', body: 'two').version_id
      dv = c.delete_objects(bucket: BUCKET, delete: { objects: [{ key: 'batch/v', version_id: bv1 }] })
      c.put_object(bucket: BUCKET, key: 'batch/q', body: 'q')
      q = c.delete_objects(bucket: BUCKET, delete: { objects: [{ key: 'batch/q' }], quiet: true })
      finish(
        'v1' => v1, 'v2' => v2, 'marker' => { 'delete_marker' => m.delete_marker, 'version_id' => m.version_id },
        'deleted_get' => deleted_get, 'deleted_head' => deleted_head, 'old' => old, 'listing' => listing, 'version_pages' => version_pages,
        'undelete' => { 'delete_marker' => u.delete_marker, 'version_id' => u.version_id }, 'now' => now,
        'remove_v1' => { 'version_id' => g.version_id }, 'after' => after,
        'batch' => { 'deleted' => d.deleted.map { |x| { 'key' => x.key, 'delete_marker' => x.delete_marker, 'version_id' => x.delete_marker_version_id } }, 'errors' => d.errors.map(&:to_h) },
        'by_version' => { 'deleted' => dv.deleted.map { |x| { 'key' => x.key, 'version_id' => x.version_id } }, 'errors' => dv.errors.map(&:to_h) },
        'quiet' => { 'deleted' => q.deleted.map(&:to_h), 'errors' => q.errors.map(&:to_h) }, 'bv1' => bv1, 'bv2' => bv2
      )
    `);
    assert.equal(r.marker.delete_marker, true);
    assert.match(r.marker.version_id, /\S/);
    assert.deepEqual([r.deleted_get.error, r.deleted_get.status], ['Aws::S3::Errors::NoSuchKey', 404]);
    assert.deepEqual([r.deleted_head.error, r.deleted_head.status], ['Aws::S3::Errors::NotFound', 404]);
    assert.equal(r.old, 'first');
    assert.deepEqual(r.listing.versions.map((v) => [v.version_id, v.is_latest, v.size, v.etag]), [
      [r.v2, false, 7, `"${md5('second!')}"`],
      [r.v1, false, 5, `"${md5('first')}"`],
    ]);
    assert.deepEqual(r.listing.markers, [{ key: 'ver/doc.txt', version_id: r.marker.version_id, is_latest: true }]);
    assert.deepEqual(r.version_pages, [1, 1, 1]);
    assert.deepEqual(r.undelete, { delete_marker: true, version_id: r.marker.version_id });
    assert.equal(r.now, 'second!');
    assert.equal(r.remove_v1.version_id, r.v1);
    assert.deepEqual(r.after, { versions: [{ key: 'ver/doc.txt', version_id: r.v2, is_latest: true, size: 7, etag: `"${md5('second!')}"` }], markers: [] });
    // The same through the JavaScript SDK.
    const js = await s3!.send(new ListObjectVersionsCommand({ Bucket: bucket, Prefix: 'ver/' }));
    assert.deepEqual((js.Versions ?? []).map((v) => v.VersionId), [r.v2]);
    assert.equal(js.DeleteMarkers, undefined);

    // The batch: every key reported deleted (a missing one too, as S3 does), each with a new marker.
    assert.deepEqual(r.batch.errors, []);
    assert.deepEqual(r.batch.deleted.map((d) => [d.key, d.delete_marker]).sort(), [['batch/1', true], ['batch/2', true], ['batch/3', true], ['batch/missing', true]]);
    assert.deepEqual(r.by_version, { deleted: [{ key: 'batch/v', version_id: r.bv1 }], errors: [] });
    assert.deepEqual(r.quiet, { deleted: [], errors: [] });
    assert.deepEqual(await keys('batch/'), ['batch/v']);
    assert.equal((await get('batch/v')).toString(), 'two');
    const bv = await s3!.send(new ListObjectVersionsCommand({ Bucket: bucket, Prefix: 'batch/v' }));
    assert.deepEqual((bv.Versions ?? []).map((v) => v.VersionId), [r.bv2]);
    // DeleteObjects needs Content-MD5 (httpChecksumRequired): the SDK sends it, the door checked it.
    const batches = r.requests.filter((x) => x.op === 'delete_objects');
    assert.equal(batches.length, 3);
    assert.ok(batches.every((x) => /^[A-Za-z0-9+/]{22}==$/.test(x.headers['content-md5'] ?? '') && x.status === 200), JSON.stringify(batches));
  });

  it('Object#upload_file above multipart_threshold (12 MiB in 5 MiB parts, ten threads) and under it, upload_stream (with and without tempfile), a 6 MiB put_object with Expect: 100-continue', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const r = await ruby<{ etags: Record<string, string>; uploads: string[] }>('upload', String.raw`
      c = door_client
      s3 = Aws::S3::Resource.new(client: c)
      b = s3.bucket(BUCKET)
      b.object('big/upload_file.bin').upload_file(File.join(WORK, 'big.bin'), multipart_threshold: 5 * 1024 * 1024,
                                                  content_type: 'application/x-big', metadata: { 'via' => 'upload_file' })
      b.object('big/small-upload_file.bin').upload_file(File.join(WORK, 'small.bin'), multipart_threshold: 5 * 1024 * 1024)
      [['big/upload_stream.bin', 'stream.bin', false], ['big/upload_stream-tempfile.bin', 'six.bin', true]].each do |key, file, tempfile|
        b.object(key).upload_stream(part_size: 5 * 1024 * 1024, tempfile: tempfile, metadata: { 'via' => 'upload_stream' }) do |w|
          File.open(File.join(WORK, file), 'rb') { |f| while (chunk = f.read(1024 * 1024)); w.write(chunk); end }
        end
      end
      File.open(File.join(WORK, 'six.bin'), 'rb') { |f| c.put_object(bucket: BUCKET, key: 'big/six.bin', body: f) }
      keys = %w[big/upload_file.bin big/small-upload_file.bin big/upload_stream.bin big/upload_stream-tempfile.bin big/six.bin]
      finish(
        'etags' => keys.to_h { |k| [k, c.head_object(bucket: BUCKET, key: k).etag] },
        'uploads' => c.list_multipart_uploads(bucket: BUCKET).uploads.map(&:key)
      )
    `, 60_000);
    const parts = (b: Buffer) => Array.from({ length: Math.ceil(b.length / (5 * MiB)) }, (_, i) => b.subarray(i * 5 * MiB, (i + 1) * 5 * MiB));
    assert.deepEqual(r.etags, {
      'big/upload_file.bin': multipartEtag(parts(big)),
      'big/small-upload_file.bin': `"${md5(small)}"`,
      'big/upload_stream.bin': multipartEtag(parts(stream)),
      'big/upload_stream-tempfile.bin': multipartEtag(parts(six)),
      'big/six.bin': `"${md5(six)}"`,
    });
    assert.deepEqual(r.uploads, []);
    await noPendingUploads();
    assert.ok((await get('big/upload_file.bin')).equals(big), 'upload_file: the same bytes');
    assert.ok((await get('big/upload_stream.bin')).equals(stream), 'upload_stream: the same bytes');
    assert.ok((await get('big/upload_stream-tempfile.bin')).equals(six), 'upload_stream (tempfile): the same bytes');
    const hs = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'big/upload_stream.bin' }));
    assert.deepEqual([hs.ContentLength, hs.Metadata], [stream.length, { via: 'upload_stream' }]);
    assert.ok((await get('big/six.bin')).equals(six), 'put_object: the same bytes');
    const h = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'big/upload_file.bin' }));
    assert.equal(h.ContentType, 'application/x-big');
    assert.deepEqual(h.Metadata, { via: 'upload_file' });
    assert.equal(h.ContentLength, big.length);

    // upload_file: one CreateMultipartUpload, three parts (each with its Content-MD5), one completion.
    const onFile = r.requests.filter((x) => x.target.startsWith(`/${bucket}/big/upload_file.bin?`));
    assert.deepEqual(onFile.map((x) => x.op).sort(), ['complete_multipart_upload', 'create_multipart_upload', 'upload_part', 'upload_part', 'upload_part']);
    const fileParts = onFile.filter((x) => x.op === 'upload_part').sort((a, b) => a.target.localeCompare(b.target));
    assert.deepEqual(fileParts.map((x) => x.headers['content-md5']), parts(big).map(md5b64));
    assert.deepEqual(fileParts.map((x) => x.headers['x-amz-content-sha256']), parts(big).map(sha256));
    assert.ok(fileParts.every((x) => x.status === 200 && x.headers.expect === '100-continue'), JSON.stringify(fileParts.map((x) => x.headers)));
    // The small file under the threshold: one PUT.
    assert.deepEqual(r.requests.filter((x) => x.target.startsWith(`/${bucket}/big/small-upload_file.bin`)).map((x) => `${x.op} ${x.status}`), ['put_object 200', 'head_object 200']);
    const sixPut = r.requests.find((x) => x.op === 'put_object' && x.target === `/${bucket}/big/six.bin`);
    assert.equal(sixPut?.headers.expect, '100-continue');
    assert.equal(sixPut?.status, 200);
  });

  it('download_file: auto mode (by partNumber for a multipart object, by ranges for a large single-PUT one), get_range with a 4 MiB chunk_size, single_request', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const r = await ruby<{ sha: Record<string, string> }>('download', String.raw`
      c = door_client
      b = Aws::S3::Resource.new(client: c).bucket(BUCKET)
      out = {}
      b.object('big/upload_file.bin').download_file(File.join(WORK, 'd-auto.bin'))
      out['auto'] = sha256_file(File.join(WORK, 'd-auto.bin'))
      b.object('big/six.bin').download_file(File.join(WORK, 'd-six.bin'))
      out['six'] = sha256_file(File.join(WORK, 'd-six.bin'))
      b.object('big/upload_file.bin').download_file(File.join(WORK, 'd-range.bin'), mode: 'get_range', chunk_size: 4 * 1024 * 1024)
      out['range'] = sha256_file(File.join(WORK, 'd-range.bin'))
      b.object('big/six.bin').download_file(File.join(WORK, 'd-single.bin'), mode: 'single_request')
      out['single'] = sha256_file(File.join(WORK, 'd-single.bin'))
      b.object('docs/small.bin').download_file(File.join(WORK, 'd-small.bin'))
      out['small'] = sha256_file(File.join(WORK, 'd-small.bin'))
      finish('sha' => out)
    `, 60_000);
    assert.deepEqual(r.sha, { auto: sha256(big), six: sha256(six), range: sha256(big), single: sha256(six), small: sha256(small) });
    const on = (key: string, op: string) => r.requests.filter((x) => x.op === op && new URL(x.target, 'http://door').pathname === `/${bucket}/${key}`);
    // The multipart object: HEAD ?partNumber=1 (x-amz-mp-parts-count: 3), HEAD, then one GET per part.
    const autoGets = on('big/upload_file.bin', 'get_object').filter((x) => x.target.includes('partNumber='));
    assert.deepEqual(autoGets.map((x) => `${new URL(x.target, 'http://door').searchParams.get('partNumber')} ${x.status}`).sort(), ['1 206', '2 206', '3 206'], show(r.requests));
    assert.ok(on('big/upload_file.bin', 'head_object').some((x) => x.target.includes('partNumber=1') && x.status === 206), show(r.requests));
    // The single-PUT 6 MiB object: no parts count, so ranged GETs of 5 MiB (the SDK asks for one byte
    // past the end in the last one; S3 answers the bytes there are, and so does the door).
    assert.deepEqual(on('big/six.bin', 'get_object').map((x) => `${x.headers.range} ${x.status}`).sort(), [`bytes=0-${5 * MiB} 206`, `bytes=${5 * MiB + 1}-${six.length} 206`, 'undefined 200'], 'two ranged GETs (auto), one whole (single_request)');
    const ranges = on('big/upload_file.bin', 'get_object').filter((x) => x.headers.range);
    assert.equal(ranges.length, 4, show(ranges));
    assert.ok(ranges.every((x) => x.status === 206));
  });

  it('copy_object (COPY and REPLACE metadata, from a version), Object#copy_to to and from a non-ASCII key, copy_to(multipart_copy: true) with UploadPartCopy', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const r = await ruby<{
      copy: { etag: string; version_id: string; source_version: string | null };
      replaced: { etag: string }; from_version: { etag: string; source_version: string | null };
      there: { etag: string }; back: { etag: string }; multipart: { etag: string; parts: number | null };
    }>('copy', String.raw`
      c = door_client
      b = Aws::S3::Resource.new(client: c).bucket(BUCKET)
      cp = c.copy_object(bucket: BUCKET, key: 'copies/hello.txt', copy_source: "#{BUCKET}/docs/hello.txt")
      rp = c.copy_object(bucket: BUCKET, key: 'copies/hello-replaced.txt', copy_source: "#{BUCKET}/docs/hello.txt",
                         metadata_directive: 'REPLACE', content_type: 'text/markdown', metadata: { 'edited' => 'yes' })
      v2 = c.list_object_versions(bucket: BUCKET, prefix: 'ver/doc.txt').versions.first.version_id
      fv = c.copy_object(bucket: BUCKET, key: 'copies/from-version.txt', copy_source: "#{BUCKET}/ver/doc.txt?versionId=#{v2}")
      b.object('docs/small.bin').copy_to(bucket: BUCKET, key: 'copies/été à+b 100%.bin')
      b.object('copies/été à+b 100%.bin').copy_to("#{BUCKET}/copies/back.bin")
      b.object('big/six.bin').copy_to(bucket: BUCKET, key: 'copies/six-multipart.bin', multipart_copy: true)
      mh = c.head_object(bucket: BUCKET, key: 'copies/six-multipart.bin', part_number: 1)
      finish(
        'copy' => { 'etag' => cp.copy_object_result.etag, 'version_id' => cp.version_id, 'source_version' => cp.copy_source_version_id },
        'replaced' => { 'etag' => rp.copy_object_result.etag },
        'from_version' => { 'etag' => fv.copy_object_result.etag, 'source_version' => fv.copy_source_version_id },
        'there' => { 'etag' => c.head_object(bucket: BUCKET, key: 'copies/été à+b 100%.bin').etag },
        'back' => { 'etag' => c.head_object(bucket: BUCKET, key: 'copies/back.bin').etag },
        'multipart' => { 'etag' => c.head_object(bucket: BUCKET, key: 'copies/six-multipart.bin').etag, 'parts' => mh.parts_count }
      )
    `, 30_000);
    assert.equal(r.copy.etag, `"${md5(hello)}"`);
    assert.match(r.copy.version_id, /\S/);
    assert.equal(r.copy.source_version, helloVersion);
    assert.equal(r.replaced.etag, `"${md5(hello)}"`);
    assert.equal(r.from_version.etag, `"${md5('second!')}"`);
    assert.deepEqual(r.there, { etag: `"${md5(small)}"` });
    assert.deepEqual(r.back, { etag: `"${md5(small)}"` });
    assert.equal((await get('copies/hello.txt')).toString(), hello);
    const kept = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'copies/hello.txt' }));
    assert.deepEqual([kept.ContentType, kept.Metadata], ['text/plain; charset=utf-8', { author: 'ruby-sdk', run: 'door test 1' }]);
    const replaced = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'copies/hello-replaced.txt' }));
    assert.deepEqual([replaced.ContentType, replaced.Metadata], ['text/markdown', { edited: 'yes' }]);
    assert.equal((await get('copies/from-version.txt')).toString(), 'second!');
    assert.ok((await get('copies/été à+b 100%.bin')).equals(small));
    assert.ok((await get('copies/back.bin')).equals(small));
    // ObjectMultipartCopier: the source's ranges (parts of 50 MiB at least, so here one) copied with
    // UploadPartCopy into a multipart upload.
    assert.ok((await get('copies/six-multipart.bin')).equals(six));
    const partCopies = r.requests.filter((x) => x.op === 'upload_part_copy');
    assert.deepEqual(partCopies.map((x) => `${x.headers['x-amz-copy-source-range']} ${x.headers['x-amz-copy-source']} ${x.status}`), [`bytes=0-${six.length - 1} ${bucket}/big/six.bin 200`]);
    assert.deepEqual(r.multipart, { etag: multipartEtag([six]), parts: 1 });
    await noPendingUploads();
  });

  it('presigned URLs (Aws::S3::Presigner, Object#presigned_url) used with fetch: GET with a response override and by version id, PUT with a signed content type, HEAD, ListObjectsV2; an altered URL and a PUT without its signed header are refused', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const r = await ruby<{ get: string; version: string; put: string; put_odd: string; head: string; list: string }>('presign', String.raw`
      c = door_client
      signer = Aws::S3::Presigner.new(client: c)
      b = Aws::S3::Resource.new(client: c).bucket(BUCKET)
      finish(
        'get' => signer.presigned_url(:get_object, bucket: BUCKET, key: 'docs/hello.txt', expires_in: 300, response_content_disposition: 'inline'),
        'version' => signer.presigned_url(:get_object, bucket: BUCKET, key: 'ver/doc.txt',
                                          version_id: c.list_object_versions(bucket: BUCKET, prefix: 'ver/doc.txt').versions.first.version_id),
        'put' => b.object('presigned/put.bin').presigned_url(:put, expires_in: 300, content_type: 'application/x-test'),
        'put_odd' => b.object('presigned/ü ber+1.txt').presigned_url(:put),
        'head' => b.object('docs/small.bin').presigned_url(:head),
        'list' => signer.presigned_url(:list_objects_v2, bucket: BUCKET, prefix: 'docs/')
      )
    `);
    for (const u of Object.values(r).filter((v): v is string => typeof v === 'string')) assert.match(u, /X-Amz-Signature=[0-9a-f]{64}/, u);
    const g = await fetch(r.get);
    assert.equal(g.status, 200);
    assert.equal(await g.text(), hello);
    assert.equal(g.headers.get('content-disposition'), 'inline');
    const v = await fetch(r.version);
    assert.deepEqual([v.status, await v.text()], [200, 'second!']);
    const body = randomBytes(3000);
    const p = await fetch(r.put, { method: 'PUT', body, headers: { 'content-type': 'application/x-test' } });
    assert.equal(p.status, 200, await p.text());
    assert.equal(p.headers.get('etag'), `"${md5(body)}"`);
    assert.ok((await get('presigned/put.bin')).equals(body));
    assert.equal((await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'presigned/put.bin' }))).ContentType, 'application/x-test');
    const po = await fetch(r.put_odd, { method: 'PUT', body: 'odd key' });
    assert.equal(po.status, 200, await po.text());
    assert.equal((await get('presigned/ü ber+1.txt')).toString(), 'odd key');
    const h = await fetch(r.head, { method: 'HEAD' });
    assert.deepEqual([h.status, h.headers.get('content-length'), h.headers.get('etag')], [200, String(small.length), `"${md5(small)}"`]);
    const l = await fetch(r.list);
    const xml = await l.text();
    assert.equal(l.status, 200, xml);
    for (const k of ['docs/hello.txt', 'docs/small.bin', 'docs/empty']) assert.ok(xml.includes(`<Key>${k}</Key>`), xml);
    // Another key under the same signature, and the PUT without the content type it signed.
    const altered = await fetch(r.get.replace('/docs/hello.txt?', '/docs/small.bin?'));
    const alteredBody = await altered.text();
    assert.equal(altered.status, 403);
    assert.match(alteredBody, /<Code>SignatureDoesNotMatch<\/Code>/);
    const unsigned = await fetch(r.put, { method: 'PUT', body: 'other', headers: { 'content-type': 'text/plain' } });
    assert.equal(unsigned.status, 403);
    assert.match(await unsigned.text(), /<Code>SignatureDoesNotMatch<\/Code>/);
    assert.ok((await get('presigned/put.bin')).equals(body), 'the refused PUT changed nothing');
  });

  it('errors as the SDK raises them: SignatureDoesNotMatch (a wrong secret, on a 6 MiB upload before its body), NoSuchKey, NotFound, NoSuchBucket, NotModified (304), PreconditionFailed (412), InvalidRange, BadDigest, NoSuchUpload, BucketNotEmpty', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const r = await ruby<Record<string, RubyError> & { ok_none_match: string; ok_match: string; big_wrong_ms: number }>('errors', String.raw`
      c = door_client
      bad = door_client(secret: '${WRONG_SECRET}')
      s3 = Aws::S3::Resource.new(client: c)
      h = c.head_object(bucket: BUCKET, key: 'docs/hello.txt')
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      big_wrong = error_of { File.open(File.join(WORK, 'six.bin'), 'rb') { |f| bad.put_object(bucket: BUCKET, key: 'errors/six.bin', body: f) } }
      big_wrong_ms = ((Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) * 1000).round
      finish(
        'wrong_put' => error_of { bad.put_object(bucket: BUCKET, key: 'errors/x', body: 'x') },
        'wrong_get' => error_of { bad.get_object(bucket: BUCKET, key: 'docs/hello.txt') },
        'wrong_list' => error_of { bad.list_objects_v2(bucket: BUCKET) },
        'wrong_head' => error_of { bad.head_object(bucket: BUCKET, key: 'docs/hello.txt') },
        'big_wrong' => big_wrong, 'big_wrong_ms' => big_wrong_ms,
        'no_key' => error_of { c.get_object(bucket: BUCKET, key: 'errors/missing') },
        'no_key_head' => error_of { c.head_object(bucket: BUCKET, key: 'errors/missing') },
        'no_bucket_get' => error_of { c.get_object(bucket: 'no-such-ruby-bucket', key: 'k') },
        'no_bucket_list' => error_of { c.list_objects_v2(bucket: 'no-such-ruby-bucket') },
        'no_bucket_put' => error_of { c.put_object(bucket: 'no-such-ruby-bucket', key: 'k', body: 'x') },
        'no_bucket_head' => error_of { c.head_bucket(bucket: 'no-such-ruby-bucket') },
        'none_match' => error_of { c.get_object(bucket: BUCKET, key: 'docs/hello.txt', if_none_match: h.etag) },
        'none_match_head' => error_of { c.head_object(bucket: BUCKET, key: 'docs/hello.txt', if_none_match: h.etag) },
        'modified_since' => error_of { c.get_object(bucket: BUCKET, key: 'docs/hello.txt', if_modified_since: h.last_modified) },
        'match' => error_of { c.get_object(bucket: BUCKET, key: 'docs/hello.txt', if_match: '"00000000000000000000000000000000"') },
        'unmodified_since' => error_of { c.get_object(bucket: BUCKET, key: 'docs/hello.txt', if_unmodified_since: h.last_modified - 3600) },
        'ok_none_match' => c.get_object(bucket: BUCKET, key: 'docs/hello.txt', if_none_match: '"other"').body.read,
        'ok_match' => c.get_object(bucket: BUCKET, key: 'docs/hello.txt', if_match: h.etag).body.read,
        'range' => error_of { c.get_object(bucket: BUCKET, key: 'docs/hello.txt', range: 'bytes=999999-') },
        'bad_md5' => error_of { c.put_object(bucket: BUCKET, key: 'errors/bad-md5', body: 'abc', content_md5: [Digest::MD5.digest('abd')].pack('m0')) },
        'no_upload' => error_of { c.upload_part(bucket: BUCKET, key: 'errors/mp', upload_id: 'no-such-upload', part_number: 1, body: 'x') },
        'not_empty' => error_of { c.delete_bucket(bucket: BUCKET) },
        'bucket_gone' => { 'error' => s3.bucket('no-such-ruby-bucket').exists? ? 'exists' : nil }
      )
    `, 30_000);
    const e = (x: RubyError | undefined) => [x?.error, x?.status];
    assert.deepEqual(e(r.wrong_put), ['Aws::S3::Errors::SignatureDoesNotMatch', 403], JSON.stringify(r.wrong_put));
    assert.deepEqual(e(r.wrong_get), ['Aws::S3::Errors::SignatureDoesNotMatch', 403]);
    assert.deepEqual(e(r.wrong_list), ['Aws::S3::Errors::SignatureDoesNotMatch', 403]);
    // A HEAD answer has no body: the SDK names the error by its status, as against S3.
    assert.deepEqual(e(r.wrong_head), ['Aws::S3::Errors::Forbidden', 403]);
    assert.deepEqual(e(r.big_wrong), ['Aws::S3::Errors::SignatureDoesNotMatch', 403], JSON.stringify(r.big_wrong));
    const bigPut = r.requests.find((x) => x.target === `/${bucket}/errors/six.bin`);
    assert.equal(bigPut?.headers.expect, '100-continue');
    assert.ok(r.big_wrong_ms < 5000, `the refusal came before the body: ${r.big_wrong_ms} ms`);
    assert.deepEqual(e(r.no_key), ['Aws::S3::Errors::NoSuchKey', 404]);
    assert.deepEqual(e(r.no_key_head), ['Aws::S3::Errors::NotFound', 404]);
    assert.deepEqual(e(r.no_bucket_get), ['Aws::S3::Errors::NoSuchBucket', 404]);
    assert.deepEqual(e(r.no_bucket_list), ['Aws::S3::Errors::NoSuchBucket', 404]);
    assert.deepEqual(e(r.no_bucket_put), ['Aws::S3::Errors::NoSuchBucket', 404]);
    assert.deepEqual(e(r.no_bucket_head), ['Aws::S3::Errors::NotFound', 404]);
    assert.deepEqual(e(r.none_match), ['Aws::S3::Errors::NotModified', 304]);
    assert.deepEqual(e(r.none_match_head), ['Aws::S3::Errors::NotModified', 304]);
    assert.deepEqual(e(r.modified_since), ['Aws::S3::Errors::NotModified', 304]);
    assert.deepEqual(e(r.match), ['Aws::S3::Errors::PreconditionFailed', 412]);
    assert.deepEqual(e(r.unmodified_since), ['Aws::S3::Errors::PreconditionFailed', 412]);
    assert.equal(r.ok_none_match, hello);
    assert.equal(r.ok_match, hello);
    assert.deepEqual(e(r.range), ['Aws::S3::Errors::InvalidRange', 416]);
    assert.deepEqual(e(r.bad_md5), ['Aws::S3::Errors::BadDigest', 400]);
    assert.deepEqual(e(r.no_upload), ['Aws::S3::Errors::NoSuchUpload', 404]);
    assert.deepEqual(e(r.not_empty), ['Aws::S3::Errors::BucketNotEmpty', 409]);
    assert.deepEqual(r.bucket_gone, { error: null });
    assert.deepEqual(await keys('errors/'), [], 'nothing stored by a refused request');
    await noPendingUploads();
  });

  it('Bucket#delete!: every version and delete marker deleted (list_object_versions, delete_objects), then the bucket', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const before = await s3!.send(new ListObjectVersionsCommand({ Bucket: bucket }));
    const total = (before.Versions?.length ?? 0) + (before.DeleteMarkers?.length ?? 0);
    assert.ok(total > 40 && !before.IsTruncated, `${total} versions and markers`);
    const r = await ruby<{ versions: number; exists: boolean; listed: boolean }>('delete-bucket', String.raw`
      c = door_client
      b = Aws::S3::Resource.new(client: c).bucket(BUCKET)
      n = b.object_versions.count
      b.delete!
      finish('versions' => n, 'exists' => b.exists?, 'listed' => c.list_buckets.buckets.map(&:name).include?(BUCKET))
    `, 30_000);
    assert.deepEqual(r, { versions: total, exists: false, listed: false, requests: r.requests });
    assert.ok(r.requests.some((x) => x.op === 'delete_objects' && x.status === 200), show(r.requests));
    assert.deepEqual(r.requests.filter((x) => x.op === 'delete_bucket').map((x) => x.status), [204]);
    assert.deepEqual(await s3Code(s3!.send(new HeadBucketCommand({ Bucket: bucket }))), { name: 'NotFound', status: 404 });
  });
});
