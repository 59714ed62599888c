import { StorageError } from '../backend.js';

/** What the SDK puts on a service error (S3ServiceException) or a transport error. */
interface SdkErrorShape {
  name?: string;
  Code?: string;
  code?: string;
  $metadata?: { httpStatusCode?: number };
}

function shape(e: unknown): SdkErrorShape {
  return (typeof e === 'object' && e !== null ? e : {}) as SdkErrorShape;
}

/** The S3 error code (`NoSuchKey`, `NoSuchUpload`…) or the error's name. */
export function s3ErrorCode(e: unknown): string | undefined {
  const s = shape(e);
  return s.Code ?? s.name;
}

export function httpStatus(e: unknown): number | undefined {
  return shape(e).$metadata?.httpStatusCode;
}

/**
 * The object (not the bucket) does not exist. HEAD answers carry no body, so a HEAD on a missing key
 * is only `NotFound` with status 404.
 */
export function isNoSuchKey(e: unknown): boolean {
  const code = s3ErrorCode(e);
  if (code === 'NoSuchBucket') return false;
  return code === 'NoSuchKey' || code === 'NotFound' || (httpStatus(e) === 404 && code !== 'NoSuchUpload');
}

export function isNoSuchUpload(e: unknown): boolean {
  return s3ErrorCode(e) === 'NoSuchUpload';
}

/**
 * Ceph RGW (16.2) answers a CompleteMultipartUpload of an upload that was aborted or completed with
 * 500 InternalError "This multipart completion is already in progress" (it cannot take the lock on the
 * upload's metadata, which is gone) where S3 says NoSuchUpload; the caller asks ListParts which it is.
 */
export function isCompletionInProgress(e: unknown): boolean {
  return httpStatus(e) === 500 && /multipart completion is already in progress/i.test((e as Error)?.message ?? '');
}

/**
 * The store has no room for the bytes: MinIO's XMinioStorageFull (and its bucket quota), the
 * QuotaExceeded of Ceph and others, EntityTooLarge (the sizes this service sends are within S3's
 * limits, so only a store-side quota gives it), or an HTTP 507 Insufficient Storage.
 */
const FULL_CODES = new Set(['XMinioStorageFull', 'XMinioAdminBucketQuotaExceeded', 'QuotaExceeded', 'EntityTooLarge', 'InsufficientStorage']);

export function isStorageFullError(e: unknown): boolean {
  return FULL_CODES.has(s3ErrorCode(e) ?? '') || httpStatus(e) === 507;
}

/** Wraps an SDK or network error into the storage error the domain understands. */
export function toStorageError(e: unknown, what: string): StorageError {
  if (e instanceof StorageError) return e;
  const code = s3ErrorCode(e) ?? 'Error';
  const status = httpStatus(e);
  const detail = `${code}${status ? ` (HTTP ${status})` : ''}: ${(e as Error)?.message ?? String(e)}`;
  if (isNoSuchKey(e)) return new StorageError('missing', `${what}: ${detail}`, { cause: e });
  if (isStorageFullError(e)) return new StorageError('full', `${what}: ${detail}`, { cause: e });
  return new StorageError('unavailable', `${what}: ${detail}`, { cause: e });
}
