/** The S3 door's object operations: PutObject, GetObject, HeadObject, DeleteObject. */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { isAppError } from '../errors.js';
import type { Bucket, ObjectVersion } from '../domain/models.js';
import { findHeadWithMetadata, findVersion, getVersionMetadata, putObject } from '../domain/objects.js';
import type { Precondition } from '../domain/preconditions.js';
import { S3_ETAG_KEY, S3_INTERNAL_KEYS, S3_MAX_PART_NUMBER, s3PartRange } from '../domain/s3-uploads.js';
import { watchBody } from '../http/body-watch.js';
import { parseRange } from '../http/download.js';
import { openContent, readFailed, type ServableFile } from '../domain/reads.js';
import { pumpFile, VerifyingStream } from '../http/file-pump.js';
import { S3Error } from './errors.js';
import { openPayload } from './payload.js';
import { readChecksumHeaders } from './multipart-checksums.js';
import { authorize, header, sendEmpty, versionIdOf, type S3Request } from './request.js';
import { toS3Error } from './error-map.js';
import { taggingCountHeader, taggingHeader } from './tagging.js';

/** Headers stored with a version as given, and returned on GET/HEAD. */
const STORED_HEADERS = ['content-type', 'content-disposition', 'content-encoding', 'content-language', 'cache-control', 'expires'];
/** S3's limit on the user metadata (x-amz-meta-*) of an object, in bytes. */
const MAX_USER_METADATA = 2048;
/** GetObject's response-* query overrides and the header each sets. */
const RESPONSE_OVERRIDES: Record<string, string> = {
  'response-content-type': 'content-type',
  'response-content-language': 'content-language',
  'response-expires': 'expires',
  'response-cache-control': 'cache-control',
  'response-content-disposition': 'content-disposition',
  'response-content-encoding': 'content-encoding',
};

/** The plain MD5 ETag of a version's file (`"hex"`), from the stored `md5:hex` checksum. */
export function etagOf(v: Pick<ObjectVersion, 'file'>): string {
  const c = v.file?.checksum ?? '';
  return `"${c.startsWith('md5:') ? c.slice(4) : c}"`;
}

/** The ETag S3 gives a version: the multipart `"<hex>-N"` stored with it, else the plain MD5's. */
export function s3EtagOf(version: ObjectVersion, metadata: Record<string, string> | null | undefined): string {
  return metadata?.[S3_ETAG_KEY] ?? etagOf(version);
}

function httpDate(micros: number): string {
  return new Date(Math.floor(micros / 1000)).toUTCString();
}

/** The metadata a PUT stores: the standard headers as given and x-amz-meta-*. */
export function metadataOf(r: S3Request): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of STORED_HEADERS) {
    let v = header(r, name);
    if (v === undefined) continue;
    if (name === 'content-encoding') {
      // aws-chunked is the framing of this request, not an encoding of the object: it goes, and the
      // rest stays as given (spaces included).
      const items = v.split(',');
      if (items.some((s) => s.trim().toLowerCase() === 'aws-chunked')) {
        v = items.filter((s) => s.trim().toLowerCase() !== 'aws-chunked').join(',').trim();
      }
      if (v.trim() === '') continue;
    }
    out[name] = v;
  }
  let userBytes = 0;
  for (const name of r.headers.keys()) {
    if (!name.startsWith('x-amz-meta-')) continue;
    const v = header(r, name)!;
    userBytes += name.length - 'x-amz-meta-'.length + Buffer.byteLength(v);
    out[name] = v;
  }
  // In the query too, as S3 and MinIO read them: presigners hoist x-amz-meta-* there (the AWS SDK v3's
  // getSignedUrl, boto 2's generate_url), where the signature covers them. A header of the same name wins.
  for (const [rawName, v] of r.query) {
    const name = rawName.toLowerCase();
    if (!name.startsWith('x-amz-meta-') || name in out) continue;
    userBytes += name.length - 'x-amz-meta-'.length + Buffer.byteLength(v);
    out[name] = v;
  }
  if (userBytes > MAX_USER_METADATA) throw new S3Error('InvalidArgument', `Your metadata headers exceed the maximum allowed metadata size (${MAX_USER_METADATA} bytes).`);
  return out;
}

/**
 * If-Match / If-None-Match of a write (PutObject, CopyObject, CompleteMultipartUpload), as the
 * domain's precondition, which checks it against the head again inside the commit. If-None-Match
 * takes `*` (create only) and, as HTTP and Ceph's RGW do (AWS answers NotImplemented), a list of
 * ETags the current object must not have. If-Match with no current object (none, or a delete
 * marker) is NoSuchKey, as S3 answers. A tag that is the head's S3 ETag (a multipart object's
 * `"<hex>-N"` included) becomes the domain's form of the head's checksum (`"md5:<hex>"`), so the
 * commit compares with the head it then finds.
 */
export async function writePrecondition(r: S3Request, bucketId: string): Promise<Precondition | undefined> {
  const ifNoneMatch = header(r, 'if-none-match');
  const ifMatch = header(r, 'if-match');
  if (ifNoneMatch === undefined && ifMatch === undefined) return undefined;
  const p: { ifMatch?: Precondition['ifMatch']; ifNoneMatch?: Precondition['ifNoneMatch'] } = {};
  const tagsOf = (list: string | undefined) => list?.split(',').map((t) => t.trim().replace(/^W\//, '').replace(/^"|"$/g, '').toLowerCase());
  const noneTags = tagsOf(ifNoneMatch);
  const matchTags = tagsOf(ifMatch);
  // The head is needed to read a tag list (If-None-Match: * alone needs none).
  const head = matchTags || (noneTags && !noneTags.includes('*')) ? await findHeadWithMetadata(r.ctx.db, bucketId, r.key) : null;
  const live = head?.version.file ? head : null;
  /** The domain's form of the given tags: the head's checksum for the one naming the head's S3 ETag. */
  const domainTags = (tags: string[]): string[] => {
    const current = live ? s3EtagOf(live.version, live.metadata).replace(/^"|"$/g, '').toLowerCase() : null;
    return tags.map((tag) => (tag === current ? `"${live!.version.file!.checksum ?? ''}"` : `"md5:${tag}"`));
  };
  if (noneTags) p.ifNoneMatch = noneTags.includes('*') ? '*' : domainTags(noneTags);
  if (matchTags) {
    if (!live) throw new S3Error('NoSuchKey');
    p.ifMatch = matchTags.includes('*') ? '*' : domainTags(matchTags);
  }
  return p;
}

export async function putObjectOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id, key: r.key });
  const metadata = metadataOf(r);
  const tags = taggingHeader(r);
  const precondition = await writePrecondition(r, bucket.id);
  const payload = await openPayload(r);
  // The same cut as the REST door's: a client gone mid-body, or silent for FILES_REST_BODY_IDLE_TIMEOUT.
  const watch = watchBody(r.req, r.ctx.config.bodyIdleTimeout, r.log);
  let version: ObjectVersion;
  try {
    version = await putObject(r.ctx, {
      bucketId: bucket.id,
      bucket,
      key: r.key,
      source: payload.source,
      through: payload.through,
      observers: payload.observers,
      declaredSize: payload.declaredSize,
      contentType: header(r, 'content-type'),
      expectedDigests: payload.expectedDigests,
      signal: watch.signal,
      precondition,
      ...(tags ? { tags } : {}),
      verify: async () => {
        await payload.verify();
        Object.assign(metadata, payload.checksums);
      },
      metadata,
    });
  } catch (e) {
    // A stalled body: RequestTimeout, whatever the cut made of the pipe.
    if (isAppError(watch.signal.reason, 'UPLOAD_TIMEOUT')) throw watch.signal.reason;
    // A framing or signature fault of the body is what the client must hear, not its consequence.
    const failure = payload.failure();
    if (failure) throw failure;
    if (isAppError(e, 'CHECKSUM_MISMATCH') && e.params.header === 'Content-MD5') throw new S3Error('BadDigest', 'The Content-MD5 you specified did not match what we received.');
    throw e;
  } finally {
    watch.done();
  }
  const headers: Record<string, string> = { etag: etagOf(version), 'x-amz-version-id': version.versionId };
  for (const [k, v] of Object.entries(payload.checksums)) headers[k] = v;
  if (Object.keys(payload.checksums).length > 0) headers['x-amz-checksum-type'] = 'FULL_OBJECT';
  sendEmpty(r, 200, headers);
}

/** GetObject's `partNumber` (1 to 10000), or null; it cannot be combined with a Range. */
function partNumberOf(r: S3Request): number | null {
  const raw = r.query.get('partNumber');
  if (raw === null) return null;
  if (!/^[0-9]{1,5}$/.test(raw) || Number(raw) < 1 || Number(raw) > S3_MAX_PART_NUMBER) {
    throw new S3Error('InvalidArgument', `Part number must be an integer between 1 and ${S3_MAX_PART_NUMBER}, inclusive`, { ArgumentName: 'partNumber', ArgumentValue: raw });
  }
  if (header(r, 'range') !== undefined) throw new S3Error('InvalidRequest', 'Cannot specify both Range header and partNumber query parameter.');
  return Number(raw);
}

/** Whether an If-Match / If-None-Match list (`*`, quoted or bare tags, weak ones too) names `etag` (quoted). */
export function etagMatches(list: string, etag: string): boolean {
  return list.split(',').some((t) => {
    const tag = t.trim().replace(/^W\//, '');
    return tag === '*' || tag === etag || `"${tag}"` === etag;
  });
}

/** An HTTP date in whole seconds, or null when absent or not a date. */
export function dateSeconds(text: string | undefined): number | null {
  if (text === undefined) return null;
  const t = Date.parse(text);
  return Number.isNaN(t) ? null : Math.floor(t / 1000);
}

/**
 * The version a read names (`versionId`, else the head) and its stored metadata, once the request
 * may read it: NoSuchKey / NoSuchVersion, and a delete marker as S3 answers it (NoSuchKey with
 * `x-amz-delete-marker` for the head, MethodNotAllowed by version id). `early` runs once the request
 * is authorised, before the lookup (a parameter check that answers before it).
 */
export async function versionToRead<T = undefined>(
  r: S3Request,
  bucket: Pick<Bucket, 'id'>,
  prefetchedHead?: { version: ObjectVersion; metadata: Record<string, string> | null } | null,
  early?: () => T,
): Promise<{ version: ObjectVersion; meta: Record<string, string>; checked: T | undefined }> {
  const versionId = versionIdOf(r);
  await authorize(r, versionId !== null ? 'object-read-version' : 'object-read', { type: 'object', bucketId: bucket.id, key: r.key, ...(versionId ? { id: versionId } : {}) });
  const checked = early?.();
  let version: ObjectVersion;
  let meta: Record<string, string>;
  if (versionId !== null) {
    const v = await findVersion(r.ctx.db, bucket.id, r.key, versionId);
    if (!v) throw new S3Error('NoSuchVersion');
    if (!v.file) throw withHeaders(new S3Error('MethodNotAllowed', 'The specified method is not allowed against a delete marker.'), { 'x-amz-delete-marker': 'true', 'x-amz-version-id': v.versionId, 'last-modified': httpDate(v.created) });
    version = v;
    meta = (await getVersionMetadata(r.ctx.db, version.versionId)) ?? {};
  } else {
    const head = prefetchedHead !== undefined ? prefetchedHead : await findHeadWithMetadata(r.ctx.db, bucket.id, r.key);
    if (!head) throw new S3Error('NoSuchKey');
    if (!head.version.file) throw withHeaders(new S3Error('NoSuchKey'), { 'x-amz-delete-marker': 'true', 'x-amz-version-id': head.version.versionId });
    version = head.version;
    meta = head.metadata ?? {};
  }
  return { version, meta, checked };
}

/** GetObject and HeadObject. */
export async function getObjectOp(
  r: S3Request,
  bucket: Pick<Bucket, 'id'>,
  /** The head and its metadata when the caller read them with the bucket (null: the key has no versions). */
  prefetchedHead?: { version: ObjectVersion; metadata: Record<string, string> | null } | null,
): Promise<void> {
  const { version, meta, checked: partNumber = null } = await versionToRead(r, bucket, prefetchedHead, () => partNumberOf(r));
  const file = version.file! as ServableFile;
  if (!file.readable || !file.uri) throw new S3Error('ServiceUnavailable', 'File storage is offline.');
  if (file.lastCheck === false && !r.ctx.config.serveCorruptedFiles) throw new S3Error('InternalError', 'The stored file failed its last integrity check and is not served.');
  // A multipart upload's object has S3's multipart ETag, stored with it at completion.
  const etag = s3EtagOf(version, meta);
  const lastModified = Math.floor(version.created / 1_000_000);
  const headers: Record<string, string> = {
    etag,
    'last-modified': httpDate(version.created),
    'accept-ranges': 'bytes',
    'x-amz-version-id': version.versionId,
    'content-type': meta['content-type'] ?? version.mimetype ?? 'application/octet-stream',
    'x-content-type-options': 'nosniff',
    ...taggingCountHeader(version.tags),
  };
  for (const [k, v] of Object.entries(meta)) {
    if (k === 'content-type' || S3_INTERNAL_KEYS.has(k) || k.startsWith('x-amz-checksum-')) continue;
    headers[k] = v;
  }
  for (const [param, name] of Object.entries(RESPONSE_OVERRIDES)) {
    const v = r.query.get(param);
    if (v !== null) headers[name] = v;
  }

  // Conditions, as S3 applies them: If-Match before If-Unmodified-Since, If-None-Match before If-Modified-Since.
  const ifMatch = header(r, 'if-match');
  const ifNoneMatch = header(r, 'if-none-match');
  if (ifMatch !== undefined) {
    if (!etagMatches(ifMatch, etag)) throw withHeaders(new S3Error('PreconditionFailed'), {});
  } else {
    const ius = dateSeconds(header(r, 'if-unmodified-since'));
    if (ius !== null && lastModified > ius) throw new S3Error('PreconditionFailed');
  }
  const notModified = ifNoneMatch !== undefined ? etagMatches(ifNoneMatch, etag) : (() => {
    const ims = dateSeconds(header(r, 'if-modified-since'));
    return ims !== null && lastModified <= ims;
  })();
  if (notModified) {
    r.res.writeHead(304, { etag, 'last-modified': headers['last-modified']!, 'x-amz-version-id': version.versionId });
    r.res.end();
    return;
  }

  let range: { start: number; end: number } | null = null;
  const rangeHeader = header(r, 'range');
  if (partNumber !== null) {
    // One part of the object: its bytes, as a range (206), and the object's part count.
    const part = s3PartRange(meta, file.size, partNumber);
    if (part.kind === 'none') throw withHeaders(new S3Error('InvalidPartNumber', undefined, { PartNumberRequested: String(partNumber), ActualPartCount: String(part.count) }), { 'x-amz-mp-parts-count': String(part.count) });
    if (part.kind === 'unknown') {
      throw new S3Error('NotImplemented', 'This object was completed by a multipart upload before files-rest recorded part sizes: its parts cannot be read one by one.');
    }
    if (part.kind === 'part') {
      range = { start: part.start, end: part.end };
      if (part.count !== null) headers['x-amz-mp-parts-count'] = String(part.count);
    }
  } else if (rangeHeader !== undefined) {
    const parsed = parseRange(rangeHeader, file.size);
    if (parsed === 'unsatisfiable') throw withHeaders(new S3Error('InvalidRange', undefined, { RangeRequested: rangeHeader, ActualObjectSize: String(file.size) }), { 'content-range': `bytes */${file.size}` });
    // A Range that is no byte range (`bytes=abc`, `bytes=5-2`) is ignored, as S3 does: 200 and the whole object.
    if (parsed !== 'ignore' && parsed !== 'invalid') range = parsed;
  }
  const length = range ? range.end - range.start + 1 : file.size;
  headers['content-length'] = String(length);
  if (range) headers['content-range'] = `bytes ${range.start}-${range.end}/${file.size}`;
  const status = range ? 206 : 200;
  // Checksums describe the whole object, or one part of a multipart object: none for another range
  // (S3 does the same). Part 1 of a single upload is the whole object.
  if (header(r, 'x-amz-checksum-mode')?.toUpperCase() === 'ENABLED') {
    const onePartOfMany = partNumber !== null && headers['x-amz-mp-parts-count'] !== undefined;
    if (onePartOfMany) Object.assign(headers, readChecksumHeaders(meta, partNumber));
    else if (!range || partNumber !== null) Object.assign(headers, readChecksumHeaders(meta));
  }
  if (r.method === 'HEAD') {
    r.res.writeHead(status, headers as OutgoingHttpHeaders);
    r.res.end();
    return;
  }
  // The bytes as the REST door reads them (reads.ts): from the first copy that can be read (another
  // one when a copy is lost or damaged), a small object in one read, a large one pumped through two
  // recycled buffers. A missing file is InternalError, an offline store ServiceUnavailable (error-map.ts).
  const content = await openContent(r.ctx, file as ServableFile, range);
  const res = r.res;
  if (content.kind === 'reader') {
    const { reader } = content;
    try {
      res.writeHead(status, headers as OutgoingHttpHeaders);
    } catch (e) {
      await reader.close();
      throw e;
    }
    res.once('finish', () => r.ctx.signals.send('file-downloaded', { obj: version, bytes: length }));
    pumpFile(reader, res, content.range, undefined, content.checksum)
      .catch(async (err: unknown) => {
        if (!res.destroyed) {
          r.log.error({ err, fileId: file.id, uri: content.copy.uri }, 'S3 download broken off');
          // A copy found short or wrong is recorded before the client sees the break: its next request gets a good copy.
          await readFailed(r.ctx, file, content.copy, err);
        }
        res.destroy();
      })
      .finally(() => reader.close());
    return;
  }
  res.writeHead(status, headers as OutgoingHttpHeaders);
  if (content.kind !== 'stream') {
    res.once('finish', () => r.ctx.signals.send('file-downloaded', { obj: version, bytes: content.kind === 'empty' ? 0 : length }));
    res.end(content.kind === 'buffer' ? content.data : undefined);
    return;
  }
  let body: Readable = content.stream;
  if (content.checksum) {
    const { copy } = content;
    const verifying = new VerifyingStream(content.checksum, (e) => readFailed(r.ctx, file, copy, e));
    body.on('error', (e) => verifying.destroy(e));
    body = body.pipe(verifying);
  }
  res.once('finish', () => r.ctx.signals.send('file-downloaded', { obj: version, bytes: length }));
  body.on('error', (err) => {
    r.log.error({ err, fileId: file.id }, 'S3 download broken off');
    res.destroy();
  });
  res.on('close', () => body.destroy());
  body.pipe(res);
}

/** DeleteObject: a new delete marker, or with versionId the removal of that version. */
/** An S3 error carrying extra response headers (x-amz-delete-marker on a NoSuchKey). */
export function withHeaders(err: S3Error, headers: Record<string, string>): S3Error {
  (err as S3Error & { headers?: Record<string, string> }).headers = headers;
  return err;
}

/** The extra headers of an error made by {@link withHeaders}. */
export function headersOf(err: unknown): Record<string, string> {
  return (err as { headers?: Record<string, string> })?.headers ?? {};
}

export { toS3Error };
