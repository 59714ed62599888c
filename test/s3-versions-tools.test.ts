// The S3 door against Debian's rclone (1.60) and s3cmd (2.3), unmodified, where a versioned store
// differs from a plain one: every bucket here is always versioned (a PUT makes a new version, a
// DELETE a delete marker), so tools that list, restore, prune and purge versions, abort forgotten
// multipart uploads, or rewrite an object in place to change its metadata or storage class meet the
// door's versioning on every call. rclone: `--s3-versions` listings and copies of old versions,
// `--s3-version-at`, deleting one old version, `backend versioning` (Enabled; suspension refused),
// `cleanup` and `backend cleanup -o max-age=0` of multipart uploads, `backend list-multipart-uploads`,
// `backend cleanup-hidden`, rmdir (BucketNotEmpty while versions remain) and purge (every version by
// id, then the bucket), md5sum/hashsum, lsjson --metadata, touch, moveto, copyto --metadata-set and
// settier. s3cmd: sync up, down and --delete-removed, du, info, rb of a bucket holding only old
// versions, multipart/listmp/abortmp, modify --add-header, setacl, cp --preserve, ls --recursive over
// more than 1000 keys, a multipart put, get --continue, signurl. Each expectation is what AWS S3
// answers these clients (the door's deliberate refusals aside: suspension of versioning, archive
// storage classes and public ACLs, each NotImplemented); what the door holds is checked with the AWS
// SDK v3. A tool that is missing is installed with apt-get when that can be done, else its test is
// skipped with the reason. Local-disk storage only, as in s3-tools.test.ts.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetBucketVersioningCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { doorClient, newDoorKey, s3Code } from './support/s3-door.js';
import { findOrInstall } from './support/system.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const RCLONE = '/usr/bin/rclone';
const S3CMD = '/usr/bin/s3cmd';
const PATH = '/usr/bin:/bin';
const MiB = 1024 * 1024;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], env: Record<string, string>, timeout = 30_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, timeout, maxBuffer: 32 * MiB }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

function ok(r: Run, what: string): Run {
  assert.equal(r.code, 0, `${what}: ${r.stderr}${r.stdout}`);
  return r;
}

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');

const skipOnS3 = testStorage() === 's3' ? 'local-disk storage only (the S3-storage pass keeps objects in memory)' : false;

describe('S3 door: versions, multipart housekeeping and metadata through rclone and s3cmd', { skip: skipOnS3 }, () => {
  let t: TestServer;
  let id: string;
  let secret: string;
  let s3: S3Client;
  let work: string;
  let rcloneEnv: Record<string, string>;
  let n = 0;

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    id = k.accessKeyId;
    secret = k.secret;
    s3 = doorClient(t, k);
    work = await mkdtemp(join(tmpdir(), 'files-rest-s3-versions-tools-'));
    await mkdir(join(work, 'rclone-home'));
    rcloneEnv = {
      PATH,
      HOME: join(work, 'rclone-home'),
      RCLONE_CONFIG: join(work, 'rclone-home', 'no-rclone.conf'),
      RCLONE_CONFIG_FR_TYPE: 's3',
      RCLONE_CONFIG_FR_PROVIDER: 'Other',
      RCLONE_CONFIG_FR_ENDPOINT: t.s3Url,
      RCLONE_CONFIG_FR_ACCESS_KEY_ID: id,
      RCLONE_CONFIG_FR_SECRET_ACCESS_KEY: secret,
      RCLONE_CONFIG_FR_FORCE_PATH_STYLE: 'true',
    };
  });
  after(async () => {
    s3?.destroy();
    await t?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  /** A fresh bucket name (made by the caller through the tool under test or the SDK). */
  const name = (what: string) => `${what}-${++n}-${randomBytes(3).toString('hex')}`;
  const rclone = (args: string[]) => run(RCLONE, ['--retries', '1', '--low-level-retries', '1', ...args], rcloneEnv);

  /** A local file with this content and modification time. */
  async function local(path: string, body: Buffer | string, mtime?: Date): Promise<string> {
    await mkdir(join(path, '..'), { recursive: true });
    await writeFile(path, body);
    if (mtime) await utimes(path, mtime, mtime);
    return path;
  }

  async function versions(bucket: string): Promise<{ versions: Array<[string, boolean, number]>; markers: Array<[string, boolean]> }> {
    const r = await s3.send(new ListObjectVersionsCommand({ Bucket: bucket }));
    return {
      versions: (r.Versions ?? []).map((v) => [v.Key!, v.IsLatest!, v.Size!]),
      markers: (r.DeleteMarkers ?? []).map((m) => [m.Key!, m.IsLatest!]),
    };
  }

  async function body(bucket: string, key: string, versionId?: string): Promise<string> {
    const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, VersionId: versionId }));
    return Buffer.from(await r.Body!.transformToByteArray()).toString();
  }

  /** An upload left open with one part, as a crashed client leaves it. */
  async function pendingUpload(bucket: string, key: string): Promise<string> {
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: Buffer.alloc(100, 7) }));
    return UploadId!;
  }

  async function uploadIds(bucket: string): Promise<string[]> {
    return ((await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads ?? []).map((u) => u.UploadId!);
  }

  /**
   * A bucket where a.txt was written three times ("one", "two2", "three33") and b.txt written once
   * then deleted (rclone delete: a delete marker). `between` is a time after the second a.txt and
   * before the third and the deletion.
   */
  async function historyBucket(dir: string): Promise<{ bucket: string; between: Date }> {
    const bucket = name('hist');
    ok(await rclone(['mkdir', `fr:${bucket}`]), 'mkdir');
    const a = join(dir, 'a.txt');
    await local(a, 'one\n');
    await local(join(dir, 'b.txt'), 'keep\n');
    ok(await rclone(['copyto', a, `fr:${bucket}/a.txt`]), 'copyto a.txt (1)');
    ok(await rclone(['copyto', join(dir, 'b.txt'), `fr:${bucket}/b.txt`]), 'copyto b.txt');
    await sleep(20);
    await local(a, 'two2\n');
    ok(await rclone(['copyto', a, `fr:${bucket}/a.txt`]), 'copyto a.txt (2)');
    await sleep(20);
    const between = new Date();
    await sleep(20);
    await local(a, 'three33\n');
    ok(await rclone(['copyto', a, `fr:${bucket}/a.txt`]), 'copyto a.txt (3)');
    ok(await rclone(['deletefile', `fr:${bucket}/b.txt`]), 'deletefile b.txt');
    return { bucket, between };
  }

  it('rclone --s3-versions lists old versions with their -vYYYY-MM-DD-HHMMSS-sss names, copies one back, deletes one; --s3-version-at shows the tree as it was', async (ctx) => {
    const found = await findOrInstall('rclone', [RCLONE]);
    if (found.skip) return ctx.skip(found.skip);
    const dir = join(work, 'versions');
    const { bucket, between } = await historyBucket(dir);

    assert.equal(ok(await rclone(['lsf', `fr:${bucket}`]), 'lsf').stdout, 'a.txt\n');
    const listed = ok(await rclone(['lsjson', '--s3-versions', `fr:${bucket}`]), 'lsjson --s3-versions').stdout;
    const entries = (JSON.parse(listed) as Array<{ Path: string; Size: number }>).map((e) => [e.Path.replace(/-v\d{4}-\d\d-\d\d-\d{6}-\d{3}/, '-vTIME'), e.Size]).sort();
    // The current a.txt, its two older versions, and b.txt's only version (hidden by its delete marker).
    assert.deepEqual(entries, [['a-vTIME.txt', 4], ['a-vTIME.txt', 5], ['a.txt', 8], ['b-vTIME.txt', 5]], listed);

    const names = ok(await rclone(['lsf', '--s3-versions', `fr:${bucket}`]), 'lsf --s3-versions').stdout.trim().split('\n');
    const oldest = names.filter((f) => f.startsWith('a-v')).sort()[0]!;
    const back = join(dir, 'back');
    ok(await rclone(['copy', '--s3-versions', `fr:${bucket}/${oldest}`, back]), 'copy --s3-versions of an old version');
    assert.equal(await readFile(join(back, oldest), 'utf8'), 'one\n');
    const deleted = names.find((f) => f.startsWith('b-v'))!;
    ok(await rclone(['copyto', '--s3-versions', `fr:${bucket}/${deleted}`, join(back, 'b-restored.txt')]), 'copyto of a deleted object\'s version');
    assert.equal(await readFile(join(back, 'b-restored.txt'), 'utf8'), 'keep\n');

    // --s3-version-at: a.txt as it was ("two2") and b.txt not yet deleted.
    const at = ok(await rclone(['lsjson', '--s3-version-at', between.toISOString(), `fr:${bucket}`]), 'lsjson --s3-version-at').stdout;
    assert.deepEqual((JSON.parse(at) as Array<{ Path: string; Size: number }>).map((e) => [e.Path, e.Size]).sort(), [['a.txt', 5], ['b.txt', 5]], at);
    assert.equal(ok(await rclone(['cat', '--s3-version-at', between.toISOString(), `fr:${bucket}/a.txt`]), 'cat --s3-version-at').stdout, 'two2\n');
    const before = ok(await rclone(['lsf', '--s3-version-at', '2000-01-01T00:00:00Z', `fr:${bucket}`]), 'lsf --s3-version-at 2000').stdout;
    assert.equal(before, '', 'nothing existed in 2000');

    // Deleting a named old version deletes exactly that version (DELETE ?versionId=), no marker.
    ok(await rclone(['deletefile', '--s3-versions', `fr:${bucket}/${oldest}`]), 'deletefile --s3-versions');
    const v = await versions(bucket);
    assert.deepEqual(v.versions.filter(([k]) => k === 'a.txt').map(([, latest, size]) => [latest, size]), [[true, 8], [false, 5]]);
    assert.deepEqual(v.markers, [['b.txt', true]]);
    assert.equal(await body(bucket, 'a.txt'), 'three33\n');
  });

  it('rclone backend versioning: reports Enabled; Suspended is refused (NotImplemented), rclone fails and the bucket stays Enabled', async (ctx) => {
    const found = await findOrInstall('rclone', [RCLONE]);
    if (found.skip) return ctx.skip(found.skip);
    const bucket = name('ver');
    ok(await rclone(['mkdir', `fr:${bucket}`]), 'mkdir');
    assert.equal(ok(await rclone(['backend', 'versioning', `fr:${bucket}`]), 'versioning').stdout.trim(), 'Enabled');
    const suspend = await rclone(['backend', 'versioning', `fr:${bucket}`, 'Suspended']);
    assert.notEqual(suspend.code, 0, `suspension must fail: ${suspend.stdout}`);
    assert.match(suspend.stderr, /NotImplemented/);
    assert.equal(ok(await rclone(['backend', 'versioning', `fr:${bucket}`]), 'versioning again').stdout.trim(), 'Enabled');
    assert.equal((await s3.send(new GetBucketVersioningCommand({ Bucket: bucket }))).Status, 'Enabled');
    // Asking for what is already so succeeds.
    assert.equal(ok(await rclone(['backend', 'versioning', `fr:${bucket}`, 'Enabled']), 'versioning Enabled').stdout.trim(), 'Enabled');
  });

  it('rclone backend list-multipart-uploads lists a pending upload; rclone cleanup keeps it (younger than 24 h); backend cleanup -o max-age=0 aborts it', async (ctx) => {
    const found = await findOrInstall('rclone', [RCLONE]);
    if (found.skip) return ctx.skip(found.skip);
    const bucket = name('mpu');
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'done.txt', Body: 'a finished object' }));
    const uploadId = await pendingUpload(bucket, 'dir/pending.bin');

    const listed = JSON.parse(ok(await rclone(['backend', 'list-multipart-uploads', `fr:${bucket}`]), 'list-multipart-uploads').stdout) as Record<string, Array<{ Key: string; UploadId: string }>>;
    assert.deepEqual(listed[bucket]!.map((u) => [u.Key, u.UploadId]), [['dir/pending.bin', uploadId]]);

    ok(await rclone(['cleanup', `fr:${bucket}`]), 'cleanup');
    assert.deepEqual(await uploadIds(bucket), [uploadId], 'an upload started now is younger than 24 h: kept');

    ok(await rclone(['backend', 'cleanup', `fr:${bucket}`, '-o', 'max-age=0']), 'backend cleanup max-age=0');
    assert.deepEqual(await uploadIds(bucket), []);
    const late = await s3Code(s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'dir/pending.bin', UploadId: uploadId, PartNumber: 2, Body: 'x' })));
    assert.equal(late.name, 'NoSuchUpload');
    assert.equal(await body(bucket, 'done.txt'), 'a finished object', 'objects are not touched');
    const after = JSON.parse(ok(await rclone(['backend', 'list-multipart-uploads', `fr:${bucket}`]), 'list-multipart-uploads').stdout) as Record<string, unknown[]>;
    assert.deepEqual(after[bucket], []);
  });

  it('rclone backend cleanup-hidden removes old versions and delete markers and keeps current objects; rmdir of a bucket holding only old versions is BucketNotEmpty; purge deletes every version, then the bucket', async (ctx) => {
    const found = await findOrInstall('rclone', [RCLONE]);
    if (found.skip) return ctx.skip(found.skip);
    const { bucket } = await historyBucket(join(work, 'hidden'));
    ok(await rclone(['backend', 'cleanup-hidden', `fr:${bucket}`]), 'cleanup-hidden');
    assert.deepEqual(await versions(bucket), { versions: [['a.txt', true, 8]], markers: [] });
    assert.equal(await body(bucket, 'a.txt'), 'three33\n');
    assert.equal(ok(await rclone(['lsf', '--s3-versions', `fr:${bucket}`]), 'lsf --s3-versions').stdout, 'a.txt\n');

    // A bucket whose objects are all deleted still holds their versions: S3 refuses to delete it.
    const kept = name('kept');
    ok(await rclone(['mkdir', `fr:${kept}`]), 'mkdir');
    const f = await local(join(work, 'hidden', 'x.txt'), 'x\n');
    ok(await rclone(['copyto', f, `fr:${kept}/x.txt`]), 'copyto');
    ok(await rclone(['copyto', f, `fr:${kept}/y.txt`]), 'copyto');
    ok(await rclone(['delete', `fr:${kept}`]), 'delete');
    assert.equal(ok(await rclone(['lsf', `fr:${kept}`]), 'lsf').stdout, '');
    const rmdir = await rclone(['rmdir', `fr:${kept}`]);
    assert.notEqual(rmdir.code, 0);
    assert.match(rmdir.stderr, /BucketNotEmpty/);
    assert.equal((await versions(kept)).versions.length, 2, 'nothing was lost');
    // rclone purge sees the bucket is versioned and deletes each version and marker by id first.
    ok(await rclone(['purge', `fr:${kept}`]), 'purge');
    const gone = await s3Code(s3.send(new HeadBucketCommand({ Bucket: kept })));
    assert.equal(gone.status, 404);
  });

  it('rclone metadata: md5sum and hashsum MD5 match, lsjson --metadata has the mtime, touch rewrites the mtime as a new version, moveto leaves a delete marker, copyto --metadata-set sets headers and user metadata', async (ctx) => {
    const found = await findOrInstall('rclone', [RCLONE]);
    if (found.skip) return ctx.skip(found.skip);
    const bucket = name('meta');
    ok(await rclone(['mkdir', `fr:${bucket}`]), 'mkdir');
    const content = randomBytes(3000);
    const mtime = new Date('2020-01-02T03:04:05Z');
    const f = await local(join(work, 'meta', 'h.bin'), content, mtime);
    ok(await rclone(['copyto', f, `fr:${bucket}/h.bin`]), 'copyto');

    assert.equal(ok(await rclone(['md5sum', `fr:${bucket}`]), 'md5sum').stdout, `${md5(content)}  h.bin\n`);
    assert.equal(ok(await rclone(['hashsum', 'MD5', `fr:${bucket}/h.bin`]), 'hashsum MD5').stdout, `${md5(content)}  h.bin\n`);
    const meta = JSON.parse(ok(await rclone(['lsjson', '--metadata', `fr:${bucket}/h.bin`]), 'lsjson --metadata').stdout) as Array<{ ModTime: string; Metadata: Record<string, string> }>;
    assert.equal(meta[0]!.ModTime, '2020-01-02T03:04:05Z'.replace('Z', '.000000000Z'));
    assert.equal(meta[0]!.Metadata.mtime, '2020-01-02T03:04:05Z');
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'h.bin' }))).Metadata?.mtime, String(mtime.getTime() / 1000));

    // touch of an existing object: a copy onto itself with REPLACE metadata, i.e. a new version.
    ok(await rclone(['touch', '-t', '2021-05-06T07:08:09', `fr:${bucket}/h.bin`]), 'touch -t');
    const touched = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'h.bin' }));
    assert.equal(touched.Metadata?.mtime, String(Date.parse('2021-05-06T07:08:09Z') / 1000));
    assert.equal(touched.ETag, `"${md5(content)}"`);
    assert.deepEqual((await versions(bucket)).versions, [['h.bin', true, 3000], ['h.bin', false, 3000]]);
    // touch of a missing object makes an empty one.
    ok(await rclone(['touch', `fr:${bucket}/new.txt`]), 'touch new');
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'new.txt' }))).ContentLength, 0);

    // moveto: server-side copy, then a DELETE of the source (a delete marker over its versions).
    ok(await rclone(['moveto', `fr:${bucket}/h.bin`, `fr:${bucket}/moved/h2.bin`]), 'moveto');
    assert.deepEqual(ok(await rclone(['lsf', '-R', `fr:${bucket}`]), 'lsf').stdout.split('\n').filter(Boolean).sort(), ['moved/', 'moved/h2.bin', 'new.txt']);
    const moved = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'moved/h2.bin' }));
    assert.equal(moved.ETag, `"${md5(content)}"`);
    assert.equal(moved.Metadata?.mtime, touched.Metadata?.mtime, 'the mtime travels with the copy');
    const v = await versions(bucket);
    assert.deepEqual(v.markers, [['h.bin', true]]);
    assert.equal(v.versions.filter(([k]) => k === 'h.bin').length, 2);

    // copyto --metadata with --metadata-set: system headers and user metadata from the command line.
    const g = await local(join(work, 'meta', 'g.txt'), 'metadata\n');
    ok(await rclone(['copyto', '-M', '--metadata-set', 'color=blue', '--metadata-set', 'content-type=application/x-foo', '--metadata-set', 'cache-control=no-cache', g, `fr:${bucket}/md.txt`]), 'copyto --metadata-set');
    const h = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'md.txt' }));
    assert.equal(h.ContentType, 'application/x-foo');
    assert.equal(h.CacheControl, 'no-cache');
    assert.equal(h.Metadata?.color, 'blue');
    const lj = JSON.parse(ok(await rclone(['lsjson', '-M', `fr:${bucket}/md.txt`]), 'lsjson -M').stdout) as Array<{ MimeType: string; Metadata: Record<string, string> }>;
    assert.equal(lj[0]!.MimeType, 'application/x-foo');
    assert.equal(lj[0]!.Metadata.color, 'blue');
    assert.equal(lj[0]!.Metadata['cache-control'], 'no-cache');
  });

  it('rclone settier STANDARD_IA: a copy onto itself that changes only the storage class is legal in S3 and must succeed', async (ctx) => {
    const found = await findOrInstall('rclone', [RCLONE]);
    if (found.skip) return ctx.skip(found.skip);
    const bucket = name('tier');
    ok(await rclone(['mkdir', `fr:${bucket}`]), 'mkdir');
    const f = await local(join(work, 'tier', 't.txt'), 'tiered\n');
    ok(await rclone(['copyto', f, `fr:${bucket}/t.txt`]), 'copyto');
    // rclone 1.60 logs a failed SetTier as ERROR and still exits 0: the log is what tells.
    // The request: PUT /bucket/t.txt, x-amz-copy-source: bucket/t.txt, x-amz-metadata-directive: COPY,
    // x-amz-storage-class: STANDARD_IA. AWS S3 answers 200 (CopyObject is how a storage class changes).
    const r = ok(await rclone(['settier', 'STANDARD_IA', `fr:${bucket}/t.txt`]), 'settier STANDARD_IA');
    assert.doesNotMatch(r.stderr, /ERROR|Failed/, r.stderr);
    assert.equal(await body(bucket, 't.txt'), 'tiered\n');
    // The door keeps one class: the object is stored (and reported) as STANDARD.
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 't.txt' }));
    assert.ok(head.StorageClass === undefined || head.StorageClass === 'STANDARD', String(head.StorageClass));
  });

  it('rclone settier GLACIER is refused (NotImplemented: an archive class) and the object stays as it was', async (ctx) => {
    const found = await findOrInstall('rclone', [RCLONE]);
    if (found.skip) return ctx.skip(found.skip);
    const bucket = name('glacier');
    ok(await rclone(['mkdir', `fr:${bucket}`]), 'mkdir');
    const f = await local(join(work, 'tier', 'g.txt'), 'not archived\n');
    ok(await rclone(['copyto', f, `fr:${bucket}/g.txt`]), 'copyto');
    const r = await rclone(['settier', 'GLACIER', `fr:${bucket}/g.txt`]);
    assert.match(r.stderr, /NotImplemented/, r.stderr);
    assert.deepEqual((await versions(bucket)).versions, [['g.txt', true, 13]], 'no new version');
    assert.equal(await body(bucket, 'g.txt'), 'not archived\n');
    const lj = JSON.parse(ok(await rclone(['lsjson', `fr:${bucket}`]), 'lsjson').stdout) as Array<{ Tier: string }>;
    assert.equal(lj[0]!.Tier, 'STANDARD');
  });

  describe('s3cmd', () => {
    let home: string;
    let s3cmdSkip: string | undefined;
    const s3cmd = (args: string[], timeout?: number) => run(S3CMD, ['-c', join(home, '.s3cfg'), ...args], { PATH, HOME: home }, timeout);

    before(async () => {
      s3cmdSkip = (await findOrInstall('s3cmd', [S3CMD])).skip;
      home = join(work, 's3cmd-home');
      await mkdir(home, { recursive: true });
      const host = new URL(t.s3Url).host;
      await writeFile(
        join(home, '.s3cfg'),
        ['[default]', `access_key = ${id}`, `secret_key = ${secret}`, `host_base = ${host}`, `host_bucket = ${host}`, 'use_https = False', 'signature_v2 = False', 'bucket_location = us-east-1', ''].join('\n'),
      );
    });

    it('s3cmd sync up and down keeps mtimes, sync --delete-removed leaves delete markers, du counts current objects, info, rb of a bucket holding old versions is BucketNotEmpty', async (ctx) => {
      if (s3cmdSkip) return ctx.skip(s3cmdSkip);
      const bucket = name('sync');
      const src = join(home, 'src');
      const mtime = new Date('2019-03-04T05:06:07Z');
      await local(join(src, 'a.txt'), 'aaa\n', mtime);
      await local(join(src, 'sub', 'b.txt'), 'bbbbbb\n');
      await local(join(src, 'sub', 'c.bin'), randomBytes(1000));
      ok(await s3cmd(['mb', `s3://${bucket}`]), 'mb');
      ok(await s3cmd(['sync', `${src}/`, `s3://${bucket}/tree/`]), 'sync up');
      const down = join(home, 'down');
      ok(await s3cmd(['sync', `s3://${bucket}/tree/`, `${down}/`]), 'sync down');
      assert.equal(await readFile(join(down, 'a.txt'), 'utf8'), 'aaa\n');
      assert.equal(await readFile(join(down, 'sub', 'b.txt'), 'utf8'), 'bbbbbb\n');
      const { stat } = await import('node:fs/promises');
      assert.equal((await stat(join(down, 'a.txt'))).mtime.getTime(), mtime.getTime(), 's3cmd-attrs carried the mtime');

      await rm(join(src, 'sub', 'c.bin'));
      const del = ok(await s3cmd(['sync', '--delete-removed', `${src}/`, `s3://${bucket}/tree/`]), 'sync --delete-removed');
      assert.match(del.stdout, /delete: 's3:\/\/[^']+\/tree\/sub\/c\.bin'/);
      const v = await versions(bucket);
      assert.deepEqual(v.markers, [['tree/sub/c.bin', true]]);
      assert.equal(v.versions.length, 3, 'the deleted object\'s version is kept');
      const du = ok(await s3cmd(['du', `s3://${bucket}`]), 'du').stdout;
      assert.match(du, /^\s*11\s+2 objects s3:\/\//, du);

      const info = ok(await s3cmd(['info', `s3://${bucket}`]), 'info bucket').stdout;
      assert.match(info, /Location:\s+us-east-1/);
      const oinfo = ok(await s3cmd(['info', `s3://${bucket}/tree/a.txt`]), 'info object').stdout;
      assert.match(oinfo, new RegExp(`MD5 sum:\\s+${md5('aaa\n')}`));
      assert.match(oinfo, /File size:\s+4/);
      assert.match(oinfo, /Storage:\s+STANDARD/);
      assert.match(oinfo, /x-amz-meta-s3cmd-attrs: .*mtime:1551675967/);

      ok(await s3cmd(['del', '--recursive', '--force', `s3://${bucket}/`]), 'del --recursive');
      assert.equal(ok(await s3cmd(['ls', '--recursive', `s3://${bucket}/`]), 'ls').stdout, '');
      const rb = await s3cmd(['rb', `s3://${bucket}`]);
      assert.notEqual(rb.code, 0);
      assert.match(rb.stderr, /BucketNotEmpty/);
      assert.equal((await s3.send(new HeadBucketCommand({ Bucket: bucket }))).$metadata.httpStatusCode, 200);
    });

    it('s3cmd multipart lists a pending upload, listmp its parts, abortmp aborts it', async (ctx) => {
      if (s3cmdSkip) return ctx.skip(s3cmdSkip);
      const bucket = name('s3mp');
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      const uploadId = await pendingUpload(bucket, 'part/pending.bin');
      const mp = ok(await s3cmd(['multipart', `s3://${bucket}`]), 'multipart').stdout;
      assert.match(mp, new RegExp(`s3://${bucket}/part/pending\\.bin\\s+${uploadId}`), mp);
      const parts = ok(await s3cmd(['listmp', `s3://${bucket}/part/pending.bin`, uploadId]), 'listmp').stdout;
      assert.match(parts, new RegExp(`\\s1\\s+"${md5(Buffer.alloc(100, 7))}"\\s+100`), parts);
      ok(await s3cmd(['abortmp', `s3://${bucket}/part/pending.bin`, uploadId]), 'abortmp');
      assert.deepEqual(await uploadIds(bucket), []);
      assert.doesNotMatch(ok(await s3cmd(['multipart', `s3://${bucket}`]), 'multipart').stdout, /pending/);
    });

    it('s3cmd modify --add-header, setacl --acl-private (and --acl-public refused), cp --preserve keeps metadata', async (ctx) => {
      if (s3cmdSkip) return ctx.skip(s3cmdSkip);
      const bucket = name('s3mod');
      ok(await s3cmd(['mb', `s3://${bucket}`]), 'mb');
      const f = await local(join(home, 'mod', 'm.txt'), 'modify me\n', new Date('2018-01-01T00:00:00Z'));
      ok(await s3cmd(['put', f, `s3://${bucket}/m.txt`]), 'put');
      ok(await s3cmd(['modify', '--add-header=Cache-Control:max-age=60', `s3://${bucket}/m.txt`]), 'modify');
      const h = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'm.txt' }));
      assert.equal(h.CacheControl, 'max-age=60');
      assert.match(h.Metadata?.['s3cmd-attrs'] ?? '', /mtime:1514764800/, 'modify kept the metadata it did not change');
      assert.equal(h.ETag, `"${md5('modify me\n')}"`);
      assert.equal((await versions(bucket)).versions.length, 2, 'modify is a copy onto itself: a new version');

      ok(await s3cmd(['setacl', '--acl-private', `s3://${bucket}/m.txt`]), 'setacl --acl-private');
      const pub = await s3cmd(['setacl', '--acl-public', `s3://${bucket}/m.txt`]);
      assert.notEqual(pub.code, 0);
      assert.match(pub.stderr, /NotImplemented/);

      ok(await s3cmd(['cp', '--preserve', `s3://${bucket}/m.txt`, `s3://${bucket}/copy/m.txt`]), 'cp --preserve');
      const c = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'copy/m.txt' }));
      assert.equal(c.CacheControl, 'max-age=60');
      assert.equal(c.Metadata?.['s3cmd-attrs'], h.Metadata?.['s3cmd-attrs']);
      assert.equal(await body(bucket, 'copy/m.txt'), 'modify me\n');
    });

    it('s3cmd restore of an object that is not archived: InvalidObjectState (403), as S3 answers for a STANDARD object', async (ctx) => {
      if (s3cmdSkip) return ctx.skip(s3cmdSkip);
      const bucket = name('s3restore');
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'r.txt', Body: 'readable now' }));
      // POST /bucket/r.txt?restore with a RestoreRequest body. Nothing here is ever archived, so the
      // S3 answer is the one for a STANDARD object: 403 InvalidObjectState ("Restore is not allowed
      // for the object's current storage class"), which scripts restoring a whole tree skip over.
      const r = await s3cmd(['restore', '--restore-days=1', `s3://${bucket}/r.txt`]);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /403 \(InvalidObjectState\)/, r.stderr);
      assert.equal(await body(bucket, 'r.txt'), 'readable now');
    });

    it('s3cmd ls --recursive and du page through 1100 keys', async (ctx) => {
      if (s3cmdSkip) return ctx.skip(s3cmdSkip);
      const bucket = name('s3many');
      await s3.send(new CreateBucketCommand({ Bucket: bucket }));
      const keys = Array.from({ length: 1100 }, (_, i) => `many/k${String(i).padStart(4, '0')}`);
      for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((k) => s3.send(new PutObjectCommand({ Bucket: bucket, Key: k, Body: 'x' }))));
      // One key overwritten: its older version must not show as a second entry.
      await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'many/k0500', Body: 'y' }));
      const ls = ok(await s3cmd(['ls', '--recursive', `s3://${bucket}/`]), 'ls --recursive').stdout.trim().split('\n');
      assert.deepEqual(ls.map((l) => l.split(/\s+/).pop()), keys.map((k) => `s3://${bucket}/${k}`));
      const du = ok(await s3cmd(['du', `s3://${bucket}/many/`]), 'du').stdout;
      assert.match(du, /^\s*1100\s+1100 objects/, du);
    });

    it('s3cmd put of 20 MiB in 5 MiB parts, get --continue of a partial file (a ranged GET), signurl', async (ctx) => {
      if (s3cmdSkip) return ctx.skip(s3cmdSkip);
      const bucket = name('s3big');
      ok(await s3cmd(['mb', `s3://${bucket}`]), 'mb');
      const big = randomBytes(20 * MiB);
      const f = await local(join(home, 'big', 'big.bin'), big);
      ok(await s3cmd(['put', '--multipart-chunk-size-mb=5', f, `s3://${bucket}/big.bin`], 60_000), 'put multipart');
      const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'big.bin' }));
      assert.match(head.ETag!, /^"[0-9a-f]{32}-4"$/);
      assert.equal(head.ContentLength, 20 * MiB);
      assert.deepEqual(await uploadIds(bucket), [], 'the upload was completed');

      const partial = join(home, 'big', 'partial.bin');
      await writeFile(partial, big.subarray(0, 7_000_000));
      const got = ok(await s3cmd(['--debug', 'get', '--continue', `s3://${bucket}/big.bin`, partial], 60_000), 'get --continue');
      assert.match(got.stderr, /'content-range': 'bytes 7000000-20971519\/20971520'/, 'the rest only was asked for');
      assert.ok((await readFile(partial)).equals(big));

      const url = ok(await s3cmd(['signurl', `s3://${bucket}/big.bin`, '+300']), 'signurl').stdout.trim();
      const r = await fetch(url, { headers: { range: 'bytes=0-9' } });
      assert.equal(r.status, 206);
      assert.ok(Buffer.from(await r.arrayBuffer()).equals(big.subarray(0, 10)));
    });
  });
});
