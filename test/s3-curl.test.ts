// The S3 door against curl's own SigV4 signer (`curl --aws-sigv4 aws:amz:REGION:s3 --user KEY:SECRET`),
// unmodified: the way a shell script or a health check talks to S3 without an SDK. Debian 12's curl
// (7.88) signs no `x-amz-content-sha256` header (curl added it for S3 in 8.x), which S3 requires on
// every SigV4 request. The door takes its absence on a request without a body as the hash of no bytes
// (MinIO does the same), so GETs, HEADs, listings, deletes and CreateBucket work as curl sends them; an
// upload must name its payload hash (`-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD'` or the body's
// SHA-256), and one that does not is refused and stores nothing. Whatever the version of curl, each
// test checks the door's answers and, through the REST door, what the bucket holds.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createToken } from '../src/auth/tokens.js';
import { findLiveBucketByName } from '../src/domain/buckets.js';
import { startTestServer, type TestServer } from './support/server.js';
import { newDoorKey } from './support/s3-door.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const MARK = '\n%{http_code}';

interface Answer {
  status: number;
  body: string;
  headers: string;
}

let t: TestServer;
let dir: string;
let user = '';
let curlVersion = '';
let token = '';

/** One curl call signed by curl itself; the status is the last line curl writes (`-w`). */
function curl(args: string[], opts: { secret?: string } = {}): Promise<Answer> {
  const auth = ['--aws-sigv4', 'aws:amz:us-east-1:s3', '--user', opts.secret ? `${user.split(':')[0]}:${opts.secret}` : user];
  return new Promise((resolve, reject) => {
    execFile('curl', ['-sS', '-D', '-', '-w', MARK, ...auth, ...args], { timeout: 30_000, maxBuffer: 16 * 1024 * 1024, encoding: 'latin1' }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`curl ${args.join(' ')}: ${err.message} ${stderr}`));
      const cut = stdout.lastIndexOf('\n');
      const status = Number(stdout.slice(cut + 1));
      const rest = stdout.slice(0, cut);
      // -D - writes the header block(s) first; a 100 Continue comes before the final answer's.
      const blocks = rest.split('\r\n\r\n');
      const bodyStart = blocks.findIndex((b, i) => i > 0 && !/^HTTP\/1\.1 100/.test(blocks[i - 1]!));
      resolve({ status, headers: blocks.slice(0, bodyStart).join('\r\n\r\n'), body: blocks.slice(bodyStart).join('\r\n\r\n') });
    });
  });
}

function code(a: Answer): string | undefined {
  return /<Code>([^<]+)<\/Code>/.exec(a.body)?.[1];
}

/** The bucket's objects (heads) and size, through the REST door. */
async function restBucket(bucket: string): Promise<{ keys: string[]; size: number }> {
  const r = await fetch(`${t.files}/${bucket}`, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(r.status, 200);
  const b = (await r.json()) as { size: number; contents: Array<{ key: string }> };
  return { keys: b.contents.map((c) => c.key).sort(), size: b.size };
}

describe('S3 door: curl --aws-sigv4', () => {
  let bucketId = '';
  const url = (path: string) => `${t.s3Url}${path}`;

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    user = `${k.accessKeyId}:${k.secret}`;
    token = (await createToken(t.server.core.ctx.db)).token;
    dir = await mkdtemp(join(tmpdir(), 's3-curl-'));
    curlVersion = await new Promise((resolve) => execFile('curl', ['--version'], (_e, out) => resolve(String(out).split('\n')[0] ?? '')));
  });

  after(async () => {
    await t?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('CreateBucket, ListBuckets and HeadBucket as curl signs them', async () => {
    assert.match(curlVersion, /^curl \d/);
    const made = await curl(['-X', 'PUT', url('/curl-bucket')]);
    assert.equal(made.status, 200, made.body);
    const head = await curl(['-I', url('/curl-bucket')]);
    assert.equal(head.status, 200);
    const list = await curl([url('/?x-id=ListBuckets')]);
    assert.equal(list.status, 200, list.body);
    assert.match(list.body, /<Name>curl-bucket<\/Name>/);
    bucketId = (await findLiveBucketByName(t.server.core.ctx.db, 'curl-bucket'))?.id ?? '';
    assert.ok(bucketId);
  });

  it('an upload names its payload hash: UNSIGNED-PAYLOAD (-T) and the body SHA-256 (--data-binary)', async () => {
    const file = join(dir, 'a.bin');
    const data = randomBytes(200_000);
    await writeFile(file, data);
    const put = await curl(['-H', 'x-amz-content-sha256: UNSIGNED-PAYLOAD', '-T', file, url('/curl-bucket/dir/a%20b.bin')]);
    assert.equal(put.status, 200, put.body);
    assert.match(put.headers, new RegExp(`etag: "${createHash('md5').update(data).digest('hex')}"`, 'i'));
    const small = Buffer.from('hello from curl\n');
    const sha = createHash('sha256').update(small).digest('hex');
    const put2 = await curl(['-X', 'PUT', '-H', `x-amz-content-sha256: ${sha}`, '-H', 'Content-Type: text/plain', '--data-binary', small.toString(), url('/curl-bucket/small.txt')]);
    assert.equal(put2.status, 200, put2.body);
    // A hash that is not the body's: nothing stored.
    const bad = await curl(['-X', 'PUT', '-H', `x-amz-content-sha256: ${sha}`, '--data-binary', 'other bytes', url('/curl-bucket/bad.txt')]);
    assert.equal(bad.status, 400, bad.body);
    assert.equal(code(bad), 'XAmzContentSHA256Mismatch');
    const got = await restBucket(bucketId);
    assert.deepEqual(got.keys, ['dir/a b.bin', 'small.txt']);
    assert.equal(got.size, data.length + small.length);
  });

  it('an upload without x-amz-content-sha256 is refused (S3 requires it) and stores nothing', async () => {
    const before = await restBucket(bucketId);
    const file = join(dir, 'n.bin');
    await writeFile(file, 'no hash named');
    for (const args of [['-T', file], ['-X', 'PUT', '--data-binary', 'no hash named']]) {
      const r = await curl([...args, url('/curl-bucket/nohash.txt')]);
      // curl before 8.x sends no header (refused); a later curl sends UNSIGNED-PAYLOAD (stored).
      if (/x-amz-content-sha256/i.test(r.headers + r.body) || r.status !== 200) {
        assert.equal(r.status, 400, r.body);
        assert.equal(code(r), 'InvalidRequest');
        assert.match(r.body, /x-amz-content-sha256/);
        assert.deepEqual(await restBucket(bucketId), before);
      }
    }
  });

  it('GET whole and ranged, HEAD, ListObjectsV2 with a prefix and a delimiter, without the header', async () => {
    const whole = await curl([url('/curl-bucket/small.txt')]);
    assert.equal(whole.status, 200);
    assert.equal(whole.body, 'hello from curl\n');
    assert.match(whole.headers, /content-type: text\/plain/i);
    const part = await curl(['-H', 'Range: bytes=6-9', url('/curl-bucket/small.txt')]);
    assert.equal(part.status, 206);
    assert.equal(part.body, 'from');
    const head = await curl(['-I', url('/curl-bucket/dir/a%20b.bin')]);
    assert.equal(head.status, 200);
    assert.match(head.headers, /content-length: 200000/i);
    const list = await curl([url('/curl-bucket?list-type=2&delimiter=%2F')]);
    assert.equal(list.status, 200, list.body);
    assert.match(list.body, /<Key>small\.txt<\/Key>/);
    assert.match(list.body, /<CommonPrefixes><Prefix>dir\/<\/Prefix><\/CommonPrefixes>/);
    const prefixed = await curl([url('/curl-bucket?list-type=2&prefix=dir%2F')]);
    assert.match(prefixed.body, /<Key>dir\/a b\.bin<\/Key>/);
    assert.doesNotMatch(prefixed.body, /small\.txt/);
    const missing = await curl([url('/curl-bucket/nothing-here')]);
    assert.equal(missing.status, 404);
    assert.equal(code(missing), 'NoSuchKey');
  });

  it('a wrong secret is SignatureDoesNotMatch, also without the header', async () => {
    const r = await curl([url('/curl-bucket/small.txt')], { secret: 'x'.repeat(40) });
    assert.equal(r.status, 403);
    assert.equal(code(r), 'SignatureDoesNotMatch');
  });

  it('DeleteObject leaves a delete marker; the versions stay listed; DeleteBucket of a non-empty bucket is refused', async () => {
    const del = await curl(['-X', 'DELETE', url('/curl-bucket/small.txt')]);
    assert.equal(del.status, 204, del.body);
    assert.match(del.headers, /x-amz-delete-marker: true/i);
    const versions = await curl([url('/curl-bucket?versions&prefix=small')]);
    assert.equal(versions.status, 200);
    assert.match(versions.body, /<DeleteMarker>/);
    assert.match(versions.body, /<Version>/);
    const rb = await curl(['-X', 'DELETE', url('/curl-bucket')]);
    assert.equal(rb.status, 409);
    assert.equal(code(rb), 'BucketNotEmpty');
    assert.deepEqual((await restBucket(bucketId)).keys, ['dir/a b.bin']);
  });
});
