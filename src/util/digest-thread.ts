/**
 * A digest computed on another thread, for the digests a receipt computes besides MD5 (a signed S3
 * payload's SHA-256, a Content-SHA1 …): SHA-256 on the HTTP thread cost a 1 GiB signed upload about
 * 15 % of its speed when the disk kept up. The chunks are kept as they come until 1 MiB has
 * arrived, then copied once into a batch whose memory is handed to one shared worker; a body that
 * never reaches 1 MiB is hashed here at the end, as cheap as before (no batch allocated for it).
 * The worker hands each batch's memory back once hashed, and it is used again: a fresh 1 MiB
 * buffer per batch made V8 collect garbage for every few MiB of external memory (0.3–0.4 s of
 * CPU per GiB on the GC threads, measured per thread). The worker runs at the lowest priority
 * (digest-worker.ts); a digest with MAX_IN_FLIGHT batches not yet hashed says so (`behind`), and
 * its byte meter stops taking bytes until the worker catches up: memory stays bounded when the
 * machine is too busy to give the worker its share.
 * If the worker stops, every digest it held fails when asked for (never while bytes are fed: that
 * runs inside a stream's write, where a throw would take the process down).
 */
import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';

const BATCH = 1024 * 1024;
/** Size of a reused batch buffer: a batch is 1 MiB and at most one chunk more. */
const BATCH_BUFFER = BATCH + 256 * 1024;
/** Batches of one digest sent and not yet hashed, past which its feeder waits (`behind`). */
const MAX_IN_FLIGHT = 8;
/** Batch buffers kept for reuse; past this the ones handed back are let go. */
const SPARE_MAX = 8;

type Reply = { type: 'digest'; id: number; digest: Uint8Array } | { type: 'free'; id: number; data: ArrayBuffer };

/** Per digest with batches in flight: how many, and who waits for that number to drop. */
const inFlight = new Map<number, { batches: number; wake: (() => void) | null }>();

let worker: Worker | null = null;
let nextId = 0;
const waiting = new Map<number, { resolve: (d: Buffer) => void; reject: (e: unknown) => void }>();
/** Batch buffers handed back by the worker, ready for the next batch. */
const spare: ArrayBuffer[] = [];

/** Memory for a batch of `size` bytes: a spare buffer when one is large enough. */
function batchBuffer(size: number): ArrayBuffer {
  if (size <= BATCH_BUFFER) return spare.pop() ?? new ArrayBuffer(BATCH_BUFFER);
  return new ArrayBuffer(size);
}

function thread(): Worker {
  if (!worker) {
    const w = new Worker(new URL('./digest-worker.js', import.meta.url));
    w.on('message', (r: Reply) => {
      if (r.type === 'free') {
        if (r.data.byteLength === BATCH_BUFFER && spare.length < SPARE_MAX) spare.push(r.data);
        const f = inFlight.get(r.id);
        if (f && --f.batches < MAX_IN_FLIGHT) {
          if (f.batches === 0) inFlight.delete(r.id);
          const wake = f.wake;
          f.wake = null;
          wake?.();
        }
        idle(w);
        return;
      }
      waiting.get(r.id)?.resolve(Buffer.from(r.digest.buffer, r.digest.byteOffset, r.digest.byteLength));
      waiting.delete(r.id);
      idle(w);
    });
    let failure: unknown;
    w.on('error', (e) => {
      failure = e;
    });
    // 'exit' follows an 'error' too.
    w.on('exit', () => {
      for (const p of waiting.values()) p.reject(new Error('the digest thread stopped', { cause: failure }));
      waiting.clear();
      // Feeders waiting for it go on (their digests fail when asked for).
      for (const f of inFlight.values()) f.wake?.();
      inFlight.clear();
      if (worker === w) worker = null;
    });
    // Unreferenced only now: adding a 'message' listener to a worker references it again (it
    // then kept every process that had used it alive, a test run or a command, after its work).
    w.unref();
    worker = w;
  }
  return worker;
}

/** The thread keeps the process alive while it has work (a caller awaits a digest), never when idle. */
function busy(w: Worker): void {
  w.ref();
}

function idle(w: Worker): void {
  if (inFlight.size === 0 && waiting.size === 0) w.unref();
}

export class OffThreadDigest {
  readonly #id = ++nextId;
  /** Bytes not yet sent: the chunks as given (kept, not copied), `#pending` bytes in all. */
  #chunks: Uint8Array[] = [];
  #pending = 0;
  /** The worker holding this digest's state, once a batch went to it. */
  #sent: Worker | null = null;
  #done = false;

  constructor(readonly algorithm: string) {
    createHash(algorithm); // an unknown algorithm fails here, not in the worker
  }

  update(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#pending += chunk.length;
    if (this.#pending >= BATCH) this.#post();
  }

  /** True once the worker that holds this digest's state has stopped: the digest is lost. */
  #lost(): boolean {
    return this.#sent !== null && this.#sent !== worker;
  }

  /** Sends what is pending as one batch: copied once into memory that is then handed over. */
  #post(): void {
    if (this.#lost()) {
      this.#chunks = [];
      this.#pending = 0;
      return;
    }
    const w = this.#sent ?? thread();
    this.#sent = w;
    const data = batchBuffer(this.#pending);
    const batch = new Uint8Array(data);
    let at = 0;
    for (const c of this.#chunks) {
      batch.set(c, at);
      at += c.length;
    }
    this.#chunks = [];
    this.#pending = 0;
    const f = inFlight.get(this.#id);
    if (f) f.batches++;
    else inFlight.set(this.#id, { batches: 1, wake: null });
    busy(w);
    w.postMessage({ type: 'update', id: this.#id, algorithm: this.algorithm, data, length: at }, [data]);
  }

  /**
   * Null when more bytes may be fed at once; otherwise a promise that resolves once the worker has
   * caught up (fewer than MAX_IN_FLIGHT of this digest's batches left to hash), or has stopped.
   */
  behind(): Promise<void> | null {
    const f = inFlight.get(this.#id);
    if (!f || f.batches < MAX_IN_FLIGHT || this.#lost()) return null;
    return new Promise((resolve) => {
      const prev = f.wake;
      f.wake = () => {
        prev?.();
        resolve();
      };
    });
  }

  /** The digest of every byte given; call once. */
  digest(): Promise<Buffer> {
    this.#done = true;
    if (this.#sent === null) {
      // Never a whole batch: hashed here, at once (as cheap as hashing as it came).
      const h = createHash(this.algorithm);
      for (const c of this.#chunks) h.update(c);
      this.#chunks = [];
      return Promise.resolve(h.digest());
    }
    if (this.#pending > 0) this.#post();
    if (this.#lost()) return Promise.reject(new Error('the digest thread stopped'));
    const w = this.#sent;
    return new Promise((resolve, reject) => {
      waiting.set(this.#id, { resolve, reject });
      busy(w);
      w.postMessage({ type: 'finish', id: this.#id, algorithm: this.algorithm });
    });
  }

  /** Lets go of the state the worker holds (a receipt that failed). */
  dispose(): void {
    if (this.#done) return;
    this.#done = true;
    this.#chunks = [];
    const f = inFlight.get(this.#id);
    f?.wake?.();
    inFlight.delete(this.#id);
    if (this.#sent !== null && !this.#lost()) {
      this.#sent.postMessage({ type: 'drop', id: this.#id });
      idle(this.#sent);
    }
  }
}

/** Stops the digest thread (tests: what a thread that dies does to the digests it held). The next batch starts a new one. */
export async function stopDigestThread(): Promise<void> {
  if (worker) await worker.terminate();
}
