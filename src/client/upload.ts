/**
 * The upload engine behind FilesClient.upload: one PUT for small content, parallel multipart parts
 * for large content, with per-part retries and backoff, resume of an upload the server still holds,
 * restart from scratch of one it dropped, progress, and an MD5 check against the server's checksum.
 * Browser-safe.
 */
import { ChecksumMismatchError, ConnectionError, FilesError, UploadRestartError, UploadStoppedError, isAbortError, isRetryable } from './errors.js';
import type { Md5Factory } from './md5.js';
import { anySignal, deferred, readChunks, sleep, type Deferred } from './streams.js';
import type { MultipartUpload, ObjectVersion, Part, UploadEvent, UploadOptions, UploadResult } from './types.js';
import type { FilesClient } from './client.js';

const MiB = 1024 * 1024;

/** Content that can be read at any offset (a Blob is one). */
export interface RandomAccessSource {
  readonly size: number;
  /** Bytes [start, end) as a Blob, sent as a request body. */
  slice(start: number, end: number): Blob;
  /** The whole content in order, for hashing; default: `slice(0, size).stream()`. */
  read?(): AsyncIterable<Uint8Array>;
  /** Media type for a single PUT. */
  readonly type?: string;
}

export type UploadSource = Blob | ArrayBuffer | ArrayBufferView | ReadableStream<Uint8Array> | RandomAccessSource;

/** Default part size: max(8 MiB, ceil(size / 9000)) rounded up to a whole MiB (stays under 10000 parts). */
export function choosePartSize(size: number): number {
  const want = Math.max(8 * MiB, Math.ceil(size / 9000));
  return Math.ceil(want / MiB) * MiB;
}

export const DEFAULT_PARALLEL = 4;

/** Part layout of the server: zero-based parts of partSize bytes, the last holding the rest. */
function partCount(size: number, partSize: number): number {
  return Math.max(Math.ceil(size / partSize), 1);
}

function partLength(size: number, partSize: number, n: number): number {
  return Math.min(partSize, size - n * partSize);
}

/** Where the parts' bodies and their MD5s come from. */
interface PartProvider {
  readonly size: number;
  /** Body of part n. Stream providers hand parts out in order: call it as soon as n is taken. */
  body(n: number): Promise<Blob>;
  /** Local hex MD5 of part n. */
  md5(n: number): Promise<string>;
  /** Local hex MD5 of the whole content. */
  whole(): Promise<string>;
  /** Part n is done: its memory may go. */
  release(n: number): void;
  /** Whether the parts can be read again (a restart from scratch needs that). */
  readonly restartable: boolean;
}

/** Random-access content: bodies are slices; one sequential pass hashes every part and the whole. */
class SlicedParts implements PartProvider {
  readonly restartable = true;
  private readonly parts: Deferred<string>[];
  private readonly all = deferred<string>();
  private started = false;

  constructor(
    private readonly src: RandomAccessSource,
    private readonly partSize: number,
    private readonly md5Factory: Md5Factory,
  ) {
    this.parts = Array.from({ length: partCount(src.size, partSize) }, () => deferred<string>());
  }

  get size(): number {
    return this.src.size;
  }

  /** Starts the hashing pass (once); it stops when the signal aborts. */
  start(signal: AbortSignal): void {
    if (this.started) return;
    this.started = true;
    this.hashAll(signal).catch((e) => {
      for (const d of this.parts) if (!d.settled) d.reject(e);
      if (!this.all.settled) this.all.reject(e);
    });
  }

  private async hashAll(signal: AbortSignal): Promise<void> {
    const { size } = this.src;
    const whole = await this.md5Factory();
    let n = 0;
    let part = await this.md5Factory();
    let inPart = 0;
    let seen = 0;
    const chunks = this.src.read ? this.src.read() : readChunks(this.src.slice(0, size).stream());
    for await (const chunk of chunks) {
      if (signal.aborted) throw signal.reason;
      whole.update(chunk);
      seen += chunk.byteLength;
      let off = 0;
      while (off < chunk.byteLength) {
        const want = partLength(size, this.partSize, n) - inPart;
        const take = Math.min(want, chunk.byteLength - off);
        part.update(off === 0 && take === chunk.byteLength ? chunk : chunk.subarray(off, off + take));
        off += take;
        inPart += take;
        if (inPart === partLength(size, this.partSize, n)) {
          this.parts[n]?.resolve(part.digest());
          n++;
          inPart = 0;
          if (n < this.parts.length) part = await this.md5Factory();
        }
      }
    }
    if (seen !== size) throw new Error(`The content changed while it was read: ${seen} bytes instead of ${size}.`);
    if (size === 0) this.parts[0]?.resolve(part.digest());
    this.all.resolve(whole.digest());
  }

  body(n: number): Promise<Blob> {
    const start = n * this.partSize;
    return Promise.resolve(this.src.slice(start, start + partLength(this.src.size, this.partSize, n)));
  }

  md5(n: number): Promise<string> {
    return this.parts[n]!.promise;
  }

  whole(): Promise<string> {
    return this.all.promise;
  }

  release(): void {}
}

/** A ReadableStream of known size: parts are read in order into memory, at most `parallel` at once. */
class StreamedParts implements PartProvider {
  readonly restartable = false;
  private readonly reader: AsyncGenerator<Uint8Array, void, undefined>;
  private leftover: Uint8Array | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private nextPart = 0;
  private readonly bodies = new Map<number, Promise<Blob>>();
  private readonly parts: Deferred<string>[];
  private readonly all = deferred<string>();
  private wholeHasher: Promise<import('./md5.js').Md5Hasher>;

  constructor(
    stream: ReadableStream<Uint8Array>,
    readonly size: number,
    private readonly partSize: number,
    private readonly md5Factory: Md5Factory,
    /** Bytes already read from the stream (a first chunk read to decide single PUT or multipart). */
    head: Uint8Array | null,
  ) {
    this.reader = readChunks(stream);
    this.leftover = head && head.byteLength > 0 ? head : null;
    this.parts = Array.from({ length: partCount(size, partSize) }, () => deferred<string>());
    this.wholeHasher = md5Factory();
  }

  body(n: number): Promise<Blob> {
    const have = this.bodies.get(n);
    if (have) return have;
    if (n !== this.nextPart) return Promise.reject(new Error(`stream parts must be read in order (wanted ${n}, next is ${this.nextPart})`));
    this.nextPart++;
    const p = this.chain.then(() => this.readPart(n));
    this.chain = p.catch(() => undefined);
    p.catch((e) => {
      for (const d of this.parts) if (!d.settled) d.reject(e);
      if (!this.all.settled) this.all.reject(e);
    });
    this.bodies.set(n, p);
    return p;
  }

  private async readPart(n: number): Promise<Blob> {
    const len = partLength(this.size, this.partSize, n);
    const buf = new Uint8Array(len);
    let filled = 0;
    while (filled < len) {
      let chunk = this.leftover;
      this.leftover = null;
      if (!chunk) {
        const r = await this.reader.next();
        if (r.done) throw new Error(`The stream ended after ${n * this.partSize + filled} bytes; ${this.size} were announced.`);
        chunk = r.value;
      }
      const take = Math.min(len - filled, chunk.byteLength);
      buf.set(chunk.subarray(0, take), filled);
      filled += take;
      if (take < chunk.byteLength) this.leftover = chunk.subarray(take);
    }
    const h = await this.md5Factory();
    h.update(buf);
    this.parts[n]!.resolve(h.digest());
    const whole = await this.wholeHasher;
    whole.update(buf);
    if (n === this.parts.length - 1) {
      if (this.leftover || !(await this.reader.next()).done) throw new Error(`The stream is longer than the ${this.size} bytes announced.`);
      this.all.resolve(whole.digest());
    }
    return new Blob([buf as unknown as BlobPart]);
  }

  md5(n: number): Promise<string> {
    return this.parts[n]!.promise;
  }

  whole(): Promise<string> {
    return this.all.promise;
  }

  release(n: number): void {
    this.bodies.delete(n);
  }
}

function isRandomAccess(s: unknown): s is RandomAccessSource {
  return typeof s === 'object' && s !== null && typeof (s as RandomAccessSource).slice === 'function' && typeof (s as RandomAccessSource).size === 'number';
}

async function readUpTo(stream: ReadableStream<Uint8Array>, max: number): Promise<{ head: Uint8Array; rest: ReadableStream<Uint8Array> | null }> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  while (n <= max) {
    const { done, value } = await reader.read();
    if (done) {
      reader.releaseLock();
      return { head: concat(chunks, n), rest: null };
    }
    chunks.push(value);
    n += value.byteLength;
  }
  reader.releaseLock();
  return { head: concat(chunks, n), rest: stream };
}

function concat(chunks: Uint8Array[], n: number): Uint8Array {
  const out = new Uint8Array(n);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.byteLength;
  }
  return out;
}

function describe(e: unknown): string {
  if (e instanceof FilesError) return `${e.status} ${e.message}`;
  if (e instanceof ConnectionError) return e.message;
  const err = e as Error & { cause?: { code?: string; message?: string } };
  const cause = err?.cause ? ` (${err.cause.code ?? err.cause.message ?? String(err.cause)})` : '';
  return `${err?.message ?? String(e)}${cause}`;
}

/** Internal: the server no longer has the upload. */
class UploadGone extends UploadRestartError {}

interface Stats {
  partsSent: number;
  partsSkipped: number;
  retries: number;
  restarts: number;
  resumed: boolean;
}

export async function runUpload(
  client: FilesClient,
  bucketId: string,
  key: string,
  source: UploadSource,
  opts: UploadOptions = {},
): Promise<UploadResult> {
  const outer = anySignal([opts.signal]);
  try {
    return await upload(client, bucketId, key, source, opts, outer.signal);
  } finally {
    // Stops background hashing whatever happened.
    outer.abort(new DOMException('upload finished', 'AbortError'));
    outer.dispose();
  }
}

async function upload(
  client: FilesClient,
  bucketId: string,
  key: string,
  source: UploadSource,
  opts: UploadOptions,
  signal: AbortSignal,
): Promise<UploadResult> {
  const emit = (e: UploadEvent) => opts.onEvent?.(e);
  let contentType = opts.contentType;

  // Normalise the source.
  let random: RandomAccessSource | null = null;
  let stream: { stream: ReadableStream<Uint8Array> | null; head: Uint8Array } | null = null;
  let size: number;
  if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) {
    size = opts.size ?? -1;
    const firstPart = opts.partSize ?? (size >= 0 ? choosePartSize(size) : 8 * MiB);
    if (size < 0 || size < firstPart) {
      // Unknown or small: read up to one part to see whether one PUT does.
      const { head, rest } = await readUpTo(source, firstPart);
      if (rest) {
        await rest.cancel().catch(() => undefined);
        throw new Error('upload: give opts.size to upload a ReadableStream larger than one part');
      }
      if (size >= 0 && head.byteLength !== size) throw new Error(`upload: the stream holds ${head.byteLength} bytes, opts.size says ${size}`);
      size = head.byteLength;
      random = new Blob([head as unknown as BlobPart]);
    } else {
      stream = { stream: source, head: new Uint8Array(0) };
    }
  } else if (source instanceof ArrayBuffer || ArrayBuffer.isView(source)) {
    const view = source instanceof ArrayBuffer ? new Uint8Array(source) : new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    random = new Blob([view as unknown as BlobPart]);
    size = view.byteLength;
  } else if (isRandomAccess(source)) {
    random = source;
    size = source.size;
    if (!contentType && source.type) contentType = source.type;
  } else {
    throw new TypeError('upload: the source must be a Blob, an ArrayBuffer, a typed array, a ReadableStream or a {size, slice} object');
  }
  if (opts.size !== undefined && opts.size !== size) throw new Error(`upload: the source holds ${size} bytes, opts.size says ${opts.size}`);

  const partSize = opts.partSize ?? choosePartSize(size);
  if (!Number.isSafeInteger(partSize) || partSize < 1) throw new RangeError('upload: partSize must be a positive integer');
  const stats: Stats = { partsSent: 0, partsSkipped: 0, retries: 0, restarts: 0, resumed: false };

  if (size < partSize) {
    return singlePut(client, bucketId, key, random!, size, partSize, contentType, opts, signal, stats);
  }

  const provider: PartProvider = random ? new SlicedParts(random, partSize, client.md5Factory) : new StreamedParts(stream!.stream!, size, partSize, client.md5Factory, stream!.head);
  if (provider instanceof SlicedParts) provider.start(signal);
  const parts = partCount(size, partSize);
  emit({ type: 'start', key, size, multipart: true, partSize, parts });
  const maxRestarts = opts.maxRestarts ?? 2;
  let resume = opts.resume ?? true;
  for (let attempt = 0; ; attempt++) {
    try {
      return await multipart(client, bucketId, key, provider, size, partSize, resume, opts, signal, stats);
    } catch (e) {
      if (!(e instanceof UploadGone)) throw e;
      if (opts.stopSignal?.aborted) throw new UploadStoppedError(key, null, 0, parts);
      if (!provider.restartable) throw new UploadRestartError(`${e.message}; a stream cannot be read again, so the upload cannot restart: upload ${key} again`, { cause: e });
      if (attempt >= maxRestarts) throw new UploadRestartError(`${e.message}; gave up after ${attempt} restart(s)`, { cause: e });
      stats.restarts++;
      resume = false;
      emit({ type: 'restart', key, uploadId: (e as UploadGone & { uploadId?: string }).uploadId ?? '', message: `${e.message}; restarting the upload of ${key} from scratch` });
    }
  }
}

async function backoff(
  e: unknown,
  attempt: number,
  opts: UploadOptions,
  signal: AbortSignal,
  stats: Stats,
  key: string,
  part: number | null,
): Promise<void> {
  const retries = opts.retries ?? 5;
  if (attempt >= retries) {
    if (e instanceof Error) e.message = `${part === null ? key : `${key} part ${part}`} failed after ${attempt + 1} attempts: ${e.message}`;
    throw e;
  }
  const base = opts.retryDelay ?? 500;
  const delayMs = Math.round(Math.min(15_000, base * 2 ** attempt) * (0.75 + Math.random() * 0.5));
  stats.retries++;
  opts.onEvent?.({
    type: 'retry',
    key,
    part,
    attempt: attempt + 1,
    delayMs,
    error: e,
    message: `${part === null ? key : `${key} part ${part}`} failed (${describe(e)}); retry ${attempt + 1}/${retries} in ${(delayMs / 1000).toFixed(1)} s`,
  });
  await sleep(delayMs, signal);
}

async function singlePut(
  client: FilesClient,
  bucketId: string,
  key: string,
  src: RandomAccessSource,
  size: number,
  partSize: number,
  contentType: string | undefined,
  opts: UploadOptions,
  signal: AbortSignal,
  stats: Stats,
): Promise<UploadResult> {
  opts.onEvent?.({ type: 'start', key, size, multipart: false, partSize, parts: 1 });
  const hasher = await client.md5Factory();
  for await (const chunk of src.read ? src.read() : readChunks(src.slice(0, size).stream())) {
    if (signal.aborted) throw signal.reason;
    hasher.update(chunk);
  }
  const md5 = hasher.digest();
  if (opts.stopSignal?.aborted) throw new UploadStoppedError(key, null, 0, 1);
  const body = src.slice(0, size);
  let object: ObjectVersion;
  for (let attempt = 0; ; attempt++) {
    let sent = 0;
    try {
      object = await client.putObject(bucketId, key, body, {
        signal,
        md5,
        ...(contentType ? { contentType } : {}),
        onBytes: (n) => {
          sent += n;
          opts.onProgress?.({ key, loaded: Math.min(sent, size), total: size, partsDone: 0, partsTotal: 1 });
        },
      });
      break;
    } catch (e) {
      if (signal.aborted || isAbortError(e) || !isRetryable(e)) throw signal.aborted ? (signal.reason ?? e) : e;
      opts.onProgress?.({ key, loaded: 0, total: size, partsDone: 0, partsTotal: 1 });
      await backoff(e, attempt, opts, signal, stats, key, null);
    }
  }
  stats.partsSent = 1;
  opts.onProgress?.({ key, loaded: size, total: size, partsDone: 1, partsTotal: 1 });
  verify(key, object, md5);
  return { object, md5, multipart: false, uploadId: null, partSize, partsTotal: 1, ...stats };
}

function verify(key: string, object: ObjectVersion, md5: string): void {
  if (object.checksum !== `md5:${md5}`) {
    throw new ChecksumMismatchError(
      `The server's checksum of ${key} (${object.checksum ?? 'none'}) does not match the local MD5 (md5:${md5}); version ${object.version_id} was stored`,
      object.checksum ?? '',
      `md5:${md5}`,
    );
  }
}

/** An in-progress upload of the same key, size and part size, with the parts the server holds. */
async function findResumable(
  client: FilesClient,
  bucketId: string,
  key: string,
  size: number,
  partSize: number,
  signal: AbortSignal,
): Promise<{ upload: MultipartUpload; parts: Part[] } | null> {
  let uploads: MultipartUpload[];
  try {
    uploads = await client.listUploads(bucketId, { signal, limit: 10000 });
  } catch (e) {
    if (e instanceof FilesError && (e.status === 403 || e.status === 404 || e.status === 401)) return null;
    throw e;
  }
  const candidates = uploads.filter((u) => u.key === key && u.size === size && u.part_size === partSize && !u.completed).reverse();
  for (const c of candidates) {
    try {
      const listed = await client.listParts(bucketId, key, c.id, { signal });
      if (listed.completed) continue;
      return { upload: listed, parts: listed.parts };
    } catch (e) {
      if (e instanceof FilesError && (e.status === 404 || e.status === 403)) continue;
      throw e;
    }
  }
  return null;
}

async function multipart(
  client: FilesClient,
  bucketId: string,
  key: string,
  provider: PartProvider,
  size: number,
  partSize: number,
  resume: boolean,
  opts: UploadOptions,
  outerSignal: AbortSignal,
  stats: Stats,
): Promise<UploadResult> {
  const count = partCount(size, partSize);
  const onServer = new Map<number, string>();
  let upload: MultipartUpload | null = null;
  if (resume) {
    const found = await findResumable(client, bucketId, key, size, partSize, outerSignal);
    if (found) {
      upload = found.upload;
      for (const p of found.parts) onServer.set(p.part_number, p.checksum);
      stats.resumed = true;
      opts.onEvent?.({
        type: 'resume',
        key,
        uploadId: upload.id,
        partsOnServer: onServer.size,
        message: `resuming upload ${upload.id} of ${key}: the server has ${onServer.size} of ${count} parts`,
      });
    }
  }
  const stop = opts.stopSignal;
  if (stop?.aborted) throw new UploadStoppedError(key, upload?.id ?? null, onServer.size, count);
  upload ??= await client.initiateMultipart(bucketId, key, size, partSize, { signal: outerSignal });
  const uploadId = upload.id;
  // Parts the server holds: those it had and those sent here.
  const held = new Set(onServer.keys());

  // Progress: bytes of finished parts plus bytes handed to connections of parts in flight.
  let confirmed = 0;
  let partsDone = 0;
  const inflight = new Map<number, number>();
  const report = () => {
    let loaded = confirmed;
    for (const v of inflight.values()) loaded += v;
    opts.onProgress?.({ key, loaded: Math.min(loaded, size), total: size, partsDone, partsTotal: count });
  };
  report();

  const gone = (why: string) => {
    const g = new UploadGone(
      `the server no longer has upload ${uploadId} of ${key} (${why}); a server aborts an upload when one of its parts fails ` +
        'unless it runs with FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE=0, and when it expires',
    );
    (g as UploadGone & { uploadId?: string }).uploadId = uploadId;
    return g;
  };

  /** After a failure: is the upload still there? false when the server dropped it. */
  const stillThere = async (signal: AbortSignal): Promise<boolean> => {
    try {
      await client.listParts(bucketId, key, uploadId, { signal });
      return true;
    } catch (e) {
      if (e instanceof FilesError && e.status === 404) return false;
      if (isAbortError(e)) throw e;
      return true; // cannot tell (network): retry and see
    }
  };

  const onFailure = async (e: unknown, n: number, attempt: number, signal: AbortSignal) => {
    if (signal.aborted) throw signal.reason ?? e;
    if (isAbortError(e) || stop?.aborted) throw e;
    if (e instanceof FilesError && (e.status === 404 || e.status === 410)) throw gone(`part ${n}: ${e.status} ${e.message}`);
    if (!isRetryable(e)) throw e;
    // Wait first: a server that aborts the upload on a failed part does so once it saw the failure.
    await backoff(e, attempt, opts, signal, stats, key, n);
    if (!(await stillThere(signal))) throw gone(`it dropped the upload after part ${n} failed: ${describe(e)}`);
  };

  const sendPart = async (n: number, signal: AbortSignal) => {
    const bodyP = provider.body(n);
    const len = partLength(size, partSize, n);
    const had = onServer.get(n);
    if (had !== undefined) {
      const local = await provider.md5(n);
      if (had === `md5:${local}`) {
        stats.partsSkipped++;
        confirmed += len;
        partsDone++;
        provider.release(n);
        report();
        return;
      }
    }
    const body = await bodyP;
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) throw signal.reason;
      inflight.set(n, 0);
      let part: Part;
      try {
        part = await client.uploadPart(bucketId, key, uploadId, n, body, {
          signal,
          onBytes: (b) => {
            inflight.set(n, (inflight.get(n) ?? 0) + b);
            report();
          },
        });
      } catch (e) {
        inflight.delete(n);
        report();
        await onFailure(e, n, attempt, signal);
        continue;
      }
      const local = await provider.md5(n);
      inflight.delete(n);
      if (part.checksum === `md5:${local}`) break;
      report();
      await onFailure(new ChecksumMismatchError(`part ${n} arrived as ${part.checksum}, sent md5:${local}`, part.checksum, `md5:${local}`), n, attempt, signal);
    }
    stats.partsSent++;
    held.add(n);
    confirmed += len;
    partsDone++;
    provider.release(n);
    report();
  };

  // A pool of `parallel` workers taking part numbers in order; the first failure stops the others,
  // the stop signal only keeps new parts from starting.
  const parallel = Math.max(1, Math.floor(opts.parallel ?? DEFAULT_PARALLEL));
  const pool = anySignal([outerSignal]);
  let failure: { e: unknown } | null = null;
  let next = 0;
  const worker = async () => {
    while (next < count && !pool.signal.aborted && !stop?.aborted) {
      const n = next++;
      try {
        await sendPart(n, pool.signal);
      } catch (e) {
        if (!failure) failure = { e };
        if (!stop?.aborted) pool.abort(e);
        return;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(parallel, count) }, worker));
  } finally {
    pool.dispose();
  }
  if (outerSignal.aborted) throw outerSignal.reason;
  if (stop?.aborted && partsDone < count) throw new UploadStoppedError(key, uploadId, held.size, count);
  if (failure) throw (failure as { e: unknown }).e;

  const md5 = await provider.whole();
  let done: MultipartUpload;
  try {
    done = await client.completeMultipart(bucketId, key, uploadId, { signal: outerSignal });
  } catch (e) {
    if (e instanceof FilesError && e.status === 404) throw gone(`${e.status} ${e.message}`);
    throw e;
  }
  const versionId = done.links.object_version ? new URL(done.links.object_version).searchParams.get('versionId') : null;
  if (!versionId) throw new FilesError(500, `Completion of ${key} did not name the new version.`, undefined, done);
  const object = await client.findVersion(bucketId, key, versionId, { signal: outerSignal });
  if (!object) throw new FilesError(404, `Version ${versionId} of ${key} is not in the bucket after completion.`);
  opts.onEvent?.({ type: 'complete', key, message: `completed upload ${uploadId} of ${key} as version ${versionId}` });
  verify(key, object, md5);
  return { object, md5, multipart: true, uploadId, partSize, partsTotal: count, ...stats };
}
