import { AppError } from '../errors.js';
import { transaction } from '../db/database.js';
import { prepared } from '../db/prepared.js';
import type { Db, Executor, Tx } from '../db/schema.js';
import { newId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';
import type { DomainContext } from './context.js';
import { getDefaultLocation, getLocationByName } from './locations.js';
import type { Bucket } from './models.js';
import { toBucket } from './rows.js';
import { EMPTY_ACCOUNT, lockBucketForWrite } from './ledger.js';

export async function createBucket(ctx: DomainContext, opts: { locationName?: string; name?: string; region?: string | null } = {}): Promise<Bucket> {
  const loc = opts.locationName ? await getLocationByName(ctx.db, opts.locationName) : await getDefaultLocation(ctx.db);
  if (!loc) throw new AppError('NO_DEFAULT_LOCATION');
  const now = nowMicros();
  const row = {
    id: newId(),
    default_location: loc.id,
    default_storage_class: 'S',
    ...EMPTY_ACCOUNT,
    quota_size: ctx.config.defaultQuotaSize,
    max_file_size: ctx.config.defaultMaxFileSize,
    locked: 0,
    deleted: 0,
    created: now,
    updated: now,
    name: opts.name ?? null,
    public_read: 0,
    copies: null,
    region: opts.region ?? null,
    cors: null,
    tags: null,
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

/** Every write of a bucket's objects begins with the ledger's row lock. */
export { lockBucketForWrite } from './ledger.js';

async function updateBucket(
  ctx: DomainContext,
  id: string,
  set: Partial<{ locked: number; deleted: number; quota_size: number | null; max_file_size: number | null; default_location: string; name: string | null; public_read: number }>,
): Promise<Bucket> {
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

/** Makes a bucket's objects downloadable without a credential, or not (the permission policy reads the flag). */
export function setBucketPublicRead(ctx: DomainContext, id: string, publicRead: boolean): Promise<Bucket> {
  return updateBucket(ctx, id, { public_read: publicRead ? 1 : 0 });
}

/**
 * A page of live buckets in id order, after the `after` id; `only` restricts it to one bucket (a
 * credential scoped to it). One more than `limit` is read, to know whether there is a next page.
 */
export async function listBuckets(db: Db, opts: { limit: number; after: string | null; only: string | null }): Promise<{ items: Bucket[]; next: string | null }> {
  let q = db.selectFrom('buckets').selectAll().where('deleted', '=', 0);
  if (opts.only !== null) q = q.where('id', '=', opts.only);
  if (opts.after !== null) q = q.where('id', '>', opts.after);
  const rows = await q.orderBy('id').limit(opts.limit + 1).execute();
  const items = rows.slice(0, opts.limit).map(toBucket);
  return { items, next: rows.length > opts.limit ? items[items.length - 1]!.id : null };
}

export function setBucketLocked(ctx: DomainContext, id: string, locked: boolean): Promise<Bucket> {
  return updateBucket(ctx, id, { locked: locked ? 1 : 0 });
}

/** Deleting a bucket frees its S3 name (undeleting does not give it back). */
export function setBucketDeleted(ctx: DomainContext, id: string, deleted: boolean): Promise<Bucket> {
  return updateBucket(ctx, id, deleted ? { deleted: 1, name: null } : { deleted: 0 });
}

/** The live bucket an S3 name (or the bucket's id) addresses, or null. */
const liveBucketByNameQuery = prepared((db: Executor, name: string) => db.selectFrom('buckets').selectAll().where('name', '=', name).where('deleted', '=', 0));

export async function findLiveBucketByName(db: Executor, name: string): Promise<Bucket | null> {
  const r = await liveBucketByNameQuery.first(db, name);
  return r ? toBucket(r) : null;
}

/**
 * Names a bucket for the S3 door (null removes the name). The caller validates the name's form;
 * a name another bucket holds is BUCKET_NAME_TAKEN.
 */
export async function setBucketName(ctx: DomainContext, id: string, name: string | null): Promise<Bucket> {
  if (name !== null) {
    const other = await ctx.db.selectFrom('buckets').select('id').where('name', '=', name).executeTakeFirst();
    if (other && other.id !== id) throw new AppError('BUCKET_NAME_TAKEN', { name });
  }
  try {
    return await updateBucket(ctx, id, { name });
  } catch (e) {
    if (e instanceof AppError) throw e;
    // The unique index: another bucket took the name at the same moment.
    throw new AppError('BUCKET_NAME_TAKEN', { name: name ?? '' }, { cause: e });
  }
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

