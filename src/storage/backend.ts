import type { Readable } from 'node:stream';

/** An inclusive byte range, as in HTTP `Range: bytes=start-end`. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface WriteOptions {
  signal?: AbortSignal;
}

/** Where one part of a multipart upload goes. */
export interface PartWrite extends WriteOptions {
  /** Zero-based part number. */
  partNumber: number;
  /** Byte offset of the part in the whole file (partNumber × part size). */
  offset: number;
  /** Exact size of this part. */
  size: number;
  /** What `initialize` returned for this file (e.g. an S3 multipart upload id), or null. */
  ref: string | null;
}

/** A stored part, as `update` reports it and `finalize` needs it back. */
export interface StoredPart {
  partNumber: number;
  /** Backend-specific tag of the part (S3 ETag); null when the backend needs none. */
  etag: string | null;
}

/** Where a web proxy can fetch a file from itself (X-Accel-Redirect). */
export type ProxyTarget = { kind: 'path'; path: string } | { kind: 'url'; url: string };

export interface StoredObjectInfo {
  uri: string;
  size: number;
  /** Last modification, milliseconds since the epoch. */
  modified: number;
}

/** Positional reads of one stored file (see `StorageBackend.openReader`). */
export interface FileReader {
  /** Reads up to `length` bytes at `position` into `buffer` at `offset`; resolves 0 at the end of the file. */
  read(buffer: Buffer, offset: number, length: number, position: number): Promise<number>;
  close(): Promise<void>;
}

/**
 * Running MD5s over ranges of stored files, extended in order off the main thread (a backend that
 * writes multipart parts in place into one readable file: fs). Each digest is named by the caller
 * (an upload id). A backend offers it as `runningDigests`; multipart completion then need not read
 * the whole file again.
 */
export interface RunningDigests {
  /**
   * Extends digest `id` with bytes [start, end) of the stored file `uri`; the first range starts at
   * 0 and each next one where the last ended. Rejects when they cannot all be read, when the digest
   * was lost or dropped, or when `start` does not continue it (never a digest of part of the file).
   */
  extend(id: string, uri: string, start: number, end: number): Promise<void>;
  /** The MD5 (hex) of everything `id` was extended with, or null when there is none (never extended, lost); forgets `id`. */
  digest(id: string): Promise<string | null>;
  /** Forgets digest `id`. */
  drop(id: string): void;
}

/**
 * A storage backend keeps the bytes of file instances. It knows nothing of HTTP, buckets or keys:
 * it is given URIs it generated itself (`makeUri`) and streams.
 *
 * Required: `makeUri`, `initialize`, `open`, `save`, `update`, `delete`.
 * Optional capabilities (callers test for them): `readRange`, `openReader`, `sendFile`, `runningDigests`, `copy`, `stat`,
 * `list`, `removeAbandonedTemporaries`, `close`.
 * Hashing is not the backend's job: the upload pipeline hashes bytes as they pass
 * (see `domain/receive.ts`), so every backend produces the same checksums.
 *
 * @example A backend module for FILES_REST_STORAGE_FACTORY=./my-backend.js
 * ```js
 * export default function factory(config) {
 *   return { name: 'mine', handles: (uri) => uri.startsWith('mine://'), makeUri, initialize, open, save, update, delete: remove };
 * }
 * ```
 */
export interface StorageBackend {
  readonly name: string;
  /** True when this backend stores files for a location or file URI like this one. */
  handles(uri: string): boolean;
  /** Normalises a location URI given by an operator (e.g. a relative path made absolute). */
  normalizeLocationUri(uri: string): string;
  /** A new, unique URI under the location's base for the file instance with this id. */
  makeUri(locationUri: string, fileId: string): string;
  /**
   * Prepares a file of exactly `size` bytes that `update` then fills part by part (multipart uploads).
   * Returns an opaque reference the caller stores and hands back (S3: the multipart upload id), or null.
   */
  initialize(uri: string, size: number, opts: { partSize: number }): Promise<string | null>;
  /** Reads the file, whole or one range. Rejects with StorageError('missing') when there is no file. */
  open(uri: string, range?: ByteRange): Promise<Readable>;
  /**
   * Writes a whole new file from `source`. Readers never see a partial file at `uri`: the bytes go to
   * a temporary name and are moved into place, durably, only once complete. On error nothing remains.
   */
  save(uri: string, source: Readable, opts?: WriteOptions): Promise<{ size: number }>;
  /** Writes one part (exactly the bytes of `source`) into an initialised file, durably. Re-writing a part replaces it. */
  update(uri: string, source: Readable, part: PartWrite): Promise<{ size: number; etag: string | null }>;
  /** Removes the file (and what only it needed, such as empty directories). Missing files are not an error. */
  delete(uri: string): Promise<void>;

  /**
   * Makes an initialised file whole once every part is written (S3: CompleteMultipartUpload). Backends
   * that write parts in place (fs) have nothing to do and leave this out.
   */
  finalize?(uri: string, ref: string | null, parts: StoredPart[]): Promise<void>;
  /**
   * Cuts an initialised file (parts written in place) to `size` bytes: an S3 door upload whose parts
   * reached further than the completed list. Backends without in-place parts leave this out.
   */
  truncate?(uri: string, size: number): Promise<void>;
  /** The least size of a part but the last that `finalize` accepts (S3: 5 MiB); absent when any size will do. */
  readonly minPartSize?: number;
  /** Drops an initialised file that will never be finalized (S3: AbortMultipartUpload). */
  abortInitialized?(uri: string, ref: string | null): Promise<void>;

  /**
   * Reads a range of a file into memory. Callers use it only for small reads (a few tens of KiB),
   * where a stream costs more than the bytes: a 4 KiB download through a stream took five trips to
   * the thread pool (open, stat, read, read, close) instead of three. Rejects like `open`.
   */
  readRange?(uri: string, range: ByteRange): Promise<Buffer>;
  /**
   * Opens a file for positional reads into buffers the caller owns and reuses. A download streams a
   * large file through two recycled buffers this way, instead of a fresh megabyte per read that the
   * garbage collector must free (a third of a 1 GiB download's CPU went to that). Rejects like `open`.
   */
  openReader?(uri: string): Promise<FileReader>;
  /**
   * Running MD5s over ranges of files as multipart parts land (see RunningDigests). Only for a backend
   * whose parts are written in place, readable as soon as `update` resolves, with no `finalize`.
   */
  readonly runningDigests?: RunningDigests;
  /**
   * Cuts an initialised file to `size` bytes. Offered only by a backend whose `update` writes in
   * place at any offset, readable at once and durable when it resolves (fs): resumable (tus) uploads
   * append to such a file and need nothing else; a location without it refuses them.
   */
  truncate?(uri: string, size: number): Promise<void>;
  /** Where a proxy can read the file from, for X-Accel-Redirect; absent when the backend cannot say. */
  sendFile?(uri: string): Promise<ProxyTarget>;
  /** Copies a stored file to a new URI of this backend without passing the bytes through Node. */
  copy?(srcUri: string, dstUri: string): Promise<void>;
  /** Size of the stored file, or null when it does not exist. */
  stat?(uri: string): Promise<{ size: number } | null>;
  /** Every stored file under a location, for reconciliation. Temporary leftovers are reported too. */
  list?(locationUri: string): AsyncIterable<StoredObjectInfo>;
  /** Checks that the storage is reachable (readiness). */
  ping?(locationUri: string): Promise<void>;
  /**
   * Removes the temporary files of interrupted writes under a location that can be proven abandoned
   * (their process is gone, or they are a day old); returns what it removed. Run at start-up.
   */
  removeAbandonedTemporaries?(locationUri: string, opts?: { signal?: AbortSignal }): Promise<string[]>;
  /** At shutdown: lets writes in flight settle and removes what they leave behind. */
  close?(): Promise<void>;
}

/** `full`: no space left (ENOSPC, EDQUOT, or the object store's equivalent); nothing was stored. */
export type StorageErrorKind = 'missing' | 'unavailable' | 'full';

export class StorageError extends Error {
  constructor(readonly kind: StorageErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StorageError';
  }
}

/** A stored file shorter than its record says (truncated): an 'unavailable' StorageError callers can tell apart. */
export class ShortReadError extends StorageError {
  constructor(message: string) {
    super('unavailable', message);
    this.name = 'ShortReadError';
  }
}

/**
 * Fills `buffer[0, length)` with the file's bytes from `position`: as many reads as that takes.
 * A file that ends first is an 'unavailable' StorageError (it is shorter than its record says).
 */
export async function readExactly(reader: FileReader, buffer: Buffer, length: number, position: number): Promise<void> {
  let got = 0;
  while (got < length) {
    const n = await reader.read(buffer, got, length - got, position + got);
    if (n === 0) throw new ShortReadError(`the stored file ended at byte ${position + got}, ${length - got} bytes short`);
    got += n;
  }
}

export function isStorageError(e: unknown, kind?: StorageErrorKind): e is StorageError {
  return e instanceof StorageError && (kind === undefined || e.kind === kind);
}

const FULL_ERRNOS = new Set(['ENOSPC', 'EDQUOT']);

/** True for an errno that says the file system (or the user's quota on it) has no space left. */
export function isNoSpaceErrno(e: unknown): boolean {
  return FULL_ERRNOS.has((e as NodeJS.ErrnoException)?.code ?? '');
}

/**
 * The storage refused bytes for lack of space: a StorageError of kind `full`, or an ENOSPC/EDQUOT
 * anywhere in the error's cause chain (a custom backend that does not wrap its errors).
 */
export function isStorageFull(e: unknown): boolean {
  for (let x: unknown = e, depth = 0; x && depth < 8; x = (x as { cause?: unknown }).cause, depth++) {
    if (isStorageError(x, 'full') || isNoSpaceErrno(x)) return true;
  }
  return false;
}
