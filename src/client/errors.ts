/** Errors of the files-rest client. Browser-safe: no Node-only imports. */

/** A refusal from the server: its HTTP status and the `message` of its `{"status", "message"}` body. */
export class FilesError extends Error {
  override readonly name: string = 'FilesError';
  constructor(
    /** HTTP status of the response. */
    readonly status: number,
    message: string,
    /** Field errors of a 422 answer, when the server gave them. */
    readonly errors?: { field: string; message: string }[],
    /** The parsed response body, when there was one. */
    readonly body?: unknown,
  ) {
    super(message);
  }
}

/** The content received or stored does not match the MD5 computed locally. */
export class ChecksumMismatchError extends Error {
  override readonly name: string = 'ChecksumMismatchError';
  constructor(
    message: string,
    /** `md5:<hex>` the server reported (or the download's header carried). */
    readonly expected: string,
    /** `md5:<hex>` computed locally. */
    readonly actual: string,
  ) {
    super(message);
  }
}

/**
 * A multipart upload that can no longer go on: the server dropped it (a failed part aborts the
 * whole upload unless the server runs with FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE=0, or it
 * expired). `upload()` restarts from scratch when it can; this is thrown when it cannot.
 */
export class UploadRestartError extends Error {
  override readonly name: string = 'UploadRestartError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** True for an error caused by an AbortSignal. */
export function isAbortError(e: unknown): boolean {
  return typeof e === 'object' && e !== null && ((e as Error).name === 'AbortError' || (e as Error).name === 'TimeoutError');
}

/**
 * Whether a failed request may succeed when sent again: network failures, 408, 429 and 5xx.
 * Refusals (other 4xx) and aborts are final.
 */
export function isRetryable(e: unknown): boolean {
  if (isAbortError(e)) return false;
  if (e instanceof FilesError) return e.status === 408 || e.status === 429 || e.status >= 500;
  if (e instanceof ChecksumMismatchError) return true;
  if (e instanceof UploadRestartError) return false;
  return true; // fetch's TypeError('fetch failed') and other transport errors
}
