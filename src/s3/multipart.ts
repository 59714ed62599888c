/**
 * The S3 door's multipart operations: CreateMultipartUpload, UploadPart, UploadPartCopy,
 * CompleteMultipartUpload, AbortMultipartUpload, ListParts, ListMultipartUploads. The protocol is
 * here (XML, 1-based part numbers, ETags); the rules are the domain's (src/domain/s3-uploads.ts,
 * and the REST door's abort, expiry and merge in multipart.ts).
 */
import { abortUpload, completionNews, completionOutcome, getUploadInLiveBucket, type MultipartUpload } from '../domain/multipart.js';
import {
  createS3Upload,
  findCompletedS3Upload,
  listS3Parts,
  listS3Uploads,
  requestS3Completion,
  S3_MAX_PART_NUMBER,
  UPLOAD_CHECKSUM_KEY,
  uploadS3Part,
  type CompletedPart,
} from '../domain/s3-uploads.js';
import { findHead, findVersion, getVersionMetadata, waitForCopies } from '../domain/objects.js';
import type { Bucket, ObjectVersion } from '../domain/models.js';
import { isAppError } from '../errors.js';
import { isStorageError } from '../storage/backend.js';
import { S3Error } from './errors.js';
import { toS3Error } from './error-map.js';
import { resolveBucket } from './names.js';
import { metadataOf, writePrecondition } from './objects.js';
import { taggingHeader } from './tagging.js';
import { openPayload, readSmallBody } from './payload.js';
import { authorize, header, sendEmpty, sendXml, type S3Request } from './request.js';
import { watchBody } from '../http/body-watch.js';
import { s3UrlEncode } from './listings.js';
import { childText, doc, el, parseXml } from './xml.js';
import { createChecksumHasher, CHECKSUM_ALGORITHMS } from './checksums.js';
import { parseCopySource } from './copy-source.js';
import {
  completionCheck,
  declarationHeaders,
  declarationText,
  declarationXml,
  declaredChecksum,
  objectChecksumXml,
  parseDeclaration,
  partChecksumText,
  partChecksumXml,
  type ListedChecksums,
} from './multipart-checksums.js';

const isoDate = (micros: number) => new Date(Math.floor(micros / 1000)).toISOString();
const md5Etag = (checksum: string) => `"${checksum.replace(/^md5:/, '')}"`;

/** The upload named by ?uploadId, as NoSuchUpload when unknown, of another key, or started by the REST door. */
async function uploadOf(r: S3Request, bucket: Bucket): Promise<MultipartUpload> {
  const id = r.query.get('uploadId') ?? '';
  if (!/^[0-9a-f-]{1,64}$/i.test(id)) throw new S3Error('NoSuchUpload');
  const u = await getUploadInLiveBucket(r.ctx.db, bucket.id, r.key, id);
  if (u.door !== 's3') throw new S3Error('NoSuchUpload');
  return u;
}

/** An integer query parameter within [min, max], or `fallback` when absent. */
function intParam(r: S3Request, name: string, fallback: number, min: number, max: number, message?: string): number {
  const v = r.query.get(name);
  if (v === null || v === '') return fallback;
  if (!/^-?\d{1,10}$/.test(v) || Number(v) < min || Number(v) > max) throw new S3Error('InvalidArgument', message ?? `${name} must be an integer from ${min} to ${max}.`);
  return Number(v);
}

function partNumberOf(r: S3Request): number {
  return intParam(r, 'partNumber', NaN, 1, S3_MAX_PART_NUMBER, `Part number must be an integer between 1 and ${S3_MAX_PART_NUMBER}, inclusive.`);
}

/** The checksum an upload declared at its start, or null. */
const declarationOf = (u: MultipartUpload) => parseDeclaration(u.metadata?.[UPLOAD_CHECKSUM_KEY]);

/** POST /bucket/key?uploads */
export async function createMultipartUploadOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id, key: r.key });
  const tags = taggingHeader(r);
  const declared = declaredChecksum(r);
  const u = await createS3Upload(r.ctx, {
    bucketId: bucket.id,
    key: r.key,
    metadata: metadataOf(r),
    ...(tags ? { tags } : {}),
    ...(declared ? { checksum: declarationText(declared) } : {}),
  });
  sendXml(r, doc('InitiateMultipartUploadResult', el('Bucket', r.bucketName) + el('Key', r.key) + el('UploadId', u.id)), 200, declarationHeaders(declared));
}

/** PUT /bucket/key?partNumber&uploadId: UploadPart, or UploadPartCopy with x-amz-copy-source. */
export async function uploadPartOp(r: S3Request, bucket: Bucket): Promise<void> {
  const partNumber = partNumberOf(r);
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id, key: r.key });
  const u = await uploadOf(r, bucket);
  if (header(r, 'x-amz-copy-source') !== undefined) return uploadPartCopy(r, u, partNumber);
  const declared = declarationOf(u);
  // An upload that declared a checksum algorithm: every part carries that one (computed if not sent).
  const payload = await openPayload(r, declared ? { checksum: declared.algorithm } : {});
  // As PutObject's: a client gone mid-body, or silent for FILES_REST_BODY_IDLE_TIMEOUT, ends the part
  // (and its claim: a re-send of the part does not wait for a stalled one).
  const watch = watchBody(r.req, r.ctx.config.bodyIdleTimeout, r.log);
  let part;
  try {
    part = await uploadS3Part(r.ctx, u, {
      partNumber,
      size: payload.declaredSize,
      source: payload.source,
      through: payload.through,
      observers: payload.observers,
      signal: watch.signal,
      expectedDigests: payload.expectedDigests,
      verify: () => payload.verify(),
      clientChecksum: () => partChecksumText(payload.checksums, declared),
    });
  } catch (e) {
    if (isAppError(watch.signal.reason, 'UPLOAD_TIMEOUT')) throw watch.signal.reason;
    const failure = payload.failure();
    if (failure) throw failure;
    if (isAppError(e, 'CHECKSUM_MISMATCH') && e.params.header === 'Content-MD5') throw new S3Error('BadDigest', 'The Content-MD5 you specified did not match what we received.');
    throw e;
  } finally {
    watch.done();
  }
  sendEmpty(r, 200, { etag: md5Etag(part.checksum), ...payload.checksums });
}

async function uploadPartCopy(r: S3Request, u: MultipartUpload, partNumber: number): Promise<void> {
  const src = parseCopySource(header(r, 'x-amz-copy-source')!);
  const srcBucket = await resolveBucket(r.ctx.db, src.bucketName);
  if (!srcBucket) throw new S3Error('NoSuchBucket', undefined, { BucketName: src.bucketName });
  await authorize(r, src.versionId ? 'object-read-version' : 'object-read', { type: 'object', bucketId: srcBucket.id, key: src.key, ...(src.versionId ? { id: src.versionId } : {}) });
  let version: ObjectVersion | null;
  if (src.versionId) {
    version = await findVersion(r.ctx.db, srcBucket.id, src.key, src.versionId);
    if (!version) throw new S3Error('NoSuchVersion');
  } else {
    version = await findHead(r.ctx.db, srcBucket.id, src.key);
    if (!version) throw new S3Error('NoSuchKey');
  }
  const file = version.file;
  if (!file) throw new S3Error(src.versionId ? 'InvalidRequest' : 'NoSuchKey', src.versionId ? 'The source version is a delete marker.' : undefined);
  if (!file.readable || !file.uri) throw new S3Error('ServiceUnavailable', 'File storage is offline.');
  let range = { start: 0, end: file.size - 1 };
  const rangeText = header(r, 'x-amz-copy-source-range');
  if (rangeText !== undefined) {
    const m = /^bytes=(\d+)-(\d+)$/.exec(rangeText.trim());
    if (!m || Number(m[1]) > Number(m[2])) {
      throw new S3Error('InvalidArgument', 'The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy, within the object.');
    }
    // Well formed but past the source's end: the range cannot be satisfied (S3's InvalidRange, 416).
    if (Number(m[2]) >= file.size) {
      throw new S3Error('InvalidRange', `The x-amz-copy-source-range ${rangeText.trim()} is not within the source object of ${file.size} bytes.`, { ActualObjectSize: String(file.size) });
    }
    range = { start: Number(m[1]), end: Number(m[2]) };
  }
  const size = range.end - range.start + 1;
  let source;
  try {
    source = size > 0 ? await r.ctx.storage.forUri(file.uri).open(file.uri, range) : (await import('node:stream')).Readable.from([]);
  } catch (e) {
    if (isStorageError(e, 'missing')) throw new S3Error('InternalError', 'The source object could not be read.');
    throw new S3Error('ServiceUnavailable', 'File storage is offline.');
  }
  source.on('error', () => {});
  let part: Awaited<ReturnType<typeof uploadS3Part>>;
  try {
    // The declared checksum of the copied bytes, as S3 gives it for a copied part.
    const declared = declarationOf(u);
    const hasher = declared ? await createChecksumHasher(declared.algorithm) : null;
    part = await uploadS3Part(r.ctx, u, {
      partNumber,
      size,
      source,
      ...(hasher ? { observers: [hasher], clientChecksum: () => `${hasher.algorithm}:${hasher.digest()}` } : {}),
    });
  } finally {
    // A part refused before its bytes were read (a layout refusal, a full quota) leaves the source
    // open: its file handle would wait for the garbage collector (Node's DEP0137 warning).
    source.destroy();
  }
  sendXml(r, doc('CopyPartResult', el('LastModified', isoDate(part.updated)) + el('ETag', md5Etag(part.checksum)) + partChecksumXml(part.clientChecksum)), 200, {
    'x-amz-copy-source-version-id': version.versionId,
  });
}

/**
 * The most a CompleteMultipartUpload body may hold: 10 000 parts listed with an ETag and a SHA-256
 * checksum each come to about 1.7 MB (1 MiB refused a CRC32-listed upload of 8 200 parts, which the
 * SDKs' default checksums now make common).
 */
const COMPLETION_BODY_MAX = 4 * 1024 * 1024;

/** The part list of a CompleteMultipartUpload body, with the checksums listed for each part. */
function parsePartList(body: Buffer): (CompletedPart & { checksums: ListedChecksums })[] {
  const root = parseXml(body.toString('utf8'));
  if (root.name !== 'CompleteMultipartUpload') throw new S3Error('MalformedXML');
  const parts = root.children.filter((c) => c.name === 'Part').map((p) => {
    const n = childText(p, 'PartNumber');
    const etag = childText(p, 'ETag');
    if (n === undefined || etag === undefined || !/^\d{1,5}$/.test(n)) throw new S3Error('MalformedXML');
    if (Number(n) < 1 || Number(n) > S3_MAX_PART_NUMBER) throw new S3Error('InvalidArgument', `Part number must be an integer between 1 and ${S3_MAX_PART_NUMBER}, inclusive.`);
    const checksums: ListedChecksums = {};
    for (const alg of CHECKSUM_ALGORITHMS) {
      const v = childText(p, `Checksum${alg}`);
      if (v !== undefined) checksums[alg] = v.trim();
    }
    return { partNumber: Number(n), etag, checksums };
  });
  if (parts.length === 0) throw new S3Error('MalformedXML', 'The XML you provided was not well-formed or did not validate against our published schema: it lists no part.');
  return parts;
}

/** POST /bucket/key?uploadId: waits for the merge, then answers with the object's ETag. */
export async function completeMultipartUploadOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id, key: r.key });
  let u: MultipartUpload;
  try {
    u = await uploadOf(r, bucket);
  } catch (e) {
    // Completed already (a client retrying because the first answer was lost): the same answer, as S3 gives.
    const done = toS3Error(e).code === 'NoSuchUpload' ? await findCompletedS3Upload(r.ctx.db, bucket.id, r.key, r.query.get('uploadId') ?? '') : null;
    if (!done) throw e;
    await readSmallBody(r, COMPLETION_BODY_MAX, { checksumHeadersDescribeObject: true });
    // The copies FILES_REST_UPLOAD_WAIT_COPIES asks for, as the first answer waited for them.
    const version = await findVersion(r.ctx.db, bucket.id, r.key, done.versionId);
    if (version) await waitForCopies(r.ctx, version);
    return sendCompletion(r, done.etag, done.versionId, await getVersionMetadata(r.ctx.db, done.versionId));
  }
  // If-None-Match: * / If-Match on the key, checked now and again when the merge commits.
  const precondition = await writePrecondition(r, bucket.id);
  // The checksum headers describe the object (its checksum made from the parts'), not this body.
  const checkAgainst = completionCheck(r, u.metadata?.[UPLOAD_CHECKSUM_KEY]);
  const list = parsePartList(await readSmallBody(r, COMPLETION_BODY_MAX, { checksumHeadersDescribeObject: true }));
  // A retry of a completion already under way (the first call's connection or server died) waits for it.
  const { upload: completing, etag, metadata } =
    u.state === 'completing' && u.metadata?.etag
      ? { upload: u, etag: u.metadata.etag, metadata: u.metadata }
      : await requestS3Completion(r.ctx, u, list, precondition, checkAgainst(list));
  const deadline = Date.now() + 600_000;
  let delay = 10;
  for (;;) {
    const st = await completionOutcome(r.ctx, completing);
    if (st.state === 'completed') return sendCompletion(r, etag, st.version.versionId, metadata);
    if (st.state === 'refused') throw st.refusal;
    if (st.state === 'failed' || st.state === 'gone' || Date.now() > deadline) {
      throw new S3Error('InternalError', st.state === 'failed' ? `Completing the upload failed: ${st.error}.` : 'The upload is still being completed; retry CompleteMultipartUpload later.');
    }
    await completionNews(u.id, delay);
    delay = Math.min(delay * 2, 100);
  }
}

function sendCompletion(r: S3Request, etag: string, versionId: string, metadata: Record<string, string> | null | undefined): void {
  const location = `${r.req.headers.host ? `http://${r.req.headers.host}` : ''}/${r.bucketName}/${r.key}`;
  const inner = el('Location', location) + el('Bucket', r.bucketName) + el('Key', r.key) + el('ETag', etag) + objectChecksumXml(metadata);
  sendXml(r, doc('CompleteMultipartUploadResult', inner), 200, {
    'x-amz-version-id': versionId,
  });
}

/** DELETE /bucket/key?uploadId */
export async function abortMultipartUploadOp(r: S3Request, bucket: Bucket): Promise<void> {
  const u = await uploadOf(r, bucket);
  await authorize(r, 'multipart-delete', { type: 'multipart', bucketId: bucket.id, id: u.id });
  await abortUpload(r.ctx, u.id, { checkLock: true });
  sendEmpty(r, 204);
}

/** GET /bucket/key?uploadId */
export async function listPartsOp(r: S3Request, bucket: Bucket): Promise<void> {
  const u = await uploadOf(r, bucket);
  await authorize(r, 'multipart-read', { type: 'multipart', bucketId: bucket.id, id: u.id });
  const marker = intParam(r, 'part-number-marker', 0, 0, S3_MAX_PART_NUMBER);
  const max = intParam(r, 'max-parts', 1000, 0, 2147483647);
  const limit = Math.min(max, 1000);
  const parts = await listS3Parts(r.ctx.db, u, marker, limit + 1);
  const truncated = parts.length > limit;
  const page = parts.slice(0, limit);
  const next = page.length ? page[page.length - 1]!.partNumber : marker;
  const inner =
    el('Bucket', r.bucketName) + el('Key', r.key) + el('UploadId', u.id) +
    el('PartNumberMarker', marker) + el('NextPartNumberMarker', next) + el('MaxParts', limit) + el('IsTruncated', truncated) +
    el('StorageClass', 'STANDARD') + declarationXml(declarationOf(u)) +
    page.map((p) => `<Part>${el('PartNumber', p.partNumber)}${el('LastModified', isoDate(p.updated))}${el('ETag', md5Etag(p.checksum))}${el('Size', p.size)}${partChecksumXml(p.clientChecksum)}</Part>`).join('');
  sendXml(r, doc('ListPartsResult', inner));
}

/** GET /bucket?uploads */
export async function listMultipartUploadsOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-listmultiparts', { type: 'bucket', bucketId: bucket.id });
  const prefix = r.query.get('prefix') ?? '';
  const delimiter = r.query.get('delimiter') ?? '';
  const keyMarker = r.query.get('key-marker') ?? '';
  const uploadIdMarker = r.query.get('upload-id-marker') ?? '';
  const limit = Math.min(intParam(r, 'max-uploads', 1000, 0, 2147483647), 1000);
  const url = r.query.get('encoding-type')?.toLowerCase() === 'url';
  if (r.query.has('encoding-type') && !url) throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request');
  const enc = url ? s3UrlEncode : (s: string) => s;
  const entries = await listS3Uploads(r.ctx.db, bucket.id, { prefix, delimiter, keyMarker, uploadIdMarker: keyMarker ? uploadIdMarker : '', limit: limit + 1 });
  const truncated = entries.length > limit;
  const page = entries.slice(0, limit);
  const last = page[page.length - 1];
  let next = '';
  if (truncated && last) {
    next = last.kind === 'upload' ? el('NextKeyMarker', enc(last.upload.key)) + el('NextUploadIdMarker', last.upload.id) : el('NextKeyMarker', enc(last.prefix)) + el('NextUploadIdMarker', '');
  }
  const inner =
    el('Bucket', r.bucketName) + el('KeyMarker', enc(keyMarker)) + el('UploadIdMarker', uploadIdMarker) + next +
    el('Prefix', enc(prefix)) + (delimiter ? el('Delimiter', enc(delimiter)) : '') + el('MaxUploads', limit) +
    (url ? el('EncodingType', 'url') : '') + el('IsTruncated', truncated) +
    page.map((e) => (e.kind === 'upload' ? `<Upload>${el('Key', enc(e.upload.key))}${el('UploadId', e.upload.id)}${el('StorageClass', 'STANDARD')}${el('Initiated', isoDate(e.upload.created))}${declarationXml(declarationOf(e.upload))}</Upload>` : '')).join('') +
    page.map((e) => (e.kind === 'prefix' ? `<CommonPrefixes>${el('Prefix', enc(e.prefix))}</CommonPrefixes>` : '')).join('');
  sendXml(r, doc('ListMultipartUploadsResult', inner));
}
