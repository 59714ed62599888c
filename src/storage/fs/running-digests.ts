import { Worker } from 'node:worker_threads';
import type { RunningDigests } from '../backend.js';

interface Reply {
  seq: number;
  ok: boolean;
  value: string | null;
}

/**
 * The fs backend's running digests: one worker thread (hash-thread.ts), started on first use, keeps
 * an MD5 per id and reads the ranges from the local file, so the HTTP thread stays free (on a 2-core
 * machine the whole-file digest is computed on the other core while parts arrive). If the thread
 * dies, every digest it held is lost: extending or finishing one of them fails, never restarts it
 * from the middle of a file.
 */
export class HashThreadDigests implements RunningDigests {
  readonly #waiting = new Map<number, (r: Reply) => void>();
  /** Ids the current thread holds a digest for, and those a dead thread took with it. */
  readonly #held = new Set<string>();
  readonly #lost = new Set<string>();
  #worker: Worker | null = null;
  #seq = 0;

  constructor(private readonly toPath: (uri: string) => string, private readonly onError: (e: unknown) => void = () => {}) {}

  #thread(): Worker {
    if (!this.#worker) {
      const w = new Worker(new URL('./hash-thread.js', import.meta.url), { workerData: { name: 'files-rest-md5' } });
      w.on('message', (r: Reply) => {
        this.#waiting.get(r.seq)?.(r);
        this.#waiting.delete(r.seq);
      });
      w.on('error', (e) => {
        this.onError(e);
        for (const id of this.#held) this.#lost.add(id);
        this.#held.clear();
        for (const answer of this.#waiting.values()) answer({ seq: -1, ok: false, value: String(e) });
        this.#waiting.clear();
        if (this.#worker === w) this.#worker = null;
      });
      // Referenced (a 'message' listener references a worker): the backend's close() ends it.
      this.#worker = w;
    }
    return this.#worker;
  }

  #call(msg: Record<string, unknown>): Promise<Reply> {
    const seq = ++this.#seq;
    return new Promise((resolve) => {
      this.#waiting.set(seq, resolve);
      this.#thread().postMessage({ ...msg, seq });
    });
  }

  async extend(id: string, uri: string, start: number, end: number): Promise<void> {
    if (this.#lost.has(id)) throw new Error('the running digest was lost (hash thread failed)');
    this.#held.add(id);
    const r = await this.#call({ type: 'range', id, path: this.toPath(uri), start, end });
    if (!r.ok) {
      this.#held.delete(id);
      throw new Error(`hashing ${uri} [${start}, ${end}) failed: ${r.value}`);
    }
  }

  async digest(id: string): Promise<string | null> {
    if (this.#lost.delete(id)) return null;
    if (!this.#held.delete(id)) return null;
    const r = await this.#call({ type: 'digest', id });
    return r.ok ? r.value : null;
  }

  drop(id: string): void {
    this.#lost.delete(id);
    if (this.#held.delete(id) && this.#worker) this.#worker.postMessage({ type: 'drop', id });
  }

  async close(): Promise<void> {
    const w = this.#worker;
    this.#worker = null;
    this.#held.clear();
    this.#lost.clear();
    if (w) await w.terminate();
  }
}
