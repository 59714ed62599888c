import type { DomainContext } from '../domain/context.js';
import { verifyFile, scheduleVerification } from '../domain/integrity.js';
import { migrateFile } from '../domain/migration.js';
import { reconcileStorage } from '../domain/reconcile.js';
import { NoGoodCopyError, repairCopy, replicateFile, scheduleReplication, summariseFixity } from '../domain/replicas.js';
import { PermanentTaskError, type AnyTaskDefinition, type TaskDefinition } from './worker.js';

/** No good copy left: retrying cannot help; the failed task is the alarm (with the metric and `file below-policy`). */
function permanentWhenNoGoodCopy(e: unknown): never {
  if (e instanceof NoGoodCopyError) throw new PermanentTaskError(e.message);
  throw e;
}

export function storageTasks(ctx: DomainContext): AnyTaskDefinition[] {
  const migrate: TaskDefinition<'migrate-file'> = {
    name: 'migrate-file',
    async run({ fileId, location }, { signal, log }) {
      const r = await migrateFile(ctx, fileId, location, signal);
      if (r.skipped) log.info({ fileId, reason: r.skipped }, 'migration skipped');
    },
  };
  const verify: TaskDefinition<'verify-checksum'> = {
    name: 'verify-checksum',
    async run({ fileId }, { signal }) {
      const r = await verifyFile(ctx, fileId, signal);
      // Storage unreachable: retry later (the old result stays meanwhile).
      if (r.ok === null && r.reason?.startsWith('storage unavailable')) throw new Error(r.reason);
    },
  };
  const schedule: TaskDefinition<'verify-checksums'> = {
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
  const sweep: TaskDefinition<'sweep-storage'> = {
    name: 'sweep-storage',
    periodicSeconds: 86_400,
    leaseSeconds: 3600,
    async run(_p, { log }) {
      const r = await reconcileStorage(ctx, { graceSeconds: 86_400 });
      // Locations not provably this database's (owner marker) are skipped; reconcileStorage logs them.
      if (r.deleted || r.missing.length || r.skipped.length) {
        log.info({ deleted: r.deleted, missing: r.missing.length, skipped: r.skipped.map((s) => s.location) }, 'storage swept');
      }
    },
  };
  const replicate: TaskDefinition<'replicate-file'> = {
    name: 'replicate-file',
    async run({ fileId }, { signal, log }) {
      const r = await replicateFile(ctx, fileId, { signal }).catch(permanentWhenNoGoodCopy);
      if (r.skipped) log.info({ fileId, reason: r.skipped }, 'replication skipped');
    },
  };
  const repair: TaskDefinition<'repair-copy'> = {
    name: 'repair-copy',
    async run({ fileId, locationId }, { signal, log }) {
      const r = await repairCopy(ctx, fileId, locationId, signal).catch(permanentWhenNoGoodCopy);
      if (r.skipped) log.info({ fileId, locationId, reason: r.skipped }, 'repair skipped');
    },
  };
  const lagging: TaskDefinition<'replicate-below-policy'> = {
    name: 'replicate-below-policy',
    periodicSeconds: 300,
    async run(_p, { log }) {
      const n = await scheduleReplication(ctx);
      if (n) log.info({ queued: n }, 'replication queued for files below their policy');
    },
  };
  const summarise: TaskDefinition<'summarise-fixity'> = {
    name: 'summarise-fixity',
    periodicSeconds: 86_400,
    async run(_p, { log }) {
      const n = await summariseFixity(ctx);
      if (n) log.info({ summarised: n }, 'old fixity events summarised');
    },
  };
  return [migrate, verify, schedule, sweep, replicate, repair, lagging, summarise];
}
