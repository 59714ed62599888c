import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { TaskQueue, Task } from './queue.js';
import type { JobName, JobPayloads } from '../domain/jobs.js';

export interface TaskRunContext {
  /** Aborted when the worker stops or loses the lease. */
  signal: AbortSignal;
  log: Logger;
  task: Task;
}

/**
 * The handler of one job of the catalogue (`JobPayloads`, src/domain/jobs.ts): its payload type
 * follows from its name. `run` must be idempotent: after a crash it runs again from the start.
 */
export interface TaskDefinition<N extends JobName<M>, M extends object = JobPayloads> {
  name: N;
  run(payload: M[N], ctx: TaskRunContext): Promise<void>;
  /** Seconds a claim lasts without a heartbeat (heartbeats are sent every third of it). */
  leaseSeconds?: number;
  /** When set, a run is scheduled every this many seconds (once across all workers). */
  periodicSeconds?: number;
}

/** A handler of any job of a catalogue: what a worker is given. */
export type AnyTaskDefinition<M extends object = JobPayloads> = { [N in JobName<M>]: TaskDefinition<N, M> }[JobName<M>];

/** Thrown by a task that must not be retried. */
export class PermanentTaskError extends Error {}

export interface WorkerOptions {
  concurrency?: number;
  /** Default lease in seconds for tasks that do not set their own. */
  leaseSeconds?: number;
  pollIntervalMs?: number;
  id?: string;
}

/** Runs tasks from the queue until stopped. Several workers, in any number of processes, can share one queue. */
export class Worker<M extends object = JobPayloads> {
  readonly id: string;
  readonly #defs = new Map<string, AnyTaskDefinition<M>>();
  readonly #active = new Map<number, { task: Task; abort: AbortController; done: Promise<void> }>();
  #running = false;
  #loop: Promise<void> | null = null;
  #wakeup: (() => void) | null = null;
  #unsubscribe: (() => void) | null = null;
  readonly #concurrency: number;
  readonly #pollMs: number;
  readonly #leaseSeconds: number;

  constructor(private readonly queue: TaskQueue<M>, defs: readonly AnyTaskDefinition<M>[], private readonly log: Logger, opts: WorkerOptions = {}) {
    for (const d of defs) this.#defs.set(d.name, d);
    this.#concurrency = opts.concurrency ?? 2;
    this.#pollMs = opts.pollIntervalMs ?? 1000;
    this.#leaseSeconds = opts.leaseSeconds ?? 60;
    this.id = opts.id ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  }

  definitions(): AnyTaskDefinition<M>[] {
    return [...this.#defs.values()];
  }

  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#unsubscribe = this.queue.onWake(() => this.#wakeup?.());
    this.#loop = this.#run();
    this.log.info({ worker: this.id }, 'task worker started');
  }

  /** Stops claiming; waits up to `graceMs` for running tasks, then aborts and releases them. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#unsubscribe?.();
    this.#wakeup?.();
    await this.#loop;
    const all = Promise.all([...this.#active.values()].map((a) => a.done));
    const timer = new Promise<void>((r) => setTimeout(r, graceMs).unref());
    await Promise.race([all, timer]);
    for (const a of this.#active.values()) a.abort.abort(new Error('worker stopping'));
    await all;
  }

  async #schedulePeriodic(): Promise<void> {
    for (const d of this.#defs.values()) {
      if (d.periodicSeconds) {
        await this.queue.schedulePeriodic(d.name, d.periodicSeconds * 1_000_000).catch((err) =>
          this.log.warn({ err, task: d.name }, 'could not schedule periodic task'),
        );
      }
    }
  }

  async #run(): Promise<void> {
    let lastSchedule = 0;
    while (this.#running) {
      if (Date.now() - lastSchedule >= this.#pollMs) {
        lastSchedule = Date.now();
        await this.#schedulePeriodic();
      }
      let claimed = false;
      if (this.#active.size < this.#concurrency) {
        try {
          const task = await this.queue.claim(this.id, this.#leaseSeconds * 1_000_000, [...this.#defs.keys()]);
          if (task) {
            claimed = true;
            this.#start(task);
          }
        } catch (err) {
          this.log.warn({ err }, 'could not claim a task (database unavailable?)');
        }
      }
      if (!claimed && this.#running) {
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, this.#pollMs);
          this.#wakeup = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.#wakeup = null;
      }
    }
  }

  #start(task: Task): void {
    const def = this.#defs.get(task.name)!;
    const abort = new AbortController();
    const leaseMicros = (def.leaseSeconds ?? this.#leaseSeconds) * 1_000_000;
    const log = this.log.child({ task: task.name, taskId: task.id, attempt: task.attempts });
    const beat = setInterval(() => {
      this.queue.heartbeat(task.id, this.id, leaseMicros).then(
        (held) => {
          if (!held) abort.abort(new Error('lease lost'));
        },
        (err) => log.warn({ err }, 'heartbeat failed'),
      );
    }, Math.max(1000, (leaseMicros / 3_000))).unref();
    const done = (async () => {
      try {
        if (def.leaseSeconds !== undefined) await this.queue.heartbeat(task.id, this.id, leaseMicros);
        // The one place a payload leaves the database: it was written by `enqueue` under this name,
        // whose type the catalogue fixes.
        await (def.run as (p: unknown, c: TaskRunContext) => Promise<void>)(task.payload, { signal: abort.signal, log, task });
        await this.queue.complete(task.id, this.id);
        log.debug('task done');
      } catch (err) {
        if (abort.signal.aborted && !this.#running) {
          await this.queue.release(task, this.id).catch(() => {});
          log.info('task released at shutdown');
        } else {
          const state = await this.queue
            .fail(task, this.id, String((err as Error)?.stack ?? err), { permanent: err instanceof PermanentTaskError })
            .catch(() => 'unknown');
          log[state === 'failed' ? 'error' : 'warn']({ err, state }, state === 'failed' ? 'task failed for good' : 'task failed; will retry');
        }
      } finally {
        clearInterval(beat);
        this.#active.delete(task.id);
        this.#wakeup?.();
      }
    })();
    this.#active.set(task.id, { task, abort, done });
  }
}
