/**
 * Digests computed on other threads: a received body's MD5 (the stored checksum) and whatever
 * else a door checks over the same bytes (a signed S3 payload's SHA-256, a Content-SHA1 …), all
 * from one batch each time. MD5 on the HTTP thread cost it 1.2 s of CPU per GiB (OpenSSL's MD5
 * runs at about 900 MB/s here) and left it the bottleneck of a large upload; SHA-256 there cost a
 * signed upload about 15 % more. A digest has lanes, each a group of algorithms one thread
 * computes (MD5 on one, the SHA-256 of a signed payload on another, side by side). The chunks are
 * kept as they come until 1 MiB has arrived, then copied once into a batch of shared memory that
 * every lane's thread reads; a body that never reaches 1 MiB is hashed here at the end, as cheap
 * as hashing it as it came (no batch allocated for it). Once every lane has hashed a batch its
 * memory is used again: a fresh 1 MiB buffer per batch made V8 collect garbage for every few MiB
 * of external memory (0.3–0.4 s of CPU per GiB on the GC threads, measured per thread), and a copy
 * per lane cost a signed upload's HTTP thread a second copy of every byte and twice the buffers. A
 * lane with MAX_IN_FLIGHT batches not yet hashed says so (`behind`), and its byte meter stops
 * taking bytes until the thread catches up: memory stays bounded when a thread falls behind.
 * If a thread stops, every digest it held fails when asked for (never while bytes are fed: that
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

type Reply = { type: 'digest'; id: number; digests: Uint8Array[] } | { type: 'free'; id: number; batch: number };

/** Digest threads at most: two, so a signed upload's MD5 and SHA-256 run side by side (one on a 1-core machine). */
const THREADS = Math.min(2, availableParallelism());

let nextId = 0;
/** Algorithm names Node's crypto accepted. */
const known = new Set<string>();
/** Batch buffers every lane has hashed, ready for the next batch. */
const spare: SharedArrayBuffer[] = [];

/** Batches copied, and batch buffers allocated (tests: one copy per batch, whatever the lanes). */
export const digestBatchStats = { copied: 0, allocated: 0 };

/** Memory for a batch of `size` bytes: a spare buffer when one is large enough. */
function batchBuffer(size: number): SharedArrayBuffer {
  const reused = size <= BATCH_BUFFER ? spare.pop() : undefined;
  if (reused) return reused;
  digestBatchStats.allocated++;
  return new SharedArrayBuffer(Math.max(size, BATCH_BUFFER));
}

/** A batch the lanes' threads read: its memory goes back to `spare` once the last has hashed it. */
interface Batch {
  data: SharedArrayBuffer;
  lanes: number;
}

let nextBatch = 0;

/** One lane's thread has hashed `batch`: its memory is free once every lane has. */
function release(batch: Batch): void {
  if (--batch.lanes > 0) return;
  if (batch.data.byteLength === BATCH_BUFFER && spare.length < SPARE_MAX) spare.push(batch.data);
}

/** One worker and the digests it holds. */
class DigestThread {
  readonly worker: Worker;
  alive = true;
  /** Digests whose state the worker holds (a batch went to it; not yet finished or dropped). */
  held = 0;
  /** Per digest with batches in flight: how many, and who waits for that number to drop. */
  readonly inFlight = new Map<number, { batches: number; wake: (() => void) | null }>();
  /** Batches sent to this thread and not yet hashed, by number. */
  readonly batches = new Map<number, Batch>();
  readonly waiting = new Map<number, { resolve: (d: Buffer[]) => void; reject: (e: unknown) => void }>();
  #idleTimer: NodeJS.Timeout | null = null;

  constructor(private readonly slot: number) {
    const w = new Worker(new URL('./digest-worker.js', import.meta.url), { workerData: { name: DIGEST_THREAD_NAME } });
    this.worker = w;
    w.on('message', (r: Reply) => {
      if (r.type === 'free') {
        const batch = this.batches.get(r.batch);
        this.batches.delete(r.batch);
        if (batch) release(batch);
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
      // Its batches are never handed back: their memory is left to the garbage collector.
      this.batches.clear();
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

/**
 * The thread for a lane's first batch: an idle one, else a new one while there is room, else the
 * least loaded; a thread another lane of the same digest holds (`taken`) only when there is no other.
 */
function pick(taken: readonly DigestThread[]): DigestThread {
  let least: DigestThread | null = null;
  let free = -1;
  for (let i = 0; i < THREADS; i++) {
    const t = pool[i];
    if (!t) free = free < 0 ? i : free;
    else if (!taken.includes(t) && (!least || t.held < least.held)) least = t;
  }
  if (least && (least.held === 0 || free < 0)) return least;
  if (free >= 0) {
    const t = new DigestThread(free);
    pool[free] = t;
    return t;
  }
  // Every thread is taken by this digest's other lanes (a 1-core machine): the least loaded of them.
  return pool.filter((t): t is DigestThread => t !== null).reduce((a, b) => (b.held < a.held ? b : a));
}

/** Algorithms one thread computes for a digest, under an id of their own in that thread. */
interface Lane {
  readonly id: number;
  readonly algorithms: readonly string[];
  thread: DigestThread | null;
}

export class OffThreadDigest {
  /** Every algorithm, lane after lane: the order of `digests()`. */
  readonly algorithms: readonly string[];
  readonly #lanes: Lane[];
  /** Bytes not yet sent: the chunks as given (kept, not copied), `#pending` bytes in all. */
  #chunks: Uint8Array[] = [];
  #pending = 0;
  /** Whether a batch went out (the lanes' threads hold state). */
  #sent = false;
  #done = false;

  /**
   * `lanes`: groups of algorithms, each computed by one thread, the groups side by side on
   * different threads where there are (e.g. `['md5'], ['sha256']`). Every lane reads the same batches.
   */
  constructor(...lanes: [string, ...string[]][]) {
    if (lanes.length === 0) throw new Error('OffThreadDigest: no algorithm');
    // An unknown algorithm fails here, not in the worker (checked once per name).
    for (const a of lanes.flat()) {
      if (!known.has(a)) {
        createHash(a);
        known.add(a);
      }
    }
    this.#lanes = lanes.map((algorithms) => ({ id: ++nextId, algorithms, thread: null }));
    this.algorithms = lanes.flat();
  }

  update(chunk: Uint8Array): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#pending += chunk.length;
    if (this.#pending >= BATCH) this.#post();
  }

  /** True once a thread that holds part of this digest's state has stopped: the digest is lost. */
  #lost(): boolean {
    return this.#sent && this.#lanes.some((l) => !l.thread!.alive);
  }

  /** Sends what is pending as one batch: copied once into shared memory every lane's thread reads. */
  #post(): void {
    if (this.#lost()) {
      this.#chunks = [];
      this.#pending = 0;
      return;
    }
    if (!this.#sent) {
      const taken: DigestThread[] = [];
      for (const l of this.#lanes) {
        l.thread = pick(taken);
        l.thread.held++;
        taken.push(l.thread);
      }
      this.#sent = true;
    }
    const data = batchBuffer(this.#pending);
    const bytes = new Uint8Array(data);
    let at = 0;
    for (const c of this.#chunks) {
      bytes.set(c, at);
      at += c.length;
    }
    digestBatchStats.copied++;
    this.#chunks = [];
    this.#pending = 0;
    const batch: Batch = { data, lanes: this.#lanes.length };
    const number = ++nextBatch;
    for (const l of this.#lanes) {
      const t = l.thread!;
      const f = t.inFlight.get(l.id);
      if (f) f.batches++;
      else t.inFlight.set(l.id, { batches: 1, wake: null });
      t.batches.set(number, batch);
      t.busy();
      t.worker.postMessage({ type: 'update', id: l.id, algorithms: l.algorithms, data, length: at, batch: number });
    }
  }

  /**
   * Null when more bytes may be fed at once; otherwise a promise that resolves once every lane's
   * thread has caught up (fewer than MAX_IN_FLIGHT of its batches left to hash), or has stopped.
   */
  behind(): Promise<void> | null {
    if (!this.#sent || this.#lost()) return null;
    for (const l of this.#lanes) {
      const f = l.thread!.inFlight.get(l.id);
      if (!f || f.batches < MAX_IN_FLIGHT) continue;
      return new Promise<void>((resolve) => {
        const prev = f.wake;
        f.wake = () => {
          prev?.();
          resolve();
        };
      }).then(() => this.behind() ?? undefined);
    }
    return null;
  }

  /** The digest of every byte given, by the first algorithm; call once (this or `digests`). */
  async digest(): Promise<Buffer> {
    return (await this.digests())[0]!;
  }

  /** The digests of every byte given, one per algorithm in `algorithms`' order; call once. */
  async digests(): Promise<Buffer[]> {
    this.#done = true;
    if (!this.#sent) {
      // Never a whole batch: hashed here, at once (as cheap as hashing as it came).
      const out = this.algorithms.map((a) => {
        const h = createHash(a);
        for (const c of this.#chunks) h.update(c);
        return h.digest();
      });
      this.#chunks = [];
      return out;
    }
    if (this.#pending > 0) this.#post();
    const lost = this.#lost();
    const results = this.#lanes.map((l) => {
      const t = l.thread!;
      t.held--;
      if (lost) {
        // Lanes on threads still alive let go of their state; the digest is lost.
        if (t.alive) t.worker.postMessage({ type: 'drop', id: l.id });
        t.inFlight.delete(l.id);
        t.idle();
        return Promise.reject(new Error('the digest thread stopped'));
      }
      return new Promise<Buffer[]>((resolve, reject) => {
        t.waiting.set(l.id, { resolve, reject });
        t.busy();
        t.worker.postMessage({ type: 'finish', id: l.id, algorithms: l.algorithms });
      });
    });
    const settled = await Promise.allSettled(results);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    return settled.flatMap((r) => (r as PromiseFulfilledResult<Buffer[]>).value);
  }

  /** Lets go of the state the threads hold (a receipt that failed). */
  dispose(): void {
    if (this.#done) return;
    this.#done = true;
    this.#chunks = [];
    if (!this.#sent) return;
    for (const l of this.#lanes) {
      const t = l.thread!;
      t.held--;
      const f = t.inFlight.get(l.id);
      f?.wake?.();
      t.inFlight.delete(l.id);
      if (t.alive) {
        t.worker.postMessage({ type: 'drop', id: l.id });
        t.idle();
      }
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
