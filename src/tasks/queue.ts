import { EventEmitter } from 'node:events';
import { sql } from 'kysely';
import { transaction } from '../db/database.js';
import type { Db, Dialect, Executor } from '../db/schema.js';
import { getTask, listTasks, retryTask, toTask, type Task, type TaskState } from '../domain/tasks.js';
import { nowMicros } from '../util/time.js';
import { JOB_ATTEMPTS, type EnqueueOptions, type JobName, type JobPayloads, type JobQueue } from '../domain/jobs.js';

export type { Task, TaskState } from '../domain/tasks.js';

/** Tasks by state (queued, running, done, failed), as counted in the database. */
export async function queueDepth(db: Executor): Promise<Record<string, number>> {
  const rows = await db
    .selectFrom('tasks')
    .select(['state', (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy('state')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]));
}

/** Retry delay after the n-th failed attempt: 2 s, 4 s, 8 s … capped at 10 minutes, with jitter. */
export function backoffMicros(attempt: number): number {
  const base = Math.min(2 ** attempt, 600) * 1_000_000;
  return Math.floor(base * (0.75 + Math.random() * 0.5));
}

/**
 * The task queue: tasks are rows of the metadata database, written in the same transaction as the
 * change that needs them (the transactional outbox), so no committed change can lose its task.
 * Workers claim tasks with a lease; a worker that dies (kill -9) loses its lease and the task runs
 * again. On PostgreSQL claims use FOR UPDATE SKIP LOCKED; SQLite serialises writers itself.
 */
export class TaskQueue<M extends object = JobPayloads> implements JobQueue<M> {
  readonly #events = new EventEmitter();
  constructor(private readonly db: Db, private readonly dialect: Dialect) {
    this.#events.setMaxListeners(50);
  }

  /** Adds a task inside the caller's transaction. Call `wake()` after the commit. */
  async enqueue<N extends JobName<M>>(tx: Executor, name: N, payload: M[N], opts: EnqueueOptions = {}): Promise<number> {
    const now = nowMicros();
    const r = await tx
      .insertInto('tasks')
      .values({
        name,
        payload: JSON.stringify(payload ?? {}),
        state: 'queued',
        attempts: 0,
        max_attempts: opts.maxAttempts ?? (JOB_ATTEMPTS as Record<string, number | undefined>)[name] ?? 8,
        run_at: opts.runAt ?? now,
        locked_by: null,
        locked_until: null,
        last_error: null,
        created: now,
        updated: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    return r.id;
  }

  /** Tells in-process workers that a task is waiting (other processes find it by polling). */
  wake(): void {
    this.#events.emit('wake');
  }

  onWake(fn: () => void): () => void {
    this.#events.on('wake', fn);
    return () => this.#events.off('wake', fn);
  }

  /** Claims one runnable task (queued and due, or running with an expired lease). */
  async claim(workerId: string, leaseMicros: number, names?: readonly string[]): Promise<Task | null> {
    return transaction(this.db, async (tx) => {
      const now = nowMicros();
      let q = tx
        .selectFrom('tasks')
        .select('id')
        .where((eb) =>
          eb.or([
            eb.and([eb('state', '=', 'queued'), eb('run_at', '<=', now)]),
            eb.and([eb('state', '=', 'running'), eb('locked_until', '<', now)]),
          ]),
        )
        .orderBy('run_at')
        .limit(1);
      if (names) q = q.where('name', 'in', names as string[]);
      if (this.dialect === 'postgres') q = q.forUpdate().skipLocked();
      const picked = await q.executeTakeFirst();
      if (!picked) return null;
      const r = await tx
        .updateTable('tasks')
        .set({ state: 'running', locked_by: workerId, locked_until: now + leaseMicros, attempts: sql`attempts + 1`, updated: now })
        .where('id', '=', picked.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      return toTask(r);
    });
  }

  /** Extends the lease of a task this worker holds; false when the lease was lost. */
  async heartbeat(id: number, workerId: string, leaseMicros: number): Promise<boolean> {
    const now = nowMicros();
    const r = await this.db
      .updateTable('tasks')
      .set({ locked_until: now + leaseMicros, updated: now })
      .where('id', '=', id)
      .where('locked_by', '=', workerId)
      .where('state', '=', 'running')
      .executeTakeFirst();
    return Number(r.numUpdatedRows) === 1;
  }

  async complete(id: number, workerId: string): Promise<void> {
    await this.db
      .updateTable('tasks')
      .set({ state: 'done', locked_by: null, locked_until: null, last_error: null, updated: nowMicros() })
      .where('id', '=', id)
      .where('locked_by', '=', workerId)
      .execute();
  }

  /** Records a failure: retried later with backoff, or `failed` once attempts run out. */
  async fail(task: Task, workerId: string, error: string, opts: { permanent?: boolean } = {}): Promise<TaskState> {
    const now = nowMicros();
    const final = opts.permanent || task.attempts >= task.maxAttempts;
    const state: TaskState = final ? 'failed' : 'queued';
    await this.db
      .updateTable('tasks')
      .set({
        state,
        locked_by: null,
        locked_until: null,
        last_error: error.slice(0, 4000),
        run_at: final ? task.runAt : now + backoffMicros(task.attempts),
        updated: now,
      })
      .where('id', '=', task.id)
      .where('locked_by', '=', workerId)
      .execute();
    return state;
  }

  /** Gives a task back without counting the attempt (graceful shutdown). */
  async release(task: Task, workerId: string): Promise<void> {
    await this.db
      .updateTable('tasks')
      .set({ state: 'queued', locked_by: null, locked_until: null, attempts: sql`attempts - 1`, updated: nowMicros() })
      .where('id', '=', task.id)
      .where('locked_by', '=', workerId)
      .execute();
  }

  async get(id: number): Promise<Task> {
    return getTask(this.db, id);
  }

  async list(opts: { state?: TaskState; limit?: number } = {}): Promise<Task[]> {
    return listTasks(this.db, opts);
  }

  /** Puts a failed task back in the queue with a fresh set of attempts (domain/tasks.ts). */
  async retry(id: number): Promise<Task> {
    return retryTask({ db: this.db, queue: this }, id);
  }

  /** Counts by state, for metrics and the operator. */
  async depth(): Promise<Record<string, number>> {
    return queueDepth(this.db);
  }

  /** Removes finished tasks older than `olderThan` microseconds. */
  async prune(olderThanMicros: number): Promise<number> {
    const r = await this.db
      .deleteFrom('tasks')
      .where('state', '=', 'done')
      .where('updated', '<', nowMicros() - olderThanMicros)
      .executeTakeFirst();
    return Number(r.numDeletedRows);
  }

  /**
   * Periodic tasks: the first worker to move `next_run` forward enqueues the run, in the same
   * transaction, so each period runs once however many workers there are.
   */
  async schedulePeriodic<N extends JobName<M>>(name: N, intervalMicros: number, payload: M[N] = {} as M[N]): Promise<boolean> {
    const now = nowMicros();
    await this.db
      .insertInto('periodic_tasks')
      .values({ name, next_run: now })
      .onConflict((oc) => oc.column('name').doNothing())
      .execute();
    const enqueued = await transaction(this.db, async (tx) => {
      const r = await tx
        .updateTable('periodic_tasks')
        .set({ next_run: now + intervalMicros })
        .where('name', '=', name)
        .where('next_run', '<=', now)
        .executeTakeFirst();
      if (Number(r.numUpdatedRows) !== 1) return false;
      await this.enqueue(tx, name, payload, { maxAttempts: 3 });
      return true;
    });
    if (enqueued) this.wake();
    return enqueued;
  }
}
