import fs, { constants } from 'node:fs';
import { mkdir, open, readdir, rename, rmdir, stat, unlink, type FileHandle } from 'node:fs/promises';
import { hostname } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Writable, type Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { isNoSpaceErrno, readExactly, StorageError, type ByteRange, type FileReader, type PartWrite, type StorageBackend, type StoredObjectInfo, type WriteOptions } from '../backend.js';
import { HashThreadDigests } from './running-digests.js';

export interface FsBackendOptions {
  splitLength: number;
  dimensions: number;
  /** Read buffer size: 1 MiB streams about three times faster than Node's 64 KiB default. */
  readHighWaterMark?: number;
}

const TMP_SUFFIX = '.tmp';
const COALESCE = 1024 * 1024;
/** Bytes between the background flushes of a large upload (PositionalWriter). */
const FLUSH_EVERY = 32 * 1024 * 1024;

/**
 * Who writes a temporary file: a short hash of the host name and the process id are part of its
 * name (`data.<random>.<host>-<pid>.tmp`), so that a later start on the same host can prove a
 * leftover abandoned (its process is gone) without touching the files of another API process
 * sharing the directory.
 */
const HOST_TAG = createHash('sha256').update(hostname()).digest('hex').slice(0, 8);
const TMP_OWNER = /\.([0-9a-f]{8})-(\d+)\.tmp$/;

/** A temporary file left by an interrupted upload can be removed once this old, whoever wrote it. */
export const TEMP_MAX_AGE_MS = 24 * 3600 * 1000;

/** The process that wrote a temporary file, when its name says (files of older versions do not). */
export function temporaryOwner(path: string): { host: string; pid: number } | null {
  const m = TMP_OWNER.exec(path);
  return m ? { host: m[1]!, pid: Number(m[2]) } : null;
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A temporary file nobody will finish: older than TEMP_MAX_AGE_MS, or written on this host by a
 * process that is gone (by this very process id before this process started: a container restarted
 * with the same pid).
 */
export function isAbandonedTemporary(path: string, modifiedMs: number, now = Date.now(), startedMs = now - process.uptime() * 1000): boolean {
  if (!path.endsWith(TMP_SUFFIX)) return false;
  if (now - modifiedMs > TEMP_MAX_AGE_MS) return true;
  const owner = temporaryOwner(path);
  if (!owner || owner.host !== HOST_TAG) return false;
  if (owner.pid === process.pid) return modifiedMs < startedMs;
  return !processAlive(owner.pid);
}

/** ENOSPC and EDQUOT become StorageError('full'); everything else passes unchanged. */
function noSpace(e: unknown, what: string): unknown {
  return isNoSpaceErrno(e) ? new StorageError('full', `${what}: ${(e as Error).message}`, { cause: e }) : e;
}

function toPath(uri: string): string {
  return uri.startsWith('file://') ? fileURLToPath(uri) : uri;
}

function isNotFound(e: unknown): boolean {
  return (e as NodeJS.ErrnoException)?.code === 'ENOENT';
}

function openFailure(path: string, e: Error): StorageError {
  return isNotFound(e)
    ? new StorageError('missing', `no file at ${path}`, { cause: e })
    : new StorageError('unavailable', `cannot open ${path}: ${e.message}`, { cause: e });
}

async function fsyncDir(dir: string): Promise<void> {
  const h = await open(dir, constants.O_RDONLY);
  try {
    await h.sync();
  } finally {
    await h.close();
  }
}

/**
 * A writable that gathers the chunks of a request body (16–64 KiB each) and writes them with one
 * `writev` per megabyte at explicit positions: one syscall per megabyte, and no copy and no buffer of
 * its own (a per-upload megabyte buffer made the garbage collector a fifth of a small-upload server's CPU).
 */
class PositionalWriter extends Writable {
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  written = 0;
  /** Bytes written since the last background flush started. */
  #unflushed = 0;
  /** The background fdatasync in flight, if any; its failure fails the write. */
  #flushing: Promise<void> | null = null;
  #flushError: unknown = null;
  constructor(private readonly handle: FileHandle, private position: number) {
    super({ highWaterMark: COALESCE });
  }
  /**
   * Every FLUSH_EVERY bytes, an fdatasync on libuv's thread pool while the transfer goes on: the
   * kernel writes the file out as it grows, so the fsync before the upload is acknowledged finds
   * little left to write (without it a 1 GiB upload ended with a whole gigabyte of page cache to
   * write back). Durability still rests on that final fsync; these only move work earlier.
   */
  #flushInBackground(bytes: number): void {
    this.#unflushed += bytes;
    if (this.#unflushed < FLUSH_EVERY || this.#flushing) return;
    this.#unflushed = 0;
    this.#flushing = this.handle.datasync().then(
      () => { this.#flushing = null; },
      (e: unknown) => { this.#flushing = null; this.#flushError ??= e; },
    );
  }
  /** Waits for a background flush in flight; throws what it failed with. */
  async settleFlush(): Promise<void> {
    if (this.#flushing) await this.#flushing;
    if (this.#flushError) throw this.#flushError;
  }
  async #flushPending(): Promise<void> {
    if (this.#flushError) throw this.#flushError;
    if (this.#pendingBytes === 0) return;
    let bufs = this.#pending;
    let left = this.#pendingBytes;
    this.#pending = [];
    this.#pendingBytes = 0;
    while (left > 0) {
      const { bytesWritten } = await this.handle.writev(bufs, this.position);
      this.position += bytesWritten;
      left -= bytesWritten;
      this.#flushInBackground(bytesWritten);
      if (left > 0) bufs = dropBytes(bufs, bytesWritten);
    }
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (e?: Error | null) => void): void {
    this.written += chunk.length;
    this.#pending.push(chunk);
    this.#pendingBytes += chunk.length;
    if (this.#pendingBytes < COALESCE) return cb();
    this.#flushPending().then(() => cb(), cb);
  }
  override _writev(chunks: Array<{ chunk: Buffer }>, cb: (e?: Error | null) => void): void {
    for (const { chunk } of chunks) {
      this.written += chunk.length;
      this.#pending.push(chunk);
      this.#pendingBytes += chunk.length;
    }
    if (this.#pendingBytes < COALESCE) return cb();
    this.#flushPending().then(() => cb(), cb);
  }
  override _final(cb: (e?: Error | null) => void): void {
    this.#flushPending().then(() => this.settleFlush()).then(() => cb(), cb);
  }
  override _destroy(err: Error | null, cb: (e?: Error | null) => void): void {
    // The file handle is closed by the owner after this: let a flush in flight end first.
    const flushing = this.#flushing;
    if (!flushing) return cb(err);
    flushing.then(() => cb(err), () => cb(err));
  }
}

/** The buffers after the first `n` bytes (what a short writev left unwritten). */
function dropBytes(bufs: Buffer[], n: number): Buffer[] {
  let i = 0;
  while (n >= bufs[i]!.length) n -= bufs[i++]!.length;
  return [bufs[i]!.subarray(n), ...bufs.slice(i + 1)];
}

/**
 * Local file-system storage. A file instance lives at
 * `<location>/<split>/<split>/…/<rest of the id>/data`, so a key never becomes a path.
 */
export class FsBackend implements StorageBackend {
  readonly name = 'fs';
  /** Parts are written in place into one local file: completion's digest is kept running as they land. */
  readonly runningDigests = new HashThreadDigests(toPath);
  readonly #readHwm: number;
  /** Temporary files of `save`s in flight, and those saves. */
  readonly #temporaries = new Set<string>();
  readonly #saving = new Set<Promise<unknown>>();
  constructor(private readonly opts: FsBackendOptions) {
    this.#readHwm = opts.readHighWaterMark ?? COALESCE;
  }

  handles(uri: string): boolean {
    return uri.startsWith('/') || uri.startsWith('file://') || uri.startsWith('.') || !/^[a-z][a-z0-9+.-]*:/i.test(uri);
  }

  normalizeLocationUri(uri: string): string {
    return resolve(toPath(uri));
  }

  makeUri(locationUri: string, fileId: string): string {
    const { splitLength: s, dimensions: d } = this.opts;
    const base = toPath(locationUri);
    const parts: string[] = [];
    for (let i = 0; i < d; i++) parts.push(fileId.slice(i * s, (i + 1) * s));
    parts.push(fileId.slice(d * s));
    return join(base, ...parts, 'data');
  }

  async initialize(uri: string, size: number): Promise<string | null> {
    const path = toPath(uri);
    try {
      await mkdir(dirname(path), { recursive: true });
      const h = await open(path, 'w');
      try {
        await h.truncate(size);
        await h.sync();
      } finally {
        await h.close();
      }
      await fsyncDir(dirname(path));
    } catch (e) {
      if (isNoSpaceErrno(e)) await this.delete(uri).catch(() => {});
      throw noSpace(e, `cannot create ${path}`);
    }
    return null;
  }

  async open(uri: string, range?: ByteRange): Promise<Readable> {
    const path = toPath(uri);
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (e) {
      throw openFailure(path, e as Error);
    }
    // A read buffer no larger than what will be read: a 4 KiB download must not allocate a megabyte.
    const length = range ? range.end - range.start + 1 : (await handle.stat()).size;
    const highWaterMark = Math.max(16 * 1024, Math.min(this.#readHwm, length));
    // The stream owns the handle and closes it when it ends or is destroyed.
    return handle.createReadStream({ start: range?.start, end: range?.end, highWaterMark });
  }

  openReader(uri: string): Promise<FileReader> {
    const path = toPath(uri);
    // Callback calls, like readRange: no FileHandle bookkeeping per read.
    return new Promise((resolve, reject) => {
      fs.open(path, 'r', (err, fd) => {
        if (err) return reject(openFailure(path, err));
        let closed = false;
        resolve({
          read: (buffer, offset, length, position) =>
            new Promise((res, rej) =>
              fs.read(fd, buffer, offset, length, position, (e, n) =>
                e ? rej(new StorageError('unavailable', `cannot read ${path}: ${e.message}`, { cause: e })) : res(n),
              ),
            ),
          close: () =>
            new Promise<void>((res) => {
              if (closed) return res();
              closed = true;
              fs.close(fd, () => res());
            }),
        });
      });
    });
  }

  async readRange(uri: string, range: ByteRange): Promise<Buffer> {
    // Three trips to the thread pool: open, read, close.
    const reader = await this.openReader(uri);
    try {
      const buf = Buffer.allocUnsafe(range.end - range.start + 1);
      await readExactly(reader, buf, buf.length, range.start);
      return buf;
    } finally {
      await reader.close();
    }
  }

  save(uri: string, source: Readable, opts: WriteOptions = {}): Promise<{ size: number }> {
    const path = toPath(uri);
    const tmp = `${path}.${randomBytes(6).toString('hex')}.${HOST_TAG}-${process.pid}${TMP_SUFFIX}`;
    // Tracked until it settles, so that `close` can wait for its clean-up (an upload cut at shutdown).
    this.#temporaries.add(tmp);
    const saving = this.#save(path, tmp, source, opts).finally(() => {
      this.#temporaries.delete(tmp);
      this.#saving.delete(saving);
    });
    this.#saving.add(saving);
    return saving;
  }

  async #save(path: string, tmp: string, source: Readable, opts: WriteOptions): Promise<{ size: number }> {
    const dir = dirname(path);
    let handle: FileHandle | null = null;
    let ok = false;
    try {
      await mkdir(dir, { recursive: true });
      handle = await open(tmp, 'wx');
      const writer = new PositionalWriter(handle, 0);
      await pipeline(source, writer, { signal: opts.signal });
      await handle.sync();
      await handle.close();
      await rename(tmp, path);
      await fsyncDir(dir);
      ok = true;
      return { size: writer.written };
    } catch (e) {
      throw noSpace(e, `cannot store ${path}`);
    } finally {
      if (!ok) {
        await handle?.close().catch(() => {});
        await unlink(tmp).catch(() => {});
        await this.#removeEmptyDirs(dir);
      }
    }
  }

  /**
   * Waits (at most `waitMs`) for the uploads still being written to settle, then removes the
   * temporary files of those that did not: nothing this process started is left behind at exit.
   */
  async close(waitMs = 5000): Promise<void> {
    if (this.#saving.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((r) => (timer = setTimeout(r, waitMs)));
      await Promise.race([Promise.allSettled([...this.#saving]), timeout]);
      clearTimeout(timer);
    }
    for (const tmp of this.#temporaries) {
      try {
        fs.unlinkSync(tmp);
      } catch {
        /* already gone */
      }
    }
    this.#temporaries.clear();
    await this.runningDigests.close();
  }

  /**
   * Removes the temporary files under a location that can be proven abandoned (see
   * isAbandonedTemporary); those of uploads in flight, here or in another process, stay.
   */
  async removeAbandonedTemporaries(locationUri: string, opts: { signal?: AbortSignal } = {}): Promise<string[]> {
    const removed: string[] = [];
    for await (const f of this.list(locationUri)) {
      if (opts.signal?.aborted) break;
      if (!isAbandonedTemporary(f.uri, f.modified) || this.#temporaries.has(f.uri)) continue;
      try {
        await unlink(f.uri);
        removed.push(f.uri);
        await this.#removeEmptyDirs(dirname(f.uri));
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
    }
    return removed;
  }

  async update(uri: string, source: Readable, part: PartWrite): Promise<{ size: number; etag: string | null }> {
    const path = toPath(uri);
    let handle: FileHandle;
    try {
      handle = await open(path, 'r+');
    } catch (e) {
      if (isNotFound(e)) throw new StorageError('missing', `no file at ${path}`, { cause: e });
      throw e;
    }
    try {
      const writer = new PositionalWriter(handle, part.offset);
      await pipeline(source, writer, { signal: part.signal });
      await handle.sync();
      return { size: writer.written, etag: null };
    } catch (e) {
      throw noSpace(e, `cannot store part ${part.partNumber} of ${path}`);
    } finally {
      await handle.close().catch(() => {});
    }
  }

  async truncate(uri: string, size: number): Promise<void> {
    const path = toPath(uri);
    const h = await open(path, 'r+').catch((e: Error) => {
      throw openFailure(path, e);
    });
    try {
      if ((await h.stat()).size !== size) {
        await h.truncate(size);
        await h.sync();
      }
    } finally {
      await h.close().catch(() => {});
    }
  }

  async delete(uri: string): Promise<void> {
    const path = toPath(uri);
    try {
      await unlink(path);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    await this.#removeEmptyDirs(dirname(path));
  }

  async sendFile(uri: string) {
    return { kind: 'path' as const, path: toPath(uri) };
  }

  async stat(uri: string): Promise<{ size: number } | null> {
    try {
      const s = await stat(toPath(uri));
      return { size: s.size };
    } catch (e) {
      if (isNotFound(e)) return null;
      throw e;
    }
  }

  async *list(locationUri: string): AsyncIterable<StoredObjectInfo> {
    const base = toPath(locationUri);
    const walk = async function* (dir: string): AsyncIterable<StoredObjectInfo> {
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch (e) {
        if (isNotFound(e)) return;
        throw e;
      }
      for (const ent of entries) {
        const p = join(dir, ent.name);
        if (ent.isDirectory()) yield* walk(p);
        else if (ent.isFile()) {
          const s = await stat(p).catch(() => null);
          if (s) yield { uri: p, size: s.size, modified: s.mtimeMs };
        }
      }
    };
    yield* walk(base);
  }

  async ping(locationUri: string): Promise<void> {
    const base = toPath(locationUri);
    await mkdir(base, { recursive: true });
    await stat(base);
  }

  /** Removes now-empty directories between the file and its location base (stops at the first non-empty one). */
  async #removeEmptyDirs(dir: string): Promise<void> {
    const depth = this.opts.dimensions + 1;
    let d = dir;
    for (let i = 0; i < depth; i++) {
      try {
        await rmdir(d);
      } catch {
        return;
      }
      const parent = dirname(d);
      if (parent === d || relative(parent, d).includes(sep)) return;
      d = parent;
    }
  }
}

export function isTemporaryUri(uri: string): boolean {
  return uri.endsWith(TMP_SUFFIX);
}
