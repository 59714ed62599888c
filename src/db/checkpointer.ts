import { Worker } from 'node:worker_threads';

/** How often the checkpoint thread copies the WAL's committed pages into the database file. */
export const CHECKPOINT_INTERVAL_MS = 100;
/** Checkpoints in a row with nothing to do after which the thread ends (it starts again with the next commits). */
export const CHECKPOINT_IDLE_TICKS = 50;
/**
 * The WAL's length past which the thread restarts it (a RESTART checkpoint; see checkpoint-worker.ts),
 * and the length SQLite cuts it back to once restarted (`journal_size_limit` of the server's connection).
 */
export const WAL_RESTART_BYTES = 64 * 1024 * 1024;
/** Commits flushed, since the thread last ran, that start it: a few commits leave a few pages in the WAL, not worth a thread. */
export const CHECKPOINT_START_COMMITS = 64;
/**
 * How long the thread waits for the server's writer to pause before it restarts the WAL anyway
 * (the writer then waits in SQLite's busy handler, as any other process's writer does).
 */
export const WRITER_PAUSE_WAIT_MS = 2_000;
/** How long the server's writer stays paused for a restart at most, should the thread never say it is done. */
export const WRITER_PAUSE_MAX_MS = 10_000;

/** The server's writer, paused while the thread restarts the WAL (the SQLite GroupCommit). */
export interface PausableWriter {
  /** Resolves once no write transaction runs; none starts until `resume()`. */
  pause(): Promise<void>;
  resume(): void;
}

/** What the thread has done, for tests and the curious. */
export interface CheckpointerStats {
  /** WAL restarts run while this process's writer was paused. */
  restartsPaused: number;
  /** WAL restarts run without the pause (the writer did not pause in time). */
  restartsUnpaused: number;
}

/**
 * SQLite's WAL checkpoints on a thread of their own. By default SQLite checkpoints inside the COMMIT
 * that takes the WAL past 1000 pages: on the connection's thread, the event loop here, which then
 * reads every page back from the WAL, writes it into the database file and fsyncs both, while no
 * request is served. The server's connection runs with `wal_autocheckpoint = 0`, and this thread's
 * own connection to the same file runs a PASSIVE checkpoint every CHECKPOINT_INTERVAL_MS: it never
 * blocks a writer or a reader, copies only what no reader still needs, and does nothing when there
 * is nothing new. It flushes the WAL before it copies (synchronous = NORMAL), as SQLite's own
 * checkpoints do. Once the WAL passes WAL_RESTART_BYTES it runs a RESTART checkpoint, which holds
 * writers back for the copy of the last tick's commits and a sync, so that the WAL starts over
 * (under steady writes a passive checkpoint never reaches its end, and the WAL would grow forever).
 * Before it does, it asks this process's writer to pause (`writer`): a write transaction begun
 * during the restart would wait in SQLite's busy handler, which sleeps on the event loop, so no
 * request was served meanwhile (REST W3's p99 went from 18–27 to 33–50 ms with the restarts). The
 * writer finishes its group, the thread restarts the WAL, the writer resumes; uploads and reads go
 * on being received and answered in between.
 *
 * The thread (a V8 isolate, about 10 MB) runs only while there are writes: `wake()` after each
 * commit's flush starts it once CHECKPOINT_START_COMMITS have been flushed since it last ran (the
 * writes of a server's start do not), and it ends after CHECKPOINT_IDLE_TICKS checkpoints in a row
 * found nothing new, so an idle server holds none. If it fails, the connection checkpoints by
 * itself again (`onFailure`).
 */
export class Checkpointer {
  #worker: Worker | null = null;
  #commits = 0;
  #failed = false;
  #stopped = false;
  /** Set while the writer is paused for a restart: ends the pause (once). */
  #unpause: (() => void) | null = null;
  /** The server's writer, paused during a restart (set once the database handle is made). */
  writer: PausableWriter | null = null;
  readonly stats: CheckpointerStats = { restartsPaused: 0, restartsUnpaused: 0 };

  constructor(
    private readonly file: string,
    private readonly driver: 'better-sqlite3' | 'node',
    /** While true (a server's start-up, until forgetStartupCommits), commits are not counted and start no thread. */
    private held: boolean,
    private readonly onFailure: (err: unknown) => void,
  ) {}

  /** Called after a commit: starts the thread unless it runs (or failed, or was stopped). */
  wake(): void {
    if (this.#worker || this.#failed || this.#stopped || this.held) return;
    if (++this.#commits < CHECKPOINT_START_COMMITS) return;
    this.#commits = 0;
    const worker = new Worker(new URL('./checkpoint-worker.js', import.meta.url), {
      workerData: { file: this.file, driver: this.driver, intervalMs: CHECKPOINT_INTERVAL_MS, idleTicks: CHECKPOINT_IDLE_TICKS, restartBytes: WAL_RESTART_BYTES, pauseWaitMs: WRITER_PAUSE_WAIT_MS },
    });
    this.#worker = worker;
    // It holds no request: the process may exit while it runs.
    worker.unref();
    let idle = false;
    worker.on('message', (m: 'idle' | 'pause' | 'resume' | 'restarted-unpaused') => {
      if (m === 'idle') idle = true;
      else if (m === 'pause') this.#pauseWriter(worker);
      else if (m === 'resume') {
        this.stats.restartsPaused++;
        this.#unpause?.();
      } else if (m === 'restarted-unpaused') {
        // The pause came too late (or never): it ends now, as the restart has.
        this.stats.restartsUnpaused++;
        this.#unpause?.();
      }
    });
    const fail = (err: unknown) => {
      if (this.#failed || this.#stopped) return;
      this.#failed = true;
      this.onFailure(err);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => {
      this.#unpause?.();
      if (this.#worker === worker) this.#worker = null;
      if (!(idle && code === 0)) fail(new Error(`the checkpoint thread exited (${code})`));
    });
  }

  /** The thread is about to restart the WAL: pauses the writer, and tells the thread once it is paused. */
  #pauseWriter(worker: Worker): void {
    const writer = this.writer;
    if (!writer || this.#unpause) {
      worker.postMessage('paused');
      return;
    }
    let timer: NodeJS.Timeout | null = null;
    const unpause = () => {
      if (this.#unpause !== unpause) return;
      this.#unpause = null;
      if (timer) clearTimeout(timer);
      writer.resume();
    };
    this.#unpause = unpause;
    // Never paused for good: a thread that stops answering loses its pause.
    timer = setTimeout(unpause, WRITER_PAUSE_MAX_MS);
    timer.unref();
    writer.pause().then(
      () => {
        if (this.#unpause === unpause) worker.postMessage('paused');
      },
      () => unpause(),
    );
  }

  /**
   * The writes so far start no thread: a new database's start-up writes (its migrations, one
   * statement at a time, the first location and token) reached CHECKPOINT_START_COMMITS and started
   * the thread (an isolate of about 10 MB) in every server just created. A server opens its database
   * held, so none of them counts (counting them and forgetting them at the end let a thirteenth
   * migration start the thread before the end). Their pages wait in the WAL for the next checkpoint.
   */
  forgetStartupCommits(): void {
    this.held = false;
    this.#commits = 0;
  }

  /** Stops the thread (its connection closes; a checkpoint under way completes first). */
  async stop(): Promise<void> {
    this.#stopped = true;
    const worker = this.#worker;
    if (!worker) return;
    // Held until it has exited (unreferenced, the process could end while waiting for it).
    worker.ref();
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.postMessage('stop');
    await exited;
  }
}
