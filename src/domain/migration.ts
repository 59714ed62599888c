import type { Readable } from 'node:stream';
import { sql } from 'kysely';
import { transaction } from '../db/database.js';
import { Throttle } from '../storage/throttle.js';
import { newId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';

import type { DomainContext } from './context.js';
import { getLocationByName, locationUsage } from './locations.js';
import { receive } from './receive.js';
import { insertFileInstance } from './ledger.js';

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
  // A good copy already in the target becomes the first copy, and the first copy one of the others:
  // no bytes move and no copy is dropped (the policy still holds).
  const there = await ctx.db.selectFrom('file_copies').selectAll().where('file_id', '=', fileId).where('location_id', '=', target.id).executeTakeFirst();
  if (there && there.last_check !== 0) {
    const swapped = await transaction(ctx.db, async (tx) => {
      const now = nowMicros();
      const cur = await tx.selectFrom('files').select(['location_id', 'uri', 'last_check', 'last_check_at']).where('id', '=', fileId).executeTakeFirst();
      if (!cur || cur.uri !== file.uri) return false;
      await tx.deleteFrom('file_copies').where('file_id', '=', fileId).where('location_id', '=', target.id).execute();
      await tx.updateTable('files').set({ location_id: target.id, uri: there.uri, last_check: there.last_check, last_check_at: there.last_check_at, updated: now }).where('id', '=', fileId).execute();
      await tx.insertInto('file_copies').values({ file_id: fileId, location_id: cur.location_id!, uri: cur.uri!, last_check: cur.last_check, last_check_at: cur.last_check_at, created: now, updated: now }).execute();
      return true;
    });
    return swapped ? { fileId, newFileId: null, skipped: 'a copy was already in the target location: it is now the first copy' } : { fileId, newFileId: null, skipped: 'the file changed meanwhile' };
  }

  const oldUri = file.uri;
  const src = ctx.storage.forUri(oldUri);
  const dst = ctx.storage.forUri(target.uri);
  const newFileId = newId();
  const newUri = dst.makeUri(target.uri, newFileId);
  const source: Readable = await src.open(file.uri);
  try {
    await receive({
      source,
      origin: 'storage',
      store: (body, sig) => dst.save(newUri, body, { signal: sig }),
      discard: () => dst.delete(newUri),
      expected: file.size,
      through: ctx.config.migrationBytesPerSecond ? [new Throttle(ctx.config.migrationBytesPerSecond)] : [],
      verify: (meter) => {
        if (meter.checksum() !== file.checksum) {
          throw new Error(`copy of file ${fileId} does not match its checksum (${meter.checksum()} ≠ ${file.checksum}); the source may be corrupted`);
        }
      },
      signal,
    });
  } finally {
    source.destroy();
  }

  const now = nowMicros();
  const committed = await transaction(ctx.db, async (tx) => {
    // The source must still be there, unchanged, when we repoint (a hard delete may have won the race).
    const still = await tx.selectFrom('files').select(['id', 'checksum']).where('id', '=', fileId).executeTakeFirst();
    if (!still || still.checksum !== file.checksum) return false;
    await insertFileInstance(
      tx,
      { id: newFileId, locationId: target.id, uri: newUri, storageClass: file.storage_class, size: file.size, checksum: file.checksum, state: 'readable', checkedAt: now },
      now,
    );
    await tx.updateTable('object_versions').set({ file_id: newFileId }).where('file_id', '=', fileId).execute();
    // The further copies, a bad one in the target included (the new first copy replaces it), and the fixity history follow.
    const replaced = await tx.deleteFrom('file_copies').where('file_id', '=', fileId).where('location_id', '=', target.id).returning('uri').execute();
    for (const r of replaced) await ctx.queue.enqueue(tx, 'remove-file-data', { uri: r.uri });
    await tx.updateTable('file_copies').set({ file_id: newFileId }).where('file_id', '=', fileId).execute();
    await tx.updateTable('fixity_events').set({ file_id: newFileId }).where('file_id', '=', fileId).execute();
    await tx.updateTable('fixity_summary').set({ file_id: newFileId }).where('file_id', '=', fileId).execute();
    await tx.deleteFrom('files').where('id', '=', fileId).execute();
    await ctx.queue.enqueue(tx, 'remove-file-data', { uri: oldUri }, { runAt: now + Math.round(ctx.config.migrationGrace * 1_000_000) });
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
      for (const r of rows) await ctx.queue.enqueue(tx, 'migrate-file', { fileId: r.id, location: locationName });
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

/** The migrate-file tasks towards one location, by state (`queued + running` files are left to move). */
export interface MigrationTarget {
  location: string;
  queued: number;
  running: number;
  done: number;
  failed: number;
}

export interface MigrationStatus {
  queued: number;
  running: number;
  done: number;
  failed: number;
  /** Per target location (the payload's `location`), those with a task in any state; done tasks are pruned after a week. */
  targets: MigrationTarget[];
  /** Bytes of file instances per location. */
  locations: { name: string; files: number; bytes: number }[];
}

/**
 * The migrate-file tasks by target location and state (the target is the payload's `location`),
 * ordered by location name.
 */
export async function migrationTargets(ctx: DomainContext): Promise<MigrationTarget[]> {
  // The target is in the JSON payload: each dialect has its own JSON accessor.
  const target = ctx.dialect === 'postgres' ? sql<string>`(payload::json ->> 'location')` : sql<string>`json_extract(payload, '$.location')`;
  const rows = await ctx.db
    .selectFrom('tasks')
    .select([target.as('location'), 'state', (eb) => eb.fn.countAll<number>().as('n')])
    .where('name', '=', 'migrate-file')
    .groupBy([target, 'state'])
    .execute();
  const targets = new Map<string, MigrationTarget>();
  for (const r of rows) {
    const state = r.state as 'queued' | 'running' | 'done' | 'failed';
    if (!['queued', 'running', 'done', 'failed'].includes(state)) continue;
    const name = String(r.location);
    const t = targets.get(name) ?? { location: name, queued: 0, running: 0, done: 0, failed: 0 };
    t[state] += Number(r.n);
    targets.set(name, t);
  }
  return [...targets.values()].sort((a, b) => (a.location < b.location ? -1 : a.location > b.location ? 1 : 0));
}

/**
 * The migrations the task queue records: migrate-file tasks by state, overall and per target location,
 * and what each location holds now. (A task names the file and the target only: the source location
 * is the file's location until its copy commits, then that file instance is gone.)
 */
export async function migrationStatus(ctx: DomainContext): Promise<MigrationStatus> {
  const [targets, locations] = await Promise.all([migrationTargets(ctx), locationUsage(ctx.db)]);
  const sum = (k: 'queued' | 'running' | 'done' | 'failed') => targets.reduce((n, t) => n + t[k], 0);
  return { queued: sum('queued'), running: sum('running'), done: sum('done'), failed: sum('failed'), targets, locations };
}
