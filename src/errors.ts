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
  MISSING_SUBRESOURCE: { status: 400, message: 'POST on an object needs the ?uploads or ?uploadId query parameter.' },
  MISSING_QUERY_ARG: { status: 400, message: "Missing required query argument '{name}'." },
  INVALID_PART_SIZE: { status: 400, message: 'Invalid part size.' },
  INVALID_FILE_SIZE: { status: 400, message: 'Invalid file size.' },
  INVALID_PART_NUMBER: { status: 400, message: 'Invalid part number.' },
  NO_PART_DETECTED: { status: 400, message: 'No upload part detected in request.' },
  MULTIPART_MISSING_PARTS: { status: 400, message: 'Not all parts have been uploaded.' },
  INVALID_UPLOAD_REQUEST: { status: 400, message: 'Invalid upload request: {reason}.' },
  INVALID_JSON_BODY: { status: 400, message: 'Request body is not valid JSON.' },
  CLIENT_DISCONNECTED: { status: 400, message: 'The client closed the connection before the upload was complete.' },
  // 401 / 403 / 404 — who may see and do what
  UNAUTHORIZED: { status: 401, message: 'A valid credential is required (Authorization: Bearer <token>).' },
  FORBIDDEN: { status: 403, message: 'You do not have a permission for this action.' },
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
  BUCKET_DELETED: { status: 409, message: 'Bucket {id} is deleted.' },
  MULTIPART_EXPIRED: { status: 410, message: 'Multipart upload has expired; start a new one.' },
  MULTIPART_NOT_COMPLETED: { status: 409, message: 'Multipart upload is not completed.' },
  FILE_CORRUPTED: { status: 409, message: 'The stored file failed its last integrity check and is not served (FILES_REST_SERVE_CORRUPTED_FILES=0).' },
  TASK_NOT_FAILED: { status: 409, message: 'Task {id} has not failed; only failed tasks can be retried.' },
  // 412 / 413 / 416 / 422 — HTTP preconditions and validation
  PRECONDITION_FAILED: { status: 412, message: 'Precondition failed.' },
  REQUEST_TOO_LARGE: { status: 413, message: 'The request body is larger than the maximum request size ({limit} bytes).' },
  RANGE_NOT_SATISFIABLE: { status: 416, message: 'The requested range is not satisfiable.' },
  VALIDATION_ERROR: { status: 422, message: 'Validation error.' },
  // 429 — FILES_REST_RATE_LIMIT
  RATE_LIMITED: { status: 429, message: 'Too many requests; retry in {after}.' },
  // 5xx — the service's own troubles
  NO_DEFAULT_LOCATION: { status: 503, message: 'No default location is configured; an operator must create one (files-rest location create NAME URI --default).' },
  STORAGE_UNAVAILABLE: { status: 503, message: 'File storage is offline.' },
  DATABASE_UNAVAILABLE: { status: 503, message: 'The database is unavailable; try again shortly.' },
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
