import { AppError } from '../errors.js';
import { transaction } from '../db/database.js';
import { prepared } from '../db/prepared.js';
import type { Executor, Tx } from '../db/schema.js';
import { newId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';
import type { DomainContext } from './context.js';
import { getDefaultLocation, getLocationByName } from './locations.js';
import type { Bucket } from './models.js';
import { toBucket } from './rows.js';

export async function createBucket(ctx: DomainContext, opts: { locationName?: string } = {}): Promise<Bucket> {
  const loc = opts.locationName ? await getLocationByName(ctx.db, opts.locationName) : await getDefaultLocation(ctx.db);
  if (!loc) throw new AppError('NO_DEFAULT_LOCATION');
  const now = nowMicros();
  const row = {
    id: newId(),
    default_location: loc.id,
    default_storage_class: 'S',
    size: 0,
    reserved_size: 0,
    quota_size: ctx.config.defaultQuotaSize,
    max_file_size: ctx.config.defaultMaxFileSize,
    locked: 0,
    deleted: 0,
    created: now,
    updated: now,
  };
  await ctx.db.insertInto('buckets').values(row).execute();
  return toBucket(row);
}

/** The bucket, or null when it does not exist. Logically deleted buckets are returned too. */
const findBucketQuery = prepared((db: Executor, id: string) => db.selectFrom('buckets').selectAll().where('id', '=', id));

export async function findBucket(db: Executor, id: string): Promise<Bucket | null> {
  const r = await findBucketQuery.first(db, id);
  return r ? toBucket(r) : null;
}

/** A bucket visible through the API: exists and is not logically deleted. */
export async function getLiveBucket(db: Executor, id: string): Promise<Bucket> {
  const b = await findBucket(db, id);
  if (!b || b.deleted) throw new AppError('BUCKET_NOT_FOUND');
  return b;
}

export async function getBucketForAdmin(db: Executor, id: string): Promise<Bucket> {
  const b = await findBucket(db, id);
  if (!b) throw new AppError('BUCKET_NOT_FOUND');
  return b;
}

/**
 * Takes the bucket's row lock for the rest of the transaction and checks it may be modified.
 * Every change to a bucket's objects starts here, so writers to one bucket are serialised by the
 * database (on PostgreSQL and SQLite alike) and always see the latest head and size.
 */
const lockBucketQuery = prepared((db: Executor, now: number, bucketId: string) =>
  db.updateTable('buckets').set({ updated: now }).where('id', '=', bucketId).returningAll(),
);

export async function lockBucketForWrite(tx: Tx, bucketId: string): Promise<Bucket> {
  const r = await lockBucketQuery.first(tx, nowMicros(), bucketId);
  if (!r || r.deleted === 1) throw new AppError('BUCKET_NOT_FOUND');
  if (r.locked === 1) throw new AppError('BUCKET_LOCKED');
  return toBucket(r);
}

async function updateBucket(ctx: DomainContext, id: string, set: Partial<{ locked: number; deleted: number; quota_size: number | null; max_file_size: number | null; default_location: string }>): Promise<Bucket> {
  return transaction(ctx.db, async (tx) => {
    const r = await tx
      .updateTable('buckets')
      .set({ ...set, updated: nowMicros() })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirst();
    if (!r) throw new AppError('BUCKET_NOT_FOUND');
    return toBucket(r);
  });
}

export function setBucketLocked(ctx: DomainContext, id: string, locked: boolean): Promise<Bucket> {
  return updateBucket(ctx, id, { locked: locked ? 1 : 0 });
}

export function setBucketDeleted(ctx: DomainContext, id: string, deleted: boolean): Promise<Bucket> {
  return updateBucket(ctx, id, { deleted: deleted ? 1 : 0 });
}

export async function setBucketProperties(
  ctx: DomainContext,
  id: string,
  props: { quotaSize?: number | null; maxFileSize?: number | null; locationName?: string },
): Promise<Bucket> {
  const set: Parameters<typeof updateBucket>[2] = {};
  if (props.quotaSize !== undefined) set.quota_size = props.quotaSize;
  if (props.maxFileSize !== undefined) set.max_file_size = props.maxFileSize;
  if (props.locationName !== undefined) set.default_location = (await getLocationByName(ctx.db, props.locationName)).id;
  return updateBucket(ctx, id, set);
}
