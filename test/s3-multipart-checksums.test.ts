// Checksums of S3 multipart uploads through the AWS SDK for JavaScript v3 (and boto3 where a recent
// one is installed): the algorithm and type declared at CreateMultipartUpload, each part's checksum
// verified and recorded, the object's composite or full-object checksum made at completion, checked
// against the client's and returned by HeadObject/GetObject with ChecksumMode. The expected values
// are computed here from the bytes; the three-part vectors are Ceph s3-tests' (5 MiB of A, B, C).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
  UploadPartCopyCommand,
  PutObjectCommand,
  type ChecksumAlgorithm,
  type CompletedPart,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { createBucket, getLiveBucket } from '../src/domain/buckets.js';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import { checksumOf } from '../src/s3/checksums.js';
import { compositeChecksum, fullObjectCrc } from '../src/s3/checksum-combine.js';
import { startTestServer, testStorage, type TestServer } from './support/server.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const MiB = 1024 * 1024;
/** Part sizes: small on fs; 5 MiB on S3 storage, whose native multipart parts must be that large. */
const PART = testStorage() === 's3' ? 5 * MiB : 64 * 1024;

async function s3Error(p: Promise<unknown>): Promise<{ name: string; status: number | undefined; message: string }> {
  try {
    await p;
  } catch (e) {
    if (e instanceof S3ServiceException) return { name: e.name, status: e.$metadata.httpStatusCode, message: e.message };
    throw e;
  }
  assert.fail('expected an S3 error');
}

const PART_CHECKSUM_FIELD = { CRC32: 'ChecksumCRC32', CRC32C: 'ChecksumCRC32C', CRC64NVME: 'ChecksumCRC64NVME', SHA1: 'ChecksumSHA1', SHA256: 'ChecksumSHA256' } as const;

describe('S3 multipart checksums', () => {
  let t: TestServer;
  let id: string;
  let secret: string;
  let s3: S3Client;
  /** A client that sends a checksum only where the operation requires one. */
  let s3Plain: S3Client;
  let bucket: string;

  before(async () => {
    t = await startTestServer({
      FILES_REST_S3_PORT: 'auto',
      FILES_REST_PERMISSION_FACTORY: 'allow-all',
      FILES_REST_SERVER_KEY: SERVER_KEY,
      FILES_REST_S3_MULTIPART_MIN_PART_SIZE: '1000',
    });
    const keys = requireServerKeys(t.config, null, { create: true });
    const k = await createAccessKey(t.server.core.ctx.db, keys);
    id = k.info.accessKeyId;
    secret = k.secret;
    const base = { endpoint: t.s3Url, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: id, secretAccessKey: secret } };
    s3 = new S3Client(base);
    s3Plain = new S3Client({ ...base, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' });
    bucket = (await createBucket(t.server.core.ctx, {})).id;
  });
  after(async () => {
    s3?.destroy();
    s3Plain?.destroy();
    await t?.close();
  });

  /** Uploads the parts with the declared algorithm (the SDK computes each part's checksum); answers the completed-part entries. */
  async function uploadParts(key: string, uploadId: string, parts: Buffer[], algorithm: ChecksumAlgorithm): Promise<CompletedPart[]> {
    const out: CompletedPart[] = [];
    for (const [i, body] of parts.entries()) {
      const r = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: uploadId, PartNumber: i + 1, Body: body, ChecksumAlgorithm: algorithm }));
      const field = PART_CHECKSUM_FIELD[algorithm as keyof typeof PART_CHECKSUM_FIELD];
      assert.equal(r[field], await checksumOf(algorithm as never, body), `part ${i + 1}'s ${algorithm} is echoed`);
      out.push({ PartNumber: i + 1, ETag: r.ETag!, [field]: r[field] });
    }
    return out;
  }

  it('SHA256 (COMPOSITE): parts listed with their checksums; a completion without them, or with a malformed or wrong object checksum, is refused; then the composite is stored and returned', async () => {
    const key = 'cks/sha256.bin';
    const parts = [randomBytes(PART), randomBytes(PART), randomBytes(1234)];
    const create = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: 'SHA256' }));
    assert.equal(create.ChecksumAlgorithm, 'SHA256');
    assert.equal(create.ChecksumType, 'COMPOSITE');
    const UploadId = create.UploadId!;
    const completed = await uploadParts(key, UploadId, parts, 'SHA256');

    const listed = await s3.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId }));
    assert.equal(listed.ChecksumAlgorithm, 'SHA256');
    assert.deepEqual(listed.Parts!.map((p) => p.ChecksumSHA256), completed.map((p) => p.ChecksumSHA256));
    const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: key }));
    assert.equal(uploads.Uploads?.[0]?.ChecksumAlgorithm, 'SHA256');

    const expected = await compositeChecksum('SHA256', await Promise.all(parts.map((p) => checksumOf('SHA256', p))));
    assert.match(expected, /-3$/);
    const complete = (extra: object, list: CompletedPart[] = completed) =>
      s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: list }, ...extra }));

    // A part without its checksum: S3's InvalidRequest.
    let e = await s3Error(complete({}, completed.map(({ ChecksumSHA256: _, ...p }) => p)));
    assert.equal(e.name, 'InvalidRequest');
    assert.match(e.message, /missing for part 1/);
    // A part checksum that is not the one recorded: InvalidPart.
    e = await s3Error(complete({}, completed.map((p, i) => (i === 1 ? { ...p, ChecksumSHA256: completed[0]!.ChecksumSHA256 } : p))));
    assert.equal(e.name, 'InvalidPart');
    // A malformed object checksum, then a well-formed wrong one.
    e = await s3Error(complete({ ChecksumSHA256: 'bad' }));
    assert.equal(e.name, 'InvalidRequest');
    e = await s3Error(complete({ ChecksumSHA256: `${Buffer.alloc(32).toString('base64')}-3` }));
    assert.equal(e.name, 'BadDigest');
    // Another type than declared.
    e = await s3Error(complete({ ChecksumType: 'FULL_OBJECT' }));
    assert.equal(e.name, 'BadDigest');
    // The object's size, when given, must be its size.
    e = await s3Error(complete({ MpuObjectSize: 5 }));
    assert.equal(e.name, 'InvalidRequest');
    const none = await s3Error(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key })));
    assert.equal(none.status, 404, 'no refused completion made the object');

    const done = await complete({ ChecksumSHA256: expected, MpuObjectSize: PART * 2 + 1234 });
    assert.equal(done.ChecksumSHA256, expected);
    assert.equal(done.ChecksumType, 'COMPOSITE');
    // Repeated after success: the same answer.
    const again = await complete({});
    assert.equal(again.ChecksumSHA256, expected);

    const plainHead = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
    assert.equal(plainHead.ChecksumSHA256, undefined, 'no checksum unless asked for');
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }));
    assert.equal(head.ChecksumSHA256, expected);
    assert.equal(head.ChecksumType, 'COMPOSITE');
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }));
    assert.equal(got.ChecksumSHA256, expected);
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(Buffer.concat(parts)));
    // One part: its own checksum, with the object's type; a range that is not a part: none.
    for (const [i, body] of parts.entries()) {
      const p = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, PartNumber: i + 1, ChecksumMode: 'ENABLED' }));
      assert.equal(p.ChecksumSHA256, completed[i]!.ChecksumSHA256, `part ${i + 1}`);
      assert.equal(p.ChecksumType, 'COMPOSITE');
      assert.equal(p.PartsCount, 3);
      assert.ok(Buffer.from(await p.Body!.transformToByteArray()).equals(body));
    }
    const ranged = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, Range: 'bytes=0-9', ChecksumMode: 'ENABLED' }));
    assert.equal(ranged.ChecksumSHA256, undefined);
    await ranged.Body!.transformToByteArray();

    // A copy is a single-part object: the composite checksum does not go with it.
    await s3.send(new CopyObjectCommand({ Bucket: bucket, Key: 'cks/sha256-copy.bin', CopySource: `${bucket}/${key}` }));
    const copy = await s3Plain.send(new HeadObjectCommand({ Bucket: bucket, Key: 'cks/sha256-copy.bin', ChecksumMode: 'ENABLED' }));
    assert.equal(copy.ChecksumSHA256, undefined);
  });

  for (const [algorithm, vectors] of [
    ['CRC32', ['JRTCyQ==', 'QoZTGg==', 'YAgjqw==', 'WgDhBQ==']],
    ['CRC32C', ['MDaLrw==', 'TH4EZg==', 'Z7mBIQ==', 'xU+Krw==']],
    ['CRC64NVME', ['L/E4WYn8v98=', 'xW1l19VobYM=', 'cK5MnNaWrW4=', 'i+6LR0y3eFo=']],
  ] as const) {
    it(`${algorithm} (FULL_OBJECT): the object's checksum is the CRC of all its bytes, combined from the parts' (s3-tests' vectors)`, async () => {
      assert.equal(fullObjectCrc(algorithm, vectors.slice(0, 3).map((value) => ({ value, size: 5 * MiB }))), vectors[3]);
      const key = `cks/${algorithm}.bin`;
      const parts = [randomBytes(PART), randomBytes(PART), randomBytes(777)];
      const create = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: algorithm, ChecksumType: 'FULL_OBJECT' }));
      assert.equal(create.ChecksumType, 'FULL_OBJECT');
      const completed = await uploadParts(key, create.UploadId!, parts, algorithm);
      const whole = await checksumOf(algorithm, Buffer.concat(parts));
      const field = PART_CHECKSUM_FIELD[algorithm];
      // Full-object: the parts' checksums may be left out of the list.
      const done = await s3.send(
        new CompleteMultipartUploadCommand({
          Bucket: bucket, Key: key, UploadId: create.UploadId!, ChecksumType: 'FULL_OBJECT', [field]: whole,
          MultipartUpload: { Parts: completed.map((p) => ({ PartNumber: p.PartNumber, ETag: p.ETag })) },
        }),
      );
      assert.equal(done[field], whole);
      assert.equal(done.ChecksumType, 'FULL_OBJECT');
      // The SDK checks a full-object checksum against the body it reads.
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }));
      assert.equal(got[field], whole);
      assert.equal(got.ChecksumType, 'FULL_OBJECT');
      assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(Buffer.concat(parts)));
      // One part: its CRC, which the SDK checks against the part's bytes.
      const part = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key, PartNumber: 2, ChecksumMode: 'ENABLED' }));
      assert.equal(part[field], completed[1]![field]);
      assert.ok(Buffer.from(await part.Body!.transformToByteArray()).equals(parts[1]!));
    });
  }

  it('declarations S3 refuses are refused before an upload exists; a part of another algorithm is refused; a part sent without one gets it computed', async () => {
    const before = (await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads?.length ?? 0;
    for (const input of [
      { ChecksumAlgorithm: 'SHA1', ChecksumType: 'FULL_OBJECT' },
      { ChecksumAlgorithm: 'CRC64NVME', ChecksumType: 'COMPOSITE' },
      { ChecksumAlgorithm: 'MD4' },
      { ChecksumType: 'COMPOSITE' },
    ] as const) {
      const e = await s3Error(s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: 'cks/refused.bin', ...(input as object) })));
      assert.equal(e.name, 'InvalidRequest', JSON.stringify(input));
    }
    assert.equal((await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }))).Uploads?.length ?? 0, before);

    const key = 'cks/mixed.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: 'CRC32C' }));
    const body = randomBytes(2000);
    const e = await s3Error(s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: body, ChecksumAlgorithm: 'SHA256' })));
    assert.equal(e.name, 'InvalidRequest');
    assert.match(e.message, /expected checksum Type: crc32c/);
    // A client that sends no checksum: the server computes the declared one and answers it.
    const r = await s3Plain.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: body }));
    assert.equal(r.ChecksumCRC32C, await checksumOf('CRC32C', body));
    // UploadPartCopy: the copied bytes' checksum, in CopyPartResult.
    await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'cks/source.bin', Body: body }));
    const copied = await s3.send(new UploadPartCopyCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 2, CopySource: `${bucket}/cks/source.bin` }));
    assert.equal(copied.CopyPartResult?.ChecksumCRC32C, await checksumOf('CRC32C', body));
    // With a checksum on each part the list must be 1..N, as S3 wants (without one, any ascending numbers do).
    const skipped = await s3Error(
      s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: [{ PartNumber: 2, ETag: copied.CopyPartResult!.ETag!, ChecksumCRC32C: copied.CopyPartResult!.ChecksumCRC32C }] } })),
    );
    assert.equal(skipped.name, 'InvalidPartOrder');
    const done = await s3.send(
      new CompleteMultipartUploadCommand({
        Bucket: bucket, Key: key, UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: r.ETag!, ChecksumCRC32C: r.ChecksumCRC32C }, { PartNumber: 2, ETag: copied.CopyPartResult!.ETag!, ChecksumCRC32C: copied.CopyPartResult!.ChecksumCRC32C }] },
      }),
    );
    assert.equal(done.ChecksumCRC32C, await compositeChecksum('CRC32C', [r.ChecksumCRC32C!, copied.CopyPartResult!.ChecksumCRC32C!]));
    const b = await getLiveBucket(t.server.core.ctx.db, bucket);
    assert.equal(b.reservedSize, 0);
  });

  it('a completion listing 10 000 parts with their SHA-256 checksums (about 1.7 MB of XML) is read whole: each part is checked', async () => {
    const key = 'cks/many.bin';
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: 'SHA256' }));
    const [part] = await uploadParts(key, UploadId!, [randomBytes(100)], 'SHA256');
    const parts: CompletedPart[] = Array.from({ length: 10000 }, (_, i) => ({ PartNumber: i + 1, ETag: part!.ETag, ChecksumSHA256: part!.ChecksumSHA256 }));
    // Read and parsed whole: the refusal is about part 2, which was never uploaded (not the body's size).
    const e = await s3Error(s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: parts } })));
    assert.equal(e.name, 'InvalidPart', e.message);
  });

  it('PutObject naming one algorithm (x-amz-sdk-checksum-algorithm) beside another\'s checksum is refused, as S3 does, and stores nothing', async () => {
    const body = Buffer.from('one algorithm named, another sent');
    const e = await s3Error(s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'cks/two-algorithms.txt', Body: body, ChecksumAlgorithm: 'CRC32', ChecksumCRC32C: await checksumOf('CRC32C', body) })));
    assert.equal(e.name, 'InvalidRequest');
    assert.match(e.message, /x-amz-sdk-checksum-algorithm/);
    assert.equal((await s3Error(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: 'cks/two-algorithms.txt' })))).status, 404);
  });

  it('an upload that declared nothing takes checksum headers on its completion without checking or storing them, as S3 does', async () => {
    const key = 'cks/undeclared.bin';
    const { UploadId } = await s3Plain.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const body = randomBytes(3000);
    const r = await s3.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber: 1, Body: body, ChecksumAlgorithm: 'CRC32' }));
    const done = await s3.send(
      new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, ChecksumCRC32: 'AAAAAA==', MultipartUpload: { Parts: [{ PartNumber: 1, ETag: r.ETag!, ChecksumCRC32: r.ChecksumCRC32 }] } }),
    );
    assert.equal(done.ChecksumCRC32, undefined);
    const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }));
    assert.equal(head.ChecksumCRC32, undefined);
  });

  it('the SDK Upload helper with its defaults (it declares CRC32) and with SHA256: completed with the composite checksum', async () => {
    for (const algorithm of [undefined, 'SHA256'] as const) {
      const key = `cks/helper-${algorithm ?? 'default'}.bin`;
      const body = randomBytes(5 * MiB * 2 + 99);
      const up = new Upload({ client: s3, params: { Bucket: bucket, Key: key, Body: body, ...(algorithm ? { ChecksumAlgorithm: algorithm } : {}) }, queueSize: 3, partSize: 5 * MiB });
      const done = await up.done();
      const alg = algorithm ?? 'CRC32';
      const parts = [0, 1, 2].map((i) => body.subarray(i * 5 * MiB, Math.min((i + 1) * 5 * MiB, body.length)));
      const expected = await compositeChecksum(alg, await Promise.all(parts.map((p) => checksumOf(alg, p))));
      assert.equal(done[PART_CHECKSUM_FIELD[alg]], expected);
      const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key, ChecksumMode: 'ENABLED' }));
      assert.equal(head[PART_CHECKSUM_FIELD[alg]], expected);
    }
  });

  it('GetObjectAttributes: ETag, the checksum (a composite one with its -N) and its type, the parts paged, storage class and size', async () => {
    const key = 'cks/attributes.bin';
    const parts = [randomBytes(PART), randomBytes(PART), randomBytes(PART), randomBytes(10)];
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ChecksumAlgorithm: 'CRC32' }));
    const completed = await uploadParts(key, UploadId!, parts, 'CRC32');
    const done = await s3.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: completed } }));
    const all = ['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize'] as const;
    const a = await s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: key, ObjectAttributes: [...all], MaxParts: 3 }));

    assert.equal(a.ETag, done.ETag!.replace(/"/g, ''));
    assert.equal(a.Checksum?.ChecksumCRC32, done.ChecksumCRC32, 'as HeadObject gives it, -4 included');
    assert.equal(a.Checksum?.ChecksumType, 'COMPOSITE');
    assert.equal(a.ObjectParts?.TotalPartsCount, 4);
    assert.equal(a.ObjectParts?.IsTruncated, true);
    assert.deepEqual(a.ObjectParts?.Parts?.map((p) => [p.PartNumber, p.Size, p.ChecksumCRC32]), completed.slice(0, 3).map((c) => [c.PartNumber, PART, c.ChecksumCRC32]));
    assert.equal(a.StorageClass, 'STANDARD');
    assert.equal(a.ObjectSize, PART * 3 + 10);
    assert.ok(a.VersionId);
    const rest = await s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: key, ObjectAttributes: ['ObjectParts'], PartNumberMarker: '3' }));
    assert.deepEqual(rest.ObjectParts?.Parts?.map((p) => [p.PartNumber, p.Size, p.ChecksumCRC32]), [[4, 10, completed[3]!.ChecksumCRC32]]);
    assert.equal(rest.ObjectParts?.IsTruncated, false);
    assert.equal(rest.ETag, undefined, 'only what was asked for');

    // A single upload: its checksum is of every byte, and it has no parts to tell.
    const body = randomBytes(100);
    const put = await s3.send(new PutObjectCommand({ Bucket: bucket, Key: 'cks/single.bin', Body: body, ChecksumAlgorithm: 'CRC32C' }));
    const single = await s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: 'cks/single.bin', ObjectAttributes: [...all] }));
    assert.equal(single.Checksum?.ChecksumCRC32C, put.ChecksumCRC32C);
    assert.equal(single.Checksum?.ChecksumType, 'FULL_OBJECT');
    assert.equal(single.ObjectParts, undefined);
    assert.equal(single.ObjectSize, 100);
    // Refusals: no attribute or an unknown one; a delete marker is NoSuchKey; an old version by id still answers.
    for (const bad of [[], ['Colour']]) {
      const e = await s3Error(s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: key, ObjectAttributes: bad as never })));
      assert.equal(e.name, 'InvalidArgument', JSON.stringify(bad));
    }
    await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: 'cks/single.bin' }));
    const gone = await s3Error(s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: 'cks/single.bin', ObjectAttributes: ['ETag'] })));
    assert.equal(gone.status, 404);
    const old = await s3.send(new GetObjectAttributesCommand({ Bucket: bucket, Key: 'cks/single.bin', VersionId: put.VersionId, ObjectAttributes: ['ObjectSize'] }));
    assert.equal(old.ObjectSize, 100);
  });

  it('boto3 with its default checksums (CRC32 on every upload), where a recent boto3 is installed', async (ctx) => {
    const python = process.env.FILES_REST_TEST_PYTHON ?? 'python3';
    const probe = await run(python, ['-c', 'import boto3, botocore; v = tuple(int(x) for x in botocore.__version__.split(".")[:2]); assert v >= (1, 36), v']);
    if (probe.code !== 0) return ctx.skip(`no boto3 with default checksums (botocore 1.36 or later) for ${python}: ${probe.stderr.trim().split('\n').pop()}`);
    const home = await mkdtemp(join(tmpdir(), 'files-rest-boto3-cks-'));
    try {
      await writeFile(join(home, 'in.bin'), randomBytes(11 * MiB + 5));
      const script = `
import boto3, sys
from boto3.s3.transfer import TransferConfig
s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], region_name='us-east-1')
cfg = TransferConfig(multipart_threshold=5*1024*1024, multipart_chunksize=5*1024*1024, max_concurrency=3)
s3.upload_file(sys.argv[5] + '/in.bin', sys.argv[4], 'cks/boto.bin', Config=cfg)
h = s3.head_object(Bucket=sys.argv[4], Key='cks/boto.bin', ChecksumMode='ENABLED')
print(h.get('ChecksumCRC32'), h.get('ChecksumType'))
s3.download_file(sys.argv[4], 'cks/boto.bin', sys.argv[5] + '/out.bin', Config=cfg)
`;
      const r = await run(python, ['-c', script, t.s3Url, id, secret, bucket, home], { HOME: home, AWS_EC2_METADATA_DISABLED: 'true', AWS_CONFIG_FILE: join(home, 'c'), AWS_SHARED_CREDENTIALS_FILE: join(home, 'k') });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout.trim(), /^[A-Za-z0-9+/]{6}==-3 COMPOSITE$/);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});

function run(cmd: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
