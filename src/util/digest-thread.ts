/**
 * Digests computed on another thread: a received body's MD5 (the stored checksum) and whatever
 * else a door checks over the same bytes (a signed S3 payload's SHA-256, a Content-SHA1 …), all
 * from one batch each time. MD5 on the HTTP thread cost it 1.2 s of CPU per GiB (OpenSSL's MD5
 * runs at about 900 MB/s here) and left it the bottleneck of a large upload; SHA-256 there cost a
 * signed upload about 15 % more. The chunks are kept as they come until 1 MiB has arrived, then
 * copied once into a batch whose memory is handed to one shared worker; a body that never reaches
 * 1 MiB is hashed here at the end, as cheap as hashing it as it came (no batch allocated for it).
 * The worker hands each batch's memory back once hashed, and it is used again: a fresh 1 MiB
 * buffer per batch made V8 collect garbage for every few MiB of external memory (0.3–0.4 s of
 * CPU per GiB on the GC threads, measured per thread). Batches are transferred, not shared: one
 * SharedArrayBuffer per batch read by both threads of a signed upload (session 28) kept every
 * batch the worker had seen alive until the worker's own collector ran, which a thread that
 * allocates almost nothing seldom does (RssAnon 240 MB against 146 after four rounds of four
 * concurrent 128 MiB uploads), for no measurable gain in speed. A digest with MAX_IN_FLIGHT batches not
 * yet hashed says so (`behind`), and its byte meter stops taking bytes until the worker catches
 * up: memory stays bounded when the worker falls behind.
 * If the worker stops, every digest it held fails when asked for (never while bytes are fed: that
 * runs inside a stream's write, where a throw would take the process down).
 */
import { createHash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

/** The digest thread's name on Linux (`top -H`, /proc/PID/task/TID/comm; at most 15 bytes). */
export const DIGEST_THREAD_NAME = 'files-rest-hash';

const BATCH = 1024 * 1024;
/** Size of a reused batch buffer: a batch is 1 MiB and at most one chunk more. */
const BATCH_BUFFER = BATCH + 256 * 1024;
/** Batches of one digest sent and not yet hashed, past which its feeder waits (`behind`). */
const MAX_IN_FLIGHT = 8;
/** Batch buffers kept for reuse; past this the ones handed back are let go. */
const SPARE_MAX = 8;
/**
 * A digest thread with nothing to do for this long stops, and the spare batch buffers go with the
 * last one: each thread is a V8 isolate of about 10 MB, and a server that had received one large
 * body kept them ever after (RssAnon 14 MB higher after one 2 MiB PUT, 28 after two at once). The
 * next large body starts a thread again (tens of milliseconds, while its first bytes arrive).
 */
let idleExitMs = 5000;

/** Tests: how long an idle digest thread lives. */
export function setDigestThreadIdleExit(ms: number): void {
  idleExitMs = ms;
}

type Reply = { type: 'digest'; id: number; digests: Uint8Array[] } | { type: 'free'; id: number; data: ArrayBuffer };

/** Digest threads at most: two, so a signed upload's MD5 and SHA-256 run side by side (one on a 1-core machine). */
const THREADS = Math.min(2, availableParallelism());

let nextId = 0;
/** Algorithm names Node's crypto accepted. */
const known = new Set<string>();
/** Batch buffers handed back by the workers, ready for the next batch. */
const spare: ArrayBuffer[] = [];

/** Memory for a batch of `size` bytes: a spare buffer when one is large enough. */
function batchBuffer(size: number): ArrayBuffer {
  if (size <= BATCH_BUFFER) return spare.pop() ?? new ArrayBuffer(BATCH_BUFFER);
  return new ArrayBuffer(size);
}

/** One worker and the digests it holds. */
class DigestThread {
  readonly worker: Worker;
  alive = true;
  /** Digests whose state the worker holds (a batch went to it; not yet finished or dropped). */
  held = 0;
  /** Per digest with batches in flight: how many, and who waits for that number to drop. */
  readonly inFlight = new Map<number, { batches: number; wake: (() => void) | null }>();
  readonly waiting = new Map<number, { resolve: (d: Buffer[]) => void; reject: (e: unknown) => void }>();
  #idleTimer: NodeJS.Timeout | null = null;

  constructor(private readonly slot: number) {
    const w = new Worker(new URL('./digest-worker.js', import.meta.url), { workerData: { name: DIGEST_THREAD_NAME } });
    this.worker = w;
    w.on('message', (r: Reply) => {
      if (r.type === 'free') {
        if (r.data.byteLength === BATCH_BUFFER && spare.length < SPARE_MAX) spare.push(r.data);
        const f = this.inFlight.get(r.id);
        if (f && --f.batches < MAX_IN_FLIGHT) {
          if (f.batches === 0) this.inFlight.delete(r.id);
          const wake = f.wake;
          f.wake = null;
          wake?.();
        }
      } else {
        this.waiting.get(r.id)?.resolve(r.digests.map((d) => Buffer.from(d.buffer, d.byteOffset, d.byteLength)));
        this.waiting.delete(r.id);
      }
      this.idle();
    });
    let failure: unknown;
    w.on('error', (e) => {
      failure = e;
    });
    // 'exit' follows an 'error' too.
    w.on('exit', () => {
      this.alive = false;
      for (const p of this.waiting.values()) p.reject(new Error('the digest thread stopped', { cause: failure }));
      this.waiting.clear();
      // Feeders waiting for it go on (their digests fail when asked for).
      for (const f of this.inFlight.values()) f.wake?.();
      this.inFlight.clear();
      if (pool[slot] === this) pool[slot] = null;
    });
    // Unreferenced only now: adding a 'message' listener to a worker references it again (it
    // then kept every process that had used it alive, a test run or a command, after its work).
    w.unref();
  }

  /** The thread keeps the process alive while it has work (a caller awaits a digest), never when idle. */
  busy(): void {
    if (this.#idleTimer) {
      clearTimeout(this.#idleTimer);
      this.#idleTimer = null;
    }
    this.worker.ref();
  }

  #unused(): boolean {
    return this.held === 0 && this.inFlight.size === 0 && this.waiting.size === 0;
  }

  idle(): void {
    if (this.inFlight.size > 0 || this.waiting.size > 0) return;
    this.worker.unref();
    // No digest's state left in it either: stop it once it has stayed unused for a while.
    if (this.#unused() && this.#idleTimer === null && this.alive) {
      this.#idleTimer = setTimeout(() => {
        this.#idleTimer = null;
        if (this.#unused()) this.#retire();
      }, idleExitMs);
      this.#idleTimer.unref();
    }
  }

  /** Out of the pool at once (no digest can pick it any more), then stopped. */
  #retire(): void {
    if (pool[this.slot] === this) pool[this.slot] = null;
    if (pool.every((t) => t === null)) spare.length = 0;
    this.alive = false;
    void this.worker.terminate();
  }
}

const pool: (DigestThread | null)[] = [];

/** The thread for a digest's first batch: an idle one, else a new one while there is room, else the least loaded. */
function pick(): DigestThread {
  let least: DigestThread | null = null;
  let free = -1;
  for (let i = 0; i < THREADS; i++) {
    const t = pool[i];
    if (!t) free = free < 0 ? i : free;
    else if (!least || t.held < least.held) least = t;
  }
  if (least && (least.held === 0 || free < 0)) return least;
  const t = new DigestThread(free);
  pool[free] = t;
  return t;
}

export class OffThreadDigest {
  readonly #id = ++nextId;
  /** The digests computed over the same bytes, from one batch each time (e.g. MD5 and SHA-256). */
  readonly algorithms: readonly string[];
  /** Bytes not yet sent: the chunks as given (kept, not copied), `#pending` bytes in all. */
  #chunks: Uint8Array[] = [];
  #pending = 0;
  /** The thread holding this digest's state, once a batch went to it. */
  #sent: DigestThread | null = null;
  #done = false;

  constructor(...algorithms: [string, ...string[]]) {
    // An unknown algorithm fails here, not in the worker (checked once per name).
    for (const a of algorithms) {
      if (!known.has(a)) {
        createHash(a);
        known.add(a);
      }
    }
    this.algorithms = algorithms;
  }

  update(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#pending += chunk.length;
    if (this.#pending >= BATCH) this.#post();
  }

  /** True once the worker that holds this digest's state has stopped: the digest is lost. */
  #lost(): boolean {
    return this.#sent !== null && !this.#sent.alive;
  }

  /** Sends what is pending as one batch: copied once into memory that is then handed over. */
  #post(): void {
    if (this.#lost()) {
      this.#chunks = [];
      this.#pending = 0;
      return;
    }
    if (!this.#sent) {
      this.#sent = pick();
      this.#sent.held++;
    }
    const t = this.#sent;
    const data = batchBuffer(this.#pending);
    const batch = new Uint8Array(data);
    let at = 0;
    for (const c of this.#chunks) {
      batch.set(c, at);
      at += c.length;
    }
    this.#chunks = [];
    this.#pending = 0;
    const f = t.inFlight.get(this.#id);
    if (f) f.batches++;
    else t.inFlight.set(this.#id, { batches: 1, wake: null });
    t.busy();
    t.worker.postMessage({ type: 'update', id: this.#id, algorithms: this.algorithms, data, length: at }, [data]);
  }

  /**
   * Null when more bytes may be fed at once; otherwise a promise that resolves once the worker has
   * caught up (fewer than MAX_IN_FLIGHT of this digest's batches left to hash), or has stopped.
   */
  behind(): Promise<void> | null {
    const f = this.#sent?.inFlight.get(this.#id);
    if (!f || f.batches < MAX_IN_FLIGHT || this.#lost()) return null;
    return new Promise((resolve) => {
      const prev = f.wake;
      f.wake = () => {
        prev?.();
        resolve();
      };
    });
  }

  /** The digest of every byte given, by the first algorithm; call once (this or `digests`). */
  async digest(): Promise<Buffer> {
    return (await this.digests())[0]!;
  }

  /** The digests of every byte given, one per algorithm in the constructor's order; call once. */
  digests(): Promise<Buffer[]> {
    this.#done = true;
    if (this.#sent === null) {
      // Never a whole batch: hashed here, at once (as cheap as hashing as it came).
      const out = this.algorithms.map((a) => {
        const h = createHash(a);
        for (const c of this.#chunks) h.update(c);
        return h.digest();
      });
      this.#chunks = [];
      return Promise.resolve(out);
    }
    if (this.#pending > 0) this.#post();
    if (this.#lost()) return Promise.reject(new Error('the digest thread stopped'));
    const t = this.#sent;
    t.held--;
    return new Promise((resolve, reject) => {
      t.waiting.set(this.#id, { resolve, reject });
      t.busy();
      t.worker.postMessage({ type: 'finish', id: this.#id, algorithms: this.algorithms });
    });
  }

  /** Lets go of the state the worker holds (a receipt that failed). */
  dispose(): void {
    if (this.#done) return;
    this.#done = true;
    this.#chunks = [];
    const t = this.#sent;
    if (t === null) return;
    t.held--;
    const f = t.inFlight.get(this.#id);
    f?.wake?.();
    t.inFlight.delete(this.#id);
    if (t.alive) {
      t.worker.postMessage({ type: 'drop', id: this.#id });
      t.idle();
    }
  }
}

/** Stops the digest thread (tests: what a thread that dies does to the digests it held). The next batch starts a new one. */
export async function stopDigestThread(): Promise<void> {
  // A timer holds the event loop until the threads have exited: an idle thread is unreferenced,
  // and the loop could end before its exit was reported, the caller's await still pending (the test
  // runner then cancelled the tests after it: 2 runs in 15 on a busy machine; referencing the
  // workers again before terminate() did not prevent it).
  const hold = setInterval(() => {}, 1000);
  try {
    await Promise.all(pool.map((t) => t?.worker.terminate()));
  } finally {
    clearInterval(hold);
  }
}
