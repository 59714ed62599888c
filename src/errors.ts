/**
 * The error catalogue: every refusal the service gives, with a stable code, its HTTP status and its
 * message. Domain code throws these; the HTTP layer renders them as `{"status", "message"}`.
 * A test checks that every code here is listed in the README's error table.
 */

export interface ErrorSpec {
  readonly status: number;
  readonly message: string;
}

export const ERRORS = {
  // 400 — the request is malformed or breaks a limit
  INVALID_KEY: { status: 400, message: 'Invalid object key: {reason}.' },
  KEY_TOO_LONG: { status: 400, message: 'Filename is too long.' },
  CONTENT_LENGTH_REQUIRED: { status: 400, message: 'A Content-Length header is required to upload a file.' },
  INVALID_HEADER: { status: 400, message: 'Invalid {header} header: {reason}.' },
  QUOTA_EXCEEDED: { status: 400, message: 'Bucket quota exceeded.' },
  MAX_FILE_SIZE_EXCEEDED: { status: 400, message: 'Maximum file size exceeded.' },
  FILE_SMALLER_THAN_EXPECTED: { status: 400, message: 'File is smaller than expected.' },
  FILE_LARGER_THAN_EXPECTED: { status: 400, message: 'File is larger than expected.' },
  CHECKSUM_MISMATCH: { status: 400, message: 'The {header} sent does not match the received content ({algorithm}).' },
  INVALID_TAGS: { status: 400, message: 'Too long/short tag key or tag value.' },
  DUPLICATE_TAG: { status: 400, message: 'Duplicate tag key.' },
  MISSING_SUBRESOURCE: { status: 400, message: 'POST on an object needs the ?uploads, ?uploadId or ?sign query parameter.' },
  MISSING_QUERY_ARG: { status: 400, message: "Missing required query argument '{name}'." },
  INVALID_PART_SIZE: { status: 400, message: 'Invalid part size: partSize must be from {min} to {max} bytes.' },
  INVALID_FILE_SIZE: { status: 400, message: 'Invalid file size: size must be from 1 to {max} bytes.' },
  INVALID_PART_NUMBER: { status: 400, message: 'Invalid part number: parts are numbered from 0 to {last}.' },
  PART_SIZE_MISMATCH: { status: 400, message: 'Invalid part size: part {partNumber} must be exactly {expected} bytes.' },
  INVALID_PART: { status: 400, message: 'One or more of the specified parts could not be found: part {partNumber} was not uploaded or its ETag differs.' },
  INVALID_PART_ORDER: { status: 400, message: 'The list of parts was not in ascending order.' },
  PART_TOO_SMALL: { status: 400, message: 'Part {partNumber} is smaller than the minimum part size ({min} bytes); only the last part may be smaller.' },
  S3_PART_LAYOUT: { status: 400, message: "Part {partNumber} ({size} bytes) does not fit the upload's layout: parts are numbered 1 to N and all but the last are {partSize} bytes, the size of part 1; the last one no larger." },
  S3_PART_OVERLAP: { status: 400, message: "Part {partNumber} ({size} bytes) would overlap part {other}: part n is kept at (n-1) × {partSize} bytes (the upload's part size), so a part larger than that must have no part after it within its reach." },
  S3_PART_BEFORE_LAYOUT: { status: 503, message: 'Part {partNumber} ({size} bytes) is smaller than a part other than the last may be, so it is the last part, and where it goes is known only once part 1 has arrived: send part 1, then this part again.' },
  NO_PART_DETECTED: { status: 400, message: 'No upload part detected in request.' },
  MULTIPART_MISSING_PARTS: { status: 400, message: 'Not all parts have been uploaded: part(s) {missing} missing (parts are numbered from 0 to {last}).' },
  INVALID_UPLOAD_REQUEST: { status: 400, message: 'Invalid upload request: {reason}.' },
  INVALID_JSON_BODY: { status: 400, message: 'Request body is not valid JSON.' },
  CLIENT_DISCONNECTED: { status: 400, message: 'The client closed the connection before the upload was complete.' },
  MALFORMED_REQUEST: { status: 400, message: 'The browser (or proxy) sent a request that this server could not understand.' },
  TUS_CHECKSUM_UNSUPPORTED: { status: 400, message: 'Unsupported Upload-Checksum algorithm {algorithm} (supported: md5, sha1, sha256).' },
  UPLOAD_TIMEOUT: { status: 408, message: 'No bytes of the upload arrived for {seconds} seconds (FILES_REST_BODY_IDLE_TIMEOUT); the upload was cut.' },
  // 401 / 403 / 404 — who may see and do what
  UNAUTHORIZED: { status: 401, message: 'A valid credential is required (Authorization: Bearer <token>).' },
  TOKEN_EXPIRED: { status: 401, message: 'The token has expired; ask for a new one.' },
  TOKEN_REVOKED: { status: 401, message: 'The token has been revoked; ask for a new one.' },
  FORBIDDEN: { status: 403, message: 'You do not have a permission for this action: it needs the {action} action.' },
  SIGNED_URL_INVALID: {
    status: 403,
    message: 'The signed URL is not valid: it was altered, used with another method or operation, or signed with a key the server no longer holds.',
  },
  SIGNED_URL_EXPIRED: { status: 403, message: 'The signed URL has expired; ask for a new one.' },
  SIGNED_URL_USED: { status: 403, message: 'The signed upload URL has already been used; ask for a new one.' },
  BUCKET_LOCKED: { status: 403, message: 'Bucket is locked for modifications.' },
  MULTIPART_ALREADY_COMPLETED: { status: 403, message: 'Multipart upload is already completed.' },
  NOT_FOUND: { status: 404, message: 'The requested URL was not found on the server.' },
  BUCKET_NOT_FOUND: { status: 404, message: 'Bucket does not exist.' },
  OBJECT_NOT_FOUND: { status: 404, message: 'Object does not exist.' },
  VERSION_IS_DELETE_MARKER: { status: 404, message: 'This version is a delete marker and has no content.' },
  UPLOAD_NOT_FOUND: { status: 404, message: 'uploadId does not exist.' },
  LOCATION_NOT_FOUND: { status: 404, message: 'Location {name} does not exist.' },
  TOKEN_NOT_FOUND: { status: 404, message: 'Token {id} does not exist.' },
  TASK_NOT_FOUND: { status: 404, message: 'Task {id} does not exist.' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'The method is not allowed for the requested URL.' },
  NOT_ACCEPTABLE: { status: 406, message: 'This resource is only available as application/json.' },
  // 409 — the request conflicts with the current state
  FILE_SHARED: { status: 409, message: 'The file of this version is shared with {count} other version(s) (snapshots); delete those first.' },
  LOCATION_EXISTS: { status: 409, message: 'Location {name} already exists.' },
  LOCATION_OWNED_ELSEWHERE: {
    status: 409,
    message:
      'The storage at {uri} belongs to another files-rest database ({owner}, named in {marker}): give this database another directory or prefix (FILES_REST_DATA_DIR for the default location), or set DATABASE_URL to the database that owns it.',
  },
  BUCKET_NAME_TAKEN: { status: 409, message: 'Bucket name {name} is taken by another bucket.' },
  INVALID_BUCKET_NAME: { status: 400, message: 'Invalid bucket name: {reason}.' },
  INVALID_CORS_CONFIGURATION: { status: 400, message: 'Invalid CORS configuration: {reason}.' },
  BUCKET_NOT_EMPTY: { status: 409, message: 'The bucket is not empty (it has versions or delete markers).' },
  ACCESS_KEY_NOT_FOUND: { status: 404, message: 'Access key {id} does not exist.' },
  SERVER_KEY_REQUIRED: {
    status: 503,
    message: 'S3 access keys and signed URLs need a server key: set FILES_REST_SERVER_KEY (base64 of 32 random bytes, e.g. `openssl rand -base64 32`).',
  },
  BUCKET_DELETED: { status: 409, message: 'Bucket {id} is deleted.' },
  RESUMABLE_EXPIRED: { status: 410, message: 'The resumable upload has expired; start a new one.' },
  MULTIPART_EXPIRED: { status: 410, message: 'Multipart upload has expired; start a new one.' },
  MULTIPART_NOT_COMPLETED: { status: 409, message: 'Multipart upload is not completed.' },
  FILE_CORRUPTED: { status: 409, message: 'The stored file failed its last integrity check and is not served (FILES_REST_SERVE_CORRUPTED_FILES=0).' },
  MULTIPART_PART_IN_PROGRESS: { status: 409, message: 'Part {part} is still being uploaded; complete the upload once it has finished.' },
  LOCATION_IN_USE: { status: 409, message: 'Location {name} cannot be removed: {reason}.' },
  TASK_NOT_FAILED: { status: 409, message: 'Task {id} has not failed; only failed tasks can be retried.' },
  UPLOAD_OFFSET_MISMATCH: { status: 409, message: 'Upload-Offset {given} does not match the offset of the upload, {offset}; ask HEAD and resume from there.' },
  // 408 / 412 / 413 / 416 / 417 / 422 — HTTP framing, preconditions and validation
  REQUEST_TIMEOUT: { status: 408, message: 'The request was not received in time.' },
  PRECONDITION_FAILED: { status: 412, message: 'Precondition failed: {reason}.' },
  REQUEST_TOO_LARGE: { status: 413, message: 'The request body is larger than the maximum request size ({limit} bytes).' },
  RANGE_NOT_SATISFIABLE: { status: 416, message: 'The requested range is not satisfiable.' },
  EXPECTATION_FAILED: { status: 417, message: 'Unsupported Expect header; only 100-continue is understood.' },
  VALIDATION_ERROR: { status: 422, message: 'Validation error.' },
  // tus (src/http/tus): the protocol's own statuses
  TUS_VERSION_UNSUPPORTED: { status: 412, message: 'Unsupported tus version {given}; this server speaks Tus-Resumable 1.0.0.' },
  UPLOAD_LENGTH_EXCEEDED: { status: 413, message: 'The upload would be longer than its Upload-Length ({length} bytes).' },
  TUS_CONTENT_TYPE: { status: 415, message: 'A tus PATCH must have Content-Type: application/offset+octet-stream.' },
  RESUMABLE_BUSY: { status: 423, message: 'Another request is writing to this upload; retry shortly.' },
  TUS_CHECKSUM_MISMATCH: { status: 460, message: 'Checksum Mismatch: the Upload-Checksum ({algorithm}) does not match the bytes of this request; they were discarded.' },
  RESUMABLE_LOCATION_UNSUPPORTED: { status: 501, message: "The bucket's storage location cannot take resumable uploads (tus needs a location whose backend writes in place: fs)." },
  // 429 — FILES_REST_RATE_LIMIT; 431 — headers beyond Node's limit
  RATE_LIMITED: { status: 429, message: 'Too many requests; retry in {after}.' },
  HEADERS_TOO_LARGE: { status: 431, message: 'The request headers are too large.' },
  // 5xx — the service's own troubles
  SHUTTING_DOWN: { status: 503, message: 'The server is shutting down; retry the request.' },
  NO_DEFAULT_LOCATION: { status: 503, message: 'No default location is configured; an operator must create one (files-rest location create NAME URI --default).' },
  STORAGE_UNAVAILABLE: { status: 503, message: 'File storage is offline.' },
  DATABASE_UNAVAILABLE: { status: 503, message: 'The database is unavailable; try again shortly.' },
  STORAGE_FULL: { status: 507, message: 'The file storage is full; an operator must free space or add storage. Nothing was stored.' },
  COPIES_NOT_MADE: { status: 503, message: 'The file was stored (version {version}) but only {made} of the {wanted} copies this server waits for could be made; the worker makes the rest.' },
  FILE_MISSING: { status: 500, message: 'The stored file could not be read.' },
  INTERNAL: { status: 500, message: 'Internal server error.' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export interface FieldError {
  field: string;
  message: string;
}

/** A refusal from the catalogue. `params` fill the `{name}` slots of the message. */
export class AppError extends Error {
  readonly status: number;
  readonly errors?: FieldError[];
  readonly headers?: Record<string, string>;

  constructor(
    readonly code: ErrorCode,
    readonly params: Record<string, string | number> = {},
    extra: { errors?: FieldError[]; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    const spec: ErrorSpec = ERRORS[code];
    super(spec.message.replace(/\{(\w+)\}/g, (_, k: string) => String(params[k] ?? `{${k}}`)), { cause: extra.cause });
    this.name = 'AppError';
    this.status = spec.status;
    if (extra.errors) this.errors = extra.errors;
    if (extra.headers) this.headers = extra.headers;
  }
}

export function isAppError(e: unknown, code?: ErrorCode): e is AppError {
  return e instanceof AppError && (code === undefined || e.code === code);
}

export function validationError(field: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', {}, { errors: [{ field, message }] });
}
