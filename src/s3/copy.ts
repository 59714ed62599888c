/**
 * CopyObject (PUT with `x-amz-copy-source`): a new version of the destination key made from a
 * version of the source, through the domain's copy (shared file instance within one location,
 * streamed bytes across locations). Metadata and tags are the source's (`COPY`, the default) or the
 * request's (`REPLACE`); the `x-amz-copy-source-if-*` conditions are checked against the source.
 */
import { copyObject } from '../domain/copy.js';
import { chooseMimetype } from '../domain/mimetype.js';
import type { Bucket, ObjectVersion } from '../domain/models.js';
import { findHead, findVersion, getVersionMetadata } from '../domain/objects.js';
import { S3_INTERNAL_KEYS } from '../domain/s3-uploads.js';
import { contentStream, openContent, servableFile } from '../domain/reads.js';
import { CHECKSUM_ALGORITHMS, checksumHeaderName, createChecksumHasher, parseChecksumAlgorithm, type ChecksumAlgorithm } from './checksums.js';
import { S3Error } from './errors.js';
import { resolveBucket } from './names.js';
import { dateSeconds, etagMatches, etagOf, metadataOf, s3EtagOf, writePrecondition } from './objects.js';
import { authorize, header, sendXml, type S3Request } from './request.js';
import { taggingHeader } from './tagging.js';
import { doc, el } from './xml.js';
import { parseCopySource } from './copy-source.js';

function directive(r: S3Request, name: string): 'COPY' | 'REPLACE' {
  const v = header(r, name)?.trim().toUpperCase() ?? 'COPY';
  if (v !== 'COPY' && v !== 'REPLACE') throw new S3Error('InvalidArgument', `Unknown ${name}: ${v}.`);
  return v;
}

/**
 * The `x-amz-copy-source-if-*` conditions, as S3 combines them: a matching if-match wins over a
 * failing if-unmodified-since, a failing if-none-match over a passing if-modified-since.
 */
function checkSourceConditions(r: S3Request, source: ObjectVersion, etag: string): void {
  const lastModified = Math.floor(source.created / 1_000_000);
  const ifMatch = header(r, 'x-amz-copy-source-if-match');
  const ifNoneMatch = header(r, 'x-amz-copy-source-if-none-match');
  if (ifMatch !== undefined) {
    if (!etagMatches(ifMatch, etag)) throw new S3Error('PreconditionFailed');
  } else {
    const ius = dateSeconds(header(r, 'x-amz-copy-source-if-unmodified-since'));
    if (ius !== null && lastModified > ius) throw new S3Error('PreconditionFailed');
  }
  if (ifNoneMatch !== undefined) {
    if (etagMatches(ifNoneMatch, etag)) throw new S3Error('PreconditionFailed');
  } else {
    const ims = dateSeconds(header(r, 'x-amz-copy-source-if-modified-since'));
    if (ims !== null && lastModified <= ims) throw new S3Error('PreconditionFailed');
  }
}

/**
 * `x-amz-checksum-algorithm` on a copy: the copy gets that algorithm's checksum of its bytes, as S3
 * computes it. The source's own checksum of that algorithm is taken when it describes the whole
 * object; otherwise the source's bytes are read and hashed. Null when the request asks for none.
 */
async function requestedChecksum(
  r: S3Request,
  source: ObjectVersion,
  metadata: Record<string, string>,
): Promise<{ algorithm: ChecksumAlgorithm; header: string; value: string } | null> {
  const text = header(r, 'x-amz-checksum-algorithm');
  if (text === undefined) return null;
  const algorithm = parseChecksumAlgorithm(text.trim());
  if (!algorithm) throw new S3Error('InvalidRequest', `Checksum algorithm ${text} is not supported (supported: ${CHECKSUM_ALGORITHMS.join(', ')}).`);
  const name = checksumHeaderName(algorithm);
  const kept = metadata['x-amz-checksum-type'] !== 'COMPOSITE' ? metadata[name] : undefined;
  if (kept !== undefined) return { algorithm, header: name, value: kept };
  const hasher = await createChecksumHasher(algorithm);
  const file = servableFile(r.ctx, source);
  const content = await openContent(r.ctx, file, null);
  if (content.kind !== 'empty') {
    for await (const chunk of contentStream(r.ctx, file, content)) hasher.update(chunk as Buffer);
  }
  return { algorithm, header: name, value: hasher.digest() };
}

export async function copyObjectOp(r: S3Request, bucket: Bucket): Promise<void> {
  const src = parseCopySource(header(r, 'x-amz-copy-source')!);
  const metaDirective = directive(r, 'x-amz-metadata-directive');
  const tagDirective = directive(r, 'x-amz-tagging-directive');
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id, key: r.key });
  const srcBucket = await resolveBucket(r.ctx.db, src.bucketName);
  if (!srcBucket) throw new S3Error('NoSuchBucket', undefined, { BucketName: src.bucketName });
  await authorize(r, src.versionId !== null ? 'object-read-version' : 'object-read', { type: 'object', bucketId: srcBucket.id, key: src.key, ...(src.versionId ? { id: src.versionId } : {}) });

  let source: ObjectVersion;
  if (src.versionId !== null) {
    const v = await findVersion(r.ctx.db, srcBucket.id, src.key, src.versionId);
    if (!v) throw new S3Error('NoSuchVersion');
    if (!v.file) throw new S3Error('InvalidRequest', 'The source of a copy request may not specifically refer to a delete marker by version id.');
    source = v;
  } else {
    const head = await findHead(r.ctx.db, srcBucket.id, src.key);
    if (!head || !head.file) throw new S3Error('NoSuchKey');
    source = head;
  }
  const sourceMetadata = (await getVersionMetadata(r.ctx.db, source.versionId)) ?? {};
  // The source's ETag as GET gives it: S3's multipart ETag for an object completed by a multipart upload.
  checkSourceConditions(r, source, s3EtagOf(source, sourceMetadata));
  // If-None-Match: * / If-Match on the destination key (not the source's x-amz-copy-source-if-*).
  const precondition = await writePrecondition(r, bucket.id);

  // Naming a storage class is a change S3 accepts (CopyObject onto itself is how a class is changed:
  // rclone settier); the door stores every class it accepts as STANDARD.
  const changesClass = r.headers.has('x-amz-storage-class');
  if (srcBucket.id === bucket.id && src.key === r.key && source.isHead && metaDirective === 'COPY' && tagDirective === 'COPY' && !changesClass) {
    throw new S3Error(
      'InvalidRequest',
      "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.",
    );
  }
  let metadata: Record<string, string>;
  let mimetype: string;
  if (metaDirective === 'REPLACE') {
    metadata = metadataOf(r);
    mimetype = chooseMimetype(r.key, header(r, 'content-type'));
  } else {
    // A copy is a new single-part object, as in S3: its ETag is its MD5, so the source's multipart
    // ETag, part size and upload id stay behind.
    // A composite checksum (made from the source's parts) does not describe a single-part copy either.
    const composite = sourceMetadata['x-amz-checksum-type'] === 'COMPOSITE';
    metadata = Object.fromEntries(Object.entries(sourceMetadata).filter(([k]) => !S3_INTERNAL_KEYS.has(k) && !(composite && k.startsWith('x-amz-checksum-'))));
    mimetype = source.mimetype ?? chooseMimetype(r.key, undefined);
  }
  const tags = tagDirective === 'REPLACE' ? (taggingHeader(r) ?? {}) : source.tags;
  const checksum = await requestedChecksum(r, source, metadata);
  if (checksum) {
    for (const k of Object.keys(metadata)) if (k.startsWith('x-amz-checksum-')) delete metadata[k];
    metadata[checksum.header] = checksum.value;
    metadata['x-amz-checksum-type'] = 'FULL_OBJECT';
  }

  const abort = new AbortController();
  const onClose = () => abort.abort();
  r.res.once('close', onClose);
  let version: ObjectVersion;
  try {
    version = await copyObject(r.ctx, { source, bucketId: bucket.id, key: r.key, mimetype, tags, metadata, signal: abort.signal, precondition });
  } finally {
    r.res.off('close', onClose);
  }
  const checksumXml = checksum ? el(`Checksum${checksum.algorithm}`, checksum.value) + el('ChecksumType', 'FULL_OBJECT') : '';
  const body = doc('CopyObjectResult', el('LastModified', new Date(Math.floor(version.created / 1000)).toISOString()) + el('ETag', etagOf(version)) + checksumXml);
  sendXml(r, body, 200, { 'x-amz-version-id': version.versionId, 'x-amz-copy-source-version-id': source.versionId });
}
