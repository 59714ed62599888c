// S3 multipart uploads through the S3 door: the AWS SDK's Upload helper, raw calls (re-sent and
// out-of-order parts, every refusal S3 gives), ListParts/ListMultipartUploads with markers, the
// AWS CLI and boto3 above their multipart thresholds, and the object seen through the REST door.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { createBucket, getLiveBucket } from '../src/domain/buckets.js';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import { PassThrough } from 'node:stream';
import { loadConfig } from '../src/config.js';
import { openCore, type Core } from '../src/service.js';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { spawnFilesRest, type ServerProcess } from './support/process.js';
import { createBucket as createRestBucket, downloadMd5, req, waitFor } from './support/http.js';
import { filesUnder, patternStream, processEnv } from './support/fixtures.js';
import { multipartEtag } from './support/s3-door.js';

const AWS_CLI = '/usr/bin/aws';
const PYTHON = '/usr/bin/python3';
const SERVER_KEY = randomBytes(32).toString('base64');
const MiB = 1024 * 1024;
/**
 * The raw calls' part sizes are multiples of K bytes: small on fs; on S3 storage (TEST_STORAGE=s3)
 * large enough for the native multipart upload underneath, whose parts must be 5 MiB.
 */
const K = testStorage() === 's3' ? 3500 : 1;
/** The least size of a part but the last, for the raw calls' small parts. */
const MIN = 1000;

const md5 = (b: Buffer) => createHash('md5').update(b).digest('hex');

async function s3Code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof S3ServiceException) return e.name;
    throw e;
  }
  assert.fail('expected an S3 error');
}

function run(cmd: string, args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('S3 multipart uploads', () => {
  let t: TestServer;
  let id: string;
  let secret: string;
  let s3: S3Client;
  let token: string;
  let bucket: string;

  before(async () => {
    t = await startTestServer({
      FILES_REST_S3_PORT: 'auto',
      FILES_REST_PERMISSION_FACTORY: 'token',
      FILES_REST_SERVER_KEY: SERVER_KEY,
      FILES_REST_S3_MULTIPART_MIN_PART_SIZE: String(MIN),
      FILES_REST_S3_MULTIPART_LAYOUT_WAIT: '200',
    });
    const keys = requireServerKeys(t.config, null, { create: true });
    const k = await createAccessKey(t.server.core.ctx.db, keys);
    id = k.info.accessKeyId;
    secret = k.secret;
    s3 = new S3Client({ endpoint: t.s3Url, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: id, secretAccessKey: secret } });
    const { createToken } = await import('../src/auth/tokens.js');
    token = (await createToken(t.server.core.ctx.db)).token;
    bucket = (await createBucket(t.server.core.ctx, {})).id;
  });
  after(async () => {
    s3?.destroy();
    await t?.close();
  });

  async function restGet(key: string): Promise<{ body: Buffer; checksum: string | undefined }> {
    const auth = { authorization: `Bearer ${token}` };
    const r = await fetch(`${t.files}/${bucket}/${key}`, { headers: auth });
    assert.equal(r.status, 200);
    const body = Buffer.from(await r.arrayBuffer());
    const listing = (await (await fetch(`${t.files}/${bucket}?versions`, { headers: auth })).json()) as { contents: Array<{ key: string; is_head: boolean; checksum: string }> };
    const v = listing.contents.find((c) => c.key === key && c.is_head);
    return { body, checksum: v?.checksum };
  }

  it('the SDK Upload helper, 4 parts in flight: the object, its -N ETag, and the same bytes with the plain MD5 through the REST door', async () => {
    const body = randomBytes(17 * MiB + 123);
    const up = new Upload({ client: s3, params: { Bucket: bucket, Key: 'sdk/big.bin', Body: body, ContentType: 'application/x-big' }, queueSize: 4, partSize: 5 * MiB });
    const done = await up.done();
    const parts = [0, 1, 2, 3].map((i) => body.subarray(i * 5 * MiB, Math.min((i + 1) * 5 * MiB, body.length)));
    assert.equal(done.ETag, multipartEtag(parts));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: 'sdk/big.bin' }));
    assert.equal(got.ETag, multipartEtag(parts));
    assert.equal(got.ContentType, 'application/x-big');
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(body));
    const rest = await restGet('sdk/big.bin');
    assert.ok(rest.body.equals(body));
    assert.equal(rest.checksum, `md5:${md5(body)}`);
    const b = await getLiveBucket(t.server.core.ctx.db, bucket);
    assert.equal(b.reservedSize, 0, 'the reservation became the object');
  });

  it('a last part smaller than a middle part may be, overtaking part 1, waits for it instead of fixing the part size', async () => {
    const key = 'raw/overtaken.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const p1 = randomBytes(2000 * K);
    const p2 = randomBytes(MIN - 1);
    const send = (n: number, b: Buffer) => s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: n, Body: b }));
    // Part 2 (surely the last: smaller than MIN) arrives first; part 1 comes after the layout wait (200 ms).
    const second = send(2, p2);
    await new Promise((r) => setTimeout(r, 600));
    const e1 = (await send(1, p1)).ETag!;
    const e2 = (await second).ETag!;
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: e1 }, { PartNumber: 2, ETag: e2 }] } }));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(Buffer.concat([p1, p2])));
  });

  it('a last part that never sees part 1: on fs stored after the layout wait (the upload is assembled at completion), elsewhere refused with ServiceUnavailable, holding nothing', async () => {
    const key = 'raw/no-first.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const once = new S3Client({ endpoint: t.s3Url, region: 'us-east-1', forcePathStyle: true, maxAttempts: 1, credentials: { accessKeyId: id, secretAccessKey: secret } });
    try {
      const p1 = randomBytes(2000 * K);
      const p2 = randomBytes(10);
      const complete = (parts: { PartNumber: number; ETag: string }[]) =>
        s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: parts } }));
      const get = async () => Buffer.from(await (await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body!.transformToByteArray());
      if (testStorage() !== 's3') {
        // The MinIO JavaScript client numbers its parts from 2: a lone small part 2 is a whole upload.
        const started = Date.now();
        const e2 = (await once.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 2, Body: p2 }))).ETag!;
        assert.ok(Date.now() - started < 1500, 'it waited the layout wait (200 ms), not ten times as long');
        const done = await complete([{ PartNumber: 2, ETag: e2 }]);
        assert.equal(done.ETag, multipartEtag([p2]));
        assert.ok((await get()).equals(p2));
        // Part 1 after it: the part size was fixed at S3's largest part, and the two are assembled.
        const again = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
        const send = (n: number, b: Buffer) => once.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: again.UploadId, PartNumber: n, Body: b }));
        const f2 = (await send(2, p2)).ETag!;
        const f1 = (await send(1, p1)).ETag!;
        await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: again.UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: f1 }, { PartNumber: 2, ETag: f2 }] } }));
        assert.ok((await get()).equals(Buffer.concat([p1, p2])));
        return;
      }
      const refused = await once.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 2, Body: p2 })).catch((e: unknown) => e);
      assert.ok(refused instanceof S3ServiceException, String(refused));
      assert.equal(refused.name, 'ServiceUnavailable');
      assert.equal(refused.$metadata.httpStatusCode, 503);
      assert.match(refused.message, /part 1/);
      const listed = await s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId }));
      assert.equal(listed.Parts?.length ?? 0, 0);
      const e1 = (await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: p1 }))).ETag!;
      const e2 = (await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 2, Body: p2 }))).ETag!;
      await complete([{ PartNumber: 1, ETag: e1 }, { PartNumber: 2, ETag: e2 }]);
      assert.ok((await get()).equals(Buffer.concat([p1, p2])));
    } finally {
      once.destroy();
    }
  });

  it('a part list S3 accepts that is not the file as it lies (parts from 2, a gap, a smaller middle part) is assembled on fs: bytes, ETag, parts by number, checksum, bucket size, no file left behind', async () => {
    const key = 'raw/assembled.bin';
    const db = t.server.core.ctx.db;
    const sizeBefore = (await getLiveBucket(db, bucket)).size;
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const send = async (n: number, b: Buffer) => (await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: n, Body: b }))).ETag!;
    const p2 = randomBytes(2000 * K);
    const p3 = randomBytes(1500 * K);
    const p4 = randomBytes(2000 * K);
    const p5 = randomBytes(2000 * K);
    const p7 = randomBytes(300 * K);
    // Part 2 first and no part 1 ever: it fixes the part size after the layout wait.
    const e2 = await send(2, p2);
    const e3 = await send(3, p3);
    await send(4, p4); // sent, not listed: it and its reservation go
    const e5 = await send(5, p5);
    const e7 = await send(7, p7);
    const list = [{ PartNumber: 2, ETag: e2 }, { PartNumber: 3, ETag: e3 }, { PartNumber: 5, ETag: e5 }, { PartNumber: 7, ETag: e7 }];
    const complete = () => s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: list } }));
    if (testStorage() === 's3') {
      // The S3 storage's parts are a native upload underneath, unreadable before it completes.
      assert.equal(await s3Code(complete()), 'InvalidArgument');
      await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId }));
      return;
    }
    const done = await complete();
    const parts = [p2, p3, p5, p7];
    const whole = Buffer.concat(parts);
    assert.equal(done.ETag, multipartEtag(parts));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    assert.equal(got.ETag, multipartEtag(parts));
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(whole));
    // Each part by its place in the list, at its own size.
    for (const [i, p] of parts.entries()) {
      const one = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, PartNumber: i + 1 }));
      assert.equal(one.PartsCount, 4);
      assert.equal(one.ContentLength, p.length);
      assert.ok(Buffer.from(await one.Body!.transformToByteArray()).equals(p), `part ${i + 1}`);
    }
    const rest = await restGet(key);
    assert.ok(rest.body.equals(whole));
    assert.equal(rest.checksum, `md5:${md5(whole)}`);
    const b = await getLiveBucket(db, bucket);
    assert.equal(b.size - sizeBefore, whole.length, 'the bucket grew by the object');
    assert.equal(b.reservedSize, 0, 'nothing else reserved');
    // The upload's own file went once the object was made of the assembled one.
    await waitFor(async () => {
      const known = new Set((await db.selectFrom('files').select('uri').execute()).map((r) => r.uri));
      const locations = await db.selectFrom('locations').select('uri').execute();
      const stored = (await Promise.all(locations.map((l) => filesUnder(l.uri)))).flat().filter((f) => !f.endsWith('.files-rest-owner'));
      // Every stored file has its row.
      return stored.every((f) => known.has(f));
    });
  });

  it('a part larger than the part size (s3fs makes its last part up to twice the others) is kept and assembled on fs; one that would overlap another part is refused', async () => {
    const key = 'raw/oversize.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const send = async (n: number, b: Buffer) => (await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: n, Body: b }))).ETag!;
    const p1 = randomBytes(2000 * K);
    const p2 = randomBytes(3500 * K); // the last part, larger than part 1
    const e1 = await send(1, p1);
    if (testStorage() === 's3') {
      assert.equal(await s3Code(send(2, p2)), 'InvalidArgument');
      await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId }));
      return;
    }
    const e2 = await send(2, p2);
    // Part 3 would start inside part 2; part 2 again, larger, would reach into a part 3 sent first.
    assert.equal(await s3Code(send(3, randomBytes(1000 * K))), 'InvalidArgument');
    const other = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: `${key}.other` }));
    const sendOther = async (n: number, b: Buffer) => (await s3.send(new UploadPartCommand({ Bucket: bucket, Key: `${key}.other`, UploadId: other.UploadId, PartNumber: n, Body: b }))).ETag!;
    await sendOther(1, p1);
    await sendOther(3, randomBytes(1000 * K));
    assert.equal(await s3Code(sendOther(2, p2)), 'InvalidArgument');
    await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: `${key}.other`, UploadId: other.UploadId }));
    const done = await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: e1 }, { PartNumber: 2, ETag: e2 }] } }));
    assert.equal(done.ETag, multipartEtag([p1, p2]));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(Buffer.concat([p1, p2])));
    const second = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, PartNumber: 2 }));
    assert.ok(Buffer.from(await second.Body!.transformToByteArray()).equals(p2));
  });

  it('an UploadPartCopy or CopyObject refused before its bytes are read closes its source file at once, leaving no handle to the garbage collector', async () => {
    const ctx = t.server.core.ctx;
    // Larger than FILES_REST_INLINE_MAX_SIZE: a file of its own, opened for each copy.
    const body = randomBytes(256 * 1024 + 3000 * K);
    const src = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'leak/src.bin', Body: body }));
    const srcFile = await ctx.db
      .selectFrom('object_versions')
      .innerJoin('files', 'files.id', 'object_versions.file_id')
      .select('files.uri')
      .where('object_versions.version_id', '=', src.VersionId!)
      .executeTakeFirstOrThrow();
    assert.ok(srcFile.uri);
    // A file handle nobody closed is closed by the garbage collector, with a warning (DEP0137).
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    const { setFlagsFromString } = await import('node:v8');
    const { runInNewContext } = await import('node:vm');
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    // A part copy refused after its source was opened: its place would overlap part 2's.
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'leak/copy.bin' }));
    await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'leak/copy.bin', UploadId, PartNumber: 1, Body: randomBytes(1000 * K) }));
    await s3.send(new UploadPartCommand({ Bucket: bucket, Key: 'leak/copy.bin', UploadId, PartNumber: 3, Body: randomBytes(1000 * K) }));
    // A copy refused after its source was opened: larger than the bucket's maximum file size.
    const { setBucketProperties } = await import('../src/domain/buckets.js');
    const small = (await createBucket(ctx, {})).id;
    await setBucketProperties(ctx, small, { maxFileSize: 1000 });
    for (let i = 0; i < 3; i++) {
      const part = await s3Code(s3.send(new UploadPartCopyCommand({ Bucket: bucket, Key: 'leak/copy.bin', UploadId, PartNumber: 2, CopySource: `${bucket}/leak/src.bin` })));
      assert.equal(part, 'InvalidArgument');
      assert.equal(await s3Code(s3.send(new CopyObjectCommand({ Bucket: small, Key: 'copied.bin', CopySource: `${bucket}/leak/src.bin` }))), 'EntityTooLarge');
    }
    const { readdir, readlink } = await import('node:fs/promises');
    /** Descriptors of this process (the server runs in it) open on the source's file. */
    const openOnSource = async () => {
      let n = 0;
      for (const fd of await readdir('/proc/self/fd')) if ((await readlink(`/proc/self/fd/${fd}`).catch(() => '')) === srcFile.uri) n++;
      return n;
    };
    assert.equal(await openOnSource(), 0, 'every refused copy closed its source');
    gc();
    await new Promise((r) => setTimeout(r, 100));
    process.off('warning', onWarning);
    assert.deepEqual(warnings.filter((w) => /file descriptor/i.test(w)), []);
    await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: 'leak/copy.bin', UploadId }));
  });

  it('raw calls: out-of-order and re-sent parts; wrong ETag, wrong order, too-small part, bad part number; then complete', async () => {
    const key = 'raw/one.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    assert.ok(UploadId);
    const p1 = randomBytes(2000 * K);
    const p2 = randomBytes(2000 * K);
    const p3 = randomBytes(1234 * K);
    const send = (n: number, b: Buffer) => s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: n, Body: b }));
    // Part 2 first: it waits for part 1 a while, then fixes the part size itself.
    const e2 = (await send(2, p2)).ETag!;
    const e3 = (await send(3, p3)).ETag!;
    const stale = randomBytes(2000 * K);
    await send(1, stale);
    const e1 = (await send(1, p1)).ETag!; // re-sent: replaces the first
    assert.equal(e1, `"${md5(p1)}"`);
    assert.equal(await s3Code(send(0, p1)), 'InvalidArgument');
    assert.equal(await s3Code(send(10001, p1)), 'InvalidArgument');
    const complete = (parts: { PartNumber: number; ETag: string }[]) =>
      s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: parts } }));
    assert.equal(await s3Code(complete([{ PartNumber: 1, ETag: `"${md5(stale)}"` }, { PartNumber: 2, ETag: e2 }, { PartNumber: 3, ETag: e3 }])), 'InvalidPart');
    assert.equal(await s3Code(complete([{ PartNumber: 1, ETag: e1 }, { PartNumber: 4, ETag: e2 }])), 'InvalidPart');
    assert.equal(await s3Code(complete([{ PartNumber: 2, ETag: e2 }, { PartNumber: 1, ETag: e1 }, { PartNumber: 3, ETag: e3 }])), 'InvalidPartOrder');
    // Re-sending part 2 smaller than the minimum: refused at completion, as S3 does.
    const small = randomBytes(10);
    const eSmall = (await send(2, small)).ETag!;
    const tooSmall = await complete([{ PartNumber: 1, ETag: e1 }, { PartNumber: 2, ETag: eSmall }, { PartNumber: 3, ETag: e3 }]).then(
      () => assert.fail('a part under the minimum was accepted'),
      (e: unknown) => e as S3ServiceException & Record<string, unknown>,
    );
    assert.equal(tooSmall.name, 'EntityTooSmall');
    // The part, its size and the minimum, as S3 names them.
    assert.deepEqual([tooSmall.PartNumber, tooSmall.ProposedSize, tooSmall.MinSizeAllowed, tooSmall.ETag], ['2', '10', String(t.config.s3MultipartMinPartSize), md5(small)]);
    const e2again = (await send(2, p2)).ETag!;
    assert.equal(await s3Code(s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: 'nope', MultipartUpload: { Parts: [{ PartNumber: 1, ETag: e1 }] } }))), 'NoSuchUpload');
    const done = await complete([{ PartNumber: 1, ETag: e1 }, { PartNumber: 2, ETag: e2again }, { PartNumber: 3, ETag: e3 }]);
    assert.equal(done.ETag, multipartEtag([p1, p2, p3]));
    const whole = Buffer.concat([p1, p2, p3]);
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(whole));
    const rest = await restGet(key);
    assert.ok(rest.body.equals(whole));
    assert.equal(rest.checksum, `md5:${md5(whole)}`);
    assert.equal(await s3Code(send(1, p1)), 'NoSuchUpload', 'a completed upload takes no more parts');
    // The completion repeated (a client whose answer was lost retries): the same answer, as S3 gives.
    const again = await complete([{ PartNumber: 1, ETag: e1 }, { PartNumber: 2, ETag: e2again }, { PartNumber: 3, ETag: e3 }]);
    assert.equal(again.ETag, done.ETag);
    assert.equal(again.VersionId, done.VersionId);
    // files-rest's own record of the upload is no header of the object, nor copied with it.
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    assert.deepEqual(Object.keys(head.Metadata ?? {}), []);
    assert.equal(JSON.stringify(head).includes(UploadId!), false);
    // Once the version it made is gone, the upload is unknown again.
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: key, VersionId: done.VersionId }));
    assert.equal(await s3Code(complete([{ PartNumber: 1, ETag: e1 }])), 'NoSuchUpload');
  });

  it('conditional writes: CompleteMultipartUpload and CopyObject honour If-None-Match: * and If-Match (a multipart ETag too); If-Match on no object is NoSuchKey', async () => {
    const key = 'cond/mp.bin';
    const parts = [randomBytes(2000 * K), randomBytes(1000 * K)];
    const upload = async () => {
      const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
      const etags: string[] = [];
      for (const [i, p] of parts.entries()) etags.push((await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body: p }))).ETag!);
      return { UploadId: UploadId!, Parts: etags.map((ETag, i) => ({ PartNumber: i + 1, ETag })) };
    };
    // If-Match with no object at the key: NoSuchKey (404), as S3 answers; nothing is made.
    const u0 = await upload();
    assert.equal(await s3Code(s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: u0.UploadId, MultipartUpload: { Parts: u0.Parts }, IfMatch: '"0123456789abcdef0123456789abcdef"' }))), 'NoSuchKey');
    assert.equal(await s3Code(s3.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'x', IfMatch: '*' }))), 'NoSuchKey');
    const first = await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: u0.UploadId, MultipartUpload: { Parts: u0.Parts }, IfNoneMatch: '*' }));
    assert.equal(first.ETag, multipartEtag(parts));
    // The key exists now: If-None-Match: * refuses a completion (the upload stays, completable).
    const u1 = await upload();
    assert.equal(await s3Code(s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: u1.UploadId, MultipartUpload: { Parts: u1.Parts }, IfNoneMatch: '*' }))), 'PreconditionFailed');
    assert.equal(await s3Code(s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: u1.UploadId, MultipartUpload: { Parts: u1.Parts }, IfMatch: '"0123456789abcdef0123456789abcdef-2"' }))), 'PreconditionFailed');
    // If-Match with the head's multipart ETag passes.
    const second = await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: u1.UploadId, MultipartUpload: { Parts: u1.Parts }, IfMatch: first.ETag }));
    assert.notEqual(second.VersionId, first.VersionId);
    // CopyObject onto an existing key with If-None-Match: * is refused; with the right If-Match it copies.
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'cond/src.txt', Body: 'source' }));
    assert.equal(await s3Code(s3.send(new CopyObjectCommand({ Bucket: bucket, Key: key, CopySource: `${bucket}/cond/src.txt`, IfNoneMatch: '*' }))), 'PreconditionFailed');
    assert.equal(await s3Code(s3.send(new CopyObjectCommand({ Bucket: bucket, Key: key, CopySource: `${bucket}/cond/src.txt`, IfMatch: '"0123456789abcdef0123456789abcdef-2"' }))), 'PreconditionFailed');
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    assert.equal(head.VersionId, second.VersionId);
    await s3.send(new CopyObjectCommand({ Bucket: bucket, Key: key, CopySource: `${bucket}/cond/src.txt`, IfMatch: head.ETag }));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    assert.equal(await got.Body!.transformToString(), 'source');
    await s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'cond/fresh.txt', CopySource: `${bucket}/cond/src.txt`, IfNoneMatch: '*' }));
  });

  it('x-amz-tagging on CreateMultipartUpload tags the object the completion makes', async () => {
    const key = 'tagged/mp.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, Tagging: 'Hello=World&foo=b%20ar', ContentType: 'text/x-tagged' }));
    const e1 = (await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: Buffer.from('tagged') }))).ETag!;
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: e1 }] } }));
    const tagging = await s3.send(new GetObjectTaggingCommand({ Bucket: bucket, Key: key }));
    assert.deepEqual(tagging.TagSet, [{ Key: 'Hello', Value: 'World' }, { Key: 'foo', Value: 'b ar' }]);
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    assert.equal(head.TagCount, 2);
    assert.equal(head.ContentType, 'text/x-tagged');
    assert.deepEqual(head.Metadata, {});
    // A malformed tag set is refused when the upload starts.
    assert.equal(await s3Code(s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, Tagging: 'a=1&a=2' }))), 'InvalidTag');
  });

  it('a completion listing fewer parts than were sent: the object is those parts, the rest released', async () => {
    const key = 'raw/fewer.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const parts = [randomBytes(2000 * K), randomBytes(2000 * K), randomBytes(2000 * K)];
    const etags: string[] = [];
    for (const [i, p] of parts.entries()) etags.push((await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: i + 1, Body: p }))).ETag!);
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: etags[0]! }, { PartNumber: 2, ETag: etags[1]! }] } }));
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    assert.equal(head.ContentLength, 4000 * K);
    assert.equal(head.ETag, multipartEtag(parts.slice(0, 2)));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(Buffer.concat(parts.slice(0, 2))));
    assert.equal((await getLiveBucket(t.server.core.ctx.db, bucket)).reservedSize, 0);
  });

  it('abort; ListMultipartUploads and ListParts with their markers; an interrupted upload resumed from its part list', async () => {
    const b = (await createBucket(t.server.core.ctx, {})).id;
    const ids: Record<string, string> = {};
    for (const key of ['a', 'b', 'c']) ids[key] = (await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: key }))).UploadId!;
    const page1 = await s3.send(new ListMultipartUploadsCommand({ Bucket: b, MaxUploads: 2 }));
    assert.deepEqual(page1.Uploads?.map((u) => u.Key), ['a', 'b']);
    assert.equal(page1.IsTruncated, true);
    const page2 = await s3.send(new ListMultipartUploadsCommand({ Bucket: b, MaxUploads: 2, KeyMarker: page1.NextKeyMarker, UploadIdMarker: page1.NextUploadIdMarker }));
    assert.deepEqual(page2.Uploads?.map((u) => u.Key), ['c']);
    assert.equal(page2.IsTruncated, false);

    await s3.send(new AbortMultipartUploadCommand({ Bucket: b, Key: 'a', UploadId: ids.a }));
    assert.equal(await s3Code(s3.send(new UploadPartCommand({ Bucket: b, Key: 'a', UploadId: ids.a, PartNumber: 1, Body: Buffer.alloc(5) }))), 'NoSuchUpload');
    assert.equal(await s3Code(s3.send(new AbortMultipartUploadCommand({ Bucket: b, Key: 'a', UploadId: ids.a }))), 'NoSuchUpload');
    assert.deepEqual((await s3.send(new ListMultipartUploadsCommand({ Bucket: b }))).Uploads?.map((u) => u.Key), ['b', 'c']);

    // An interrupted upload of 4 parts: 3 sent, then the client lists them and sends what is missing.
    const data = [randomBytes(1500 * K), randomBytes(1500 * K), randomBytes(1500 * K), randomBytes(700 * K)];
    for (const n of [1, 2, 4]) await s3.send(new UploadPartCommand({ Bucket: b, Key: 'b', UploadId: ids.b, PartNumber: n, Body: data[n - 1] }));
    assert.ok((await getLiveBucket(t.server.core.ctx.db, b)).reservedSize >= 3700 * K, 'parts reserve their size as they arrive');
    const lp1 = await s3.send(new ListPartsCommand({ Bucket: b, Key: 'b', UploadId: ids.b, MaxParts: 2 }));
    assert.deepEqual(lp1.Parts?.map((p) => [p.PartNumber, p.Size, p.ETag]), [[1, 1500 * K, `"${md5(data[0]!)}"`], [2, 1500 * K, `"${md5(data[1]!)}"`]]);
    assert.equal(lp1.IsTruncated, true);
    const lp2 = await s3.send(new ListPartsCommand({ Bucket: b, Key: 'b', UploadId: ids.b, PartNumberMarker: lp1.NextPartNumberMarker }));
    assert.deepEqual(lp2.Parts?.map((p) => p.PartNumber), [4]);
    const have = new Set([...lp1.Parts!, ...lp2.Parts!].map((p) => p.PartNumber));
    for (const n of [1, 2, 3, 4]) if (!have.has(n)) await s3.send(new UploadPartCommand({ Bucket: b, Key: 'b', UploadId: ids.b, PartNumber: n, Body: data[n - 1] }));
    const all = (await s3.send(new ListPartsCommand({ Bucket: b, Key: 'b', UploadId: ids.b }))).Parts!;
    const done = await s3.send(new CompleteMultipartUploadCommand({ Bucket: b, Key: 'b', UploadId: ids.b, MultipartUpload: { Parts: all.map((p) => ({ PartNumber: p.PartNumber!, ETag: p.ETag! })) } }));
    assert.equal(done.ETag, multipartEtag(data));
    const got = await s3.send(new GetObjectCommand({ Bucket: b, Key: 'b' }));
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(Buffer.concat(data)));
    await s3.send(new AbortMultipartUploadCommand({ Bucket: b, Key: 'c', UploadId: ids.c }));
    const after = await getLiveBucket(t.server.core.ctx.db, b);
    assert.equal(after.reservedSize, 0);
    assert.equal(after.size, 5200 * K);
  });

  it('DeleteBucket aborts the multipart uploads still in progress, as S3 does; a version still refuses it', async () => {
    const files = () => filesUnder(join(t.dir, 'data'));
    const before = new Set(await files());
    const b = (await createBucket(t.server.core.ctx, {})).id;
    const first = (await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'left/one' }))).UploadId!;
    await s3.send(new UploadPartCommand({ Bucket: b, Key: 'left/one', UploadId: first, PartNumber: 1, Body: randomBytes(1500 * K) }));
    await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'left/two' }));
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 'kept', Body: 'x' }));
    // An object version keeps the bucket, and the uploads with it.
    assert.equal(await s3Code(s3.send(new DeleteBucketCommand({ Bucket: b }))), 'BucketNotEmpty');
    assert.equal((await s3.send(new ListMultipartUploadsCommand({ Bucket: b }))).Uploads?.length, 2);
    const listed = await fetch(`${t.files}/${b}?versions`, { headers: { authorization: `Bearer ${token}` } });
    const version = ((await listed.json()) as { contents: Array<{ version_id: string }> }).contents[0]!.version_id;
    assert.equal((await fetch(`${t.files}/${b}/kept?versionId=${version}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } })).status, 204);
    // Only uploads left: the bucket goes, and the uploads with it.
    await s3.send(new DeleteBucketCommand({ Bucket: b }));
    assert.equal(await s3Code(s3.send(new HeadBucketCommand({ Bucket: b }))), 'NotFound');
    assert.equal(await s3Code(s3.send(new UploadPartCommand({ Bucket: b, Key: 'left/one', UploadId: first, PartNumber: 2, Body: Buffer.alloc(5) }))), 'NoSuchBucket');
    const rows = await t.server.core.ctx.db.selectFrom('multipart_uploads').select('id').where('bucket_id', '=', b).execute();
    assert.deepEqual(rows, []);
    // The part's file is removed by the background worker (earlier tests' files may go meanwhile).
    await waitFor(async () => (await files()).every((f) => before.has(f)));
  });

  it('UploadPartCopy with x-amz-copy-source-range', async () => {
    const src = randomBytes(4000 * K);
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'copy/src.bin', Body: src }));
    const key = 'copy/dst.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const c1 = await s3.send(new UploadPartCopyCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, CopySource: `${bucket}/copy/src.bin`, CopySourceRange: `bytes=0-${2000 * K - 1}` }));
    const c2 = await s3.send(new UploadPartCopyCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 2, CopySource: `${bucket}/copy/src.bin`, CopySourceRange: `bytes=${2000 * K}-${4000 * K - 1}` }));
    assert.equal(c1.CopyPartResult?.ETag, `"${md5(src.subarray(0, 2000 * K))}"`);
    assert.equal(
      await s3Code(s3.send(new UploadPartCopyCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 3, CopySource: `${bucket}/copy/src.bin`, CopySourceRange: `bytes=${4000 * K}-${10000 * K}` }))),
      'InvalidRange',
    );
    // A range that is not of the form bytes=first-last is malformed, not unsatisfiable.
    assert.equal(
      await s3Code(s3.send(new UploadPartCopyCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 3, CopySource: `${bucket}/copy/src.bin`, CopySourceRange: `bytes=5-1` }))),
      'InvalidArgument',
    );
    await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: c1.CopyPartResult!.ETag! }, { PartNumber: 2, ETag: c2.CopyPartResult!.ETag! }] } }));
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(src));
  });

  it('MalformedXML for a completion with no part', async () => {
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'x' }));
    assert.equal(await s3Code(s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: 'x', UploadId, MultipartUpload: { Parts: [] } }))), 'MalformedXML');
  });

  it('the AWS CLI: s3 cp above the multipart threshold and back, byte-identical, with the -N ETag', async (ctx) => {
    if (!existsSync(AWS_CLI)) return ctx.skip(`${AWS_CLI} is not installed (Debian package awscli)`);
    const home = await mkdtemp(join(tmpdir(), 'files-rest-awscli-mp-'));
    try {
      const env = {
        PATH: '/usr/bin:/bin', HOME: home, AWS_ACCESS_KEY_ID: id, AWS_SECRET_ACCESS_KEY: secret, AWS_DEFAULT_REGION: 'us-east-1',
        AWS_EC2_METADATA_DISABLED: 'true', AWS_CONFIG_FILE: join(home, 'config'), AWS_SHARED_CREDENTIALS_FILE: join(home, 'credentials'),
      };
      for (const [k, v] of [['default.s3.multipart_threshold', '5MB'], ['default.s3.multipart_chunksize', '5MB']]) {
        const r = await run(AWS_CLI, ['configure', 'set', k!, v!], env);
        assert.equal(r.code, 0, r.stderr);
      }
      const data = randomBytes(12 * MiB + 5);
      await writeFile(join(home, 'in.bin'), data);
      const aws = (...args: string[]) => run(AWS_CLI, ['--endpoint-url', t.s3Url, ...args], env);
      let r = await aws('s3', 'cp', join(home, 'in.bin'), `s3://${bucket}/cli/big.bin`);
      assert.equal(r.code, 0, r.stderr);
      r = await aws('s3api', 'head-object', '--bucket', bucket, '--key', 'cli/big.bin');
      assert.equal(r.code, 0, r.stderr);
      assert.match((JSON.parse(r.stdout) as { ETag: string }).ETag, /^"[0-9a-f]{32}-3"$/);
      r = await aws('s3', 'cp', `s3://${bucket}/cli/big.bin`, join(home, 'out.bin'));
      assert.equal(r.code, 0, r.stderr);
      assert.ok((await readFile(join(home, 'out.bin'))).equals(data));
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });

  it('boto3: upload_file/download_file with a low multipart threshold', async (ctx) => {
    const probe = await run(PYTHON, ['-c', 'import boto3'], { PATH: '/usr/bin:/bin' });
    if (probe.code !== 0) return ctx.skip(`boto3 is not importable by ${PYTHON}`);
    const home = await mkdtemp(join(tmpdir(), 'files-rest-boto3-mp-'));
    try {
      // Parts of 5 MiB, 5 MiB and 7 bytes: the last, under MIN, waits for part 1 when boto3's threads let it overtake.
      const data = randomBytes(10 * MiB + 7);
      await writeFile(join(home, 'in.bin'), data);
      const script = `
import boto3, sys
from boto3.s3.transfer import TransferConfig
s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], region_name='us-east-1')
cfg = TransferConfig(multipart_threshold=5*1024*1024, multipart_chunksize=5*1024*1024, max_concurrency=4)
s3.upload_file(sys.argv[5] + '/in.bin', sys.argv[4], 'boto/big.bin', Config=cfg)
print(s3.head_object(Bucket=sys.argv[4], Key='boto/big.bin')['ETag'])
s3.download_file(sys.argv[4], 'boto/big.bin', sys.argv[5] + '/out.bin', Config=cfg)
`;
      const r = await run(PYTHON, ['-c', script, t.s3Url, id, secret, bucket, home], {
        PATH: '/usr/bin:/bin', HOME: home, AWS_EC2_METADATA_DISABLED: 'true', AWS_CONFIG_FILE: join(home, 'c'), AWS_SHARED_CREDENTIALS_FILE: join(home, 'k'),
      });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout.trim(), /^"[0-9a-f]{32}-3"$/);
      assert.ok((await readFile(join(home, 'out.bin'))).equals(data));
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});

describe('S3 multipart: kill -9 leaves the upload completed or still completable', () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void>;
  let core: Core;
  let key: { id: string; secret: string };
  const procs: ServerProcess[] = [];
  before(async () => {
    const e = await processEnv({ FILES_REST_SERVER_KEY: SERVER_KEY, FILES_REST_S3_MULTIPART_MIN_PART_SIZE: String(MiB), FILES_REST_TASK_LEASE: '2', FILES_REST_WORKER: '0' });
    env = e.env;
    dir = e.dir;
    drop = e.drop;
    core = await openCore(loadConfig({ ...env, LOG_LEVEL: 'silent' }));
    const k = await createAccessKey(core.ctx.db, requireServerKeys(core.ctx.config, null, { create: true }));
    key = { id: k.info.accessKeyId, secret: k.secret };
  });
  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    await core?.close();
    await drop();
    await rm(dir, { recursive: true, force: true });
  });

  async function serve(extra: Record<string, string> = {}): Promise<{ p: ServerProcess; s3: S3Client }> {
    const p = await spawnFilesRest('serve', { ...env, FILES_REST_S3_PORT: 'auto', ...extra });
    procs.push(p);
    await p.waitFor(/S3 API listening on http/);
    const url = /S3 API listening on (http:\/\/[^\s"]+)/.exec(p.output())![1]!;
    const s3 = new S3Client({ endpoint: url, region: 'us-east-1', forcePathStyle: true, maxAttempts: 1, credentials: { accessKeyId: key.id, secretAccessKey: key.secret } });
    return { p, s3 };
  }
  const pattern = async (size: number, seed: number) => {
    const chunks: Buffer[] = [];
    for await (const c of patternStream(size, MiB, seed)) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  };

  it('a server killed mid-part: after restart ListParts shows the stored parts, the rest are re-sent and the upload completes', async () => {
    let { p, s3 } = await serve({ FILES_REST_WORKER: '1' });
    const b = await createRestBucket(p.files);
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'k.bin' }));
    const parts = [await pattern(4 * MiB, 1), await pattern(4 * MiB, 2), await pattern(MiB, 3)];
    const e1 = (await s3.send(new UploadPartCommand({ Bucket: b, Key: 'k.bin', UploadId, PartNumber: 1, Body: parts[0] }))).ETag!;
    // Part 2: half its bytes, then kill -9.
    const half = new PassThrough();
    const sending = s3.send(new UploadPartCommand({ Bucket: b, Key: 'k.bin', UploadId, PartNumber: 2, Body: half, ContentLength: 4 * MiB })).catch((e: unknown) => e);
    half.write(parts[1]!.subarray(0, 2 * MiB));
    await new Promise((r) => setTimeout(r, 300));
    await p.kill('SIGKILL');
    half.destroy();
    assert.ok((await sending) instanceof Error);
    s3.destroy();
    ({ p, s3 } = await serve({ FILES_REST_WORKER: '1' }));
    const listed = await s3.send(new ListPartsCommand({ Bucket: b, Key: 'k.bin', UploadId }));
    assert.deepEqual(listed.Parts?.map((x) => x.PartNumber), [1]);
    const e2 = (await s3.send(new UploadPartCommand({ Bucket: b, Key: 'k.bin', UploadId, PartNumber: 2, Body: parts[1] }))).ETag!;
    const e3 = (await s3.send(new UploadPartCommand({ Bucket: b, Key: 'k.bin', UploadId, PartNumber: 3, Body: parts[2] }))).ETag!;
    const done = await s3.send(new CompleteMultipartUploadCommand({ Bucket: b, Key: 'k.bin', UploadId, MultipartUpload: { Parts: [{ PartNumber: 1, ETag: e1 }, { PartNumber: 2, ETag: e2 }, { PartNumber: 3, ETag: e3 }] } }));
    assert.equal(done.ETag, multipartEtag(parts));
    const d = await downloadMd5(`${p.files}/${b}/k.bin`);
    assert.equal(d.md5, md5(Buffer.concat(parts)));
    const bucket = await core.ctx.db.selectFrom('buckets').selectAll().where('id', '=', b).executeTakeFirstOrThrow();
    assert.equal(Number(bucket.size), 9 * MiB);
    assert.equal(Number(bucket.reserved_size), 0);
    s3.destroy();
    await p.kill('SIGTERM');
  });

  it('a server killed while it assembles a part list (parts from 2): after restart the upload is open with its parts, no stray file is left, and a retried completion makes the object once', async () => {
    let { p, s3 } = await serve({ FILES_REST_WORKER: '1', FILES_REST_S3_MULTIPART_LAYOUT_WAIT: '100' });
    const b = await createRestBucket(p.files);
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'asm.bin' }));
    const partSize = 64 * MiB;
    const want = createHash('md5');
    const list: { PartNumber: number; ETag: string }[] = [];
    // Numbered from 2, as the MinIO JavaScript client numbers them: the completion assembles them.
    for (let n = 2; n <= 6; n++) {
      const body = await pattern(partSize, n);
      want.update(body);
      list.push({ PartNumber: n, ETag: (await s3.send(new UploadPartCommand({ Bucket: b, Key: 'asm.bin', UploadId, PartNumber: n, Body: body }))).ETag! });
    }
    const dataDir = env.FILES_REST_DATA_DIR!;
    const temporaries = async () => (await filesUnder(dataDir)).filter((f) => f.endsWith('.tmp'));
    const complete = (c: S3Client) => c.send(new CompleteMultipartUploadCommand({ Bucket: b, Key: 'asm.bin', UploadId, MultipartUpload: { Parts: list } }));
    const first = complete(s3).catch((e: unknown) => e);
    // The assembled file is being written (its temporary name exists): kill -9.
    await waitFor(async () => (await temporaries()).length > 0, 20_000, 2);
    await p.kill('SIGKILL');
    assert.ok((await first) instanceof Error);
    s3.destroy();
    ({ p, s3 } = await serve({ FILES_REST_WORKER: '1' }));
    // The interrupted copy's temporary file is removed by the start-up sweep (its process is gone).
    await waitFor(async () => (await temporaries()).length === 0, 20_000, 20);
    assert.equal((await req(`${p.files}/${b}/asm.bin`)).status, 404, 'no half object');
    const listed = await s3.send(new ListPartsCommand({ Bucket: b, Key: 'asm.bin', UploadId }));
    assert.deepEqual(listed.Parts?.map((x) => x.PartNumber), [2, 3, 4, 5, 6]);
    const done = await complete(s3);
    assert.match(done.ETag ?? '', /-5"$/);
    const d = await downloadMd5(`${p.files}/${b}/asm.bin`);
    assert.equal(d.md5, want.digest('hex'));
    const versions = await req(`${p.files}/${b}?versions`);
    assert.equal(versions.json.contents.length, 1);
    const bucket = await core.ctx.db.selectFrom('buckets').selectAll().where('id', '=', b).executeTakeFirstOrThrow();
    assert.equal(Number(bucket.reserved_size), 0);
    assert.equal(Number(bucket.size), 5 * partSize);
    // Every stored file has its row (the upload's own file went with its task).
    await waitFor(async () => {
      const known = new Set((await core.ctx.db.selectFrom('files').select('uri').execute()).map((r) => r.uri));
      return (await filesUnder(dataDir)).filter((f) => !f.endsWith('.files-rest-owner')).every((f) => known.has(f));
    }, 20_000, 50);
    s3.destroy();
    await p.kill('SIGTERM');
  });

  it('server and worker killed mid-completion: a retried CompleteMultipartUpload ends with the object, made once', async () => {
    let { p, s3 } = await serve();
    const b = await createRestBucket(p.files);
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: b, Key: 'big.bin' }));
    const partSize = 64 * MiB;
    const want = createHash('md5');
    const md5s: Buffer[] = [];
    const list: { PartNumber: number; ETag: string }[] = [];
    for (let n = 1; n <= 6; n++) {
      const body = await pattern(partSize, n);
      want.update(body);
      md5s.push(createHash('md5').update(body).digest());
      list.push({ PartNumber: n, ETag: (await s3.send(new UploadPartCommand({ Bucket: b, Key: 'big.bin', UploadId, PartNumber: n, Body: body }))).ETag! });
    }
    const complete = (c: S3Client) => c.send(new CompleteMultipartUploadCommand({ Bucket: b, Key: 'big.bin', UploadId, MultipartUpload: { Parts: list } }));
    // No worker yet: the completion waits; the server dies under it.
    const first = complete(s3).catch((e: unknown) => e);
    const runningOrQueued = async (state: string) =>
      (await core.ctx.db.selectFrom('tasks').selectAll().where('name', '=', 'complete-multipart').where('payload', 'like', `%${UploadId}%`).where('state', '=', state).executeTakeFirst()) ?? null;
    await waitFor(() => runningOrQueued('queued'), 20_000, 20);
    await p.kill('SIGKILL');
    assert.ok((await first) instanceof Error);
    s3.destroy();
    ({ p, s3 } = await serve());
    // The worker dies mid-merge too.
    const w1 = await spawnFilesRest('worker', env);
    procs.push(w1);
    await waitFor(() => runningOrQueued('running'), 20_000, 5);
    await w1.kill('SIGKILL');
    assert.equal((await req(`${p.files}/${b}/big.bin`)).status, 404, 'no half object');
    const retry = complete(s3);
    const w2 = await spawnFilesRest('worker', env);
    procs.push(w2);
    const done = await retry;
    const etag = createHash('md5');
    for (const m of md5s) etag.update(m);
    assert.equal(done.ETag, `"${etag.digest('hex')}-6"`);
    const d = await downloadMd5(`${p.files}/${b}/big.bin`);
    assert.equal(d.md5, want.digest('hex'));
    const versions = await req(`${p.files}/${b}?versions`);
    assert.equal(versions.json.contents.length, 1);
    const bucket = await core.ctx.db.selectFrom('buckets').selectAll().where('id', '=', b).executeTakeFirstOrThrow();
    assert.equal(Number(bucket.reserved_size), 0);
    assert.equal(Number(bucket.size), 6 * partSize);
    s3.destroy();
    await w2.kill('SIGTERM');
    await p.kill('SIGTERM');
  });
});
