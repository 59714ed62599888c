import { Worker } from 'node:worker_threads';

/** How often the checkpoint thread copies the WAL's committed pages into the database file. */
export const CHECKPOINT_INTERVAL_MS = 100;

/**
 * SQLite's WAL checkpoints on a thread of their own. By default SQLite checkpoints inside the COMMIT
 * that takes the WAL past 1000 pages: on the connection's thread, the event loop here, which then
 * reads every page back from the WAL, writes it into the database file and fsyncs both, while no
 * request is served (a third of the SQLite I/O of the 4 KiB PUT benchmark). The server's connection
 * runs with `wal_autocheckpoint = 0`, and this thread's own connection to the same file runs a
 * PASSIVE checkpoint every CHECKPOINT_INTERVAL_MS: it never blocks a writer or a reader, copies only
 * what no reader still needs, and does nothing when there is nothing new. It flushes the WAL before
 * it copies (synchronous = NORMAL), as SQLite's own checkpoints do. If the thread fails, the
 * connection checkpoints by itself again (`onFailure`).
 */
export class Checkpointer {
  readonly #worker: Worker;
  #stopped = false;

  constructor(file: string, driver: 'better-sqlite3' | 'node', onFailure: (err: unknown) => void) {
    this.#worker = new Worker(new URL('./checkpoint-worker.js', import.meta.url), {
      workerData: { file, driver, intervalMs: CHECKPOINT_INTERVAL_MS },
    });
    // It holds no request: the process may exit while it runs.
    this.#worker.unref();
    const failed = (err: unknown) => {
      if (this.#stopped) return;
      this.#stopped = true;
      onFailure(err);
    };
    this.#worker.on('error', failed);
    this.#worker.on('exit', (code) => failed(new Error(`the checkpoint thread exited (${code})`)));
  }

  /** Stops the thread (its connection closes; a checkpoint under way completes first). */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    // Held until it has exited (unreferenced, the process could end while waiting for it).
    this.#worker.ref();
    this.#worker.postMessage('stop');
    await new Promise((resolve) => this.#worker.once('exit', resolve));
  }
}
