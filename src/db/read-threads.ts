import { Worker } from 'node:worker_threads';

/**
 * SQLite's reads off the event loop. better-sqlite3 runs every statement on the thread that calls
 * it, and a SQLite server has one connection, so the reads of every request (the bucket of an
 * upload, the version and bytes of a download, a listing's page) ran on the event loop, in turn
 * with the writes: in a profile of 4 KiB GETs on two cores, a third of the event loop's time. In WAL
 * mode any number of connections read beside the one writer, each from the last commit it saw, so a
 * SELECT outside a transaction goes to a read thread with a connection of its own
 * (read-thread.ts) and the event loop only sends it and takes the rows back. Statements inside a
 * transaction stay on the server's connection, which sees the transaction's own writes.
 *
 * The threads start when reads come fast (BUSY_WINDOW_READS within BUSY_WINDOW_MS): a server
 * answering a request now and then, and its start-up, keep reading on the event loop. A thread stops
 * after IDLE_MS without a read. Reads asked for while no thread is ready, and the reads of a thread
 * that is lost, run on the server's own connection (`run` answers null, or the promise rejects with
 * ReadThreadLost).
 */

/** One statement for a read thread; `sql` is sent only the first time a thread gets `sqlId`. */
export interface ReadRequest {
  id: number;
  sqlId: number;
  sql?: string;
  params: readonly unknown[];
}

/** A read thread's answer: the rows (with the names of the columns holding blobs), or the error. */
export type ReadAnswer =
  | { id: number; rows: Record<string, unknown>[]; blobs?: string[]; error?: undefined }
  | { id: number; error: { message: string; code?: string; name?: string }; rows?: undefined };

/** The read thread stopped (or failed) before it answered: the caller runs the statement itself. */
export class ReadThreadLost extends Error {
  constructor(reason: string) {
    super(`the SQLite read thread stopped before it answered (${reason})`);
    this.name = 'ReadThreadLost';
  }
}

/** Distinct SQL texts a thread prepares before the threads are replaced (the server's own statement cache keeps as many). */
export const MAX_SQL_TEXTS = 2000;

/** A read thread stops after this long without a read. */
export const READ_THREAD_IDLE_MS = 5_000;

/**
 * This many reads within BUSY_WINDOW_MS start a thread. (Reads that overlap another statement were
 * a worse sign: under many small downloads each request's one read runs whole between two others,
 * so they never overlapped, while a server's first background task overlapped a lookup at once.)
 */
export const BUSY_WINDOW_READS = 32;
export const BUSY_WINDOW_MS = 100;

interface Pending {
  resolve: (rows: Record<string, unknown>[]) => void;
  reject: (e: unknown) => void;
}

export interface ReadThreadStats {
  /** Threads started since the pool was made. */
  started: number;
  /** Statements answered by a read thread. */
  reads: number;
  /** Read threads running now (ready or starting). */
  running: number;
}

class ReadThread {
  readonly pending = new Map<number, Pending>();
  /** The ids of the SQL texts this thread has been sent. */
  readonly known = new Set<number>();
  ready = false;
  stopping = false;
  lastUsed = Date.now();
  outbox: ReadRequest[] = [];
  #scheduled = false;
  constructor(readonly worker: Worker) {}

  send(r: ReadRequest, p: Pending): void {
    this.pending.set(r.id, p);
    this.lastUsed = Date.now();
    this.outbox.push(r);
    // The reads asked for in one turn of the event loop go in one message.
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Sends the reads asked for since the last batch. */
  flush(): void {
    this.#scheduled = false;
    const batch = this.outbox;
    this.outbox = [];
    if (batch.length > 0) this.worker.postMessage(batch);
  }
}

export class ReadThreads {
  #threads: ReadThread[] = [];
  #nextId = 1;
  readonly #sqlIds = new Map<string, number>();
  #nextSqlId = 1;
  #idleTimer: NodeJS.Timeout | null = null;
  /** Set when a thread failed before it was ready (it could not open the database): none starts again. */
  #broken = false;
  #closed = false;
  readonly stats: ReadThreadStats = { started: 0, reads: 0, running: 0 };
  /** While set, no thread starts (a server's start-up: its reads come fast, and then it may idle). */
  held = false;
  /** Reads asked for since #windowStart (ms): BUSY_WINDOW_READS of them start a thread. */
  #windowStart = 0;
  #windowReads = 0;

  constructor(
    private readonly file: string,
    private readonly driver: 'better-sqlite3' | 'node',
    private readonly mmapSize: number,
    /** How many read threads may run at once. */
    private readonly max: number,
    private readonly idleMs = READ_THREAD_IDLE_MS,
  ) {}

  /** Ends `held`: reads count toward starting a thread from now on. */
  release(): void {
    this.held = false;
    this.#windowReads = 0;
  }

  /**
   * Runs a SELECT on a read thread: the rows, or null when no thread is ready (the caller runs it
   * on its own connection). Reads that come fast start a thread for the reads to come.
   */
  run(sql: string, params: readonly unknown[]): Promise<Record<string, unknown>[]> | null {
    let best: ReadThread | null = null;
    for (const t of this.#threads) {
      if (t.ready && !t.stopping && (best === null || t.pending.size < best.pending.size)) best = t;
    }
    const now = Date.now();
    if (now - this.#windowStart > BUSY_WINDOW_MS) {
      this.#windowStart = now;
      this.#windowReads = 0;
    }
    const many = ++this.#windowReads >= BUSY_WINDOW_READS;
    const starting = this.#threads.some((t) => !t.ready && !t.stopping);
    if ((best === null || best.pending.size > 0) && many && !starting && !this.held && this.#running() < this.max) this.#start();
    if (best === null) return null;
    let sqlId = this.#sqlIds.get(sql);
    if (sqlId === undefined) {
      if (this.#sqlIds.size >= MAX_SQL_TEXTS) {
        // Past the bound (queries with lists of every length): the threads' statements go with their
        // threads, which end once they have answered what they were sent; new ones start clean.
        // Ids are never given twice, so a thread cannot run another text under an old id.
        this.#sqlIds.clear();
        for (const t of this.#threads) this.#stop(t);
        best = null;
      }
      sqlId = this.#nextSqlId++;
      this.#sqlIds.set(sql, sqlId);
    }
    if (best === null) return null;
    const r: ReadRequest = { id: this.#nextId++, sqlId, params };
    if (!best.known.has(sqlId)) {
      r.sql = sql;
      best.known.add(sqlId);
    }
    const thread = best;
    return new Promise((resolve, reject) => thread.send(r, { resolve, reject }));
  }

  #running(): number {
    return this.#threads.filter((t) => !t.stopping).length;
  }

  #start(): void {
    if (this.#broken || this.#closed) return;
    const worker = new Worker(new URL('./read-thread.js', import.meta.url), {
      workerData: { file: this.file, driver: this.driver, mmapSize: this.mmapSize },
    });
    const thread = new ReadThread(worker);
    this.#threads.push(thread);
    this.stats.started++;
    this.stats.running = this.#threads.length;
    // It holds no request of its own: the reads waiting on it keep their requests' sockets open.
    worker.unref();
    worker.on('online', () => {
      thread.ready = true;
      this.#armIdle();
    });
    worker.on('message', (answers: ReadAnswer[]) => {
      for (const a of answers) {
        const p = thread.pending.get(a.id);
        if (!p) continue;
        thread.pending.delete(a.id);
        if (a.error) {
          const e = new Error(a.error.message) as Error & { code?: string };
          if (a.error.name) e.name = a.error.name;
          if (a.error.code !== undefined) e.code = a.error.code;
          p.reject(e);
          continue;
        }
        this.stats.reads++;
        if (a.blobs) {
          for (const row of a.rows) {
            for (const k of a.blobs) {
              const v = row[k];
              if (v instanceof Uint8Array) row[k] = Buffer.from(v.buffer, v.byteOffset, v.byteLength);
            }
          }
        }
        p.resolve(a.rows);
      }
    });
    let failure: unknown = null;
    worker.on('error', (e) => {
      failure = e;
      if (!thread.ready) {
        this.#broken = true;
        process.emitWarning(`files-rest: a SQLite read thread could not start (${String((e as Error)?.message ?? e)}); reads run on the event loop`);
      }
    });
    worker.on('exit', (code) => {
      this.#threads = this.#threads.filter((t) => t !== thread);
      this.stats.running = this.#threads.length;
      const reason = failure ? String((failure as Error)?.message ?? failure) : `exit code ${code}`;
      for (const p of thread.pending.values()) p.reject(new ReadThreadLost(reason));
      thread.pending.clear();
    });
  }

  /** Tells a thread to end once it has answered what it was sent; no read goes to it any more. */
  #stop(t: ReadThread): void {
    if (t.stopping) return;
    t.stopping = true;
    t.flush();
    t.worker.postMessage('stop');
  }

  /** Stops the threads that have had no read for idleMs; checks again while any runs. */
  #armIdle(): void {
    if (this.#idleTimer || this.#closed) return;
    const check = () => {
      this.#idleTimer = null;
      const now = Date.now();
      for (const t of this.#threads) {
        if (t.ready && !t.stopping && t.pending.size === 0 && now - t.lastUsed >= this.idleMs) this.#stop(t);
      }
      if (this.#threads.some((t) => !t.stopping)) this.#armIdle();
    };
    this.#idleTimer = setTimeout(check, Math.max(50, Math.floor(this.idleMs / 4)));
    this.#idleTimer.unref();
  }

  /** Stops every thread once it has answered what it was sent; no thread starts again. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#idleTimer) clearTimeout(this.#idleTimer);
    this.#idleTimer = null;
    await Promise.all(
      this.#threads.map((t) => {
        const exited = new Promise((resolve) => t.worker.once('exit', resolve));
        // Held until it has exited (unreferenced, the process could end while waiting for it).
        t.worker.ref();
        // A thread still starting gets the message once it runs.
        this.#stop(t);
        return exited;
      }),
    );
  }
}
