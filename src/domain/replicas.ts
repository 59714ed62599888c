import type { Readable } from 'node:stream';
import { sql } from 'kysely';
import { AppError } from '../errors.js';
import { isUniqueViolation, transaction } from '../db/database.js';
import type { Executor, Tx } from '../db/schema.js';
import type { Config } from '../config.js';
import { newId } from '../util/ids.js';
import { DAY_MICROS, nowMicros } from '../util/time.js';
import { Throttle } from '../storage/throttle.js';
import type { DomainContext } from './context.js';
import type { Bucket, Location } from './models.js';
import { listLocations } from './locations.js';
import { receive } from './receive.js';

/**
 * Replicas (issue 18). A file instance's own location and URI are its first copy; `file_copies`
 * holds the others, at most one per location. A bucket requires N copies of each of its files
 * (`buckets.copies`, or FILES_REST_DEFAULT_COPIES); an upload is acknowledged with its first copy
 * and the `replicate-file` job, written in the upload's transaction, makes the rest, each copied to
 * a URI no row names yet, verified against the MD5, and only then recorded. Every check, failure,
 * repair and replication of a copy is a row of `fixity_events`.
 *
 * The first copy is always the best one known: when it fails a check and another copy does not,
 * the two swap roles in the transaction that records the failure, so reads, X-Accel-Redirect and
 * everything else that reads `files.uri` keep using a good copy; `files.last_check = 0` then means
 * that no copy is known good.
 */

/** One copy of a file instance. */
export interface FileCopy {
  locationId: string;
  location: string;
  uri: string;
  /** The file instance's own location and URI. */
  primary: boolean;
  lastCheckAt: number | null;
  /** true: matched at its last check; false: missing or wrong; null: not checked since it was made. */
  lastCheck: boolean | null;
}

/** A copy that is not known bad (it matched, or was never checked). */
export function isGood(c: Pick<FileCopy, 'lastCheck'>): boolean {
  return c.lastCheck !== false;
}

/** Copies a bucket requires of each of its files. */
export function requiredCopies(config: Pick<Config, 'defaultCopies'>, bucket: Pick<Bucket, 'copies'>): number {
  return bucket.copies ?? config.defaultCopies;
}

/** Thrown when a copy cannot be repaired because no other copy passes its check. */
export class NoGoodCopyError extends Error {}

/** Copies a file of a bucket with `required` > 1 lacks are made by the worker: queued in the caller's transaction. */
export async function queueReplication(ctx: DomainContext, tx: Tx, fileId: string, required: number): Promise<void> {
  if (required > 1) await ctx.queue.enqueue(tx, 'replicate-file', { fileId });
}

/** Copies the file instance requires: the largest policy among the buckets whose versions use it (snapshots share files). */
export async function fileRequiredCopies(ctx: DomainContext, db: Executor, fileId: string): Promise<number> {
  const r = await db
    .selectFrom('object_versions')
    .innerJoin('buckets', 'buckets.id', 'object_versions.bucket_id')
    .select((eb) => eb.fn.max(eb.fn.coalesce('buckets.copies', sql<number>`${ctx.config.defaultCopies}`)).as('n'))
    .where('object_versions.file_id', '=', fileId)
    .executeTakeFirst();
  return r?.n === null || r?.n === undefined ? ctx.config.defaultCopies : Number(r.n);
}

/** Every copy of a file instance, the first copy first; null when the file instance does not exist. */
export async function copiesOf(db: Executor, fileId: string) {
  const file = await db
    .selectFrom('files')
    .leftJoin('locations', 'locations.id', 'files.location_id')
    .select(['files.id', 'files.location_id', 'files.uri', 'files.size', 'files.checksum', 'files.readable', 'files.last_check', 'files.last_check_at', 'locations.name as location'])
    .where('files.id', '=', fileId)
    .executeTakeFirst();
  if (!file) return null;
  const rows = await db
    .selectFrom('file_copies')
    .innerJoin('locations', 'locations.id', 'file_copies.location_id')
    .select(['file_copies.location_id', 'file_copies.uri', 'file_copies.last_check', 'file_copies.last_check_at', 'locations.name as location'])
    .where('file_copies.file_id', '=', fileId)
    .orderBy('file_copies.created')
    .execute();
  const copies: FileCopy[] = [];
  if (file.location_id && file.uri) {
    copies.push({
      locationId: file.location_id,
      location: file.location ?? file.location_id,
      uri: file.uri,
      primary: true,
      lastCheckAt: file.last_check_at,
      lastCheck: file.last_check === null ? null : file.last_check === 1,
    });
  }
  for (const r of rows) {
    copies.push({ locationId: r.location_id, location: r.location, uri: r.uri, primary: false, lastCheckAt: r.last_check_at, lastCheck: r.last_check === null ? null : r.last_check === 1 });
  }
  return { file: { id: file.id, size: Number(file.size), checksum: file.checksum, readable: file.readable === 1 }, copies };
}

export type FixityKind = 'check' | 'failure' | 'repair' | 'replicate';

export async function recordFixity(
  db: Executor,
  e: { fileId: string; locationId: string; kind: FixityKind; ok: boolean; checksumFound?: string | null; detail?: string | null },
  at = nowMicros(),
): Promise<void> {
  await db
    .insertInto('fixity_events')
    .values({ file_id: e.fileId, location_id: e.locationId, at, kind: e.kind, ok: e.ok ? 1 : 0, checksum_found: e.checksumFound ?? null, detail: e.detail ?? null })
    .execute();
}

/**
 * Records the result of checking (or reading) the copy of `fileId` in `locationId` at `uri`: its
 * last check, a fixity event, and for a failure the `repair-copy` job; a failed first copy swaps
 * roles with a copy not known bad. All in one transaction. Nothing is recorded when the copy is no
 * longer at `uri` (repaired or moved meanwhile). With `onlyIfGood`, a failure of a copy already
 * known bad records nothing (reads report each failure once). Returns false when nothing was recorded.
 */
export async function recordCopyResult(
  ctx: DomainContext,
  r: { fileId: string; locationId: string; uri: string; ok: boolean; checksumFound?: string | null; detail?: string; kind?: FixityKind; onlyIfGood?: boolean },
): Promise<boolean> {
  const now = nowMicros();
  const recorded = await transaction(ctx.db, async (tx) => {
    const file = await tx.selectFrom('files').select(['location_id', 'uri', 'last_check', 'last_check_at']).where('id', '=', r.fileId).executeTakeFirst();
    if (!file) return false;
    const primary = file.location_id === r.locationId && file.uri === r.uri;
    if (primary) {
      if (r.onlyIfGood && file.last_check === 0) return false;
      await tx.updateTable('files').set({ last_check: r.ok ? 1 : 0, last_check_at: now }).where('id', '=', r.fileId).execute();
    } else {
      const c = await tx.selectFrom('file_copies').select(['last_check']).where('file_id', '=', r.fileId).where('location_id', '=', r.locationId).where('uri', '=', r.uri).executeTakeFirst();
      if (!c) return false;
      if (r.onlyIfGood && c.last_check === 0) return false;
      await tx.updateTable('file_copies').set({ last_check: r.ok ? 1 : 0, last_check_at: now, updated: now }).where('file_id', '=', r.fileId).where('location_id', '=', r.locationId).execute();
    }
    await recordFixity(tx, { fileId: r.fileId, locationId: r.locationId, kind: r.kind ?? (r.ok ? 'check' : 'failure'), ok: r.ok, checksumFound: r.checksumFound ?? null, detail: r.detail ?? null }, now);
    // Keep the best copy first: a failed first copy gives way to one not known bad; a good copy
    // takes the place of a first copy known bad.
    if (primary && !r.ok) {
      const other = await tx.selectFrom('file_copies').select(['location_id', 'uri', 'last_check', 'last_check_at']).where('file_id', '=', r.fileId).where((eb) => eb.or([eb('last_check', 'is', null), eb('last_check', '=', 1)])).orderBy('created').executeTakeFirst();
      if (other) await swapFirstCopy(tx, r.fileId, { locationId: r.locationId, uri: r.uri, lastCheck: 0, lastCheckAt: now }, other, now);
    } else if (!primary && r.ok && file.last_check === 0 && file.location_id && file.uri) {
      await swapFirstCopy(tx, r.fileId, { locationId: file.location_id, uri: file.uri, lastCheck: 0, lastCheckAt: file.last_check_at }, { location_id: r.locationId, uri: r.uri, last_check: 1, last_check_at: now }, now);
    }
    if (!r.ok) await ctx.queue.enqueue(tx, 'repair-copy', { fileId: r.fileId, locationId: r.locationId });
    return true;
  });
  if (recorded && !r.ok) {
    ctx.queue.wake();
    ctx.log.error({ fileId: r.fileId, locationId: r.locationId, uri: r.uri, reason: r.detail }, 'a copy of a file failed its check; its repair is queued');
  }
  return recorded;
}

/** The copy `next` becomes the first copy, and the first copy `old` one of the others. */
async function swapFirstCopy(
  tx: Tx,
  fileId: string,
  old: { locationId: string; uri: string; lastCheck: number | null; lastCheckAt: number | null },
  next: { location_id: string; uri: string; last_check: number | null; last_check_at: number | null },
  now: number,
): Promise<void> {
  await tx.deleteFrom('file_copies').where('file_id', '=', fileId).where('location_id', '=', next.location_id).execute();
  await tx
    .updateTable('files')
    .set({ location_id: next.location_id, uri: next.uri, last_check: next.last_check, last_check_at: next.last_check_at, updated: now })
    .where('id', '=', fileId)
    .execute();
  await tx
    .insertInto('file_copies')
    .values({ file_id: fileId, location_id: old.locationId, uri: old.uri, last_check: old.lastCheck, last_check_at: old.lastCheckAt, created: now, updated: now })
    .execute();
}

/** The locations that take further copies, in order (FILES_REST_REPLICA_LOCATIONS, else every location by name). */
export async function replicaTargets(ctx: DomainContext): Promise<Location[]> {
  const all = await listLocations(ctx.db);
  if (ctx.config.replicaLocations.length === 0) return all;
  const byName = new Map(all.map((l) => [l.name, l]));
  const out: Location[] = [];
  for (const name of ctx.config.replicaLocations) {
    const l = byName.get(name);
    if (l) out.push(l);
    else ctx.log.warn({ location: name }, `FILES_REST_REPLICA_LOCATIONS names ${name}, which is not a location`);
  }
  return out;
}

/**
 * Copies the bytes of `source` (a copy of the file) into `location` at a new URI no row names, and
 * verifies their MD5 and size as they pass. Returns the new URI; on failure nothing is left there.
 * A source that turns out missing or wrong is reported (recordCopyResult) and the error says so.
 */
async function copyBytes(ctx: DomainContext, file: { id: string; size: number; checksum: string }, source: FileCopy, location: Location, signal?: AbortSignal): Promise<string> {
  const src = ctx.storage.forUri(source.uri);
  const dst = ctx.storage.forUri(location.uri);
  const uri = dst.makeUri(location.uri, newId());
  const stream: Readable = await src.open(source.uri);
  try {
    await receive({
      source: stream,
      origin: 'storage',
      store: (body, sig) => dst.save(uri, body, { signal: sig }),
      discard: () => dst.delete(uri),
      expected: file.size,
      through: ctx.config.migrationBytesPerSecond ? [new Throttle(ctx.config.migrationBytesPerSecond)] : [],
      verify: (meter) => {
        if (meter.checksum() !== file.checksum) throw new SourceMismatch(meter.checksum());
      },
      signal,
    });
  } finally {
    stream.destroy();
  }
  return uri;
}

class SourceMismatch extends Error {
  constructor(readonly found: string) {
    super(`the source copy does not match the file's checksum (found ${found})`);
  }
}

function sourceFailure(e: unknown): { checksumFound: string | null; detail: string } | null {
  if (e instanceof SourceMismatch) return { checksumFound: e.found, detail: e.message };
  if (e instanceof AppError && (e.code === 'FILE_SMALLER_THAN_EXPECTED' || e.code === 'FILE_LARGER_THAN_EXPECTED')) return { checksumFound: null, detail: `the source copy has the wrong size: ${e.message}` };
  const kind = (e as { kind?: string } | null)?.kind;
  if (kind === 'missing') return { checksumFound: null, detail: 'the source copy is missing' };
  return null;
}

/**
 * Copies `file` from its good copies (first copy first) into `location`. A source found missing or
 * wrong is recorded and the next one tried. Returns the new URI.
 */
async function copyFromGood(ctx: DomainContext, file: { id: string; size: number; checksum: string }, sources: FileCopy[], location: Location, signal?: AbortSignal): Promise<{ uri: string; from: FileCopy }> {
  let last: unknown = new NoGoodCopyError(`no copy of file ${file.id} passes its check`);
  for (const s of sources) {
    try {
      return { uri: await copyBytes(ctx, file, s, location, signal), from: s };
    } catch (e) {
      const bad = sourceFailure(e);
      if (!bad) throw e; // the target (or the network) failed: retry later
      await recordCopyResult(ctx, { fileId: file.id, locationId: s.locationId, uri: s.uri, ok: false, ...bad });
      last = new NoGoodCopyError(`no copy of file ${file.id} passes its check (last: ${bad.detail})`);
    }
  }
  throw last;
}

export interface ReplicationResult {
  fileId: string;
  required: number;
  /** Good copies once done. */
  good: number;
  /** Names of the locations that received a copy. */
  made: string[];
  skipped?: string;
}

/**
 * Makes the copies `fileId` lacks (its policy, or `upTo`), one location at a time: the next
 * replica target without a copy, from a good copy, verified, then recorded. Idempotent: a file that
 * has its copies is left alone; two runs racing on one location keep one copy (the other's bytes go).
 * Throws when a copy could not be made (no location left, storage unreachable): the job retries.
 */
export async function replicateFile(ctx: DomainContext, fileId: string, opts: { upTo?: number; signal?: AbortSignal } = {}): Promise<ReplicationResult> {
  const required = opts.upTo ?? (await fileRequiredCopies(ctx, ctx.db, fileId));
  const made: string[] = [];
  for (;;) {
    const state = await copiesOf(ctx.db, fileId);
    if (!state) return { fileId, required, good: 0, made, skipped: 'the file instance no longer exists' };
    const { file, copies } = state;
    if (!file.readable || !file.checksum) return { fileId, required, good: 0, made, skipped: 'not readable' };
    const good = copies.filter(isGood);
    if (good.length >= required) return { fileId, required, good: good.length, made };
    if (good.length === 0) throw new NoGoodCopyError(`file ${fileId} has no good copy to replicate from`);
    const held = new Set(copies.map((c) => c.locationId));
    const target = (await replicaTargets(ctx)).find((l) => !held.has(l.id));
    if (!target) throw new Error(`file ${fileId} has ${good.length} of ${required} copies and no further location to put one in (FILES_REST_REPLICA_LOCATIONS)`);
    const { uri } = await copyFromGood(ctx, { id: file.id, size: file.size, checksum: file.checksum }, good, target, opts.signal);
    const now = nowMicros();
    let committed = false;
    try {
      committed = await transaction(ctx.db, async (tx) => {
        const still = await tx.selectFrom('files').select(['checksum', 'location_id']).where('id', '=', fileId).executeTakeFirst();
        if (!still || still.checksum !== file.checksum || still.location_id === target.id) return false;
        await tx.insertInto('file_copies').values({ file_id: fileId, location_id: target.id, uri, last_check: 1, last_check_at: now, created: now, updated: now }).execute();
        await recordFixity(tx, { fileId, locationId: target.id, kind: 'replicate', ok: true, checksumFound: file.checksum, detail: `copied from ${good[0]!.location}` }, now);
        return true;
      });
    } catch (e) {
      if (!isUniqueViolation(e)) throw e;
    }
    if (!committed) {
      await ctx.storage.forUri(uri).delete(uri).catch(() => {});
      // Another run made this copy, or the file went: look again.
      const again = await copiesOf(ctx.db, fileId);
      if (!again || again.copies.some((c) => c.locationId === target.id)) continue;
      return { fileId, required, good: good.length, made, skipped: 'the file changed during the copy' };
    }
    made.push(target.name);
    ctx.log.info({ fileId, location: target.name, uri, bytes: file.size }, 'file copy made');
  }
}

/**
 * Replaces the copy of `fileId` in `locationId`, known bad, from a copy that passes its check: the
 * bytes go to a new URI in that location, verified; then, in one transaction, the copy points at
 * them, its check is recorded good, a `repair` event is written, and the bad bytes' removal is queued.
 * A copy that is no longer known bad is left alone. No good copy: NoGoodCopyError (the job fails for
 * good, and the failed task is the alarm).
 */
export async function repairCopy(ctx: DomainContext, fileId: string, locationId: string, signal?: AbortSignal): Promise<{ repaired: boolean; skipped?: string }> {
  const state = await copiesOf(ctx.db, fileId);
  if (!state) return { repaired: false, skipped: 'the file instance no longer exists' };
  const { file, copies } = state;
  const bad = copies.find((c) => c.locationId === locationId);
  if (!bad) return { repaired: false, skipped: 'no copy in that location' };
  if (bad.lastCheck !== false) return { repaired: false, skipped: 'the copy is not known bad' };
  if (!file.checksum) return { repaired: false, skipped: 'not readable' };
  const sources = copies.filter((c) => c !== bad && isGood(c));
  if (sources.length === 0) {
    await recordFixity(ctx.db, { fileId, locationId, kind: 'repair', ok: false, detail: 'no good copy to repair from' });
    throw new NoGoodCopyError(`file ${fileId}: no copy passes its check; the copy in ${bad.location} cannot be repaired`);
  }
  const location = (await listLocations(ctx.db)).find((l) => l.id === locationId);
  if (!location) return { repaired: false, skipped: 'the location no longer exists' };
  const { uri, from } = await copyFromGood(ctx, { id: file.id, size: file.size, checksum: file.checksum }, sources, location, signal);
  const now = nowMicros();
  const committed = await transaction(ctx.db, async (tx) => {
    let n: bigint;
    if (bad.primary) {
      const r = await tx.updateTable('files').set({ uri, last_check: 1, last_check_at: now, updated: now }).where('id', '=', fileId).where('uri', '=', bad.uri).where('last_check', '=', 0).executeTakeFirst();
      n = r.numUpdatedRows;
    } else {
      const r = await tx.updateTable('file_copies').set({ uri, last_check: 1, last_check_at: now, updated: now }).where('file_id', '=', fileId).where('location_id', '=', locationId).where('uri', '=', bad.uri).where('last_check', '=', 0).executeTakeFirst();
      n = r.numUpdatedRows;
    }
    if (Number(n) !== 1) return false;
    await recordFixity(tx, { fileId, locationId, kind: 'repair', ok: true, checksumFound: file.checksum, detail: `replaced from the copy in ${from.location}` }, now);
    await ctx.queue.enqueue(tx, 'remove-file-data', { uri: bad.uri }, { runAt: now + Math.round(ctx.config.migrationGrace * 1_000_000) });
    // A repaired copy takes the place of a first copy known bad.
    if (!bad.primary) {
      const f = await tx.selectFrom('files').select(['location_id', 'uri', 'last_check', 'last_check_at']).where('id', '=', fileId).executeTakeFirst();
      if (f && f.last_check === 0 && f.location_id && f.uri) {
        await swapFirstCopy(tx, fileId, { locationId: f.location_id, uri: f.uri, lastCheck: 0, lastCheckAt: f.last_check_at }, { location_id: locationId, uri, last_check: 1, last_check_at: now }, now);
      }
    }
    return true;
  });
  if (!committed) {
    await ctx.storage.forUri(uri).delete(uri).catch(() => {});
    return { repaired: false, skipped: 'the copy changed during the repair' };
  }
  ctx.queue.wake();
  ctx.log.warn({ fileId, location: location.name, from: from.location, uri }, 'copy of a file repaired');
  return { repaired: true };
}

/** What `file status` and the REST views show of one file instance. */
export interface FileStatus {
  file_id: string;
  size: number;
  checksum: string | null;
  required_copies: number;
  good_copies: number;
  copies: { location: string; uri: string; first: boolean; last_check_at: number | null; last_check: boolean | null }[];
}

export async function fileStatus(ctx: DomainContext, fileId: string): Promise<FileStatus> {
  const state = await copiesOf(ctx.db, fileId);
  if (!state) throw new AppError('OBJECT_NOT_FOUND');
  return {
    file_id: fileId,
    size: state.file.size,
    checksum: state.file.checksum,
    required_copies: await fileRequiredCopies(ctx, ctx.db, fileId),
    good_copies: state.copies.filter(isGood).length,
    copies: state.copies.map((c) => ({ location: c.location, uri: c.uri, first: c.primary, last_check_at: c.lastCheckAt, last_check: c.lastCheck })),
  };
}

/** Good copies of each file (SQL): 1 for a first copy not known bad, plus its other copies not known bad. */
const GOOD_COPIES = sql<number>`(case when files.last_check = 0 then 0 else 1 end + (select count(*) from file_copies c where c.file_id = files.id and (c.last_check is null or c.last_check = 1)))`;

/** Copies required of each file (SQL): the largest policy of the buckets whose versions use it. */
function requiredSql(dflt: number) {
  return sql<number>`(select max(coalesce(b.copies, ${sql.lit(dflt)})) from object_versions v join buckets b on b.id = v.bucket_id where v.file_id = files.id)`;
}

/**
 * Does any file require more than one copy? When not (the default), a file is below its policy only
 * when its first copy is known bad, and the lag queries need not count copies file by file.
 */
async function anyReplication(ctx: DomainContext): Promise<boolean> {
  if (ctx.config.defaultCopies > 1) return true;
  const b = await ctx.db.selectFrom('buckets').select('id').where('copies', '>', 1).limit(1).executeTakeFirst();
  return b !== undefined;
}

export interface BelowPolicy {
  file_id: string;
  size: number;
  required: number;
  good: number;
}

/**
 * Readable files with fewer good copies than their policy requires (replication lag, and files
 * with no good copy left: `good` 0), up to `limit`, files with no good copy first.
 */
export async function filesBelowPolicy(ctx: DomainContext, opts: { limit?: number } = {}): Promise<BelowPolicy[]> {
  let q = ctx.db.selectFrom('files');
  if (!(await anyReplication(ctx))) q = q.where('files.last_check', '=', 0);
  const rows = await q
    .select(['files.id', 'files.size', GOOD_COPIES.as('good'), requiredSql(ctx.config.defaultCopies).as('required')])
    .where('files.readable', '=', 1)
    .where(sql<boolean>`${GOOD_COPIES} < coalesce(${requiredSql(ctx.config.defaultCopies)}, 1)`)
    .orderBy(sql`${GOOD_COPIES}`)
    .orderBy('files.id')
    .limit(opts.limit ?? 1000)
    .execute();
  return rows.map((r) => ({ file_id: r.id, size: Number(r.size), required: Number(r.required ?? 1), good: Number(r.good) }));
}

/** Replication lag for the metrics: files and bytes below their policy, and files with no good copy. */
export async function replicationLag(ctx: DomainContext): Promise<{ files: number; bytes: number; noGoodCopy: number }> {
  let q = ctx.db.selectFrom('files');
  if (!(await anyReplication(ctx))) q = q.where('files.last_check', '=', 0);
  const r = await q
    .select([
      (eb) => eb.fn.countAll<number>().as('files'),
      (eb) => eb.fn.coalesce(eb.fn.sum<number>('files.size'), sql<number>`0`).as('bytes'),
      sql<number>`coalesce(sum(case when ${GOOD_COPIES} = 0 then 1 else 0 end), 0)`.as('none'),
    ])
    .where('files.readable', '=', 1)
    .where(sql<boolean>`${GOOD_COPIES} < coalesce(${requiredSql(ctx.config.defaultCopies)}, 1)`)
    .executeTakeFirstOrThrow();
  return { files: Number(r.files), bytes: Number(r.bytes), noGoodCopy: Number(r.none) };
}

/**
 * Queues `replicate-file` for files below their policy that have no such job queued or running
 * (a location that was unreachable is back, a policy was raised), up to `limit`. Periodic.
 */
export async function scheduleReplication(ctx: DomainContext, limit = 1000): Promise<number> {
  const below = (await filesBelowPolicy(ctx, { limit })).filter((f) => f.good > 0);
  if (below.length === 0) return 0;
  const pending = new Set(
    (await ctx.db.selectFrom('tasks').select('payload').where('name', '=', 'replicate-file').where('state', 'in', ['queued', 'running']).execute()).map((r) => (JSON.parse(r.payload) as { fileId: string }).fileId),
  );
  const todo = below.filter((f) => !pending.has(f.file_id));
  if (todo.length === 0) return 0;
  await transaction(ctx.db, async (tx) => {
    for (const f of todo) await ctx.queue.enqueue(tx, 'replicate-file', { fileId: f.file_id });
  });
  ctx.queue.wake();
  return todo.length;
}

/** Sets a bucket's replication policy (null: the default) and queues the copies its files now lack. */
export async function setBucketCopies(ctx: DomainContext, bucketId: string, copies: number | null): Promise<number> {
  if (copies !== null && (!Number.isInteger(copies) || copies < 1 || copies > 10)) {
    throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'copies', message: 'expected a whole number from 1 to 10, or default' }] });
  }
  const r = await ctx.db.updateTable('buckets').set({ copies, updated: nowMicros() }).where('id', '=', bucketId).executeTakeFirst();
  if (Number(r.numUpdatedRows) !== 1) throw new AppError('BUCKET_NOT_FOUND');
  return scheduleReplication(ctx, 1_000_000);
}

/** A fixity event as the admin command and the REST view show it. */
export interface FixityEvent {
  at: number;
  location: string;
  kind: string;
  ok: boolean;
  checksum_found: string | null;
  detail: string | null;
}

/** The fixity history of a file instance: its events (oldest first) and the summary of pruned ones. */
export async function fixityHistory(ctx: DomainContext, fileId: string, opts: { limit?: number } = {}) {
  const names = new Map((await listLocations(ctx.db)).map((l) => [l.id, l.name]));
  const events = await ctx.db.selectFrom('fixity_events').selectAll().where('file_id', '=', fileId).orderBy('at', 'desc').orderBy('id', 'desc').limit(opts.limit ?? 1000).execute();
  const summary = await ctx.db.selectFrom('fixity_summary').selectAll().where('file_id', '=', fileId).orderBy('location_id').orderBy('kind').execute();
  return {
    events: events.reverse().map((e): FixityEvent => ({ at: Number(e.at), location: names.get(e.location_id) ?? e.location_id, kind: e.kind, ok: e.ok === 1, checksum_found: e.checksum_found, detail: e.detail })),
    summary: summary.map((s) => ({ location: names.get(s.location_id) ?? s.location_id, kind: s.kind, count: Number(s.count), failed: Number(s.failed), first_at: Number(s.first_at), last_at: Number(s.last_at) })),
  };
}

/**
 * Summarises fixity events older than FILES_REST_FIXITY_HISTORY_DAYS into `fixity_summary` (count,
 * failures, first and last time, per file, location and kind) and removes them, in batches, each in
 * one transaction. Returns the number of events summarised.
 */
export async function summariseFixity(ctx: DomainContext, opts: { olderThanDays?: number } = {}): Promise<number> {
  const cutoff = nowMicros() - Math.round((opts.olderThanDays ?? ctx.config.fixityHistoryDays) * DAY_MICROS);
  let total = 0;
  for (;;) {
    const n = await transaction(ctx.db, async (tx) => {
      const batch = await tx.selectFrom('fixity_events').selectAll().where('at', '<', cutoff).orderBy('id').limit(1000).execute();
      if (batch.length === 0) return 0;
      const groups = new Map<string, { file_id: string; location_id: string; kind: string; count: number; failed: number; first_at: number; last_at: number }>();
      for (const e of batch) {
        const k = `${e.file_id}\0${e.location_id}\0${e.kind}`;
        const g = groups.get(k) ?? { file_id: e.file_id, location_id: e.location_id, kind: e.kind, count: 0, failed: 0, first_at: Number(e.at), last_at: Number(e.at) };
        g.count++;
        if (e.ok !== 1) g.failed++;
        g.first_at = Math.min(g.first_at, Number(e.at));
        g.last_at = Math.max(g.last_at, Number(e.at));
        groups.set(k, g);
      }
      for (const g of groups.values()) {
        await tx
          .insertInto('fixity_summary')
          .values(g)
          .onConflict((oc) =>
            oc.columns(['file_id', 'location_id', 'kind']).doUpdateSet({
              count: sql`fixity_summary.count + ${g.count}`,
              failed: sql`fixity_summary.failed + ${g.failed}`,
              first_at: sql`case when fixity_summary.first_at < ${g.first_at} then fixity_summary.first_at else ${g.first_at} end`,
              last_at: sql`case when fixity_summary.last_at > ${g.last_at} then fixity_summary.last_at else ${g.last_at} end`,
            }),
          )
          .execute();
      }
      await tx.deleteFrom('fixity_events').where('id', 'in', batch.map((e) => e.id)).execute();
      return batch.length;
    });
    total += n;
    if (n < 1000) return total;
  }
}

/** A file instance named by its id, or by `bucket/key` (the head version's file). */
export async function resolveFileRef(ctx: DomainContext, ref: string): Promise<string> {
  const slash = ref.indexOf('/');
  if (slash < 0) {
    const f = await ctx.db.selectFrom('files').select('id').where('id', '=', ref).executeTakeFirst();
    if (!f) throw new AppError('OBJECT_NOT_FOUND');
    return f.id;
  }
  const v = await ctx.db
    .selectFrom('object_versions')
    .select('file_id')
    .where('bucket_id', '=', ref.slice(0, slash))
    .where('key', '=', ref.slice(slash + 1))
    .where('is_head', '=', 1)
    .executeTakeFirst();
  if (!v?.file_id) throw new AppError('OBJECT_NOT_FOUND');
  return v.file_id;
}

/**
 * Removes a location. Refused (LOCATION_IN_USE) while it is a bucket's default location, holds a file
 * still being written, or holds the only good copy of any file. Otherwise, in one transaction: each
 * first copy it holds gives way to a good copy elsewhere, its other copies are forgotten, and the
 * files concerned get a `replicate-file` job (their policy may now want a copy in another location).
 * The bytes in its storage are left for the operator. Returns the number of files that lost a copy.
 */
export async function removeLocation(ctx: DomainContext, name: string): Promise<number> {
  const loc = (await listLocations(ctx.db)).find((l) => l.name === name);
  if (!loc) throw new AppError('LOCATION_NOT_FOUND', { name });
  const affected = await transaction(ctx.db, async (tx) => {
    const defaults = await tx.selectFrom('buckets').select((eb) => eb.fn.countAll<number>().as('n')).where('default_location', '=', loc.id).executeTakeFirstOrThrow();
    if (loc.isDefault || Number(defaults.n) > 0) {
      throw new AppError('LOCATION_IN_USE', { name, reason: `it is the default location${Number(defaults.n) ? ` of ${Number(defaults.n)} bucket(s)` : ''}; migrate them to another location first (file migrate --location)` });
    }
    const writing = await tx.selectFrom('files').select((eb) => eb.fn.countAll<number>().as('n')).where('location_id', '=', loc.id).where('readable', '=', 0).executeTakeFirstOrThrow();
    if (Number(writing.n) > 0) throw new AppError('LOCATION_IN_USE', { name, reason: `${Number(writing.n)} file(s) are still being written there` });
    // A first copy here needs a good copy elsewhere; another copy here, a good first copy.
    const firsts = await tx
      .selectFrom('files')
      .select(['files.id', 'files.uri', 'files.last_check', 'files.last_check_at'])
      .where('files.location_id', '=', loc.id)
      .execute();
    const others = await tx.selectFrom('file_copies').select(['file_id', 'location_id', 'uri', 'last_check', 'last_check_at', 'created']).where('file_id', 'in', firsts.length ? firsts.map((f) => f.id) : ['']).execute();
    const byFile = new Map<string, typeof others>();
    for (const c of others) byFile.set(c.file_id, [...(byFile.get(c.file_id) ?? []), c]);
    const only: string[] = [];
    const plan: { id: string; uri: string; lastCheck: number | null; lastCheckAt: number | null; next: (typeof others)[number] }[] = [];
    for (const f of firsts) {
      const next = (byFile.get(f.id) ?? []).filter((c) => c.location_id !== loc.id && c.last_check !== 0).sort((a, b) => Number(a.created) - Number(b.created))[0];
      if (!next) only.push(f.id);
      else plan.push({ id: f.id, uri: f.uri!, lastCheck: f.last_check, lastCheckAt: f.last_check_at, next });
    }
    const copiesHere = await tx
      .selectFrom('file_copies')
      .innerJoin('files', 'files.id', 'file_copies.file_id')
      .select(['file_copies.file_id', 'file_copies.last_check', 'files.last_check as first_check'])
      .where('file_copies.location_id', '=', loc.id)
      .execute();
    // The first copy known bad means no other copy is good (it would have taken the first place).
    for (const c of copiesHere) if (c.first_check === 0 && c.last_check !== 0) only.push(c.file_id);
    if (only.length) {
      throw new AppError('LOCATION_IN_USE', { name, reason: `it holds the only good copy of ${only.length} file(s) (e.g. ${only[0]}); migrate them first (file migrate --location)` });
    }
    const now = nowMicros();
    for (const p of plan) {
      await swapFirstCopy(tx, p.id, { locationId: loc.id, uri: p.uri, lastCheck: p.lastCheck, lastCheckAt: p.lastCheckAt }, p.next, now);
    }
    const dropped = await tx.deleteFrom('file_copies').where('location_id', '=', loc.id).returning('file_id').execute();
    const files = [...new Set(dropped.map((d) => d.file_id))];
    for (const f of files) await ctx.queue.enqueue(tx, 'replicate-file', { fileId: f });
    await tx.deleteFrom('locations').where('id', '=', loc.id).execute();
    return files.length;
  });
  ctx.queue.wake();
  ctx.log.warn({ location: name, files: affected }, 'location removed');
  return affected;
}
