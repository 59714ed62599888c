import { sql, type QueryCreator, type Selectable } from 'kysely';
import { AppError } from '../errors.js';
import { prepared } from '../db/prepared.js';
import type { BucketTable, Database, Executor, Tx } from '../db/schema.js';
import { nowMicros } from '../util/time.js';
import { checkSize } from './limits.js';
import type { Bucket, FileInstance } from './models.js';
import { toBucket, toFile } from './rows.js';

/**
 * The ledger of a bucket's bytes: every write of `size` and `reserved_size` (which carry the
 * invariant size + reserved ≤ quota), every file instance's row, and the one check that a bucket may
 * be written (BUCKET_LOCKED). Each write runs in the caller's transaction, under the bucket's row lock
 * (`lockBucketForWrite`), so the limits it checks are those of the latest state.
 */

/** The accounting columns of a new bucket: nothing stored, nothing reserved. */
export const EMPTY_ACCOUNT = { size: 0, reserved_size: 0 } as const;

/** Refuses a change to a locked bucket's objects. The one place BUCKET_LOCKED is thrown. */
export function assertWritable(bucket: Pick<Bucket, 'locked'>): void {
  if (bucket.locked) throw new AppError('BUCKET_LOCKED');
}

const lockBucketQuery = prepared((db: Executor, now: number, bucketId: string) =>
  db.updateTable('buckets').set({ updated: now }).where('id', '=', bucketId).returningAll(),
);

/**
 * Takes the bucket's row lock for the rest of the transaction and checks it may be modified.
 * Every change to a bucket's objects starts here, so writers to one bucket are serialised by the
 * database (on PostgreSQL and SQLite alike) and always see the latest head and size.
 */
export async function lockBucketForWrite(tx: Tx, bucketId: string): Promise<Bucket> {
  const r = await lockBucketQuery.first(tx, nowMicros(), bucketId);
  if (!r || r.deleted === 1) throw new AppError('BUCKET_NOT_FOUND');
  const bucket = toBucket(r);
  assertWritable(bucket);
  return bucket;
}

const adjustQuery = prepared((db: Executor, size: number, reserved: number, bucketId: string) =>
  db
    .updateTable('buckets')
    .set({ size: sql`size + ${size}`, reserved_size: sql`reserved_size + ${reserved}` })
    .where('id', '=', bucketId),
);

async function adjust(tx: Tx, bucketId: string, delta: { size?: number; reserved?: number }): Promise<void> {
  await adjustQuery.execute(tx, delta.size ?? 0, delta.reserved ?? 0, bucketId);
}

/** Reserves `bytes` for a file still being received (a multipart upload), within the limits. `bucket` is locked. */
export async function reserve(tx: Tx, bucket: Bucket, bytes: number): Promise<void> {
  checkSize(bucket, bytes);
  await adjust(tx, bucket.id, { reserved: bytes });
}

/**
 * Reserves `bytes` more for a file whose size is learnt as it arrives (an S3 multipart upload) and
 * already holds `held`: the quota counts the new bytes, the maximum file size the whole file.
 * `bucket` is locked.
 */
export async function reserveMore(tx: Tx, bucket: Bucket, bytes: number, held: number): Promise<void> {
  checkSize({ ...bucket, maxFileSize: null }, bytes);
  checkSize({ ...bucket, quotaSize: null }, held + bytes);
  await adjust(tx, bucket.id, { reserved: bytes });
}

/** Gives a reservation back (the upload was aborted, expired or failed). */
export async function releaseReservation(tx: Tx, bucketId: string, bytes: number): Promise<void> {
  await adjust(tx, bucketId, { reserved: -bytes });
}

/** The bucket's row lock with `size` more stored and `reserved` more reserved; answers the row as it is now. */
export const lockAndStoreStatement = (db: QueryCreator<Database>, now: number, size: number, reserved: number, bucketId: string) =>
  db
    .updateTable('buckets')
    .set({ updated: now, size: sql`size + ${size}`, reserved_size: sql`reserved_size + ${reserved}` })
    .where('id', '=', bucketId)
    .returningAll();
const lockAndStoreQuery = prepared((db: Executor, now: number, size: number, reserved: number, bucketId: string) => lockAndStoreStatement(db, now, size, reserved, bucketId));

/**
 * The checks of `lockBucketAndStore` on the row its statement answered (or a statement that did the
 * same in a larger one): throws what refuses the change, and returns the bucket as it was before.
 */
export function bucketBeforeStore(r: Selectable<BucketTable> | undefined, bytes: number, reserved?: number): Bucket {
  if (!r || r.deleted === 1) throw new AppError('BUCKET_NOT_FOUND');
  const bucket = toBucket({ ...r, size: r.size - bytes, reserved_size: r.reserved_size + (reserved ?? 0) });
  assertWritable(bucket);
  if (reserved === undefined) checkSize(bucket, bytes);
  return bucket;
}

/**
 * `lockBucketForWrite` for a stored file that joins the bucket, in the same statement: its bytes
 * count. With `reserved`, they were checked when reserved and the reservation moves into the size;
 * otherwise they are checked now against the limits as they were before. A refusal (locked, deleted,
 * over a limit) throws, and the caller's transaction takes the change back with it. One statement
 * instead of two per upload: a round trip less on PostgreSQL, where a bucket's uploads are
 * committed one after another in its group. Returns the bucket as it was before.
 */
export async function lockBucketAndStore(tx: Tx, bucketId: string, bytes: number, reserved?: number): Promise<Bucket> {
  return bucketBeforeStore(await lockAndStoreQuery.first(tx, nowMicros(), bytes, -(reserved ?? 0), bucketId), bytes, reserved);
}

/** A stored file leaves the bucket (a hard delete). */
export async function removeStored(tx: Tx, bucketId: string, bytes: number): Promise<void> {
  await adjust(tx, bucketId, { size: -bytes });
}

/** A new bucket's content, made in the same transaction (a snapshot): no limit applies. */
export async function addCopied(tx: Tx, bucketId: string, bytes: number): Promise<void> {
  await adjust(tx, bucketId, { size: bytes });
}

export interface NewFileInstance {
  id: string;
  locationId: string;
  uri: string;
  storageClass: string;
  size: number;
  /** `md5:<hex>`, or null while its bytes are still arriving (multipart). */
  checksum: string | null;
  /** Readable: its bytes are all there. Writable: parts are still being written into it. */
  state: 'readable' | 'writable';
  /** When its bytes were last verified (a migration's copy is, as it is made). */
  checkedAt?: number | null;
}

/** The arguments of a new file instance's row, in the order `fileInstanceRow` takes them. */
type FileRowArgs = [
  id: string,
  locationId: string,
  uri: string,
  storageClass: string,
  size: number,
  checksum: string | null,
  readable: number,
  writable: number,
  lastCheckAt: number | null,
  lastCheck: number | null,
  now: number,
];

/** A new file instance's row (the values of its INSERT, for the prepared queries that make one). */
function fileInstanceRow(...[id, locationId, uri, storageClass, size, checksum, readable, writable, lastCheckAt, lastCheck, now]: FileRowArgs) {
  return {
    id,
    location_id: locationId,
    uri,
    storage_class: storageClass,
    size,
    checksum,
    readable,
    writable,
    last_check_at: lastCheckAt,
    last_check: lastCheck,
    created: now,
    updated: now,
  };
}

/** The row arguments of a new file instance. */
function fileRowArgs(f: NewFileInstance, now: number): FileRowArgs {
  const checked = f.checkedAt ?? null;
  return [f.id, f.locationId, f.uri, f.storageClass, f.size, f.checksum, f.state === 'readable' ? 1 : 0, f.state === 'writable' ? 1 : 0, checked, checked === null ? null : 1, now];
}

const insertFileQuery = prepared((db: Executor, ...row: FileRowArgs) => db.insertInto('files').values(fileInstanceRow(...row)).returningAll());

/** A new file instance as its row makes it, for a statement that inserts that row in a larger one. */
export function newFileInstance(f: NewFileInstance, now: number): FileInstance {
  return toFile(fileInstanceRow(...fileRowArgs(f, now)));
}

/** Records a file instance (the bytes are already in storage, or preallocated for parts); returns it as stored. */
export async function insertFileInstance(tx: Tx, f: NewFileInstance, now = nowMicros()): Promise<FileInstance> {
  const row = await insertFileQuery.first(tx, ...fileRowArgs(f, now));
  return toFile(row!);
}
