import type { DomainContext } from '../domain/context.js';
import type { AnyTaskDefinition, TaskDefinition } from './worker.js';
import type { TaskQueue } from './queue.js';

/** Removes the bytes of a file instance whose row is already gone. Idempotent: a missing file is fine. */
export function removeFileData(ctx: DomainContext): TaskDefinition<'remove-file-data'> {
  return {
    name: 'remove-file-data',
    async run({ uri, initialized, multipartRef }, { log }) {
      const backend = ctx.storage.forUri(uri);
      // A multipart file that was never finalized (abort, expiry) may need the backend's own clean-up.
      if (initialized && backend.abortInitialized) await backend.abortInitialized(uri, multipartRef ?? null);
      await backend.delete(uri);
      log.info({ uri }, 'file data removed');
    },
  };
}

/** Forgets finished tasks after a week, so the table stays small. */
export function pruneTasks(queue: TaskQueue): TaskDefinition<'prune-tasks'> {
  return {
    name: 'prune-tasks',
    periodicSeconds: 3600,
    async run(_p, { log }) {
      const n = await queue.prune(7 * 86_400_000_000);
      if (n) log.info({ removed: n }, 'pruned finished tasks');
    },
  };
}

export function builtinTasks(ctx: DomainContext, queue: TaskQueue): AnyTaskDefinition[] {
  return [removeFileData(ctx), pruneTasks(queue)];
}
