import { pipeline } from 'node:stream/promises';
import { PassThrough, type Readable } from 'node:stream';
import { sql } from 'kysely';
import { transaction } from '../db/database.js';
import { MeasuringStream } from '../storage/measure.js';
import { Throttle } from '../storage/throttle.js';
import { newId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';

import type { DomainContext } from './context.js';
import { getLocationByName } from './locations.js';

export interface MigrationResult {
  fileId: string;
  newFileId: string | null;
  /** Why nothing was done, when nothing was. */
  skipped?: string;
}

/**
 * Moves one file instance to another location without downtime: copy the bytes to a new file
 * instance in the target, verify the copy's MD5 against the stored checksum, then in one transaction
 * repoint every object version from the old instance to the new one and drop the old row. The old
 * bytes are removed by a task that runs after FILES_REST_MIGRATION_GRACE seconds, so downloads
 * that opened the old copy finish. Idempotent: a file already in the target is left alone; a crash
 * before the commit leaves the old state (the half-made copy is removed or swept by the reconciler).
 */
export async function migrateFile(ctx: DomainContext, fileId: string, locationName: string, signal?: AbortSignal): Promise<MigrationResult> {
  const target = await getLocationByName(ctx.db, locationName);
  const file = await ctx.db.selectFrom('files').selectAll().where('id', '=', fileId).executeTakeFirst();
  if (!file) return { fileId, newFileId: null, skipped: 'the file instance no longer exists' };
  if (file.location_id === target.id) return { fileId, newFileId: null, skipped: 'already in the target location' };
  if (file.readable !== 1 || !file.uri || !file.checksum) return { fileId, newFileId: null, skipped: 'not readable (a multipart upload in progress?)' };

  const src = ctx.storage.forUri(file.uri);
  const dst = ctx.storage.forUri(target.uri);
  const newFileId = newId();
  const newUri = dst.makeUri(target.uri, newFileId);
  const meter = new MeasuringStream({ limit: null, limitError: () => new Error('unreachable'), expected: file.size });
  const source: Readable = await src.open(file.uri);
  const stages: NodeJS.ReadWriteStream[] = [];
  if (ctx.config.migrationBytesPerSecond) stages.push(new Throttle(ctx.config.migrationBytesPerSecond));
  const out = new PassThrough({ highWaterMark: 1024 * 1024 });
  const run = pipeline as unknown as (...args: unknown[]) => Promise<void>;
  const copying = run(source, ...stages, meter, out, { signal }).catch((e: unknown) => {
    out.destroy(e as Error);
    throw e;
  });
  try {
    await Promise.all([dst.save(newUri, out, { signal }), copying]);
  } catch (e) {
    await dst.delete(newUri).catch(() => {});
    throw e;
  }
  if (meter.checksum() !== file.checksum) {
    await dst.delete(newUri).catch(() => {});
    throw new Error(`copy of file ${fileId} does not match its checksum (${meter.checksum()} ≠ ${file.checksum}); the source may be corrupted`);
  }

  const now = nowMicros();
  const committed = await transaction(ctx.db, async (tx) => {
    // The source must still be there, unchanged, when we repoint (a hard delete may have won the race).
    const still = await tx.selectFrom('files').select(['id', 'checksum']).where('id', '=', fileId).executeTakeFirst();
    if (!still || still.checksum !== file.checksum) return false;
    await tx
      .insertInto('files')
      .values({
        id: newFileId, location_id: target.id, uri: newUri, storage_class: file.storage_class, size: file.size, checksum: file.checksum,
        readable: 1, writable: 0, last_check_at: now, last_check: 1, created: now, updated: now,
      })
      .execute();
    await tx.updateTable('object_versions').set({ file_id: newFileId }).where('file_id', '=', fileId).execute();
    await tx.deleteFrom('files').where('id', '=', fileId).execute();
    await ctx.queue.enqueue(tx, 'remove-file-data', { uri: file.uri }, { runAt: now + Math.round(ctx.config.migrationGrace * 1_000_000) });
    return true;
  });
  if (!committed) {
    await dst.delete(newUri).catch(() => {});
    return { fileId, newFileId: null, skipped: 'the file instance was deleted during the copy' };
  }
  ctx.queue.wake();
  ctx.log.info({ fileId, newFileId, from: file.uri, to: newUri, bytes: file.size }, 'file migrated');
  return { fileId, newFileId };
}

/**
 * Queues the migration of every readable file instance not yet in `locationName` (of one bucket, or
 * of all), and makes that location the default of the buckets concerned, so that uploads arriving
 * during the migration already go to it. Returns the number of tasks queued.
 */
export async function queueMigration(ctx: DomainContext, locationName: string, opts: { bucketId?: string } = {}): Promise<number> {
  const target = await getLocationByName(ctx.db, locationName);
  let queued = 0;
  let after = '';
  for (;;) {
    let q = ctx.db
      .selectFrom('files')
      .select(['files.id'])
      .where('files.readable', '=', 1)
      .where((eb) => eb.or([eb('files.location_id', '!=', target.id), eb('files.location_id', 'is', null)]))
      .where('files.id', '>', after)
      .orderBy('files.id')
      .limit(1000);
    if (opts.bucketId) {
      q = q.where((eb) =>
        eb.exists(
          eb.selectFrom('object_versions').select('object_versions.seq').whereRef('object_versions.file_id', '=', 'files.id').where('object_versions.bucket_id', '=', opts.bucketId!),
        ),
      );
    }
    const rows = await q.execute();
    if (rows.length === 0) break;
    await transaction(ctx.db, async (tx) => {
      for (const r of rows) await ctx.queue.enqueue(tx, 'migrate-file', { fileId: r.id, location: locationName }, { maxAttempts: 5 });
    });
    queued += rows.length;
    after = rows[rows.length - 1]!.id;
  }
  let buckets = ctx.db.updateTable('buckets').set({ default_location: target.id, updated: nowMicros() });
  if (opts.bucketId) buckets = buckets.where('id', '=', opts.bucketId);
  await buckets.execute();
  ctx.queue.wake();
  return queued;
}

export interface MigrationStatus {
  queued: number;
  running: number;
  done: number;
  failed: number;
  /** Bytes of file instances per location. */
  locations: { name: string; files: number; bytes: number }[];
}

export async function migrationStatus(ctx: DomainContext): Promise<MigrationStatus> {
  const states = await ctx.db
    .selectFrom('tasks')
    .select(['state', (eb) => eb.fn.countAll<number>().as('n')])
    .where('name', '=', 'migrate-file')
    .groupBy('state')
    .execute();
  const by = Object.fromEntries(states.map((r) => [r.state, Number(r.n)]));
  const locs = await ctx.db
    .selectFrom('locations')
    .leftJoin('files', 'files.location_id', 'locations.id')
    .select(['locations.name', (eb) => eb.fn.count<number>('files.id').as('files'), (eb) => eb.fn.coalesce(eb.fn.sum<number>('files.size'), sql<number>`0`).as('bytes')])
    .groupBy('locations.name')
    .orderBy('locations.name')
    .execute();
  return {
    queued: by.queued ?? 0,
    running: by.running ?? 0,
    done: by.done ?? 0,
    failed: by.failed ?? 0,
    locations: locs.map((l) => ({ name: l.name, files: Number(l.files), bytes: Number(l.bytes) })),
  };
}

