// CopyObject, DeleteObjects and object tagging through the S3 door, with real clients (AWS SDK v3
// defaults, the AWS CLI): a copy within one location shares the file instance (no byte copied, as
// snapshots do; a hard delete of either version is refused while the other exists), across
// locations the bytes are copied; DeleteObjects of 1000 keys with per-key results; S3 tag sets are
// the REST door's version tags.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  CopyObjectCommand,
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  DeleteObjectTaggingCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  ListObjectVersionsCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '@smithy/core/checksum';
import { HttpRequest } from '@smithy/core/protocols';
import { createBucket, getLiveBucket } from '../src/domain/buckets.js';
import { createLocation } from '../src/domain/locations.js';
import { findVersion, putObject } from '../src/domain/objects.js';
import { resolveBucket } from '../src/s3/names.js';
import { fileRemovalsSettled, startTestServer, storedFiles, testStorage, type TestServer } from './support/server.js';
import { doorClient, newDoorKey, s3Code } from './support/s3-door.js';

const AWS_CLI = '/usr/bin/aws';
const SERVER_KEY = randomBytes(32).toString('base64');

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');


function run(cmd: string, args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('S3 CopyObject, DeleteObjects, tagging', () => {
  let t: TestServer;
  let id: string;
  let secret: string;
  let s3: S3Client;

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    id = k.accessKeyId;
    secret = k.secret;
    s3 = doorClient(t, k);
  });
  after(async () => {
    s3?.destroy();
    await t?.close();
  });

  const bucketOf = async (name: string) => (await resolveBucket(t.server.core.ctx.db, name))!;
  const fileIdOf = async (bucket: string, key: string, versionId: string) => (await findVersion(t.server.core.ctx.db, (await bucketOf(bucket)).id, key, versionId))!.fileId;

  /** A raw request signed by hand (bodies the SDK would not send). */
  async function signed(method: string, path: string, query: Record<string, string>, headers: Record<string, string>, body?: string): Promise<Response> {
    const u = new URL(t.s3Url);
    const signer = new SignatureV4({ credentials: { accessKeyId: id, secretAccessKey: secret }, region: 'us-east-1', service: 's3', sha256: Sha256 });
    const req = await signer.sign(new HttpRequest({ method, protocol: 'http:', hostname: u.hostname, port: Number(u.port), path, query, headers: { host: u.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...headers }, body }));
    const qs = new URLSearchParams(query).toString().replace(/=(&|$)/g, '$1');
    return fetch(`${t.s3Url}${path}${qs ? `?${qs}` : ''}`, { method, headers: req.headers as Record<string, string>, body });
  }

  it('DeleteObject of a key with nothing live places a delete marker, as S3 with versioning enabled; the REST door still answers 404', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'markers' }));
    const first = await s3.send(new DeleteObjectCommand({ Bucket: 'markers', Key: 'never/there' }));
    assert.equal(first.DeleteMarker, true);
    assert.ok(first.VersionId);
    // A delete marker on a delete marker: another one, newest first.
    const second = await s3.send(new DeleteObjectCommand({ Bucket: 'markers', Key: 'never/there' }));
    assert.equal(second.DeleteMarker, true);
    assert.ok(second.VersionId && second.VersionId !== first.VersionId);
    const listed = await s3.send(new ListObjectVersionsCommand({ Bucket: 'markers' }));
    assert.equal(listed.Versions, undefined);
    assert.deepEqual(listed.DeleteMarkers?.map((m) => [m.Key, m.VersionId, m.IsLatest]), [
      ['never/there', second.VersionId, true],
      ['never/there', first.VersionId, false],
    ]);
    assert.equal((await s3Code(s3.send(new GetObjectCommand({ Bucket: 'markers', Key: 'never/there' })))).name, 'NoSuchKey');
    // The REST door's soft delete of a key with nothing live is unchanged: 404, no marker.
    const { createToken } = await import('../src/auth/tokens.js');
    const token = (await createToken(t.server.core.ctx.db)).token;
    const b = await bucketOf('markers');
    const rest = await fetch(`${t.files}/${b.id}/rest-missing`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
    assert.equal(rest.status, 404);
    assert.equal((await s3.send(new ListObjectVersionsCommand({ Bucket: 'markers', Prefix: 'rest-missing' }))).DeleteMarkers, undefined);
  });

  it('CopyObject within a bucket: a new version sharing the file instance, metadata copied, sizes counted as snapshots count them; S3 deletes either version, the REST door refuses while shared', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'copy-src' }));
    const body = randomBytes(50_000);
    const put = await s3.send(new PutObjectCommand({ Bucket: 'copy-src', Key: 'a b/src.bin', Body: body, ContentType: 'application/x-src', Metadata: { colour: 'red' } }));
    const before = await storedFiles(t);
    const copy = await s3.send(new CopyObjectCommand({ Bucket: 'copy-src', Key: 'dst.bin', CopySource: `copy-src/${encodeURIComponent('a b/src.bin')}` }));
    assert.equal(copy.CopyObjectResult?.ETag, `"${md5(body)}"`);
    assert.ok(copy.CopyObjectResult?.LastModified instanceof Date);
    assert.ok(copy.VersionId && copy.VersionId !== put.VersionId);
    assert.equal(copy.CopySourceVersionId, put.VersionId);
    assert.deepEqual(await storedFiles(t), before, 'no byte copied');
    assert.equal(await fileIdOf('copy-src', 'dst.bin', copy.VersionId!), await fileIdOf('copy-src', 'a b/src.bin', put.VersionId!));
    const got = await s3.send(new GetObjectCommand({ Bucket: 'copy-src', Key: 'dst.bin' }));
    assert.deepEqual(Buffer.from(await got.Body!.transformToByteArray()), body);
    assert.equal(got.ContentType, 'application/x-src');
    assert.equal(got.Metadata?.colour, 'red');
    assert.equal(got.VersionId, copy.VersionId);
    // Each version counts toward its bucket's size, as a snapshot's do.
    assert.equal((await bucketOf('copy-src')).size, 2 * body.length);

    // The REST door refuses the hard delete of a version whose file another version shares (SPEC.md).
    const b = await bucketOf('copy-src');
    const rest = await fetch(`${t.files}/${b.id}/dst.bin?versionId=${copy.VersionId}`, { method: 'DELETE' });
    assert.equal(rest.status, 409);
    assert.match(await rest.text(), /shared/);
    // A soft delete is a delete marker, the copy stays readable.
    const marker = await s3.send(new DeleteObjectCommand({ Bucket: 'copy-src', Key: 'a b/src.bin' }));
    assert.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'copy-src', Key: 'dst.bin' }))).Body!.transformToString('hex'), body.toString('hex'));
    // Through S3 versions are independent, as on S3: the source's version goes alone, its bytes stay for the copy.
    await s3.send(new DeleteObjectCommand({ Bucket: 'copy-src', Key: 'a b/src.bin', VersionId: put.VersionId }));
    await s3.send(new DeleteObjectCommand({ Bucket: 'copy-src', Key: 'a b/src.bin', VersionId: marker.VersionId }));
    assert.equal((await bucketOf('copy-src')).size, body.length);
    const fileId = await fileIdOf('copy-src', 'dst.bin', copy.VersionId!);
    const fileRow = () => t.server.core.ctx.db.selectFrom('files').select(['id', 'uri']).where('id', '=', fileId).executeTakeFirst();
    const uri = (await fileRow())?.uri;
    assert.ok(uri && (await storedFiles(t)).includes(uri), 'the file and its bytes stay while the copy holds them');
    assert.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'copy-src', Key: 'dst.bin' }))).Body!.transformToString('hex'), body.toString('hex'));
    // The last version holding the file takes it with it; the bucket is empty and can go.
    await s3.send(new DeleteObjectCommand({ Bucket: 'copy-src', Key: 'dst.bin', VersionId: copy.VersionId }));
    assert.equal((await bucketOf('copy-src')).size, 0);
    assert.equal(await fileRow(), undefined);
    await fileRemovalsSettled(t);
    assert.ok(!(await storedFiles(t)).includes(uri), 'the bytes went with the last version');
    await s3.send(new DeleteBucketCommand({ Bucket: 'copy-src' }));
  });

  it('CopyObject across buckets of one location shares the file; across locations the bytes are copied to the destination location', async () => {
    const ctx = t.server.core.ctx;
    await s3.send(new CreateBucketCommand({ Bucket: 'near-src' }));
    await s3.send(new CreateBucketCommand({ Bucket: 'near-dst' }));
    // Larger than FILES_REST_INLINE_MAX_SIZE's default: a file in a location, not a row in the database.
    const body = randomBytes(70_000);
    const put = await s3.send(new PutObjectCommand({ Bucket: 'near-src', Key: 'k', Body: body }));
    // Earlier tests' hard deletes remove their bytes in the background: let them land first.
    await fileRemovalsSettled(t);
    const before = await storedFiles(t);
    const copy = await s3.send(new CopyObjectCommand({ Bucket: 'near-dst', Key: 'k2', CopySource: '/near-src/k' }));
    assert.deepEqual(await storedFiles(t), before, 'no new file on disk');
    assert.equal(await fileIdOf('near-dst', 'k2', copy.VersionId!), await fileIdOf('near-src', 'k', put.VersionId!));
    assert.equal((await bucketOf('near-dst')).size, body.length);
    assert.equal((await bucketOf('near-src')).size, body.length);

    const dir = join(t.dir, 'second-location');
    await createLocation(ctx, { name: 'second', uri: dir });
    const far = await createBucket(ctx, { locationName: 'second', name: 'far-dst' });
    const farCopy = await s3.send(new CopyObjectCommand({ Bucket: 'far-dst', Key: 'moved/k', CopySource: 'near-src/k' }));
    assert.equal(farCopy.CopyObjectResult?.ETag, `"${md5(body)}"`);
    const after = await storedFiles(t);
    assert.equal(after.length, before.length + 1, 'one new file');
    const farVersion = (await findVersion(ctx.db, far.id, 'moved/k', farCopy.VersionId!))!;
    assert.notEqual(farVersion.fileId, await fileIdOf('near-src', 'k', put.VersionId!));
    assert.equal(farVersion.file!.locationId, (await getLiveBucket(ctx.db, far.id)).defaultLocation);
    assert.ok(farVersion.file!.uri!.includes('second-location'), farVersion.file!.uri!);
    const got = await s3.send(new GetObjectCommand({ Bucket: 'far-dst', Key: 'moved/k' }));
    assert.deepEqual(Buffer.from(await got.Body!.transformToByteArray()), body);
    assert.equal((await getLiveBucket(ctx.db, far.id)).size, body.length);
    // Not shared: the copy's version can be hard-deleted, the bytes go.
    await s3.send(new DeleteObjectCommand({ Bucket: 'far-dst', Key: 'moved/k', VersionId: farCopy.VersionId }));
    assert.equal((await getLiveBucket(ctx.db, far.id)).size, 0);

    // A source whose stored bytes no longer match their checksum is not copied: nothing is stored.
    if (testStorage() === 'fs') {
      const bad = Buffer.from('x'.repeat(70_000)); // a file (above FILES_REST_INLINE_MAX_SIZE), damaged below by path
      const v = await s3.send(new PutObjectCommand({ Bucket: 'near-src', Key: 'rotten', Body: bad }));
      const file = (await findVersion(ctx.db, (await bucketOf('near-src')).id, 'rotten', v.VersionId!))!.file!;
      await writeFile(file.uri!, Buffer.from('y'.repeat(70_000)));
      // The hard delete above removes far-dst's bytes in the background: let that land first.
      await fileRemovalsSettled(t);
      const stored = await storedFiles(t);
      assert.deepEqual(await s3Code(s3.send(new CopyObjectCommand({ Bucket: 'far-dst', Key: 'rotten', CopySource: 'near-src/rotten' }))), { name: 'InternalError', status: 500 });
      assert.deepEqual(await storedFiles(t), stored);
      assert.equal((await s3Code(s3.send(new HeadObjectCommand({ Bucket: 'far-dst', Key: 'rotten' })))).status, 404);
    }
  });

  it('CopyObject of a version by versionId, with x-amz-copy-source-if-* conditions, REPLACE metadata, and onto itself', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'copy-cond' }));
    const v1 = await s3.send(new PutObjectCommand({ Bucket: 'copy-cond', Key: 'k', Body: 'one', Metadata: { n: '1' } }));
    const v2 = await s3.send(new PutObjectCommand({ Bucket: 'copy-cond', Key: 'k', Body: 'two' }));
    const old = await s3.send(new CopyObjectCommand({ Bucket: 'copy-cond', Key: 'old', CopySource: `copy-cond/k?versionId=${v1.VersionId}` }));
    assert.equal(old.CopySourceVersionId, v1.VersionId);
    const oldGot = await s3.send(new GetObjectCommand({ Bucket: 'copy-cond', Key: 'old' }));
    assert.equal(await oldGot.Body!.transformToString(), 'one');
    assert.equal(oldGot.Metadata?.n, '1');
    assert.equal((await s3Code(s3.send(new CopyObjectCommand({ Bucket: 'copy-cond', Key: 'x', CopySource: 'copy-cond/k?versionId=00000000-0000-4000-8000-000000000000' })))).name, 'NoSuchVersion');
    assert.equal((await s3Code(s3.send(new CopyObjectCommand({ Bucket: 'copy-cond', Key: 'x', CopySource: 'copy-cond/missing' })))).name, 'NoSuchKey');
    assert.equal((await s3Code(s3.send(new CopyObjectCommand({ Bucket: 'copy-cond', Key: 'x', CopySource: 'no-such-bucket-here/k' })))).name, 'NoSuchBucket');

    const etag = v2.ETag!;
    const past = new Date(Date.now() - 3600_000);
    const future = new Date(Date.now() + 3600_000);
    const cond = (extra: Record<string, unknown>) => s3.send(new CopyObjectCommand({ Bucket: 'copy-cond', Key: 'c', CopySource: 'copy-cond/k', ...extra }));
    for (const extra of [{ CopySourceIfMatch: '"0123456789abcdef0123456789abcdef"' }, { CopySourceIfNoneMatch: etag }, { CopySourceIfModifiedSince: future }, { CopySourceIfUnmodifiedSince: past }]) {
      assert.deepEqual(await s3Code(cond(extra)), { name: 'PreconditionFailed', status: 412 }, JSON.stringify(extra));
    }
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: 'copy-cond', Key: 'c' })).catch((e: Error) => e)) instanceof Error, true, 'nothing copied');
    // A matching If-Match wins over a failing If-Unmodified-Since, as S3 has it.
    await cond({ CopySourceIfMatch: etag, CopySourceIfUnmodifiedSince: past });
    await cond({ CopySourceIfNoneMatch: '"0123456789abcdef0123456789abcdef"', CopySourceIfModifiedSince: past });
    await cond({ CopySourceIfModifiedSince: past, CopySourceIfUnmodifiedSince: future });

    // Onto itself: refused without REPLACE, a new version with the new metadata with it.
    assert.deepEqual(await s3Code(s3.send(new CopyObjectCommand({ Bucket: 'copy-cond', Key: 'k', CopySource: 'copy-cond/k' }))), { name: 'InvalidRequest', status: 400 });
    const self = await s3.send(new CopyObjectCommand({ Bucket: 'copy-cond', Key: 'k', CopySource: 'copy-cond/k', MetadataDirective: 'REPLACE', ContentType: 'text/x-new', Metadata: { fresh: 'yes' } }));
    assert.notEqual(self.VersionId, v2.VersionId);
    const head = await s3.send(new HeadObjectCommand({ Bucket: 'copy-cond', Key: 'k' }));
    assert.equal(head.ContentType, 'text/x-new');
    assert.deepEqual(head.Metadata, { fresh: 'yes' });
    assert.equal(head.ETag, etag);
    assert.equal(await fileIdOf('copy-cond', 'k', self.VersionId!), await fileIdOf('copy-cond', 'k', v2.VersionId!));
    // An unknown directive is refused.
    const bad = await signed('PUT', '/copy-cond/z', {}, { 'x-amz-copy-source': '/copy-cond/k', 'x-amz-metadata-directive': 'MERGE' });
    assert.equal(bad.status, 400);
  });

  it('CopyObject with x-amz-checksum-algorithm: the copy gets that checksum of its bytes (computed, or the source\'s own when it describes the whole object)', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'copy-checksums' }));
    const body = randomBytes(300_000);
    const sha256 = createHash('sha256').update(body).digest('base64');
    // The SDK's default: a CRC32 of the whole object, stored with it.
    const put = await s3.send(new PutObjectCommand({ Bucket: 'copy-checksums', Key: 'src.bin', Body: body }));
    assert.ok(put.ChecksumCRC32);
    const copied = await s3.send(new CopyObjectCommand({ Bucket: 'copy-checksums', Key: 'sha.bin', CopySource: 'copy-checksums/src.bin', ChecksumAlgorithm: 'SHA256' }));
    assert.equal(copied.CopyObjectResult?.ChecksumSHA256, sha256);
    let got = await s3.send(new GetObjectCommand({ Bucket: 'copy-checksums', Key: 'sha.bin', ChecksumMode: 'ENABLED' }));
    assert.equal(got.ChecksumSHA256, sha256);
    assert.equal(got.ChecksumCRC32, undefined, 'only the checksum asked for');
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(body));
    // The same algorithm as the source's: the source's value.
    const same = await s3.send(new CopyObjectCommand({ Bucket: 'copy-checksums', Key: 'crc.bin', CopySource: 'copy-checksums/src.bin', ChecksumAlgorithm: 'CRC32' }));
    assert.equal(same.CopyObjectResult?.ChecksumCRC32, put.ChecksumCRC32);
    // REPLACE metadata: computed all the same.
    const replaced = await s3.send(new CopyObjectCommand({ Bucket: 'copy-checksums', Key: 'crc-replaced.bin', CopySource: 'copy-checksums/src.bin', ChecksumAlgorithm: 'CRC32', MetadataDirective: 'REPLACE', ContentType: 'application/x-test' }));
    assert.equal(replaced.CopyObjectResult?.ChecksumCRC32, put.ChecksumCRC32);
    got = await s3.send(new GetObjectCommand({ Bucket: 'copy-checksums', Key: 'crc-replaced.bin', ChecksumMode: 'ENABLED' }));
    assert.equal(got.ChecksumCRC32, put.ChecksumCRC32);
    await got.Body!.transformToByteArray();
    // An algorithm S3 does not have.
    const bad = await signed('PUT', '/copy-checksums/bad.bin', {}, { 'x-amz-copy-source': '/copy-checksums/src.bin', 'x-amz-checksum-algorithm': 'MD5' });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /<Code>InvalidRequest<\/Code>/);
  });

  it('conditional deletes: If-Match, x-amz-if-match-last-modified-time and -size on DeleteObject and per entry of DeleteObjects; refused, nothing deleted', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'cond-delete' }));
    const put = await s3.send(new PutObjectCommand({ Bucket: 'cond-delete', Key: 'k', Body: 'twelve bytes' }));
    const head = await s3.send(new HeadObjectCommand({ Bucket: 'cond-delete', Key: 'k' }));
    const refused = async (p: Promise<unknown>) => assert.deepEqual(await s3Code(p), { name: 'PreconditionFailed', status: 412 });
    await refused(s3.send(new DeleteObjectCommand({ Bucket: 'cond-delete', Key: 'k', IfMatch: '"0123456789abcdef0123456789abcdef"' })));
    await refused(s3.send(new DeleteObjectCommand({ Bucket: 'cond-delete', Key: 'k', IfMatchLastModifiedTime: new Date('2015-01-01T00:00:00Z') })));
    await refused(s3.send(new DeleteObjectCommand({ Bucket: 'cond-delete', Key: 'k', IfMatchSize: 13 })));
    await refused(s3.send(new DeleteObjectCommand({ Bucket: 'cond-delete', Key: 'k', VersionId: put.VersionId, IfMatchSize: 13 })));
    // Still there, unchanged.
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: 'cond-delete', Key: 'k' }))).VersionId, put.VersionId);
    // All three holding: a delete marker.
    const done = await s3.send(new DeleteObjectCommand({ Bucket: 'cond-delete', Key: 'k', IfMatch: put.ETag, IfMatchLastModifiedTime: head.LastModified, IfMatchSize: 12 }));
    assert.equal(done.DeleteMarker, true);
    // The current version is that delete marker now: it has no ETag.
    await refused(s3.send(new DeleteObjectCommand({ Bucket: 'cond-delete', Key: 'k', IfMatch: put.ETag })));
    // A version by id, with its ETag: that version goes.
    const v = await s3.send(new DeleteObjectCommand({ Bucket: 'cond-delete', Key: 'k', VersionId: put.VersionId, IfMatch: put.ETag }));
    assert.equal(v.VersionId, put.VersionId);
    // A key that never had anything: deleted already, no delete marker placed.
    await s3.send(new DeleteObjectCommand({ Bucket: 'cond-delete', Key: 'never', IfMatch: '*' }));
    const listed = await s3.send(new ListObjectVersionsCommand({ Bucket: 'cond-delete', Prefix: 'never' }));
    assert.equal((listed.DeleteMarkers ?? []).length, 0);
    // DeleteObjects: an entry whose condition fails is an Error for its key; the others go.
    const a = await s3.send(new PutObjectCommand({ Bucket: 'cond-delete', Key: 'a', Body: 'a' }));
    await s3.send(new PutObjectCommand({ Bucket: 'cond-delete', Key: 'b', Body: 'bb' }));
    const res = await s3.send(
      new DeleteObjectsCommand({ Bucket: 'cond-delete', Delete: { Objects: [{ Key: 'a', ETag: a.ETag, Size: 1 }, { Key: 'b', ETag: '"ffffffffffffffffffffffffffffffff"' }, { Key: 'b', Size: 3 }] } }),
    );
    assert.deepEqual(res.Deleted?.map((d) => d.Key), ['a']);
    assert.deepEqual(res.Errors?.map((e) => [e.Key, e.Code]), [['b', 'PreconditionFailed'], ['b', 'PreconditionFailed']]);
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: 'cond-delete', Key: 'b' }))).ContentLength, 2);
    // A condition that cannot be read.
    const bad = await signed('DELETE', '/cond-delete/b', {}, { 'x-amz-if-match-size': 'many' });
    assert.equal(bad.status, 400);
    assert.match(await bad.text(), /<Code>InvalidArgument<\/Code>/);
  });

  it('DeleteObjects: 1000 keys in one request, verbose and quiet, existing, missing and version-addressed keys, an error per key', async () => {
    const ctx = t.server.core.ctx;
    await s3.send(new CreateBucketCommand({ Bucket: 'bulk' }));
    const b = await bucketOf('bulk');
    const put = (key: string, data: string) => putObject(ctx, { bucketId: b.id, key, source: Readable.from([Buffer.from(data)]), declaredSize: Buffer.byteLength(data) });
    const keys: string[] = [];
    for (let i = 0; i < 400; i++) {
      keys.push(`k/${String(i).padStart(4, '0')}`);
      await put(keys[i]!, `data ${i}`);
    }
    const older = await put('versioned', 'old');
    await put('versioned', 'new');
    const shared = await put('shared', 'shared bytes');
    await s3.send(new CopyObjectCommand({ Bucket: 'bulk', Key: 'shared-copy', CopySource: 'bulk/shared' }));
    const objects: { Key: string; VersionId?: string }[] = keys.map((Key) => ({ Key }));
    objects.push({ Key: 'versioned', VersionId: older.versionId });
    objects.push({ Key: 'shared', VersionId: shared.versionId });
    objects.push({ Key: 'gone', VersionId: '00000000-0000-4000-8000-000000000000' });
    while (objects.length < 1000) objects.push({ Key: `missing/${objects.length}` });
    const res = await s3.send(new DeleteObjectsCommand({ Bucket: 'bulk', Delete: { Objects: objects } }));
    assert.equal(res.Errors?.length ?? 0, 0);
    assert.equal(res.Deleted?.length, 1000);
    assert.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'bulk', Key: 'shared-copy' }))).Body!.transformToString(), 'shared bytes', 'the copy keeps the shared bytes');
    const byKey = new Map(res.Deleted!.map((d) => [d.Key, d]));
    assert.equal(byKey.get('k/0000')?.DeleteMarker, true);
    assert.ok(byKey.get('k/0000')?.DeleteMarkerVersionId);
    assert.equal(byKey.get('versioned')?.VersionId, older.versionId);
    assert.equal(byKey.get('versioned')?.DeleteMarker, undefined);
    assert.equal(byKey.get('gone')?.VersionId, '00000000-0000-4000-8000-000000000000');
    assert.ok(byKey.has('missing/500'));
    assert.equal((await s3Code(s3.send(new GetObjectCommand({ Bucket: 'bulk', Key: 'k/0399' })))).name, 'NoSuchKey');
    assert.equal(await findVersion(ctx.db, b.id, 'versioned', older.versionId), null, 'the version is gone');
    assert.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'bulk', Key: 'versioned' }))).Body!.transformToString(), 'new');

    // Quiet: only the errors.
    await put('quiet/a', 'a');
    const quiet = await s3.send(new DeleteObjectsCommand({ Bucket: 'bulk', Delete: { Quiet: true, Objects: [{ Key: 'quiet/a' }, { Key: 'quiet/none' }, { Key: '' }] } }));
    assert.equal(quiet.Deleted, undefined);
    assert.deepEqual(quiet.Errors?.map((e) => [e.Key ?? '', e.Code]), [['', 'InvalidArgument']]);
    assert.equal((await s3Code(s3.send(new HeadObjectCommand({ Bucket: 'bulk', Key: 'quiet/a' })))).status, 404);

    // More than 1000 keys, bad bodies, no or wrong integrity header.
    const many = Array.from({ length: 1001 }, (_, i) => ({ Key: `m${i}` }));
    assert.deepEqual(await s3Code(s3.send(new DeleteObjectsCommand({ Bucket: 'bulk', Delete: { Objects: many } }))), { name: 'MalformedXML', status: 400 });
    const xml = '<Delete><Object><Key>shared-copy</Key></Object></Delete>';
    const b64md5 = (s: string) => createHash('md5').update(s).digest('base64');
    for (const bad of ['<Delete><Object><Key>a</Key>', '<Nope/>', '<Delete></Delete>', '<Delete><Object><VersionId>x</VersionId></Object></Delete>', 'not xml']) {
      const r = await signed('POST', '/bulk', { delete: '' }, { 'content-md5': b64md5(bad) }, bad);
      assert.equal(r.status, 400, bad);
      assert.match(await r.text(), /<Code>MalformedXML<\/Code>/, bad);
    }
    let r = await signed('POST', '/bulk', { delete: '' }, {}, xml);
    assert.equal(r.status, 400);
    assert.match(await r.text(), /Content-MD5 OR x-amz-checksum-\*/);
    r = await signed('POST', '/bulk', { delete: '' }, { 'content-md5': b64md5('other') }, xml);
    assert.match(await r.text(), /<Code>BadDigest<\/Code>/);
    r = await signed('POST', '/bulk', { delete: '' }, { 'x-amz-checksum-sha256': createHash('sha256').update('other').digest('base64') }, xml);
    assert.match(await r.text(), /<Code>BadDigest<\/Code>/);
    assert.ok(await s3.send(new HeadObjectCommand({ Bucket: 'bulk', Key: 'shared-copy' })), 'nothing deleted by refused requests');
    r = await signed('POST', '/bulk', { delete: '' }, { 'x-amz-checksum-sha256': createHash('sha256').update(xml).digest('base64') }, xml);
    assert.equal(r.status, 200);
    assert.match(await r.text(), /<Deleted><Key>shared-copy<\/Key><DeleteMarker>true<\/DeleteMarker>/);
  });

  it('tagging: round trip with versionId, x-amz-tagging on PutObject, x-amz-tagging-count, S3 limits, the same tags through the REST door', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'tags' }));
    const b = await bucketOf('tags');
    const v1 = await s3.send(new PutObjectCommand({ Bucket: 'tags', Key: 'doc', Body: 'v1', Tagging: 'project=alpha&note=a%20b%C3%A9' }));
    let got = await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'doc' }));
    // Listed by key, not in the order given (as S3 and RGW list them).
    assert.deepEqual(got.TagSet, [{ Key: 'note', Value: 'a bé' }, { Key: 'project', Value: 'alpha' }]);
    assert.equal(got.VersionId, v1.VersionId);
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: 'tags', Key: 'doc' }))).TagCount, 2);
    const v2 = await s3.send(new PutObjectCommand({ Bucket: 'tags', Key: 'doc', Body: 'v2' }));
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: 'tags', Key: 'doc' }))).TagCount, undefined);
    const put = await s3.send(new PutObjectTaggingCommand({ Bucket: 'tags', Key: 'doc', Tagging: { TagSet: [{ Key: 'state', Value: 'final' }] } }));
    assert.equal(put.VersionId, v2.VersionId);
    await s3.send(new PutObjectTaggingCommand({ Bucket: 'tags', Key: 'doc', VersionId: v1.VersionId, Tagging: { TagSet: [{ Key: 'state', Value: 'draft' }] } }));
    assert.deepEqual((await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'doc', VersionId: v1.VersionId }))).TagSet, [{ Key: 'state', Value: 'draft' }]);
    assert.equal((await s3.send(new GetObjectCommand({ Bucket: 'tags', Key: 'doc' }))).TagCount, 1);

    // The REST door sees them as the versions' tags, and S3 sees what REST stored.
    const listing = (await (await fetch(`${t.files}/${b.id}?versions`)).json()) as { contents: Array<{ version_id: string; tags: Record<string, string> }> };
    const tagsOf = (v: string) => listing.contents.find((c) => c.version_id === v)?.tags;
    assert.deepEqual(tagsOf(v2.VersionId!), { state: 'final' });
    assert.deepEqual(tagsOf(v1.VersionId!), { state: 'draft' });
    const restPut = await fetch(`${t.files}/${b.id}/rest-doc`, { method: 'PUT', headers: { 'content-type': 'text/plain', 'x-invenio-file-tags': 'via=rest&n=1' }, body: 'rest' });
    assert.equal(restPut.status, 200, await restPut.clone().text());
    assert.deepEqual((await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'rest-doc' }))).TagSet, [{ Key: 'n', Value: '1' }, { Key: 'via', Value: 'rest' }]);

    // Delete: an empty set; a copy takes the source's tags unless told to replace them.
    await s3.send(new DeleteObjectTaggingCommand({ Bucket: 'tags', Key: 'doc', VersionId: v1.VersionId }));
    assert.deepEqual((await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'doc', VersionId: v1.VersionId }))).TagSet ?? [], []);
    await s3.send(new CopyObjectCommand({ Bucket: 'tags', Key: 'copied', CopySource: 'tags/doc' }));
    assert.deepEqual((await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'copied' }))).TagSet, [{ Key: 'state', Value: 'final' }]);
    await s3.send(new CopyObjectCommand({ Bucket: 'tags', Key: 'copied', CopySource: 'tags/doc', TaggingDirective: 'REPLACE', Tagging: 'x=y' }));
    assert.deepEqual((await s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'copied' }))).TagSet, [{ Key: 'x', Value: 'y' }]);

    // S3's limits: 10 tags, keys of 128 and values of 256 characters, no duplicate key.
    const tooMany = Array.from({ length: 11 }, (_, i) => ({ Key: `t${i}`, Value: 'v' }));
    for (const TagSet of [tooMany, [{ Key: 'k'.repeat(129), Value: 'v' }], [{ Key: 'k', Value: 'v'.repeat(257) }], [{ Key: 'd', Value: '1' }, { Key: 'd', Value: '2' }]]) {
      assert.deepEqual(await s3Code(s3.send(new PutObjectTaggingCommand({ Bucket: 'tags', Key: 'doc', Tagging: { TagSet } }))), { name: 'InvalidTag', status: 400 });
    }
    await s3.send(new PutObjectTaggingCommand({ Bucket: 'tags', Key: 'doc', Tagging: { TagSet: [{ Key: 'k'.repeat(128), Value: 'v'.repeat(256) }] } }));
    assert.deepEqual(await s3Code(s3.send(new PutObjectCommand({ Bucket: 'tags', Key: 'bad', Body: 'x', Tagging: Array.from({ length: 11 }, (_, i) => `t${i}=v`).join('&') }))), { name: 'InvalidTag', status: 400 });
    assert.equal((await s3Code(s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'none' })))).name, 'NoSuchKey');
    assert.equal((await s3Code(s3.send(new GetObjectTaggingCommand({ Bucket: 'tags', Key: 'doc', VersionId: '00000000-0000-4000-8000-000000000000' })))).name, 'NoSuchVersion');
    const badXml = '<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>';
    const r = await signed('PUT', '/tags/doc', { tagging: '' }, { 'content-md5': createHash('md5').update(badXml).digest('base64') }, badXml);
    assert.match(await r.text(), /<Code>MalformedXML<\/Code>/);
    // Bucket tagging is the bucket's own (s3-door.test.ts): the object's tags are not the bucket's.
    const bucketTags = await signed('GET', '/tags', { tagging: '' }, {});
    assert.equal(bucketTags.status, 404);
    assert.match(await bucketTags.text(), /<Code>NoSuchTagSet<\/Code>/);
  });

  it('the AWS CLI: s3 cp between keys, s3api put-object-tagging, s3 rm --recursive (DeleteObjects), s3 sync twice uploads nothing the second time', async (ctx) => {
    if (!existsSync(AWS_CLI)) return ctx.skip(`${AWS_CLI} is not installed (Debian package awscli)`);
    const home = await mkdtemp(join(tmpdir(), 'files-rest-awscli-'));
    try {
      const env = {
        PATH: '/usr/bin:/bin',
        HOME: home,
        AWS_ACCESS_KEY_ID: id,
        AWS_SECRET_ACCESS_KEY: secret,
        AWS_DEFAULT_REGION: 'us-east-1',
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_CONFIG_FILE: join(home, 'config'),
        AWS_SHARED_CREDENTIALS_FILE: join(home, 'credentials'),
      };
      const aws = async (...args: string[]) => {
        const r = await run(AWS_CLI, ['--endpoint-url', t.s3Url, ...args], env);
        assert.equal(r.code, 0, `aws ${args.join(' ')}: ${r.stderr}`);
        return r.stdout;
      };
      await aws('s3api', 'create-bucket', '--bucket', 'cli-copy');
      const data = randomBytes(20_000);
      await writeFile(join(home, 'in.bin'), data);
      await aws('s3', 'cp', join(home, 'in.bin'), 's3://cli-copy/k');
      await fileRemovalsSettled(t);
      const before = await storedFiles(t);
      await aws('s3', 'cp', 's3://cli-copy/k', 's3://cli-copy/k2');
      assert.deepEqual(await storedFiles(t), before, 'a copy within the location stores no byte');
      await aws('s3', 'cp', 's3://cli-copy/k2', join(home, 'out.bin'));
      assert.deepEqual(await readFile(join(home, 'out.bin')), data);
      await aws('s3api', 'put-object-tagging', '--bucket', 'cli-copy', '--key', 'k2', '--tagging', 'TagSet=[{Key=team,Value=blue}]');
      const tagging = JSON.parse(await aws('s3api', 'get-object-tagging', '--bucket', 'cli-copy', '--key', 'k2')) as { TagSet: unknown[] };
      assert.deepEqual(tagging.TagSet, [{ Key: 'team', Value: 'blue' }]);

      // sync: a tree of small files, twice; the second run compares size and LastModified and uploads nothing.
      const tree = join(home, 'tree');
      for (const d of ['a', 'a/b', 'c']) await mkdir(join(tree, d), { recursive: true });
      const files = ['top.txt', 'a/one.txt', 'a/b/two.bin', 'a/b/three.bin', 'c/four.txt'];
      for (const [i, f] of files.entries()) await writeFile(join(tree, f), randomBytes(1000 * (i + 1)));
      const first = await aws('s3', 'sync', tree, 's3://cli-copy/tree');
      assert.equal(first.match(/^upload:/gm)?.length, files.length, first);
      const b = await bucketOf('cli-copy');
      const countVersions = async () => Number((await t.server.core.ctx.db.selectFrom('object_versions').select((eb) => eb.fn.countAll<number>().as('n')).where('bucket_id', '=', b.id).executeTakeFirstOrThrow()).n);
      const versions = await countVersions();
      const second = await aws('s3', 'sync', tree, 's3://cli-copy/tree');
      assert.equal(second.trim(), '', `nothing to upload: ${second}`);
      assert.equal(await countVersions(), versions);
      // A changed file (other size) is uploaded again, alone.
      await writeFile(join(tree, 'c/four.txt'), 'changed');
      const third = await aws('s3', 'sync', tree, 's3://cli-copy/tree');
      assert.deepEqual(third.match(/^upload:.*$/gm)?.map((l) => l.replace(/.* to /, '')), ['s3://cli-copy/tree/c/four.txt']);

      // rm --recursive: DeleteObjects with Content-MD5, every key gets a delete marker.
      const rm1 = await aws('s3', 'rm', '--recursive', 's3://cli-copy/');
      assert.equal(rm1.match(/^delete:/gm)?.length, files.length + 2, rm1);
      const listed = JSON.parse((await aws('s3api', 'list-objects-v2', '--bucket', 'cli-copy')) || '{}') as { KeyCount?: number };
      assert.equal(listed.KeyCount ?? 0, 0);
      assert.ok((await readdir(home)).length > 0);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});
