/**
 * The one table from the domain's refusals (src/errors.ts) to S3's error codes: every refusal the
 * S3 door passes on goes through `toS3Error`. A code missing here becomes InvalidRequest (a 4xx
 * refusal) or InternalError (a 5xx), never a silent success.
 */
import { isAppError, type ErrorCode } from '../errors.js';
import { isS3Error, S3Error, type S3ErrorCode } from './errors.js';

/** A domain code → the S3 code and, when the domain's message is not S3's, the message to give. */
const TABLE: Partial<Record<ErrorCode, [S3ErrorCode, string?]>> = {
  BUCKET_NOT_FOUND: ['NoSuchBucket'],
  BUCKET_DELETED: ['NoSuchBucket'],
  OBJECT_NOT_FOUND: ['NoSuchKey'],
  VERSION_IS_DELETE_MARKER: ['MethodNotAllowed', 'The specified method is not allowed against a delete marker.'],
  MAX_FILE_SIZE_EXCEEDED: ['EntityTooLarge', "Your proposed upload exceeds the bucket's maximum file size."],
  QUOTA_EXCEEDED: ['AccessDenied', 'Bucket quota exceeded: the upload would take the bucket over its quota.'],
  BUCKET_LOCKED: ['AccessDenied', 'Bucket is locked for modifications.'],
  KEY_TOO_LONG: ['KeyTooLongError'],
  INVALID_KEY: ['InvalidArgument'],
  CHECKSUM_MISMATCH: ['BadDigest'],
  FILE_SMALLER_THAN_EXPECTED: ['IncompleteBody'],
  FILE_LARGER_THAN_EXPECTED: ['InvalidRequest', 'The body is larger than its announced length.'],
  CLIENT_DISCONNECTED: ['IncompleteBody'],
  UPLOAD_TIMEOUT: ['RequestTimeout'],
  REQUEST_TIMEOUT: ['RequestTimeout'],
  PRECONDITION_FAILED: ['PreconditionFailed'],
  RANGE_NOT_SATISFIABLE: ['InvalidRange'],
  FILE_SHARED: ['InvalidRequest'],
  INVALID_TAGS: ['InvalidTag'],
  DUPLICATE_TAG: ['InvalidTag', 'Cannot provide multiple Tags with the same key.'],
  BUCKET_NAME_TAKEN: ['BucketAlreadyExists'],
  BUCKET_NOT_EMPTY: ['BucketNotEmpty'],
  INVALID_BUCKET_NAME: ['InvalidBucketName'],
  INVALID_CORS_CONFIGURATION: ['InvalidRequest'],
  INVALID_HEADER: ['InvalidArgument'],
  VALIDATION_ERROR: ['InvalidArgument'],
  FORBIDDEN: ['AccessDenied'],
  UNAUTHORIZED: ['AccessDenied'],
  MULTIPART_PART_IN_PROGRESS: ['InvalidRequest'],
  UPLOAD_NOT_FOUND: ['NoSuchUpload'],
  MULTIPART_ALREADY_COMPLETED: ['NoSuchUpload', 'The specified multipart upload is already being completed.'],
  MULTIPART_EXPIRED: ['NoSuchUpload', 'The specified multipart upload has expired.'],
  INVALID_PART: ['InvalidPart'],
  INVALID_PART_ORDER: ['InvalidPartOrder'],
  PART_TOO_SMALL: ['EntityTooSmall'],
  S3_PART_LAYOUT: ['InvalidArgument'],
  S3_PART_OVERLAP: ['InvalidArgument'],
  S3_PART_BEFORE_LAYOUT: ['ServiceUnavailable'],
  INVALID_PART_NUMBER: ['InvalidArgument', 'Part number must be an integer between 1 and 10000, inclusive.'],
  FILE_CORRUPTED: ['InternalError', 'The stored file failed its last integrity check and is not served.'],
  FILE_MISSING: ['InternalError', 'The stored file could not be read.'],
  STORAGE_FULL: ['ServiceUnavailable', 'The file storage is full; nothing was stored.'],
  STORAGE_UNAVAILABLE: ['ServiceUnavailable', 'File storage is offline.'],
  DATABASE_UNAVAILABLE: ['ServiceUnavailable', 'The database is unavailable; try again shortly.'],
  SHUTTING_DOWN: ['ServiceUnavailable', 'The server is shutting down; retry the request.'],
  NO_DEFAULT_LOCATION: ['ServiceUnavailable', 'No default location is configured.'],
  RATE_LIMITED: ['SlowDown'],
  SERVER_KEY_REQUIRED: ['ServiceUnavailable'],
  COPIES_NOT_MADE: ['ServiceUnavailable', 'The object was stored, but not every copy this server waits for (FILES_REST_UPLOAD_WAIT_COPIES) could be made; the worker makes the rest.'],
};

/** The S3 error for anything a handler threw. */
export function toS3Error(e: unknown): S3Error {
  if (isS3Error(e)) return e;
  if (isAppError(e)) {
    const hit = TABLE[e.code];
    if (hit) {
      const [code, message] = hit;
      if (e.code === 'CHECKSUM_MISMATCH' && e.params.header === 'x-amz-content-sha256') return new S3Error('XAmzContentSHA256Mismatch');
      // S3 names the part, its size and the minimum, as SDKs and tools print them.
      if (e.code === 'PART_TOO_SMALL' && e.params.size !== undefined) {
        const { partNumber, min, size, etag } = e.params;
        return new S3Error('EntityTooSmall', undefined, { ProposedSize: String(size), MinSizeAllowed: String(min), PartNumber: String(partNumber), ETag: String(etag) });
      }
      return new S3Error(code, message ?? (code === 'InvalidArgument' || code === 'InvalidRequest' || e.code === 'S3_PART_BEFORE_LAYOUT' ? e.message : undefined));
    }
    return new S3Error(e.status >= 500 ? 'InternalError' : 'InvalidRequest', e.status >= 500 ? undefined : e.message);
  }
  return new S3Error('InternalError');
}

/** The domain codes the table maps (for tests and the README). */
export const MAPPED_CODES = Object.keys(TABLE) as ErrorCode[];
