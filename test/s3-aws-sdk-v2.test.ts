// The S3 door against the real, unmodified AWS SDK for JavaScript v2 (npm `aws-sdk`, 2.1693.0), as
// the many applications still on it use it: path-style, one client signing SigV4 (`signatureVersion:
// 'v4'`) and one with the SDK's default (SigV4 for requests, but SigV2 — `?AWSAccessKeyId=…&Signature=…`
// — for the URLs `getSignedUrl` makes in us-east-1). v2 talks to S3 unlike v3: no checksum trailers
// (over http it signs a hex SHA-256 of every body, so it cannot send a stream that is not a file),
// `Content-MD5` on the operations S3 requires one for (DeleteObjects, the tagging and configuration
// PUTs), its own ManagedUpload for multipart (`s3.upload`), its own presigner (`getSignedUrl`,
// `createPresignedPost`) and its own XML parsing. Buckets, objects with their headers, Content-MD5,
// ManagedUpload from a Buffer and a stream (and aborted), the three listings, deletes, copies and
// UploadPartCopy, presigned GET/PUT/POST used through fetch, tagging and versioning, what
// files-rest does not offer, and refusals (wrong secret, scoped key, missing keys, clock skew).
//
// TEST_AWS_SDK_V2_TRACE=1 logs every SDK call (the SDK's `logger: console`) and every request and
// answer it exchanged (method, path, headers, status, the answer's headers and body) to stderr.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import AWS from 'aws-sdk';
import { createBucket } from '../src/domain/buckets.js';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import { startTestServer, type TestServer } from './support/server.js';
import { multipartEtag, rejectionWithin, streamOfUnknownLength } from './support/s3-door.js';

// The SDK warns of its end of support on the tick after it is loaded; not in the test output.
createRequire(import.meta.url)('aws-sdk/lib/maintenance_mode_message').suppress = true;

if (process.env.TEST_AWS_SDK_V2_TRACE) {
  // AWS.events: listeners every request of every client gets (not in the SDK's types).
  type Exchange = AWS.Response<unknown, AWS.AWSError> & { request: { httpRequest: AWS.HttpRequest } };
  const events = (AWS as unknown as { events: { on(event: 'complete', f: (resp: Exchange) => void): void } }).events;
  events.on('complete', (resp) => {
    const q = resp.request.httpRequest;
    const a = resp.httpResponse;
    const body = Buffer.isBuffer(a.body) && a.body.length < 4000 ? a.body.toString() : `<${a.body?.length ?? 0} bytes>`;
    process.stderr.write(`>> ${q.method} ${q.path}\n${JSON.stringify(q.headers, null, 1)}\n<< ${a.statusCode}\n${JSON.stringify(a.headers, null, 1)}\n${body}\n\n`);
  });
}

const SERVER_KEY = randomBytes(32).toString('base64');
const MiB = 1024 * 1024;

function md5(b: Buffer | string): string {
  return createHash('md5').update(b).digest('hex');
}

function md5base64(b: Buffer | string): string {
  return createHash('md5').update(b).digest('base64');
}

/** `buf` cut in `size` pieces, the last one shorter. */
function pieces(buf: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < buf.length; at += size) out.push(buf.subarray(at, at + size));
  return out;
}

/** A key in a listing answered with `encoding-type=url` (S3 may write a space as `+`). */
function urlDecoded(s: string | undefined): string | undefined {
  return s === undefined ? undefined : decodeURIComponent(s.replace(/\+/g, ' '));
}

/** The SDK's error of a call that must fail, within `ms` (a hang fails the test). */
async function awsError(p: Promise<unknown>, ms = 15_000): Promise<AWS.AWSError> {
  const e = await rejectionWithin(p, ms);
  // The SDK's errors carry a code or an HTTP status (a HEAD's 412 has no body to name a code).
  const sdk = e as Partial<AWS.AWSError>;
  if (e instanceof Error && !(e instanceof assert.AssertionError) && (typeof sdk.code === 'string' || typeof sdk.statusCode === 'number')) return e as AWS.AWSError;
  throw e;
}

/** The error code of a call that must fail. */
async function code(p: Promise<unknown>, ms?: number): Promise<string> {
  return (await awsError(p, ms)).code;
}

/** Waits (at most `ms`) until `check` holds; answers its last value. */
async function eventually<T>(probe: () => Promise<T>, check: (v: T) => boolean, ms = 5000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (check(v) || Date.now() > end) return v;
    await sleep(100);
  }
}

describe('S3 door with the AWS SDK for JavaScript v2', () => {
  let t: TestServer;
  let full: { id: string; secret: string };
  /** A key scoped to `mine` only. */
  let scoped: { id: string; secret: string };
  let mine: string;
  let otherBucket: string;
  /** signatureVersion 'v4'. */
  let s3: AWS.S3;
  /** The SDK's default signatureVersion (not set). */
  let dflt: AWS.S3;
  let tmp: string;

  function client(key: { id: string; secret: string }, extra: AWS.S3.ClientConfiguration = { signatureVersion: 'v4' }): AWS.S3 {
    return new AWS.S3({
      endpoint: t.s3Url,
      s3ForcePathStyle: true,
      region: 'us-east-1',
      accessKeyId: key.id,
      secretAccessKey: key.secret,
      maxRetries: 0,
      ...(process.env.TEST_AWS_SDK_V2_TRACE ? { logger: console } : {}),
      ...extra,
    });
  }

  /** Every version and delete marker of a bucket, removed (so that it can be deleted). */
  async function emptyBucket(c: AWS.S3, Bucket: string): Promise<void> {
    const l = await c.listObjectVersions({ Bucket }).promise();
    const all = [...(l.Versions ?? []), ...(l.DeleteMarkers ?? [])].map((v) => ({ Key: v.Key!, VersionId: v.VersionId! }));
    if (all.length) await c.deleteObjects({ Bucket, Delete: { Objects: all, Quiet: true } }).promise();
  }

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const ctx = t.server.core.ctx;
    const keys = requireServerKeys(t.config, null, { create: true });
    const k = await createAccessKey(ctx.db, keys);
    full = { id: k.info.accessKeyId, secret: k.secret };
    mine = (await createBucket(ctx, {})).id;
    otherBucket = (await createBucket(ctx, {})).id;
    const s = await createAccessKey(ctx.db, keys, { bucket: mine });
    scoped = { id: s.info.accessKeyId, secret: s.secret };
    s3 = client(full);
    dflt = client(full, {});
    tmp = await mkdtemp(join(tmpdir(), 'files-rest-aws-sdk-v2-'));
  });
  after(async () => {
    await t?.close();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('buckets: createBucket, headBucket, listBuckets, getBucketLocation, deleteBucket (empty, and BucketNotEmpty)', async () => {
    for (const [c, B] of [[s3, 'sdk-v2-bucket-one'], [dflt, 'sdk-v2-bucket-two']] as const) {
      const made = c.createBucket({ Bucket: B });
      const out = await made.promise();
      assert.equal(out.Location, `/${B}`);
      await c.headBucket({ Bucket: B }).promise();
      const names = ((await c.listBuckets().promise()).Buckets ?? []).map((b) => b.Name);
      assert.ok(names.includes(B), names.join(','));
      const listed = (await c.listBuckets().promise()).Buckets!.find((b) => b.Name === B)!;
      assert.ok(listed.CreationDate && Math.abs(listed.CreationDate.getTime() - Date.now()) < 60_000, String(listed.CreationDate));
      assert.equal((await c.getBucketLocation({ Bucket: B }).promise()).LocationConstraint, '');
      // The client with the default signature version signs its requests with SigV4 all the same.
      assert.match(String(made.httpRequest.headers['Authorization']), /^AWS4-HMAC-SHA256 Credential=[A-Z0-9]+\/\d{8}\/us-east-1\/s3\/aws4_request/);
    }
    const missing = await awsError(s3.headBucket({ Bucket: 'sdk-v2-bucket-missing' }).promise());
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.code, 'NotFound');

    // A bucket holding a version is not empty (versioning is on); without it, it goes.
    const put = await s3.putObject({ Bucket: 'sdk-v2-bucket-two', Key: 'x.txt', Body: 'x' }).promise();
    assert.equal(await code(dflt.deleteBucket({ Bucket: 'sdk-v2-bucket-two' }).promise()), 'BucketNotEmpty');
    await s3.headBucket({ Bucket: 'sdk-v2-bucket-two' }).promise();
    await s3.deleteObject({ Bucket: 'sdk-v2-bucket-two', Key: 'x.txt', VersionId: put.VersionId! }).promise();
    await dflt.deleteBucket({ Bucket: 'sdk-v2-bucket-two' }).promise();
    await s3.deleteBucket({ Bucket: 'sdk-v2-bucket-one' }).promise();
    for (const B of ['sdk-v2-bucket-one', 'sdk-v2-bucket-two']) assert.equal((await awsError(s3.headBucket({ Bucket: B }).promise())).statusCode, 404);
    const left = ((await s3.listBuckets().promise()).Buckets ?? []).map((b) => b.Name);
    assert.ok(!left.includes('sdk-v2-bucket-one') && !left.includes('sdk-v2-bucket-two'), left.join(','));
    assert.equal(await code(s3.deleteBucket({ Bucket: 'sdk-v2-bucket-one' }).promise()), 'NoSuchBucket');
  });

  it('objects: putObject from a Buffer, a string and a file stream with headers and metadata; headObject, getObject whole and ranged; Content-MD5 right and wrong (BadDigest, nothing stored)', async () => {
    const B = 'sdk-v2-objects';
    await s3.createBucket({ Bucket: B }).promise();
    const headers = { ContentType: 'application/x-sdk-v2', ContentDisposition: 'attachment; filename="b.bin"', CacheControl: 'max-age=60', Metadata: { foo: 'bar', 'two-words': 'Hello World' } };
    const buffer = randomBytes(300_000);
    const text = 'a string body, é and ü';
    const file = join(tmp, 'stream.bin');
    const fileBody = randomBytes(2 * MiB + 5);
    await writeFile(file, fileBody);
    const bodies: Array<[string, Buffer, AWS.S3.Body, number | undefined]> = [
      ['buffer.bin', buffer, buffer, undefined],
      ['string.txt', Buffer.from(text), text, undefined],
      ['stream.bin', fileBody, createReadStream(file), fileBody.length],
    ];
    for (const [Key, bytes, Body, ContentLength] of bodies) {
      const put = await s3.putObject({ Bucket: B, Key, Body, ContentLength, ...headers }).promise();
      assert.equal(put.ETag, `"${md5(bytes)}"`, Key);
      assert.ok(put.VersionId, Key);
      for (const c of [s3, dflt]) {
        const h = await c.headObject({ Bucket: B, Key }).promise();
        assert.equal(h.ContentLength, bytes.length, Key);
        assert.equal(h.ETag, `"${md5(bytes)}"`, Key);
        assert.equal(h.VersionId, put.VersionId, Key);
        assert.equal(h.ContentType, headers.ContentType, Key);
        assert.equal(h.ContentDisposition, headers.ContentDisposition, Key);
        assert.equal(h.CacheControl, headers.CacheControl, Key);
        assert.deepEqual(h.Metadata, headers.Metadata, Key);
        assert.ok(h.LastModified && Math.abs(h.LastModified.getTime() - Date.now()) < 60_000, String(h.LastModified));
        const g = await c.getObject({ Bucket: B, Key }).promise();
        assert.ok(Buffer.isBuffer(g.Body));
        assert.equal(md5(g.Body as Buffer), md5(bytes), Key);
        assert.equal(g.ContentType, headers.ContentType);
        assert.deepEqual(g.Metadata, headers.Metadata);
        const r = await c.getObject({ Bucket: B, Key, Range: 'bytes=5-9' }).promise();
        assert.equal(r.ContentRange, `bytes 5-9/${bytes.length}`);
        assert.equal(r.ContentLength, 5);
        assert.deepEqual(r.Body, bytes.subarray(5, 10));
        const tail = await c.getObject({ Bucket: B, Key, Range: 'bytes=-3' }).promise();
        assert.deepEqual(tail.Body, bytes.subarray(bytes.length - 3));
      }
    }
    assert.equal(await code(s3.getObject({ Bucket: B, Key: 'buffer.bin', Range: `bytes=${buffer.length + 10}-` }).promise()), 'InvalidRange');
    // Conditional reads: no body to carry a code for a 304, so the SDK names the status.
    const etag = `"${md5(buffer)}"`;
    const notModified = await awsError(s3.getObject({ Bucket: B, Key: 'buffer.bin', IfNoneMatch: etag }).promise());
    assert.deepEqual([notModified.statusCode, notModified.code], [304, 'NotModified']);
    const failedGet = await awsError(s3.getObject({ Bucket: B, Key: 'buffer.bin', IfMatch: `"${md5('other')}"` }).promise());
    assert.deepEqual([failedGet.statusCode, failedGet.code], [412, 'PreconditionFailed']);
    assert.equal((await awsError(dflt.headObject({ Bucket: B, Key: 'buffer.bin', IfMatch: `"${md5('other')}"` }).promise())).statusCode, 412);
    assert.equal((await s3.getObject({ Bucket: B, Key: 'buffer.bin', IfMatch: etag, IfModifiedSince: new Date(Date.now() - 3_600_000) }).promise()).ContentLength, buffer.length);

    // Over http the SDK signs a SHA-256 of the body: a stream that is not a file it refuses itself
    // (AWS would see the same nothing; over https it sends UNSIGNED-PAYLOAD instead).
    const plain = await awsError(s3.putObject({ Bucket: B, Key: 'plain-stream.bin', Body: streamOfUnknownLength(Buffer.from('abc')), ContentLength: 3 }).promise());
    assert.match(plain.message, /Non-file stream objects are not supported with SigV4/);

    // Content-MD5: right, then wrong (the MD5 of other bytes): BadDigest and nothing stored.
    const withMd5 = s3.putObject({ Bucket: B, Key: 'md5.txt', Body: 'checked', ContentMD5: md5base64('checked') });
    const ok = await withMd5.promise();
    assert.equal(withMd5.httpRequest.headers['Content-MD5'], md5base64('checked'));
    assert.equal(ok.ETag, `"${md5('checked')}"`);
    assert.equal(await code(s3.putObject({ Bucket: B, Key: 'bad-md5.txt', Body: 'checked', ContentMD5: md5base64('other bytes') }).promise()), 'BadDigest');
    assert.equal((await awsError(s3.headObject({ Bucket: B, Key: 'bad-md5.txt' }).promise())).statusCode, 404);
    // Over an existing object: the object stays as it was.
    assert.equal(await code(dflt.putObject({ Bucket: B, Key: 'md5.txt', Body: 'replaced', ContentMD5: md5base64('other bytes') }).promise()), 'BadDigest');
    assert.equal(String((await s3.getObject({ Bucket: B, Key: 'md5.txt' }).promise()).Body), 'checked');
    const versions = await s3.listObjectVersions({ Bucket: B, Prefix: 'md5.txt' }).promise();
    assert.equal(versions.Versions?.length, 1);
    assert.deepEqual(versions.DeleteMarkers ?? [], []);
  });

  it('ManagedUpload (s3.upload): 30 MiB from a Buffer and from a stream of unknown length, partSize 5 MiB, queueSize 4; multipart ETags; nothing left in progress', async () => {
    const B = 'sdk-v2-upload';
    await s3.createBucket({ Bucket: B }).promise();
    const big = randomBytes(30 * MiB);
    const parts = pieces(big, 5 * MiB);
    assert.equal(parts.length, 6);
    for (const [Key, Body] of [['buffer.bin', big], ['stream.bin', streamOfUnknownLength(big)]] as const) {
      let progress = 0;
      const up = s3.upload({ Bucket: B, Key, Body, ContentType: 'application/x-managed', Metadata: { via: 'upload' } }, { partSize: 5 * MiB, queueSize: 4 });
      up.on('httpUploadProgress', (p) => (progress = Math.max(progress, p.loaded)));
      const out = await up.promise();
      assert.equal(out.ETag, multipartEtag(parts), Key);
      assert.equal(out.Key, Key);
      assert.equal(out.Bucket, B);
      assert.equal(progress, big.length);
      const h = await s3.headObject({ Bucket: B, Key }).promise();
      assert.equal(h.ContentLength, big.length);
      assert.equal(h.ETag, out.ETag);
      assert.equal(h.ContentType, 'application/x-managed');
      assert.deepEqual(h.Metadata, { via: 'upload' });
      const g = await s3.getObject({ Bucket: B, Key }).promise();
      assert.equal(md5(g.Body as Buffer), md5(big), Key);
      assert.equal(g.ETag, out.ETag);
      const part3 = await s3.getObject({ Bucket: B, Key, PartNumber: 3 }).promise();
      assert.equal(part3.PartsCount, 6);
      assert.equal(md5(part3.Body as Buffer), md5(parts[2]!));
    }
    // A small stream goes in one PutObject.
    const small = await s3.upload({ Bucket: B, Key: 'small.txt', Body: streamOfUnknownLength(Buffer.from('small')) }, { partSize: 5 * MiB }).promise();
    assert.equal(small.ETag, `"${md5('small')}"`);
    const listed = await s3.listObjectsV2({ Bucket: B }).promise();
    assert.deepEqual(listed.Contents?.map((c) => [c.Key, c.Size, c.ETag]), [
      ['buffer.bin', big.length, multipartEtag(parts)],
      ['small.txt', 5, `"${md5('small')}"`],
      ['stream.bin', big.length, multipartEtag(parts)],
    ]);
    assert.deepEqual((await s3.listMultipartUploads({ Bucket: B }).promise()).Uploads ?? [], []);
  });

  it('an aborted ManagedUpload (.abort() between parts, and while parts are being sent) leaves no upload in progress and no object', async () => {
    const B = 'sdk-v2-abort';
    await s3.createBucket({ Bucket: B }).promise();

    // Between parts: two parts sent, the third not yet filled.
    const feed = new PassThrough();
    const up = s3.upload({ Bucket: B, Key: 'between.bin', Body: feed }, { partSize: 5 * MiB, queueSize: 4 });
    const done = up.promise();
    done.catch(() => {});
    for (let i = 0; i < 12; i++) feed.write(randomBytes(MiB));
    const listParts = async (): Promise<number> => {
      const u = (await s3.listMultipartUploads({ Bucket: B }).promise()).Uploads ?? [];
      if (u.length !== 1) return 0;
      return ((await s3.listParts({ Bucket: B, Key: u[0]!.Key!, UploadId: u[0]!.UploadId! }).promise()).Parts ?? []).length;
    };
    assert.equal(await eventually(listParts, (n) => n === 2, 10_000), 2);
    const uploadId = (await s3.listMultipartUploads({ Bucket: B }).promise()).Uploads![0]!.UploadId!;
    up.abort();
    const aborted = await awsError(done);
    assert.equal(aborted.code, 'RequestAbortedError');
    // AbortMultipartUpload goes out without the caller waiting for it.
    const left = await eventually(async () => (await s3.listMultipartUploads({ Bucket: B }).promise()).Uploads ?? [], (u) => u.length === 0);
    assert.deepEqual(left.map((u) => u.Key), [], 'no upload in progress');
    assert.equal(await code(s3.listParts({ Bucket: B, Key: 'between.bin', UploadId: uploadId }).promise()), 'NoSuchUpload');
    assert.equal((await awsError(s3.headObject({ Bucket: B, Key: 'between.bin' }).promise())).statusCode, 404);
    feed.destroy();

    // While parts are on the wire: abort at the first progress event (the upload id is known by then).
    const up2 = s3.upload({ Bucket: B, Key: 'inflight.bin', Body: streamOfUnknownLength(randomBytes(30 * MiB)) }, { partSize: 5 * MiB, queueSize: 4 });
    const done2 = up2.promise();
    done2.catch(() => {});
    let abortedOnce = false;
    up2.on('httpUploadProgress', () => {
      if (abortedOnce) return;
      abortedOnce = true;
      up2.abort();
    });
    assert.equal((await awsError(done2)).code, 'RequestAbortedError');
    const left2 = await eventually(async () => (await s3.listMultipartUploads({ Bucket: B }).promise()).Uploads ?? [], (u) => u.length === 0);
    assert.deepEqual(left2.map((u) => u.Key), [], 'no upload in progress');
    // And none comes back from a part that was on the wire.
    await sleep(500);
    assert.deepEqual((await s3.listMultipartUploads({ Bucket: B }).promise()).Uploads ?? [], []);
    assert.equal((await awsError(s3.headObject({ Bucket: B, Key: 'inflight.bin' }).promise())).statusCode, 404);
    assert.deepEqual((await s3.listObjectVersions({ Bucket: B }).promise()).Versions ?? [], []);
  });

  it('listings: listObjects and listObjectsV2 with Prefix, Delimiter, MaxKeys paging (Marker, ContinuationToken), StartAfter, EncodingType url; listObjectVersions with a delete marker', async () => {
    const B = 'sdk-v2-list';
    await s3.createBucket({ Bucket: B }).promise();
    const odd = 'odd/a b+c é&=%.txt';
    const keys = ['docs/one.txt', 'docs/sub/three.txt', 'docs/two.txt', odd, 'top.txt'];
    for (const k of keys) await s3.putObject({ Bucket: B, Key: k, Body: `body of ${k}` }).promise();

    const flat = await s3.listObjects({ Bucket: B }).promise();
    assert.deepEqual(flat.Contents?.map((c) => c.Key), keys);
    assert.equal(flat.Contents?.[0]?.ETag, `"${md5('body of docs/one.txt')}"`);
    assert.equal(flat.Contents?.[0]?.Size, 'body of docs/one.txt'.length);
    assert.equal(flat.IsTruncated, false);
    const root = await dflt.listObjects({ Bucket: B, Delimiter: '/' }).promise();
    assert.deepEqual(root.Contents?.map((c) => c.Key), ['top.txt']);
    assert.deepEqual(root.CommonPrefixes?.map((p) => p.Prefix), ['docs/', 'odd/']);
    const docs = await s3.listObjects({ Bucket: B, Prefix: 'docs/', Delimiter: '/' }).promise();
    assert.deepEqual(docs.Contents?.map((c) => c.Key), ['docs/one.txt', 'docs/two.txt']);
    assert.deepEqual(docs.CommonPrefixes?.map((p) => p.Prefix), ['docs/sub/']);
    assert.equal(docs.Prefix, 'docs/');
    assert.equal(docs.Delimiter, '/');

    // v1 paging: MaxKeys 2, Marker the last key (NextMarker comes only with a delimiter).
    const v1pages: string[][] = [];
    let marker: string | undefined;
    for (;;) {
      const p = await s3.listObjects({ Bucket: B, MaxKeys: 2, Marker: marker }).promise();
      assert.equal(p.MaxKeys, 2);
      v1pages.push((p.Contents ?? []).map((c) => c.Key!));
      if (!p.IsTruncated) break;
      marker = p.NextMarker ?? p.Contents!.at(-1)!.Key;
      assert.ok(v1pages.length < 10);
    }
    assert.deepEqual(v1pages, [keys.slice(0, 2), keys.slice(2, 4), keys.slice(4)]);
    // With a delimiter, a page's NextMarker may be a prefix.
    const d1 = await s3.listObjects({ Bucket: B, Delimiter: '/', MaxKeys: 1 }).promise();
    assert.equal(d1.IsTruncated, true);
    assert.deepEqual(d1.CommonPrefixes?.map((p) => p.Prefix), ['docs/']);
    assert.equal(d1.NextMarker, 'docs/');
    const d2 = await s3.listObjects({ Bucket: B, Delimiter: '/', MaxKeys: 5, Marker: d1.NextMarker }).promise();
    assert.deepEqual([...(d2.CommonPrefixes ?? []).map((p) => p.Prefix), ...(d2.Contents ?? []).map((c) => c.Key)], ['odd/', 'top.txt']);

    // v2 paging with ContinuationToken.
    const v2pages: string[][] = [];
    let token: string | undefined;
    for (;;) {
      const p = await dflt.listObjectsV2({ Bucket: B, MaxKeys: 2, ContinuationToken: token }).promise();
      v2pages.push((p.Contents ?? []).map((c) => c.Key!));
      assert.equal(p.KeyCount, p.Contents?.length ?? 0);
      if (token) assert.equal(p.ContinuationToken, token);
      if (!p.IsTruncated) break;
      assert.ok(p.NextContinuationToken);
      token = p.NextContinuationToken;
      assert.ok(v2pages.length < 10);
    }
    assert.deepEqual(v2pages, [keys.slice(0, 2), keys.slice(2, 4), keys.slice(4)]);
    const owned = await s3.listObjectsV2({ Bucket: B, Prefix: 'top', FetchOwner: true }).promise();
    assert.ok(owned.Contents?.[0]?.Owner?.ID, JSON.stringify(owned.Contents));
    const startAfter = await s3.listObjectsV2({ Bucket: B, StartAfter: 'docs/two.txt' }).promise();
    assert.deepEqual(startAfter.Contents?.map((c) => c.Key), [odd, 'top.txt']);
    assert.equal(startAfter.StartAfter, 'docs/two.txt');
    const v2docs = await s3.listObjectsV2({ Bucket: B, Prefix: 'docs/', Delimiter: '/', StartAfter: 'docs/one.txt' }).promise();
    assert.deepEqual(v2docs.Contents?.map((c) => c.Key), ['docs/two.txt']);
    assert.deepEqual(v2docs.CommonPrefixes?.map((p) => p.Prefix), ['docs/sub/']);

    // EncodingType url: the SDK v2 hands the keys over as the server encoded them.
    const e1 = await s3.listObjects({ Bucket: B, Prefix: 'odd/', EncodingType: 'url' }).promise();
    assert.equal(e1.EncodingType, 'url');
    assert.equal(e1.Contents?.length, 1);
    assert.doesNotMatch(e1.Contents![0]!.Key!, /[ &=é]/, 'encoded');
    assert.equal(urlDecoded(e1.Contents![0]!.Key), odd);
    const e2 = await s3.listObjectsV2({ Bucket: B, Delimiter: '/', EncodingType: 'url' }).promise();
    assert.deepEqual(e2.CommonPrefixes?.map((p) => urlDecoded(p.Prefix)), ['docs/', 'odd/']);
    const e3 = await s3.listObjectsV2({ Bucket: B, Prefix: 'odd/', EncodingType: 'url' }).promise();
    assert.deepEqual(e3.Contents?.map((c) => urlDecoded(c.Key)), [odd]);
    assert.equal(String((await s3.getObject({ Bucket: B, Key: odd }).promise()).Body), `body of ${odd}`);

    // One key written twice, then deleted: two versions and a delete marker, newest first.
    const ids: string[] = [];
    for (const v of ['v1', 'v2 longer']) ids.push((await s3.putObject({ Bucket: B, Key: 'ver.txt', Body: v }).promise()).VersionId!);
    const del = await s3.deleteObject({ Bucket: B, Key: 'ver.txt' }).promise();
    assert.equal(del.DeleteMarker, true);
    const vers = await dflt.listObjectVersions({ Bucket: B, Prefix: 'ver' }).promise();
    assert.deepEqual(vers.Versions?.map((v) => [v.Key, v.VersionId, v.IsLatest, v.Size]), [
      ['ver.txt', ids[1], false, 9],
      ['ver.txt', ids[0], false, 2],
    ]);
    assert.deepEqual(vers.DeleteMarkers?.map((m) => [m.Key, m.VersionId, m.IsLatest]), [['ver.txt', del.VersionId, true]]);
    assert.ok(!(await s3.listObjectsV2({ Bucket: B }).promise()).Contents?.some((c) => c.Key === 'ver.txt'));
    // Versions paged by KeyMarker / VersionIdMarker.
    const vp = await s3.listObjectVersions({ Bucket: B, Prefix: 'ver', MaxKeys: 1 }).promise();
    assert.equal(vp.IsTruncated, true);
    const vp2 = await s3.listObjectVersions({ Bucket: B, Prefix: 'ver', KeyMarker: vp.NextKeyMarker, VersionIdMarker: vp.NextVersionIdMarker }).promise();
    const seen = [...(vp.DeleteMarkers ?? []), ...(vp.Versions ?? []), ...(vp2.DeleteMarkers ?? []), ...(vp2.Versions ?? [])].map((v) => v.VersionId).sort();
    assert.deepEqual(seen, [del.VersionId, ...ids].sort());
  });

  it('deletes: deleteObject (a delete marker), deleteObject with VersionId, deleteObjects Quiet false and true (with the Content-MD5 the SDK sends)', async () => {
    const B = 'sdk-v2-delete';
    await s3.createBucket({ Bucket: B }).promise();
    const a1 = await s3.putObject({ Bucket: B, Key: 'a.txt', Body: 'a1' }).promise();
    const a2 = await s3.putObject({ Bucket: B, Key: 'a.txt', Body: 'a2' }).promise();
    const marker = await s3.deleteObject({ Bucket: B, Key: 'a.txt' }).promise();
    assert.equal(marker.DeleteMarker, true);
    assert.ok(marker.VersionId && marker.VersionId !== a2.VersionId);
    assert.equal(await code(s3.getObject({ Bucket: B, Key: 'a.txt' }).promise()), 'NoSuchKey');
    assert.equal(String((await s3.getObject({ Bucket: B, Key: 'a.txt', VersionId: a1.VersionId! }).promise()).Body), 'a1');
    // A version removed for good.
    const gone = await dflt.deleteObject({ Bucket: B, Key: 'a.txt', VersionId: a2.VersionId! }).promise();
    assert.equal(gone.VersionId, a2.VersionId);
    assert.notEqual(gone.DeleteMarker, true);
    assert.equal((await awsError(s3.headObject({ Bucket: B, Key: 'a.txt', VersionId: a2.VersionId! }).promise())).statusCode, 404);
    // The delete marker removed: a1 is back.
    const unmark = await s3.deleteObject({ Bucket: B, Key: 'a.txt', VersionId: marker.VersionId! }).promise();
    assert.equal(unmark.DeleteMarker, true);
    assert.equal(unmark.VersionId, marker.VersionId);
    assert.equal(String((await s3.getObject({ Bucket: B, Key: 'a.txt' }).promise()).Body), 'a1');

    const names = ['bulk/1.txt', 'bulk/2.txt', 'bulk/3.txt'];
    const puts = new Map<string, string>();
    for (const n of names) puts.set(n, (await s3.putObject({ Bucket: B, Key: n, Body: n }).promise()).VersionId!);
    const loud = s3.deleteObjects({ Bucket: B, Delete: { Objects: names.map((Key) => ({ Key })), Quiet: false } });
    const out = await loud.promise();
    const sent = loud.httpRequest.headers['Content-MD5'];
    assert.ok(sent, 'the SDK sends Content-MD5 with DeleteObjects');
    assert.equal(sent, md5base64(String(loud.httpRequest.body)));
    assert.deepEqual(out.Errors ?? [], []);
    assert.deepEqual(out.Deleted?.map((d) => [d.Key, d.DeleteMarker]).sort(), names.map((n) => [n, true]));
    for (const d of out.Deleted ?? []) assert.ok(d.DeleteMarkerVersionId && d.DeleteMarkerVersionId !== puts.get(d.Key!), JSON.stringify(d));
    for (const n of names) assert.equal(await code(s3.getObject({ Bucket: B, Key: n }).promise()), 'NoSuchKey');
    assert.deepEqual((await s3.listObjectsV2({ Bucket: B, Prefix: 'bulk/' }).promise()).Contents ?? [], []);

    // Every version and marker by Key and VersionId, quietly: nothing left, nothing answered.
    const vers = await s3.listObjectVersions({ Bucket: B, Prefix: 'bulk/' }).promise();
    const all = [...(vers.Versions ?? []), ...(vers.DeleteMarkers ?? [])].map((v) => ({ Key: v.Key!, VersionId: v.VersionId! }));
    assert.equal(all.length, 6);
    const quiet = await dflt.deleteObjects({ Bucket: B, Delete: { Objects: all, Quiet: true } }).promise();
    assert.deepEqual(quiet.Deleted ?? [], []);
    assert.deepEqual(quiet.Errors ?? [], []);
    const remaining = await s3.listObjectVersions({ Bucket: B, Prefix: 'bulk/' }).promise();
    assert.deepEqual([...(remaining.Versions ?? []), ...(remaining.DeleteMarkers ?? [])], []);
    await emptyBucket(s3, B);
    await s3.deleteBucket({ Bucket: B }).promise();
  });

  it('copies: copyObject with MetadataDirective COPY and REPLACE, CopySourceIfMatch failing (PreconditionFailed); uploadPartCopy in a multipart upload', async () => {
    const B = 'sdk-v2-copy';
    await s3.createBucket({ Bucket: B }).promise();
    // A source key with characters the copy source carries URL-encoded (the caller encodes it in v2).
    const SRC = 'src dir/sö urce+1.txt';
    const source = `${B}/${SRC.split('/').map(encodeURIComponent).join('/')}`;
    const v1 = await s3.putObject({ Bucket: B, Key: SRC, Body: 'source one', ContentType: 'text/x-src', Metadata: { foo: 'src' } }).promise();
    const v2 = await s3.putObject({ Bucket: B, Key: SRC, Body: 'source two, newer', ContentType: 'text/x-src2', Metadata: { foo: 'src2' } }).promise();

    const c1 = await s3.copyObject({ Bucket: B, Key: 'copy/same.txt', CopySource: source, CopySourceIfMatch: v2.ETag }).promise();
    assert.equal(c1.CopyObjectResult?.ETag, `"${md5('source two, newer')}"`);
    assert.ok(c1.CopyObjectResult?.LastModified instanceof Date);
    assert.equal(c1.CopySourceVersionId, v2.VersionId);
    assert.ok(c1.VersionId);
    const h1 = await s3.headObject({ Bucket: B, Key: 'copy/same.txt' }).promise();
    assert.equal(h1.ContentType, 'text/x-src2');
    assert.deepEqual(h1.Metadata, { foo: 'src2' });
    assert.equal(String((await s3.getObject({ Bucket: B, Key: 'copy/same.txt' }).promise()).Body), 'source two, newer');

    // An older version, REPLACE: the new headers and metadata only.
    const c2 = await dflt.copyObject({ Bucket: B, Key: 'copy/replaced.txt', CopySource: `${source}?versionId=${v1.VersionId}`, MetadataDirective: 'REPLACE', ContentType: 'text/x-copy', Metadata: { colour: 'red' } }).promise();
    assert.equal(c2.CopySourceVersionId, v1.VersionId);
    const h2 = await s3.headObject({ Bucket: B, Key: 'copy/replaced.txt' }).promise();
    assert.equal(h2.ContentType, 'text/x-copy');
    assert.deepEqual(h2.Metadata, { colour: 'red' });
    assert.equal(h2.VersionId, c2.VersionId);
    assert.equal(String((await s3.getObject({ Bucket: B, Key: 'copy/replaced.txt' }).promise()).Body), 'source one');

    const failed = await awsError(s3.copyObject({ Bucket: B, Key: 'copy/never.txt', CopySource: source, CopySourceIfMatch: `"${md5('something else')}"` }).promise());
    assert.equal(failed.code, 'PreconditionFailed');
    assert.equal(failed.statusCode, 412);
    assert.equal((await awsError(s3.headObject({ Bucket: B, Key: 'copy/never.txt' }).promise())).statusCode, 404);
    assert.equal(await code(s3.copyObject({ Bucket: B, Key: 'copy/never.txt', CopySource: `${B}/missing.txt` }).promise()), 'NoSuchKey');

    // UploadPartCopy: the whole of a 5 MiB source, a range of it, then an uploaded part.
    const first = randomBytes(5 * MiB + 200);
    await s3.putObject({ Bucket: B, Key: 'parts/first.bin', Body: first }).promise();
    const mp = await s3.createMultipartUpload({ Bucket: B, Key: 'composed.bin', ContentType: 'application/x-composed', Metadata: { made: 'uploadPartCopy' } }).promise();
    const UploadId = mp.UploadId!;
    const p1 = await s3.uploadPartCopy({ Bucket: B, Key: 'composed.bin', UploadId, PartNumber: 1, CopySource: `${B}/parts/first.bin` }).promise();
    assert.equal(p1.CopyPartResult?.ETag, `"${md5(first)}"`);
    const p2 = await dflt.uploadPartCopy({ Bucket: B, Key: 'composed.bin', UploadId, PartNumber: 2, CopySource: `${B}/parts/first.bin`, CopySourceRange: 'bytes=100-5242979' }).promise();
    const second = first.subarray(100, 5242980);
    assert.equal(p2.CopyPartResult?.ETag, `"${md5(second)}"`);
    const third = Buffer.from('and the tail');
    const p3 = await s3.uploadPart({ Bucket: B, Key: 'composed.bin', UploadId, PartNumber: 3, Body: third }).promise();
    assert.equal(p3.ETag, `"${md5(third)}"`);
    const listed = await s3.listParts({ Bucket: B, Key: 'composed.bin', UploadId }).promise();
    assert.deepEqual(listed.Parts?.map((p) => [p.PartNumber, p.Size, p.ETag]), [
      [1, first.length, p1.CopyPartResult?.ETag],
      [2, second.length, p2.CopyPartResult?.ETag],
      [3, third.length, p3.ETag],
    ]);
    const done = await s3
      .completeMultipartUpload({
        Bucket: B,
        Key: 'composed.bin',
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: p1.CopyPartResult!.ETag! }, { PartNumber: 2, ETag: p2.CopyPartResult!.ETag! }, { PartNumber: 3, ETag: p3.ETag! }] },
      })
      .promise();
    assert.equal(done.ETag, multipartEtag([first, second, third]));
    assert.ok(done.VersionId);
    const h = await s3.headObject({ Bucket: B, Key: 'composed.bin' }).promise();
    assert.equal(h.ContentLength, first.length + second.length + third.length);
    assert.equal(h.ContentType, 'application/x-composed');
    assert.deepEqual(h.Metadata, { made: 'uploadPartCopy' });
    assert.equal(h.ETag, done.ETag);
    assert.equal(md5((await s3.getObject({ Bucket: B, Key: 'composed.bin' }).promise()).Body as Buffer), md5(Buffer.concat([first, second, third])));
  });

  it('presigned: getSignedUrl getObject and putObject with both clients (SigV4, and the default: SigV2) through fetch, expired URLs refused, createPresignedPost through fetch FormData', async () => {
    const B = 'sdk-v2-presigned';
    await s3.createBucket({ Bucket: B }).promise();
    const body = randomBytes(50_000);
    for (const Key of ['dir/get me.bin', 'dir/ö+x&y=z.bin']) await s3.putObject({ Bucket: B, Key, Body: body }).promise();
    for (const [c, scheme] of [[s3, /[?&]X-Amz-Algorithm=AWS4-HMAC-SHA256&/], [dflt, /[?&]AWSAccessKeyId=[A-Z0-9]+&(?:.*&)?Expires=\d+&Signature=/]] as const) {
      for (const Key of ['dir/get me.bin', 'dir/ö+x&y=z.bin']) {
        const url = c.getSignedUrl('getObject', { Bucket: B, Key, Expires: 300 });
        assert.match(url, scheme);
        const r = await fetch(url);
        assert.equal(r.status, 200, url);
        assert.equal(md5(Buffer.from(await r.arrayBuffer())), md5(body));
      }
      const overridden = await fetch(c.getSignedUrl('getObject', { Bucket: B, Key: 'dir/get me.bin', ResponseContentType: 'text/x-override', ResponseContentDisposition: 'attachment; filename="x.bin"' }));
      assert.equal(overridden.status, 200);
      assert.equal(overridden.headers.get('content-type'), 'text/x-override');
      assert.equal(overridden.headers.get('content-disposition'), 'attachment; filename="x.bin"');
      await overridden.arrayBuffer();

      const up = randomBytes(40_000);
      const Key = c === s3 ? 'presigned/put v4+ö.bin' : 'presigned/put default+ö.bin';
      const putUrl = c.getSignedUrl('putObject', { Bucket: B, Key, Expires: 300, ContentType: 'application/x-presigned' });
      assert.match(putUrl, scheme);
      const pr = await fetch(putUrl, { method: 'PUT', body: new Uint8Array(up), headers: { 'Content-Type': 'application/x-presigned' } });
      assert.equal(pr.status, 200, await pr.text());
      assert.equal(pr.headers.get('etag'), `"${md5(up)}"`);
      const h = await s3.headObject({ Bucket: B, Key }).promise();
      assert.equal(h.ContentLength, up.length);
      assert.equal(h.ContentType, 'application/x-presigned');
      assert.equal(md5((await s3.getObject({ Bucket: B, Key }).promise()).Body as Buffer), md5(up));
    }

    // Expired: 1 s, then 2 s later.
    const short = [s3, dflt].map((c) => c.getSignedUrl('getObject', { Bucket: B, Key: 'dir/get me.bin', Expires: 1 }));
    const shortPut = s3.getSignedUrl('putObject', { Bucket: B, Key: 'presigned/late.bin', Expires: 1 });
    await sleep(2100);
    for (const url of short) {
      const r = await fetch(url);
      assert.equal(r.status, 403, url);
      assert.match(await r.text(), /<Code>AccessDenied<\/Code>.*expired/s);
    }
    const late = await fetch(shortPut, { method: 'PUT', body: new Uint8Array(Buffer.from('late')) });
    assert.equal(late.status, 403);
    await late.arrayBuffer();
    assert.equal((await awsError(s3.headObject({ Bucket: B, Key: 'presigned/late.bin' }).promise())).statusCode, 404);

    // createPresignedPost (always SigV4), posted as a form.
    for (const c of [s3, dflt]) {
      const Key = c === s3 ? 'posted/v4.txt' : 'posted/default.txt';
      const post = c.createPresignedPost({
        Bucket: B,
        Fields: { key: Key, 'Content-Type': 'text/x-posted', 'x-amz-meta-foo': 'posted' },
        Conditions: [['content-length-range', 1, 1024]],
        Expires: 300,
      });
      assert.equal(post.url, `${t.s3Url.replace(/\/$/, '')}/${B}`);
      assert.equal(post.fields['X-Amz-Algorithm'], 'AWS4-HMAC-SHA256');
      const send = async (content: string): Promise<Response> => {
        const form = new FormData();
        for (const [k, v] of Object.entries(post.fields)) form.append(k, v);
        form.append('file', new Blob([content]), 'form.txt');
        return fetch(post.url, { method: 'POST', body: form });
      };
      const ok = await send('posted through a form');
      assert.equal(ok.status, 204, await ok.text());
      assert.ok(ok.headers.get('x-amz-version-id'));
      const h = await s3.headObject({ Bucket: B, Key }).promise();
      assert.equal(h.ContentType, 'text/x-posted');
      assert.deepEqual(h.Metadata, { foo: 'posted' });
      assert.equal(String((await s3.getObject({ Bucket: B, Key }).promise()).Body), 'posted through a form');
      // Outside the content-length-range: refused, nothing changed.
      const tooBig = await send('x'.repeat(2000));
      assert.equal(tooBig.status, 400);
      assert.match(await tooBig.text(), /<Code>EntityTooLarge<\/Code>/);
      assert.equal((await s3.headObject({ Bucket: B, Key }).promise()).ContentLength, 'posted through a form'.length);
    }
  });

  it('tagging and configuration: object and bucket tagging, versioning Enabled (Suspended refused), policy, lifecycle and encryption NotImplemented', async () => {
    const B = 'sdk-v2-config';
    await s3.createBucket({ Bucket: B }).promise();
    const v1 = await s3.putObject({ Bucket: B, Key: 'tagged.txt', Body: 'one', Tagging: 'first=1&second=two' }).promise();
    assert.equal((await s3.getObject({ Bucket: B, Key: 'tagged.txt' }).promise()).TagCount, 2);
    const v2 = await s3.putObject({ Bucket: B, Key: 'tagged.txt', Body: 'two' }).promise();
    const put = s3.putObjectTagging({ Bucket: B, Key: 'tagged.txt', Tagging: { TagSet: [{ Key: 'b', Value: 'two' }, { Key: 'a', Value: '1' }] } });
    const putOut = await put.promise();
    assert.ok(put.httpRequest.headers['Content-MD5'], 'the SDK sends Content-MD5 with PutObjectTagging');
    assert.equal(putOut.VersionId, v2.VersionId);
    const got = await dflt.getObjectTagging({ Bucket: B, Key: 'tagged.txt' }).promise();
    assert.deepEqual(got.TagSet, [{ Key: 'a', Value: '1' }, { Key: 'b', Value: 'two' }]);
    assert.equal(got.VersionId, v2.VersionId);
    assert.deepEqual((await s3.getObjectTagging({ Bucket: B, Key: 'tagged.txt', VersionId: v1.VersionId! }).promise()).TagSet, [{ Key: 'first', Value: '1' }, { Key: 'second', Value: 'two' }]);
    const del = await s3.deleteObjectTagging({ Bucket: B, Key: 'tagged.txt' }).promise();
    assert.equal(del.VersionId, v2.VersionId);
    assert.deepEqual((await s3.getObjectTagging({ Bucket: B, Key: 'tagged.txt' }).promise()).TagSet, []);
    assert.equal((await s3.getObjectTagging({ Bucket: B, Key: 'tagged.txt', VersionId: v1.VersionId! }).promise()).TagSet.length, 2);
    assert.equal(await code(s3.putObjectTagging({ Bucket: B, Key: 'tagged.txt', Tagging: { TagSet: Array.from({ length: 11 }, (_, i) => ({ Key: `k${i}`, Value: 'v' })) } }).promise()), 'InvalidTag');

    const bt = s3.putBucketTagging({ Bucket: B, Tagging: { TagSet: [{ Key: 'project', Value: 'sdk-v2' }, { Key: 'owner', Value: 'tests' }] } });
    await bt.promise();
    assert.ok(bt.httpRequest.headers['Content-MD5'], 'the SDK sends Content-MD5 with PutBucketTagging');
    assert.deepEqual((await dflt.getBucketTagging({ Bucket: B }).promise()).TagSet, [{ Key: 'owner', Value: 'tests' }, { Key: 'project', Value: 'sdk-v2' }]);
    await s3.deleteBucketTagging({ Bucket: B }).promise();
    assert.equal(await code(s3.getBucketTagging({ Bucket: B }).promise()), 'NoSuchTagSet');

    assert.equal((await s3.getBucketVersioning({ Bucket: B }).promise()).Status, 'Enabled');
    await s3.putBucketVersioning({ Bucket: B, VersioningConfiguration: { Status: 'Enabled' } }).promise();
    const suspend = await awsError(s3.putBucketVersioning({ Bucket: B, VersioningConfiguration: { Status: 'Suspended' } }).promise());
    assert.equal(suspend.code, 'NotImplemented');
    assert.equal(suspend.statusCode, 501);
    assert.equal((await dflt.getBucketVersioning({ Bucket: B }).promise()).Status, 'Enabled');

    for (const call of [
      () => s3.getBucketPolicy({ Bucket: B }).promise(),
      () => s3.putBucketPolicy({ Bucket: B, Policy: JSON.stringify({ Version: '2012-10-17', Statement: [] }) }).promise(),
      () => s3.putBucketLifecycleConfiguration({ Bucket: B, LifecycleConfiguration: { Rules: [{ ID: 'expire', Status: 'Enabled', Filter: { Prefix: '' }, Expiration: { Days: 1 } }] } }).promise(),
      () => s3.getBucketLifecycleConfiguration({ Bucket: B }).promise(),
      () => s3.putBucketEncryption({ Bucket: B, ServerSideEncryptionConfiguration: { Rules: [{ ApplyServerSideEncryptionByDefault: { SSEAlgorithm: 'AES256' } }] } }).promise(),
      () => s3.getBucketEncryption({ Bucket: B }).promise(),
      () => s3.putObject({ Bucket: B, Key: 'encrypted.txt', Body: 'secret', ServerSideEncryption: 'AES256' }).promise(),
    ]) {
      const e = await awsError(call());
      assert.equal(e.code, 'NotImplemented', `${call.toString()}: ${e.code} ${e.message}`);
      assert.equal(e.statusCode, 501);
    }
    assert.equal((await awsError(s3.headObject({ Bucket: B, Key: 'encrypted.txt' }).promise())).statusCode, 404);
  });

  it('errors: a wrong secret (SignatureDoesNotMatch), a key scoped to another bucket (AccessDenied), missing keys (NoSuchKey, NotFound 404), a clock 20 minutes behind (RequestTimeTooSkewed)', async () => {
    const B = 'sdk-v2-errors';
    await s3.createBucket({ Bucket: B }).promise();
    await s3.putObject({ Bucket: B, Key: 'here.txt', Body: 'here' }).promise();

    for (const wrong of [client({ id: full.id, secret: 'wrong-secret' }), client({ id: full.id, secret: 'wrong-secret' }, {})]) {
      for (const call of [
        () => wrong.getObject({ Bucket: B, Key: 'here.txt' }).promise(),
        () => wrong.listObjectsV2({ Bucket: B }).promise(),
        () => wrong.listBuckets().promise(),
        () => wrong.putObject({ Bucket: B, Key: 'never.txt', Body: 'never' }).promise(),
        () => wrong.deleteObjects({ Bucket: B, Delete: { Objects: [{ Key: 'here.txt' }] } }).promise(),
      ]) {
        const e = await awsError(call());
        assert.equal(e.code, 'SignatureDoesNotMatch');
        assert.equal(e.statusCode, 403);
      }
      const r = await fetch(wrong.getSignedUrl('getObject', { Bucket: B, Key: 'here.txt' }));
      assert.equal(r.status, 403);
      assert.match(await r.text(), /<Code>SignatureDoesNotMatch<\/Code>/);
      // A HEAD has no body to carry the code: the SDK names the status.
      const h = await awsError(wrong.headObject({ Bucket: B, Key: 'here.txt' }).promise());
      assert.equal(h.statusCode, 403);
      assert.equal(h.code, 'Forbidden');
    }
    assert.equal(await code(s3.getObject({ Bucket: B, Key: 'never.txt' }).promise()), 'NoSuchKey');
    assert.equal(await code(client({ id: 'AKIANOTAKEY000000000', secret: 'x' }).listBuckets().promise()), 'InvalidAccessKeyId');

    for (const sc of [client(scoped), client(scoped, {})]) {
      await sc.putObject({ Bucket: mine, Key: 'mine.txt', Body: 'mine' }).promise();
      assert.equal(String((await sc.getObject({ Bucket: mine, Key: 'mine.txt' }).promise()).Body), 'mine');
      assert.deepEqual(((await sc.listBuckets().promise()).Buckets ?? []).map((b) => b.Name), [mine]);
      await sc.headBucket({ Bucket: mine }).promise();
      for (const call of [
        () => sc.getObject({ Bucket: otherBucket, Key: 'mine.txt' }).promise(),
        () => sc.listObjects({ Bucket: otherBucket }).promise(),
        () => sc.listObjectsV2({ Bucket: otherBucket }).promise(),
        () => sc.putObject({ Bucket: otherBucket, Key: 'x.txt', Body: 'x' }).promise(),
        () => sc.getObject({ Bucket: B, Key: 'here.txt' }).promise(),
        () => sc.deleteObject({ Bucket: B, Key: 'here.txt' }).promise(),
        () => sc.copyObject({ Bucket: mine, Key: 'stolen.txt', CopySource: `${B}/here.txt` }).promise(),
      ]) {
        const e = await awsError(call());
        assert.equal(e.code, 'AccessDenied');
        assert.equal(e.statusCode, 403);
      }
      assert.equal((await awsError(sc.headBucket({ Bucket: otherBucket }).promise())).statusCode, 403);
    }
    assert.equal(String((await s3.getObject({ Bucket: B, Key: 'here.txt' }).promise()).Body), 'here');

    const missing = await awsError(s3.getObject({ Bucket: B, Key: 'missing.txt' }).promise());
    assert.equal(missing.code, 'NoSuchKey');
    assert.equal(missing.statusCode, 404);
    const head = await awsError(dflt.headObject({ Bucket: B, Key: 'missing.txt' }).promise());
    assert.equal(head.code, 'NotFound');
    assert.equal(head.statusCode, 404);
    assert.equal(await code(s3.getObject({ Bucket: 'sdk-v2-no-bucket', Key: 'x.txt' }).promise()), 'NoSuchBucket');
    assert.equal(await code(s3.listObjectsV2({ Bucket: 'sdk-v2-no-bucket' }).promise()), 'NoSuchBucket');
    assert.equal(await code(s3.putObject({ Bucket: 'sdk-v2-no-bucket', Key: 'x.txt', Body: 'x' }).promise()), 'NoSuchBucket');

    // A clock 20 minutes behind, not corrected: RequestTimeTooSkewed (the limit is 15 minutes).
    for (const extra of [{ signatureVersion: 'v4' }, {}]) {
      const skewed = client(full, { ...extra, correctClockSkew: false, systemClockOffset: -20 * 60 * 1000 });
      for (const call of [
        () => skewed.getObject({ Bucket: B, Key: 'here.txt' }).promise(),
        () => skewed.putObject({ Bucket: B, Key: 'skewed.txt', Body: 'skewed' }).promise(),
        () => skewed.listBuckets().promise(),
      ]) {
        const e = await awsError(call());
        assert.equal(e.code, 'RequestTimeTooSkewed');
        assert.equal(e.statusCode, 403);
      }
    }
    assert.equal((await awsError(s3.headObject({ Bucket: B, Key: 'skewed.txt' }).promise())).statusCode, 404);
    // 10 minutes behind is within S3's 15.
    const close = client(full, { correctClockSkew: false, systemClockOffset: -10 * 60 * 1000 });
    assert.equal(String((await close.getObject({ Bucket: B, Key: 'here.txt' }).promise()).Body), 'here');
  });
});
