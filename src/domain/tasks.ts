import type { Selectable } from 'kysely';
import type { Executor, TaskTable } from '../db/schema.js';
import { AppError } from '../errors.js';
import { nowMicros } from '../util/time.js';

/**
 * What an operator reads of the task queue and may do to it: list tasks (failed ones above all),
 * read one, queue a failed one again. The queue itself (claims, leases, backoff) is src/tasks/queue.ts;
 * these are the reads and the one repair both the admin commands and the REST admin endpoints use.
 */

export type TaskState = 'queued' | 'running' | 'done' | 'failed';
export const TASK_STATES: readonly TaskState[] = ['queued', 'running', 'done', 'failed'];

export interface Task {
  id: number;
  name: string;
  payload: unknown;
  state: TaskState;
  attempts: number;
  maxAttempts: number;
  runAt: number;
  lockedBy: string | null;
  lockedUntil: number | null;
  lastError: string | null;
  created: number;
  updated: number;
}

export function toTask(r: Selectable<TaskTable>): Task {
  return {
    id: r.id,
    name: r.name,
    payload: JSON.parse(r.payload) as unknown,
    state: r.state as TaskState,
    attempts: r.attempts,
    maxAttempts: r.max_attempts,
    runAt: r.run_at,
    lockedBy: r.locked_by,
    lockedUntil: r.locked_until,
    lastError: r.last_error,
    created: r.created,
    updated: r.updated,
  };
}

/** What a retry needs: the database and a way to wake idle workers (the domain's queue, or the task queue itself). */
export interface Requeue {
  db: Executor;
  queue: { wake(): void };
}

export async function getTask(db: Executor, id: number): Promise<Task> {
  const r = await db.selectFrom('tasks').selectAll().where('id', '=', id).executeTakeFirst();
  if (!r) throw new AppError('TASK_NOT_FOUND', { id });
  return toTask(r);
}

export interface TaskListOptions {
  state?: TaskState;
  limit?: number;
  /** Keyset cursor: only tasks with a smaller id (the list is newest first). */
  before?: number;
}

/** Tasks, newest first (by id), of one state or all; `limit + 1` is never read, the caller pages with `before`. */
export async function listTasks(db: Executor, opts: TaskListOptions = {}): Promise<Task[]> {
  let q = db.selectFrom('tasks').selectAll().orderBy('id', 'desc').limit(opts.limit ?? 100);
  if (opts.state) q = q.where('state', '=', opts.state);
  if (opts.before !== undefined) q = q.where('id', '<', opts.before);
  return (await q.execute()).map(toTask);
}

/**
 * Puts a failed task back in the queue with a fresh set of attempts, and wakes the workers.
 * Unknown id: TASK_NOT_FOUND; a task that has not failed (queued, running, done): TASK_NOT_FAILED.
 */
export async function retryTask(ctx: Requeue, id: number): Promise<Task> {
  const now = nowMicros();
  const r = await ctx.db
    .updateTable('tasks')
    .set({ state: 'queued', attempts: 0, run_at: now, last_error: null, updated: now })
    .where('id', '=', id)
    .where('state', '=', 'failed')
    .returningAll()
    .executeTakeFirst();
  if (!r) {
    await getTask(ctx.db, id);
    throw new AppError('TASK_NOT_FAILED', { id });
  }
  ctx.queue.wake();
  return toTask(r);
}

/** Queues every failed task again (fresh attempts); returns how many. */
export async function retryFailedTasks(ctx: Requeue): Promise<number> {
  const now = nowMicros();
  const r = await ctx.db
    .updateTable('tasks')
    .set({ state: 'queued', attempts: 0, run_at: now, last_error: null, updated: now })
    .where('state', '=', 'failed')
    .executeTakeFirst();
  const n = Number(r.numUpdatedRows);
  if (n > 0) ctx.queue.wake();
  return n;
}

/**
 * One line saying what a task is about, for people: the file, location, upload or URL of its payload.
 * A webhook delivery's body and signature are left out (they are the event's content).
 */
export function taskSummary(t: Pick<Task, 'name' | 'payload'>): string {
  const p = (t.payload ?? {}) as Record<string, unknown>;
  switch (t.name) {
    case 'migrate-file':
      return `file ${String(p.fileId)} → location ${String(p.location)}`;
    case 'verify-checksum':
      return `file ${String(p.fileId)}`;
    case 'remove-file-data':
      return `remove ${String(p.uri)}`;
    case 'complete-multipart':
      return `multipart upload ${String(p.uploadId)}`;
    case 'deliver-webhook':
      return `${String(p.event)} → ${String(p.url)} (delivery ${String(p.delivery)})`;
    default: {
      const keys = Object.keys(p);
      return keys.length === 0 ? '' : JSON.stringify(p).slice(0, 200);
    }
  }
}
