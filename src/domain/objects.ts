import type { Readable } from 'node:stream';
import { sql, type Compilable } from 'kysely';
import { AppError, isAppError } from '../errors.js';
import { transaction } from '../db/database.js';
import { prepared } from '../db/prepared.js';
import { TRUE_LITERAL, type Executor } from '../db/schema.js';
import { isStorageError } from '../storage/backend.js';
import { MeasuringStream, type DigestAlgorithm } from '../storage/measure.js';
import { newId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';
import { getLiveBucket, lockBucketForWrite } from './buckets.js';
import type { DomainContext } from './context.js';
import { checkSize, tightestLimit } from './limits.js';
import { getLocationById } from './locations.js';
import { chooseMimetype } from './mimetype.js';
import { validateKey, prefixUpperBound } from './keys.js';
import type { ListedVersion, ObjectVersion } from './models.js';
import { LISTED_VERSION_COLUMNS, toListedVersion, toVersion, VERSION_WITH_FILE_COLUMNS, type ListedVersionRow, type VersionWithFileRow } from './rows.js';

export interface ExpectedDigest {
  algorithm: DigestAlgorithm;
  value: Buffer;
  /** The header it came from, for the error message. */
  header: string;
}

export interface PutObjectInput {
  bucketId: string;
  key: string;
  source: Readable;
  /** Content-Length announced by the client, or null when unknown. */
  declaredSize: number | null;
  contentType?: string;
  tags?: Record<string, string>;
  expectedDigests?: ExpectedDigest[];
  signal?: AbortSignal;
}

/** Checks made before a single byte of an upload is read: existence, lock, key, announced size. */
export async function checkUploadAllowed(ctx: DomainContext, bucketId: string, key: string, declaredSize: number | null) {
  const bucket = await getLiveBucket(ctx.db, bucketId);
  if (declaredSize !== null) checkSize(bucket, declaredSize);
  if (bucket.locked) throw new AppError('BUCKET_LOCKED');
  validateKey(key, ctx.config.objectKeyMaxLen);
  return bucket;
}

/**
 * Stores a file as the new head version of `key`. Bytes first: they are streamed to storage under a
 * name no reader uses, hashed and measured on the way; then one short transaction inserts the file
 * instance and the version and moves the head. Any failure leaves no row and no file behind.
 */
export async function putObject(ctx: DomainContext, input: PutObjectInput): Promise<ObjectVersion> {
  const bucket = await checkUploadAllowed(ctx, input.bucketId, input.key, input.declaredSize);
  const limit = tightestLimit(bucket);
  const location = await getLocationById(ctx.db, bucket.defaultLocation);
  const backend = ctx.storage.forUri(location.uri);
  const fileId = newId();
  const uri = backend.makeUri(location.uri, fileId);

  const meter = new MeasuringStream({
    limit: limit?.bytes ?? null,
    limitError: () => new AppError(limit!.reason),
    expected: input.declaredSize,
    extraDigests: (input.expectedDigests ?? []).map((d) => d.algorithm),
  });
  // Errors of the meter reach us through save()'s promise; a late one must not become an uncaught exception.
  meter.on('error', () => {});
  // A client that goes away fails the source; pass that on so storage stops and cleans up.
  const forward = (e: Error) => meter.destroy(e);
  input.source.once('error', forward);
  try {
    await backend.save(uri, input.source.pipe(meter), { signal: input.signal });
    input.source.off('error', forward);
  } catch (e) {
    input.source.off('error', forward);
    input.source.unpipe(meter);
    throw uploadFailure(e, input.source, meter);
  }

  try {
    for (const d of input.expectedDigests ?? []) {
      if (!meter.digest(d.algorithm).equals(d.value)) {
        throw new AppError('CHECKSUM_MISMATCH', { header: d.header, algorithm: d.algorithm });
      }
    }
    const version = await commitNewVersion(ctx, {
      bucketId: bucket.id,
      key: input.key,
      file: { id: fileId, locationId: location.id, uri, size: meter.bytes, checksum: meter.checksum() },
      mimetype: chooseMimetype(input.key, input.contentType),
      tags: input.tags ?? {},
    });
    ctx.signals.send('file-uploaded', { obj: version });
    return version;
  } catch (e) {
    await backend.delete(uri).catch((err) => ctx.log.error({ err, uri }, 'could not remove the bytes of a refused upload'));
    throw e;
  }
}

/** Maps a failed upload stream to the refusal a client should see. */
function uploadFailure(e: unknown, source: Readable, meter: MeasuringStream): unknown {
  if (isAppError(e)) return e;
  const err = e as NodeJS.ErrnoException;
  if (source.errored || source.destroyed || err?.code === 'ECONNRESET' || err?.code === 'ABORT_ERR' || err?.name === 'AbortError') {
    if (meter.errored && isAppError(meter.errored)) return meter.errored;
    return new AppError('CLIENT_DISCONNECTED', {}, { cause: e });
  }
  if (isStorageError(e)) return new AppError('STORAGE_UNAVAILABLE', {}, { cause: e });
  return e;
}

// The statements of an upload's commit, compiled once (see db/prepared.ts).
const addToBucketSize = prepared((db: Executor, add: number, release: number, bucketId: string) =>
  db
    .updateTable('buckets')
    .set({ size: sql`size + ${add}`, reserved_size: sql`reserved_size - ${release}` })
    .where('id', '=', bucketId),
);
const insertFile = prepared(
  (db: Executor, id: string, locationId: string, uri: string, storageClass: string, size: number, checksum: string, created: number, updated: number) =>
    db.insertInto('files').values({
      id,
      location_id: locationId,
      uri,
      storage_class: storageClass,
      size,
      checksum,
      readable: 1,
      writable: 0,
      last_check_at: null,
      last_check: null,
      created,
      updated,
    }),
);
const retireHead = prepared((db: Executor, now: number, bucketId: string, key: string) =>
  db
    .updateTable('object_versions')
    .set({ is_head: 0, updated: now })
    .where('bucket_id', '=', bucketId)
    .where('key', '=', key)
    .where('is_head', '=', TRUE_LITERAL),
);
const insertHeadVersion = prepared(
  (db: Executor, versionId: string, bucketId: string, key: string, fileId: string, mimetype: string, tags: string, created: number, updated: number) =>
    db.insertInto('object_versions').values({
      version_id: versionId,
      bucket_id: bucketId,
      key,
      file_id: fileId,
      mimetype,
      is_head: 1,
      tags,
      created,
      updated,
    }),
);

export interface NewFile {
  id: string;
  locationId: string;
  uri: string;
  size: number;
  checksum: string;
}

/**
 * The metadata half of an upload: in one transaction, under the bucket's row lock, re-check the
 * limits against the current bucket, add the size, insert the file instance and the version, and
 * make it the head. Two API processes can't both pass a quota or leave two heads.
 */
export async function commitNewVersion(
  ctx: DomainContext,
  input: {
    bucketId: string;
    key: string;
    file: NewFile | { existingId: string; size: number };
    mimetype: string;
    tags: Record<string, string>;
    versionId?: string;
    /** Bytes reserved for this file (multipart): released now, and the limits were checked at reservation. */
    releaseReservation?: number;
  },
  hooks: { inTransaction?: (tx: import('../db/schema.js').Tx) => Promise<void> } = {},
): Promise<ObjectVersion> {
  const now = nowMicros();
  const versionId = input.versionId ?? newId();
  return transaction(ctx.db, async (tx) => {
    const bucket = await lockBucketForWrite(tx, input.bucketId);
    const size = input.file.size;
    const reserved = input.releaseReservation ?? 0;
    if (input.releaseReservation === undefined) checkSize(bucket, size);
    await addToBucketSize.execute(tx, size, reserved, bucket.id);
    let fileId: string;
    if ('existingId' in input.file) {
      fileId = input.file.existingId;
    } else {
      fileId = input.file.id;
      await insertFile.execute(tx, fileId, input.file.locationId, input.file.uri, bucket.defaultStorageClass, size, input.file.checksum, now, now);
    }
    if (hooks.inTransaction) await hooks.inTransaction(tx);
    await retireHead.execute(tx, now, bucket.id, input.key);
    await insertHeadVersion.execute(tx, versionId, bucket.id, input.key, fileId, input.mimetype, JSON.stringify(input.tags), now, now);
    const version = (await findVersion(tx, bucket.id, input.key, versionId))!;
    await ctx.outbox?.record(tx, 'file-uploaded', { obj: version });
    return version;
  });
}

function versionsQuery(db: Executor) {
  return db
    .selectFrom('object_versions')
    .leftJoin('files', 'files.id', 'object_versions.file_id')
    .select(VERSION_WITH_FILE_COLUMNS);
}

const findVersionQuery = prepared((db: Executor, bucketId: string, key: string, versionId: string) =>
  versionsQuery(db)
    .where('object_versions.bucket_id', '=', bucketId)
    .where('object_versions.key', '=', key)
    .where('object_versions.version_id', '=', versionId),
);

export async function findVersion(db: Executor, bucketId: string, key: string, versionId: string): Promise<ObjectVersion | null> {
  const r = await findVersionQuery.first(db, bucketId, key, versionId);
  return r ? toVersion(r as VersionWithFileRow) : null;
}

const findHeadQuery = prepared((db: Executor, bucketId: string, key: string) =>
  versionsQuery(db)
    .where('object_versions.bucket_id', '=', bucketId)
    .where('object_versions.key', '=', key)
    .where('object_versions.is_head', '=', TRUE_LITERAL),
);

/** The head version of a key, delete marker or not; null when the key has no versions. */
export async function findHead(db: Executor, bucketId: string, key: string): Promise<ObjectVersion | null> {
  const r = await findHeadQuery.first(db, bucketId, key);
  return r ? toVersion(r as VersionWithFileRow) : null;
}

const liveBucketHeadQuery = prepared((db: Executor, bucketId: string, key: string) =>
  db
    .selectFrom('buckets')
    .leftJoin('object_versions', (j) =>
      j
        .onRef('object_versions.bucket_id', '=', 'buckets.id')
        .on('object_versions.key', '=', key)
        .on('object_versions.is_head', '=', TRUE_LITERAL),
    )
    .leftJoin('files', 'files.id', 'object_versions.file_id')
    .select(['buckets.deleted as b_deleted', ...VERSION_WITH_FILE_COLUMNS])
    .where('buckets.id', '=', bucketId),
);

/**
 * The head version of a key together with its bucket's liveness, in one statement (the download of
 * a head runs two lookups otherwise: a sixth of a small download's CPU was SQLite). Throws
 * BUCKET_NOT_FOUND for a missing or deleted bucket; null when the key has no versions.
 * The caller checks permissions before it reveals anything about the key.
 */
export async function findHeadInLiveBucket(db: Executor, bucketId: string, key: string): Promise<ObjectVersion | null> {
  const r = (await liveBucketHeadQuery.first(db, bucketId, key)) as (VersionWithFileRow & { b_deleted: number }) | undefined;
  if (!r || r.b_deleted) throw new AppError('BUCKET_NOT_FOUND');
  return r.seq === null ? null : toVersion(r);
}

/**
 * The version a read addresses: with a version id, exactly that version (a delete marker included,
 * the caller decides); without, the head if it has a file.
 */
export async function getVersionForRead(db: Executor, bucketId: string, key: string, versionId: string | null): Promise<ObjectVersion> {
  if (versionId !== null) {
    const v = await findVersion(db, bucketId, key, versionId);
    if (!v) throw new AppError('OBJECT_NOT_FOUND');
    return v;
  }
  const head = await findHead(db, bucketId, key);
  if (!head || head.fileId === null) throw new AppError('OBJECT_NOT_FOUND');
  return head;
}

/**
 * Soft delete: a delete marker (a version without a file) becomes the head. The file and the older
 * versions stay; the bucket size does not change (it counts stored versions).
 */
export async function softDeleteObject(ctx: DomainContext, bucketId: string, key: string): Promise<{ deleted: ObjectVersion; marker: ObjectVersion }> {
  const now = nowMicros();
  const markerId = newId();
  const result = await transaction(ctx.db, async (tx) => {
    const bucket = await lockBucketForWrite(tx, bucketId);
    const head = await findHead(tx, bucket.id, key);
    if (!head || head.fileId === null) throw new AppError('OBJECT_NOT_FOUND');
    await tx.updateTable('object_versions').set({ is_head: 0, updated: now }).where('seq', '=', head.seq).execute();
    await tx
      .insertInto('object_versions')
      .values({ version_id: markerId, bucket_id: bucket.id, key, file_id: null, mimetype: null, is_head: 1, tags: '{}', created: now, updated: now })
      .execute();
    const marker = (await findVersion(tx, bucket.id, key, markerId))!;
    const deleted = { ...head, isHead: false };
    await ctx.outbox?.record(tx, 'file-deleted', { obj: deleted, kind: 'soft' });
    return { deleted, marker };
  });
  ctx.signals.send('file-deleted', { obj: result.deleted, kind: 'soft' });
  return result;
}

/**
 * Hard delete of one version. Refused (409) when its file instance is shared with another version
 * (after a snapshot); otherwise the version and its file instance go in one transaction, the bucket
 * size drops by the file's size once, the newest remaining version becomes head if this one was,
 * and the removal of the bytes is queued in the same transaction.
 */
export async function hardDeleteVersion(ctx: DomainContext, bucketId: string, key: string, versionId: string): Promise<ObjectVersion> {
  const now = nowMicros();
  const removed = await transaction(ctx.db, async (tx) => {
    const bucket = await lockBucketForWrite(tx, bucketId);
    const v = await findVersion(tx, bucket.id, key, versionId);
    if (!v) throw new AppError('OBJECT_NOT_FOUND');
    if (v.fileId !== null) {
      const others = await tx
        .selectFrom('object_versions')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('file_id', '=', v.fileId)
        .where('seq', '!=', v.seq)
        .executeTakeFirstOrThrow();
      const n = Number(others.n);
      if (n > 0) throw new AppError('FILE_SHARED', { count: n });
    }
    await tx.deleteFrom('object_versions').where('seq', '=', v.seq).execute();
    if (v.file) {
      await tx.updateTable('buckets').set({ size: sql`size - ${v.file.size}` }).where('id', '=', bucket.id).execute();
      await tx.deleteFrom('files').where('id', '=', v.file.id).execute();
      if (v.file.uri) await ctx.queue.enqueue(tx, 'remove-file-data', { uri: v.file.uri });
    }
    if (v.isHead) {
      const newest = await tx
        .selectFrom('object_versions')
        .select('seq')
        .where('bucket_id', '=', bucket.id)
        .where('key', '=', key)
        .orderBy('seq', 'desc')
        .limit(1)
        .executeTakeFirst();
      if (newest) await tx.updateTable('object_versions').set({ is_head: 1, updated: now }).where('seq', '=', newest.seq).execute();
    }
    await ctx.outbox?.record(tx, 'file-deleted', { obj: v, kind: 'hard' });
    return v;
  });
  ctx.queue.wake();
  ctx.signals.send('file-deleted', { obj: removed, kind: 'hard' });
  return removed;
}

export interface ListOptions {
  limit: number;
  prefix?: string | null;
  /** Opaque cursor from a previous page. */
  after?: string | null;
}

export interface Page<T> {
  items: T[];
  /** Cursor for the next page, or null when this is the last. */
  next: string | null;
}

function encodeCursor(v: unknown[]): string {
  return Buffer.from(JSON.stringify(v)).toString('base64url');
}

function decodeCursor(s: string, shape: 'key' | 'key-seq'): [string, number] {
  try {
    const v = JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && typeof v[0] === 'string' && (shape === 'key' ? v.length === 1 : v.length === 2 && Number.isSafeInteger(v[1]))) {
      return [v[0], (v[1] as number) ?? 0];
    }
  } catch {
    /* fall through */
  }
  throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'after', message: 'Not a cursor from a previous page.' }] });
}

/** A listing query of one shape (with or without prefix bounds and cursor), compiled once. */
type ListShape = `${'p' | ''}${'u' | ''}${'a' | ''}`;
function listingQueries<Args extends unknown[]>(
  build: (db: Executor, shape: ListShape, ...args: Args) => Compilable<unknown>,
) {
  const byShape = new Map<ListShape, ReturnType<typeof prepared<Args, unknown>>>();
  return (shape: ListShape) => {
    let q = byShape.get(shape);
    if (!q) {
      q = prepared((db: Executor, ...args: Args) => build(db, shape, ...args));
      byShape.set(shape, q);
    }
    return q;
  };
}

function listingShape(opts: ListOptions, upper: string | null): ListShape {
  return `${opts.prefix ? 'p' : ''}${upper !== null ? 'u' : ''}${opts.after ? 'a' : ''}` as ListShape;
}

/** A page from up to `limit + 1` rows: the extra row only says there is a next page, whose cursor `cursorOf` makes from this page's last item. */
function listingPage(rows: unknown[], limit: number, cursorOf: (last: ListedVersion) => unknown[]): Page<ListedVersion> {
  const items = rows.slice(0, limit).map((r) => toListedVersion(r as ListedVersionRow));
  const last = items[items.length - 1];
  return { items, next: rows.length > limit && last ? encodeCursor(cursorOf(last)) : null };
}

/** Arguments of a listing query in a fixed order; each shape uses only those it needs. */
function listingArgs(bucketId: string, opts: ListOptions, upper: string | null, after: unknown[], limit: number): unknown[] {
  const args: unknown[] = [bucketId];
  if (opts.prefix) args.push(opts.prefix);
  if (upper !== null) args.push(upper);
  args.push(...after, limit);
  return args;
}

const latestQuery = listingQueries((db: Executor, shape: ListShape, ...args: unknown[]) => {
  let i = 0;
  let q = db
    .selectFrom('object_versions')
    .innerJoin('files', 'files.id', 'object_versions.file_id')
    .select(LISTED_VERSION_COLUMNS)
    .where('object_versions.bucket_id', '=', args[i++] as string)
    .where('object_versions.is_head', '=', TRUE_LITERAL);
  if (shape.includes('p')) q = q.where('object_versions.key', '>=', args[i++] as string);
  if (shape.includes('u')) q = q.where('object_versions.key', '<', args[i++] as string);
  if (shape.includes('a')) q = q.where('object_versions.key', '>', args[i++] as string);
  return q.orderBy('object_versions.key').limit(args[i++] as number);
});

/** Latest version of every key that has a file, by key; keyset-paged so every page costs the same. */
export async function listLatest(db: Executor, bucketId: string, opts: ListOptions): Promise<Page<ListedVersion>> {
  const upper = opts.prefix ? prefixUpperBound(opts.prefix) : null;
  const after = opts.after ? [decodeCursor(opts.after, 'key')[0]] : [];
  const rows = await latestQuery(listingShape(opts, upper)).execute(db, ...listingArgs(bucketId, opts, upper, after, opts.limit + 1));
  return listingPage(rows, opts.limit, (last) => [last.key]);
}

const versionsListQuery = listingQueries((db: Executor, shape: ListShape, ...args: unknown[]) => {
  let i = 0;
  let q = db
    .selectFrom('object_versions')
    .leftJoin('files', 'files.id', 'object_versions.file_id')
    .select(LISTED_VERSION_COLUMNS)
    .where('object_versions.bucket_id', '=', args[i++] as string);
  if (shape.includes('p')) q = q.where('object_versions.key', '>=', args[i++] as string);
  if (shape.includes('u')) q = q.where('object_versions.key', '<', args[i++] as string);
  if (shape.includes('a')) {
    // (key, seq) after the cursor: a later key, or the same key and an older version.
    const key = args[i++] as string;
    const seq = args[i++] as number;
    q = q.where((eb) =>
      eb.or([eb('object_versions.key', '>', key), eb.and([eb('object_versions.key', '=', key), eb('object_versions.seq', '<', seq)])]),
    );
  }
  return q.orderBy('object_versions.key').orderBy('object_versions.seq', 'desc').limit(args[i++] as number);
});

/** Every version, delete markers included, by key and newest first; keyset-paged. */
export async function listVersions(db: Executor, bucketId: string, opts: ListOptions): Promise<Page<ListedVersion>> {
  const upper = opts.prefix ? prefixUpperBound(opts.prefix) : null;
  const after = opts.after ? decodeCursor(opts.after, 'key-seq') : [];
  const rows = await versionsListQuery(listingShape(opts, upper)).execute(db, ...listingArgs(bucketId, opts, upper, after, opts.limit + 1));
  return listingPage(rows, opts.limit, (last) => [last.key, last.seq]);
}
