import type { DomainContext } from '../domain/context.js';
import { verifyFile, scheduleVerification } from '../domain/integrity.js';
import { migrateFile } from '../domain/migration.js';
import { reconcileStorage } from '../domain/reconcile.js';
import type { TaskDefinition } from './worker.js';

export function storageTasks(ctx: DomainContext): TaskDefinition<never>[] {
  const migrate: TaskDefinition<{ fileId: string; location: string }> = {
    name: 'migrate-file',
    async run({ fileId, location }, { signal, log }) {
      const r = await migrateFile(ctx, fileId, location, signal);
      if (r.skipped) log.info({ fileId, reason: r.skipped }, 'migration skipped');
    },
  };
  const verify: TaskDefinition<{ fileId: string }> = {
    name: 'verify-checksum',
    async run({ fileId }, { signal }) {
      const r = await verifyFile(ctx, fileId, signal);
      // Storage unreachable: retry later (the old result stays meanwhile).
      if (r.ok === null && r.reason?.startsWith('storage unavailable')) throw new Error(r.reason);
    },
  };
  const schedule: TaskDefinition<Record<string, never>> = {
    name: 'verify-checksums',
    periodicSeconds: ctx.config.checksumVerifyInterval,
    async run(_p, { log }) {
      const n = await scheduleVerification(ctx);
      if (n) log.info({ queued: n }, 'integrity checks queued');
    },
  };
  // Crash leftovers (a file renamed into place whose commit never happened, temporary files of an
  // interrupted upload) are deleted once a day, when older than a day: no upload lasts that long
  // without a row, since multipart files get their row at initiation.
  const sweep: TaskDefinition<Record<string, never>> = {
    name: 'sweep-storage',
    periodicSeconds: 86_400,
    leaseSeconds: 3600,
    async run(_p, { log }) {
      const r = await reconcileStorage(ctx, { graceSeconds: 86_400 });
      if (r.deleted || r.missing.length) log.info({ deleted: r.deleted, missing: r.missing.length }, 'storage swept');
    },
  };
  return [migrate, verify, schedule, sweep] as TaskDefinition<never>[];
}
