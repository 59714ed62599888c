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

/**
 * An upload stopped by its `stopSignal`: the parts in flight were finished, no new one was started.
 * The server keeps the parts it holds, so upload() of the same content, key and part size resumes.
 */
export class UploadStoppedError extends Error {
  override readonly name: string = 'UploadStoppedError';
  constructor(
    readonly key: string,
    /** The multipart upload the server holds; null when nothing was stored (no multipart upload yet). */
    readonly uploadId: string | null,
    /** Parts the server holds, out of `partsTotal`. */
    readonly partsOnServer: number,
    readonly partsTotal: number,
  ) {
    super(
      uploadId
        ? `upload of ${key} stopped: the server holds ${partsOnServer} of ${partsTotal} parts of upload ${uploadId}; upload it again to resume`
        : `upload of ${key} stopped before anything was stored`,
    );
  }
}

/**
 * The server could not be reached, or the connection broke before an answer came: names the URL and
 * the cause (`could not reach http://h:8080/files/…: connect ECONNREFUSED 127.0.0.1:8080`). `cause`
 * is fetch's own error. Retryable.
 */
export class ConnectionError extends Error {
  override readonly name: string = 'ConnectionError';
  constructor(
    /** The request's method. */
    readonly method: string,
    /** The URL the request went to. */
    readonly url: string,
    cause: unknown,
  ) {
    super(connectionMessage(url, cause), { cause });
  }
}

// Failures before any byte went out: the server was not reached at all.
const CONNECT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT']);

function connectionMessage(url: string, e: unknown): string {
  // fetch rejects with TypeError('fetch failed') and the reason in `cause` (Node), or a bare
  // TypeError (browsers, which tell nothing more).
  const outer = e as Error & { cause?: unknown };
  const inner = (outer?.cause ?? outer) as (Error & { code?: string; errors?: unknown[] }) | undefined;
  // Several addresses tried (localhost: ::1 then 127.0.0.1): an AggregateError without a message.
  const parts = Array.isArray(inner?.errors) ? inner.errors.map((x) => (x as Error)?.message).filter(Boolean) : [];
  const detail = inner?.message || parts.join('; ') || inner?.code || String(inner ?? 'network error');
  const code = inner?.code ?? '';
  // A browser's bare TypeError says nothing more: most often, the server was not reached.
  const before = !outer?.cause || CONNECT_CODES.has(code) || /^(connect|getaddrinfo) /.test(detail);
  return `${before ? 'could not reach' : 'lost the connection to'} ${url}: ${detail.replace(/[\u0000-\u001f]/g, ' ')}`;
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
  if (e instanceof UploadRestartError || e instanceof UploadStoppedError) return false;
  return true; // fetch's TypeError('fetch failed') and other transport errors
}
