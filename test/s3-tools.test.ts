// The S3 door against real, unmodified tools doing real work (Debian's rclone, restic and AWS CLI):
// rclone sync of a tree with a multipart file there and back, rclone check, a second sync that moves
// nothing; a restic repository (init, backup, check --read-data, restore, a second backup); aws s3 cp
// of 1 GiB with the CLI's default multipart settings, there and back. Also, with the AWS SDK v3, what
// these tools rely on: a multipart object's ETag the same in GET, HEAD and every listing, GetObject
// and HeadObject with partNumber, ListMultipartUploads with a prefix and a delimiter. A tool that is
// missing is installed with apt-get when that can be done (root on Debian; .ci/run installs rclone,
// restic and awscli beforehand), else its test is skipped with the reason. Local-disk
// storage only: these tests are about the S3 door, and the S3-storage pass keeps its objects in memory.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { once } from 'node:events';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { createBucket } from '../src/domain/buckets.js';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { multipartEtag, s3Code } from './support/s3-door.js';
import { findOrInstall } from './support/system.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const RCLONE = '/usr/bin/rclone';
const RESTIC = '/usr/bin/restic';
const AWS = '/usr/bin/aws';
const PATH = '/usr/bin:/bin';
const MiB = 1024 * 1024;
/** The least part size (but the last) the server takes here: small, for the SDK's raw parts. */
const MIN = 1000;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], env: Record<string, string>, opts: { cwd?: string; timeout?: number } = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, cwd: opts.cwd, timeout: opts.timeout ?? 120_000, maxBuffer: 32 * MiB }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

function ok(r: Run, what: string): Run {
  assert.equal(r.code, 0, `${what}: ${r.stderr}${r.stdout}`);
  return r;
}



/** Every file under `dir`, as relative path → content. */
async function readTree(dir: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else out.set(relative(dir, p), await readFile(p));
    }
  };
  await walk(dir);
  return out;
}

function assertSameTree(got: Map<string, Buffer>, want: Map<string, Buffer>, what: string): void {
  assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort(), `${what}: the same files`);
  for (const [k, v] of want) assert.ok(got.get(k)!.equals(v), `${what}: ${k} byte for byte`);
}

/** Runs a command whose stdout is hashed as it streams: its SHA-256 and length, never held whole. */
function streamSha256(cmd: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; sha256: string; bytes: number; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const h = createHash('sha256');
    let bytes = 0;
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.stdout.on('data', (d: Buffer) => {
      h.update(d);
      bytes += d.length;
    });
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', (e) => (stderr += String(e)));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, sha256: h.digest('hex'), bytes, stderr });
    });
  });
}

/**
 * Writes `size` bytes fast: a 1 MiB pattern whose every block starts with its own index, so that
 * no two 8 MiB parts are alike (a part served in another's place shows). Returns its SHA-256.
 */
async function writePatternFile(path: string, size: number): Promise<string> {
  const block = Buffer.alloc(MiB);
  for (let i = 0; i < MiB; i++) block[i] = (i * 31 + 7) & 0xff;
  const h = createHash('sha256');
  const out = createWriteStream(path);
  let written = 0;
  for (let n = 0; written < size; n++) {
    const b = Buffer.from(block.subarray(0, Math.min(MiB, size - written)));
    if (b.length >= 8) b.writeBigUInt64BE(BigInt(n), 0);
    h.update(b);
    written += b.length;
    if (!out.write(b)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return h.digest('hex');
}

const skipOnS3 = testStorage() === 's3' ? 'local-disk storage only (the S3-storage pass keeps objects in memory)' : false;

describe('S3 door with real tools', { skip: skipOnS3 }, () => {
  let t: TestServer;
  let id: string;
  let secret: string;
  let s3: S3Client;
  let work: string;
  let port: string;

  before(async () => {
    t = await startTestServer({
      FILES_REST_S3_PORT: 'auto',
      FILES_REST_PERMISSION_FACTORY: 'token',
      FILES_REST_SERVER_KEY: SERVER_KEY,
      FILES_REST_S3_MULTIPART_MIN_PART_SIZE: String(MIN),
    });
    const keys = requireServerKeys(t.config, null, { create: true });
    const k = await createAccessKey(t.server.core.ctx.db, keys);
    id = k.info.accessKeyId;
    secret = k.secret;
    s3 = new S3Client({ endpoint: t.s3Url, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: id, secretAccessKey: secret } });
    port = new URL(t.s3Url).port;
    work = await mkdtemp(join(tmpdir(), 'files-rest-s3-tools-'));
  });
  after(async () => {
    s3?.destroy();
    await t?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  /** A bucket made through files-rest, addressed by its id. */
  async function bucket(): Promise<string> {
    return (await createBucket(t.server.core.ctx, {})).id;
  }

  /** A multipart object of these parts, completed through raw SDK calls. */
  async function multipartObject(b: string, key: string, parts: Buffer[]): Promise<string> {
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: key }));
    const list = [];
    for (const [i, p] of parts.entries()) {
      const r = await s3.send(new UploadPartCommand({ Bucket: b, Key: key, UploadId, PartNumber: i + 1, Body: p }));
      list.push({ PartNumber: i + 1, ETag: r.ETag });
    }
    const done = await s3.send(new CompleteMultipartUploadCommand({ Bucket: b, Key: key, UploadId, MultipartUpload: { Parts: list } }));
    return done.ETag!;
  }

  it('a multipart object has one ETag: the completion, GET, HEAD, ListObjects, ListObjectsV2 and ListObjectVersions agree', async () => {
    const b = await bucket();
    const parts = [randomBytes(3000), randomBytes(3000), randomBytes(1234)];
    const etag = await multipartObject(b, 'dir/multi.bin', parts);
    assert.equal(etag, multipartEtag(parts));
    const single = randomBytes(500);
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 'dir/single.bin', Body: single }));
    const plain = `"${createHash('md5').update(single).digest('hex')}"`;

    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'dir/multi.bin' }))).ETag, etag);
    assert.equal((await s3.send(new GetObjectCommand({ Bucket: b, Key: 'dir/multi.bin' }))).ETag, etag);
    const v2 = await s3.send(new ListObjectsV2Command({ Bucket: b, Prefix: 'dir/' }));
    assert.deepEqual(v2.Contents!.map((c) => [c.Key, c.ETag]), [['dir/multi.bin', etag], ['dir/single.bin', plain]]);
    const v1 = await s3.send(new ListObjectsCommand({ Bucket: b }));
    assert.deepEqual(v1.Contents!.map((c) => [c.Key, c.ETag]), [['dir/multi.bin', etag], ['dir/single.bin', plain]]);
    // An older version made by multipart keeps its ETag in the versions listing; a newer single PUT has its MD5.
    const over = randomBytes(100);
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 'dir/multi.bin', Body: over }));
    const versions = await s3.send(new ListObjectVersionsCommand({ Bucket: b, Prefix: 'dir/multi' }));
    assert.deepEqual(versions.Versions!.map((v) => [v.IsLatest, v.ETag]), [[true, `"${createHash('md5').update(over).digest('hex')}"`], [false, etag]]);
    // A copy is a single-part object, as in S3: its ETag is the plain MD5 in the answer, GET and the
    // listing; the source condition compares the source's multipart ETag.
    const contentMd5 = `"${createHash('md5').update(Buffer.concat(parts)).digest('hex')}"`;
    const source = versions.Versions![1]!.VersionId!;
    const copied = await s3.send(new CopyObjectCommand({ Bucket: b, Key: 'copy.bin', CopySource: `${b}/dir/multi.bin?versionId=${source}`, CopySourceIfMatch: etag }));
    assert.equal(copied.CopyObjectResult!.ETag, contentMd5);
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'copy.bin' }))).ETag, contentMd5);
    assert.equal((await s3.send(new ListObjectsV2Command({ Bucket: b, Prefix: 'copy.bin' }))).Contents![0]!.ETag, contentMd5);
    const copyPart = await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'copy.bin', PartNumber: 1 }));
    assert.equal(copyPart.ContentLength, Buffer.concat(parts).length);
    assert.equal(copyPart.PartsCount, undefined);
    // files-rest's own checksum stays the plain MD5 of the content.
    const rest = (await t.server.core.ctx.db.selectFrom('object_versions').innerJoin('files', 'files.id', 'object_versions.file_id').select('files.checksum').where('object_versions.bucket_id', '=', b).where('object_versions.key', '=', 'dir/multi.bin').where('object_versions.is_head', '=', 0).executeTakeFirstOrThrow()).checksum;
    assert.equal(rest, `md5:${createHash('md5').update(Buffer.concat(parts)).digest('hex')}`);
  });

  it('GetObject and HeadObject with partNumber: the part (206, Content-Range, x-amz-mp-parts-count); part 1 of a single-part object is all of it', async () => {
    const b = await bucket();
    const parts = [randomBytes(4000), randomBytes(4000), randomBytes(4000), randomBytes(77)];
    const etag = await multipartObject(b, 'm.bin', parts);
    const whole = Buffer.concat(parts);
    let start = 0;
    for (const [i, p] of parts.entries()) {
      const got = await s3.send(new GetObjectCommand({ Bucket: b, Key: 'm.bin', PartNumber: i + 1 }));
      assert.equal(got.$metadata.httpStatusCode, 206);
      assert.equal(got.PartsCount, 4);
      assert.equal(got.ETag, etag);
      assert.equal(got.ContentLength, p.length);
      assert.equal(got.ContentRange, `bytes ${start}-${start + p.length - 1}/${whole.length}`);
      assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(p), `part ${i + 1}`);
      const head = await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'm.bin', PartNumber: i + 1 }));
      assert.equal(head.ContentLength, p.length);
      assert.equal(head.PartsCount, 4);
      start += p.length;
    }
    assert.deepEqual(await s3Code(s3.send(new GetObjectCommand({ Bucket: b, Key: 'm.bin', PartNumber: 5 }))), { name: 'InvalidPartNumber', status: 416 });
    assert.deepEqual(await s3Code(s3.send(new GetObjectCommand({ Bucket: b, Key: 'm.bin', PartNumber: 1, Range: 'bytes=0-1' }))), { name: 'InvalidRequest', status: 400 });
    assert.deepEqual(await s3Code(s3.send(new GetObjectCommand({ Bucket: b, Key: 'm.bin', PartNumber: 10001 }))), { name: 'InvalidArgument', status: 400 });

    // A single-part object: part 1 is the whole object, with no part count; there is no part 2.
    const single = randomBytes(999);
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 's.bin', Body: single }));
    const one = await s3.send(new GetObjectCommand({ Bucket: b, Key: 's.bin', PartNumber: 1 }));
    assert.equal(one.ContentLength, single.length);
    assert.equal(one.PartsCount, undefined);
    assert.ok(Buffer.from(await one.Body!.transformToByteArray()).equals(single));
    assert.deepEqual(await s3Code(s3.send(new GetObjectCommand({ Bucket: b, Key: 's.bin', PartNumber: 2 }))), { name: 'InvalidPartNumber', status: 416 });
  });

  it('ListMultipartUploads with a prefix and a delimiter: CommonPrefixes counted once, markers continue past them', async () => {
    const b = await bucket();
    const keys = ['a/1', 'a/2', 'a/x/3', 'b/1', 'c', 'c/1', 'd/1', 'top'];
    const ids = new Map<string, string>();
    for (const key of keys) ids.set(key, (await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: key }))).UploadId!);
    const all = await s3.send(new ListMultipartUploadsCommand({ Bucket: b, Delimiter: '/' }));
    assert.deepEqual(all.Uploads!.map((u) => u.Key), ['c', 'top']);
    assert.deepEqual(all.CommonPrefixes!.map((p) => p.Prefix), ['a/', 'b/', 'c/', 'd/']);
    assert.equal(all.Delimiter, '/');
    assert.equal(all.IsTruncated, false);
    const underA = await s3.send(new ListMultipartUploadsCommand({ Bucket: b, Prefix: 'a/', Delimiter: '/' }));
    assert.deepEqual(underA.Uploads!.map((u) => [u.Key, u.UploadId]), [['a/1', ids.get('a/1')], ['a/2', ids.get('a/2')]]);
    assert.deepEqual(underA.CommonPrefixes!.map((p) => p.Prefix), ['a/x/']);
    // Pages of 2: a common prefix counts once and the next page starts after everything under it.
    const seen: string[] = [];
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (let i = 0; i < 10; i++) {
      const page = await s3.send(new ListMultipartUploadsCommand({ Bucket: b, Delimiter: '/', MaxUploads: 2, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker }));
      const entries = [...(page.Uploads ?? []).map((u) => u.Key!), ...(page.CommonPrefixes ?? []).map((p) => p.Prefix!)].sort();
      assert.ok(entries.length <= 2);
      seen.push(...entries);
      if (!page.IsTruncated) break;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker || undefined;
    }
    assert.deepEqual(seen, ['a/', 'b/', 'c', 'c/', 'd/', 'top']);
    // Without a delimiter, a prefix lists every upload under it.
    const flat = await s3.send(new ListMultipartUploadsCommand({ Bucket: b, Prefix: 'a/' }));
    assert.deepEqual(flat.Uploads!.map((u) => u.Key), ['a/1', 'a/2', 'a/x/3']);
    assert.equal(flat.CommonPrefixes, undefined);
    for (const [key, UploadId] of ids) await s3.send(new AbortMultipartUploadCommand({ Bucket: b, Key: key, UploadId }));
  });

  it('rclone sync of a tree (a multipart file, an empty file, a non-ASCII name) there and back, rclone check, a second sync that moves nothing', async (ctx) => {
    const found = await findOrInstall('rclone', [RCLONE]);
    if (found.skip) return ctx.skip(found.skip);
    const home = join(work, 'rclone');
    const src = join(home, 'src');
    await mkdir(join(src, 'docs', 'deep', 'er'), { recursive: true });
    await mkdir(join(src, 'données'), { recursive: true });
    const files: Record<string, Buffer> = {
      'top.txt': Buffer.from('top of the tree\n'),
      'empty.txt': Buffer.alloc(0),
      'docs/a.bin': randomBytes(70_000),
      'docs/deep/b.txt': Buffer.from('b'.repeat(5000)),
      'docs/deep/er/big.bin': randomBytes(12 * MiB + 4321), // over the 5M cutoff: 3 parts of 5M
      'données/résumé été.txt': Buffer.from('non-ASCII name, café\n'),
    };
    for (const [k, v] of Object.entries(files)) await writeFile(join(src, k), v);
    const want = await readTree(src);
    const name = `rclone-${randomBytes(4).toString('hex')}`;
    const env = {
      PATH,
      HOME: home,
      RCLONE_CONFIG: join(home, 'no-rclone.conf'),
      RCLONE_CONFIG_FR_TYPE: 's3',
      RCLONE_CONFIG_FR_PROVIDER: 'Other',
      RCLONE_CONFIG_FR_ENDPOINT: t.s3Url,
      RCLONE_CONFIG_FR_ACCESS_KEY_ID: id,
      RCLONE_CONFIG_FR_SECRET_ACCESS_KEY: secret,
      RCLONE_CONFIG_FR_FORCE_PATH_STYLE: 'true',
    };
    const rclone = (args: string[]) => run(RCLONE, ['--retries', '1', '--low-level-retries', '1', '--s3-upload-cutoff', '5M', '--s3-chunk-size', '5M', ...args], env);
    ok(await rclone(['mkdir', `fr:${name}`]), 'mkdir');
    const up = ok(await rclone(['sync', '-v', src, `fr:${name}/tree`]), 'sync up');
    assert.equal((up.stderr.match(/Copied \(new\)/g) ?? []).length, Object.keys(files).length, up.stderr);
    // The big file went up in parts: its ETag is S3's multipart one, the same in HEAD and the listing.
    const bigKey = 'tree/docs/deep/er/big.bin';
    const head = await s3.send(new HeadObjectCommand({ Bucket: name, Key: bigKey }));
    assert.match(head.ETag!, /^"[0-9a-f]{32}-3"$/);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: name, Prefix: bigKey }));
    assert.equal(listed.Contents![0]!.ETag, head.ETag);

    const check = await rclone(['check', src, `fr:${name}/tree`]);
    ok(check, 'check');
    assert.match(check.stderr, /0 differences found/);
    assert.match(check.stderr, new RegExp(`${Object.keys(files).length} matching files`));
    assert.doesNotMatch(check.stderr, /could not be checked|hashes could not/);

    const back = join(home, 'back');
    ok(await rclone(['sync', `fr:${name}/tree`, back]), 'sync down');
    assertSameTree(await readTree(back), want, 'synced back');

    const again = ok(await rclone(['sync', '-v', src, `fr:${name}/tree`]), 'second sync');
    assert.doesNotMatch(again.stderr, /Copied|Deleted/, again.stderr);
    assert.match(again.stderr, /There was nothing to transfer/);
  });

  it('restic: init a repository in a bucket, backup, check --read-data, restore byte for byte, a second backup', async (ctx) => {
    const found = await findOrInstall('restic', [RESTIC]);
    if (found.skip) return ctx.skip(found.skip);
    const home = join(work, 'restic');
    const src = join(home, 'data');
    await mkdir(join(src, 'sub', 'dir'), { recursive: true });
    await writeFile(join(src, 'a.bin'), randomBytes(3 * MiB + 17));
    await writeFile(join(src, 'sub', 'b.txt'), Buffer.from('restic through files-rest\n'));
    await writeFile(join(src, 'sub', 'dir', 'c.bin'), randomBytes(200_000));
    await writeFile(join(src, 'sub', 'empty'), Buffer.alloc(0));
    const name = `restic-${randomBytes(4).toString('hex')}`;
    const env = {
      PATH,
      HOME: home,
      RESTIC_PASSWORD: 'correct horse battery staple',
      RESTIC_CACHE_DIR: join(home, 'cache'),
      AWS_ACCESS_KEY_ID: id,
      AWS_SECRET_ACCESS_KEY: secret,
    };
    const restic = (args: string[]) => run(RESTIC, ['-r', `s3:http://127.0.0.1:${port}/${name}`, ...args], env, { cwd: home });
    ok(await restic(['init']), 'init');
    ok(await restic(['backup', '--json', 'data']), 'backup');
    ok(await restic(['check', '--read-data']), 'check --read-data');
    const target = join(home, 'restored');
    ok(await restic(['restore', 'latest', '--target', target]), 'restore');
    assertSameTree(await readTree(join(target, 'data')), await readTree(src), 'restored');

    // A second backup after a change: a new snapshot, the repository still whole.
    await writeFile(join(src, 'sub', 'b.txt'), Buffer.from('changed\n'));
    await writeFile(join(src, 'new.bin'), randomBytes(1_000_000));
    ok(await restic(['backup', 'data']), 'second backup');
    const snapshots = JSON.parse(ok(await restic(['snapshots', '--json']), 'snapshots').stdout) as unknown[];
    assert.equal(snapshots.length, 2);
    ok(await restic(['check', '--read-data']), 'check after the second backup');
    const target2 = join(home, 'restored2');
    ok(await restic(['restore', 'latest', '--target', target2]), 'restore the second');
    assertSameTree(await readTree(join(target2, 'data')), await readTree(src), 'second restore');
  });

  it('aws s3 cp of 1 GiB with the default multipart settings (8 MiB parts, 10 at once), up and back down (streamed), the same SHA-256', { timeout: 300_000 }, async (ctx) => {
    const found = await findOrInstall('awscli', [AWS]);
    if (found.skip) return ctx.skip(found.skip);
    const home = join(work, 'aws');
    await mkdir(home, { recursive: true });
    const size = 1024 * MiB;
    const file = join(home, 'one-gib.bin');
    try {
      const w0 = Date.now();
      const sha = await writePatternFile(file, size);
      const writeSeconds = (Date.now() - w0) / 1000;
      const name = `aws-${randomBytes(4).toString('hex')}`;
      const env = {
        PATH,
        HOME: home,
        AWS_ACCESS_KEY_ID: id,
        AWS_SECRET_ACCESS_KEY: secret,
        AWS_DEFAULT_REGION: 'us-east-1',
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_CONFIG_FILE: join(home, 'aws-config'),
        AWS_SHARED_CREDENTIALS_FILE: join(home, 'aws-credentials'),
      };
      const aws = (args: string[]) => run(AWS, ['--endpoint-url', t.s3Url, ...args], env, { timeout: 240_000 });
      ok(await aws(['s3', 'mb', `s3://${name}`]), 'mb');
      let t0 = Date.now();
      ok(await aws(['s3', 'cp', '--no-progress', file, `s3://${name}/big/one-gib.bin`]), 'cp up');
      const upSeconds = (Date.now() - t0) / 1000;
      const head = await s3.send(new HeadObjectCommand({ Bucket: name, Key: 'big/one-gib.bin' }));
      assert.equal(head.ContentLength, size);
      assert.match(head.ETag!, /^"[0-9a-f]{32}-128"$/, '128 parts of 8 MiB');
      const part = await s3.send(new HeadObjectCommand({ Bucket: name, Key: 'big/one-gib.bin', PartNumber: 128 }));
      assert.equal(part.ContentLength, 8 * MiB);
      assert.equal(part.PartsCount, 128);
      // Down to stdout (the CLI still fetches ranged parts, 10 at once), hashed as it streams.
      t0 = Date.now();
      const down = await streamSha256(AWS, ['--endpoint-url', t.s3Url, 's3', 'cp', '--no-progress', `s3://${name}/big/one-gib.bin`, '-'], env);
      const downSeconds = (Date.now() - t0) / 1000;
      assert.equal(down.code, 0, down.stderr);
      // Figures for the record, not conditions.
      ctx.diagnostic(`1 GiB file written and hashed in ${writeSeconds.toFixed(1)} s; aws s3 cp up ${upSeconds.toFixed(1)} s (${(1024 / upSeconds).toFixed(0)} MiB/s), down ${downSeconds.toFixed(1)} s (${(1024 / downSeconds).toFixed(0)} MiB/s)`);
      assert.equal(down.bytes, size);
      assert.equal(down.sha256, sha);
    } finally {
      await rm(file, { force: true });
    }
  });
});
