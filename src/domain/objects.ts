import type { Readable } from 'node:stream';
import { sql, type Compilable, type QueryCreator, type Selectable } from 'kysely';
import { AppError } from '../errors.js';
import { transaction, type AnyBatch, type BatchedTransaction } from '../db/database.js';
import { prepared } from '../db/prepared.js';
import { TRUE_LITERAL, type BucketTable, type Database, type Executor, type Tx } from '../db/schema.js';
import type { ByteMeter, ByteObserver, DigestAlgorithm } from './byte-meter.js';
import { receive, type ExpectedDigest } from './receive.js';
import { newId, newOrderedId } from '../util/ids.js';
import { collect, INLINE_SCHEME, insertInlineFile } from '../storage/inline/inline-backend.js';
import { nowMicros } from '../util/time.js';
import { getLiveBucket } from './buckets.js';
import { fileRequiredCopies, queueReplication, replicateFile, requiredCopies } from './replicas.js';
import { assertWritable, bucketBeforeStore, insertFileInstance, lockAndStoreStatement, lockBucketAndStore, lockBucketForWrite, newFileInstance, removeStored, type NewFileInstance } from './ledger.js';
import type { DomainContext } from './context.js';
import { checkSize, tightestLimit } from './limits.js';
import { getLocationById } from './locations.js';
import { chooseMimetype } from './mimetype.js';
import { keyTextProblem, validateKey, prefixUpperBound } from './keys.js';
import type { Bucket, FileInstance, ListedVersion, ObjectVersion } from './models.js';
import { checkPrecondition, hasPrecondition, type Precondition } from './preconditions.js';
import { LISTED_VERSION_COLUMNS, toFile, toListedVersion, toVersion, toVersionOf, VERSION_COLUMNS, VERSION_WITH_FILE_COLUMNS, type ListedVersionRow, type VersionRow, type VersionWithFileRow } from './rows.js';

export type { ExpectedDigest } from './receive.js';

export interface PutObjectInput {
  bucketId: string;
  /**
   * The bucket as the door has just read it (live), so that it is not read again; read when absent.
   * The commit checks it once more under its row lock.
   */
  bucket?: Bucket;
  key: string;
  source: Readable;
  /** Content-Length announced by the client, or null when unknown. */
  declaredSize: number | null;
  contentType?: string;
  tags?: Record<string, string>;
  expectedDigests?: ExpectedDigest[];
  /** A door's own checks (see `receive`): more digests, observers of every byte, and a check before the commit. */
  extraDigests?: readonly DigestAlgorithm[];
  observers?: readonly ByteObserver[];
  /** Stages between the source and the meter: a door's decoder of its body framing (S3's aws-chunked). */
  through?: NodeJS.ReadWriteStream[];
  verify?: (meter: ByteMeter) => void | Promise<void>;
  signal?: AbortSignal;
  /** If-Match / If-None-Match: checked before the body is read and again atomically with the head flip. */
  precondition?: Precondition | null;
  /** Metadata stored with the version as given (the S3 door's headers); see {@link getVersionMetadata}. */
  metadata?: Record<string, string>;
}

/**
 * Checks made before a single byte of an upload is read: existence, lock, key, announced size, and
 * the precondition against the current head (so a refused upload is not received at all).
 */
export async function checkUploadAllowed(ctx: DomainContext, bucketId: string, key: string, declaredSize: number | null, precondition?: Precondition | null, known?: Bucket) {
  const bucket = known && known.id === bucketId && !known.deleted ? known : await getLiveBucket(ctx.db, bucketId);
  if (declaredSize !== null) checkSize(bucket, declaredSize);
  assertWritable(bucket);
  validateKey(key, ctx.config.objectKeyMaxLen);
  if (hasPrecondition(precondition)) checkPrecondition(await findHead(ctx.db, bucket.id, key), precondition);
  return bucket;
}

/**
 * Stores a file as the new head version of `key`. Bytes first: they are streamed to storage under a
 * name no reader uses, hashed and measured on the way; then one short transaction inserts the file
 * instance and the version and moves the head. Any failure leaves no row and no file behind.
 */
export async function putObject(ctx: DomainContext, input: PutObjectInput): Promise<ObjectVersion> {
  const bucket = await checkUploadAllowed(ctx, input.bucketId, input.key, input.declaredSize, input.precondition, input.bucket);
  const limit = tightestLimit(bucket);
  // A small upload of announced size is kept in the database, written with its metadata in one
  // commit (storage/inline); any other goes to the location's storage, bytes first. An inline file
  // instance belongs to the bucket's location without using its URI (the files row's reference to
  // the location is checked by the database), so the location is read only for a file.
  const inline = ctx.config.inlineMaxSize > 0 && input.declaredSize !== null && input.declaredSize <= ctx.config.inlineMaxSize;
  // Time-ordered for a row kept in the database; random for a file, whose path splits the id.
  const fileId = inline ? newOrderedId() : newId();
  const location = inline ? null : await getLocationById(ctx.db, bucket.defaultLocation);
  const backend = ctx.storage.forUri(location?.uri ?? INLINE_SCHEME);
  const uri = backend.makeUri(location?.uri ?? '', fileId);

  // A source that already failed (a door's decoder refused the body while the checks ran) would
  // never end a pipe: refuse now, before anything is written.
  if (input.source.destroyed || input.source.errored) {
    throw new AppError('CLIENT_DISCONNECTED', {}, { cause: input.source.errored ?? undefined });
  }
  const received = await receive<{ size: number; content?: Buffer }>({
    source: input.source,
    store: inline
      ? async (body, signal) => {
          const content = await collect(body, signal);
          return { size: content.length, content };
        }
      : (body, signal) => backend.save(uri, body, { signal }),
    // A file that was stored but failed its verification goes again (save cleans up its own failures;
    // an inline upload has written nothing yet).
    discard: async (stored) => {
      if (stored && !inline) await backend.delete(uri);
    },
    onDiscardError: (err) => ctx.log.error({ err, uri }, 'could not remove the bytes of a refused upload'),
    limit: limit ? { bytes: limit.bytes, error: () => new AppError(limit.reason) } : null,
    expected: input.declaredSize,
    expectedDigests: input.expectedDigests,
    extraDigests: input.extraDigests,
    observers: input.observers,
    through: input.through,
    verify: input.verify,
    signal: input.signal,
  });

  let version: ObjectVersion;
  try {
    version = await commitNewVersion(ctx, {
      bucketId: bucket.id,
      key: input.key,
      file: { id: fileId, locationId: bucket.defaultLocation, uri, size: received.bytes, checksum: received.checksum, content: received.stored.content },
      mimetype: chooseMimetype(input.key, input.contentType),
      tags: input.tags ?? {},
      precondition: input.precondition,
      metadata: input.metadata,
    });
    ctx.signals.send('file-uploaded', { obj: version });
  } catch (e) {
    // An inline upload's bytes went with its transaction, which did not commit.
    if (!inline) await backend.delete(uri).catch((err) => ctx.log.error({ err, uri }, 'could not remove the bytes of a refused upload'));
    throw e;
  }
  // Committed: from here a failure leaves the version stored (COPIES_NOT_MADE says so).
  await waitForCopies(ctx, version);
  return version;
}

// The statements of an upload's commit, compiled once (see db/prepared.ts).
/** The key's head stops being the head (its successor is inserted next). */
const headRetirement = (db: QueryCreator<Database>, bucketId: string, key: string, now: number) =>
  db.updateTable('object_versions').set({ is_head: 0, updated: now }).where('bucket_id', '=', bucketId).where('key', '=', key).where('is_head', '=', TRUE_LITERAL);
const retireHead = prepared((db: Executor, now: number, bucketId: string, key: string) => headRetirement(db, bucketId, key, now));
/**
 * PostgreSQL: an upload's whole commit in one statement (a data-modifying WITH) instead of four or
 * five: the bucket's lock with the bytes counted, the retirement of its key's head, the new file
 * instance (with its bytes when they are kept inline) and the new head version. On PostgreSQL every
 * statement is a round trip and costs the event loop about 100 µs (pg's Bind/Execute and a writev to
 * the socket: 58 µs per writev in a W3 profile), and a bucket's uploads commit one after another in
 * its group, under its lock (README, Performance, Session 26: W3 on PostgreSQL 1 649 uploads a
 * second before, 2 593 after, with groups without savepoints).
 *
 * Each part writes its own table. Every write reads the bucket's row (FROM b), so nothing is written
 * for a bucket that does not exist, and the file takes the bucket's default storage class there. The
 * new head is inserted by a SELECT over the retirement's result, so the retirement has run when the
 * unique index of heads is checked (a row this transaction updated is no conflict); the references to
 * the new file are checked at the statement's end. The statement answers the bucket's row as its
 * lock left it and the new version's `seq` (its other columns are the arguments); the checks of
 * `lockBucketAndStore` (bucketBeforeStore) run on that row after the writes, and a refusal throws: the
 * transaction's rollback (its savepoint's, or its group's) takes the writes back.
 *
 * It runs only in a bucket's group (database.ts, BucketGroups), which holds the bucket's row lock
 * before its first statement: a statement that waited for that lock inside would keep its older
 * snapshot for its other parts, miss the head another process's group had just committed, and
 * insert a second head (multinode.test.ts found it). The retirement addresses the head by bucket id
 * and key, as a lone one does: joined with the bucket's row instead (FROM b), the uploads of a full
 * benchmark run went at a third of the speed, by fits (the plans were not examined).
 */
type StoreArgs = [now: number, bucketId: string, key: string, versionId: string, mimetype: string, tags: string, metadata: string | null, fileId: string, locationId: string, uri: string, size: number, checksum: string];
const storeAll = (db: Executor, [now, bucketId, key, versionId, mimetype, tags, metadata, fileId, locationId, uri, size, checksum]: StoreArgs, data: Buffer | null) => {
  const locked = db
    .with('b', (q) => lockAndStoreStatement(q, now, size, 0, bucketId))
    .with('retired', (q) => headRetirement(q as unknown as QueryCreator<Database>, bucketId, key, now).returning('seq'));
  const withBytes =
    data === null
      ? locked
      : (locked.with('bytes', (q) =>
          q
            .insertInto('inline_files')
            .columns(['uri', 'data', 'created'])
            .expression((eb) => eb.selectFrom('b').select((e) => [e.val(uri).as('uri'), e.val(data).as('data'), e.val(now).as('created')])),
        ) as unknown as typeof locked);
  return withBytes
    .with('file', (q) =>
      q
        .insertInto('files')
        .columns(['id', 'location_id', 'uri', 'storage_class', 'size', 'checksum', 'readable', 'writable', 'last_check_at', 'last_check', 'created', 'updated'])
        .expression((eb) =>
          eb.selectFrom('b').select((e) => [
            e.val(fileId).as('id'),
            e.val(locationId).as('location_id'),
            e.val(uri).as('uri'),
            'b.default_storage_class as storage_class',
            e.val(size).as('size'),
            e.val(checksum).as('checksum'),
            e.lit(1).as('readable'),
            e.lit(0).as('writable'),
            e.lit(null).as('last_check_at'),
            e.lit(null).as('last_check'),
            e.val(now).as('created'),
            e.val(now).as('updated'),
          ]),
        ),
    )
    .with('head', (q) =>
      q
        .insertInto('object_versions')
        .columns(['version_id', 'bucket_id', 'key', 'file_id', 'mimetype', 'is_head', 'tags', 'created', 'updated', 'metadata'])
        .expression((eb) =>
          eb
            // One row per bucket row, whatever the retirement changed; reading its result makes it run first.
            .selectFrom([eb.selectFrom('retired').select((e) => e.fn.countAll().as('n')).as('r'), 'b'])
            .select((e) => [
              e.val(versionId).as('version_id'),
              e.val(bucketId).as('bucket_id'),
              e.val(key).as('key'),
              e.val(fileId).as('file_id'),
              e.val(mimetype).as('mimetype'),
              e.lit(1).as('is_head'),
              e.val(tags).as('tags'),
              e.val(now).as('created'),
              e.val(now).as('updated'),
              e.val(metadata).as('metadata'),
            ]),
        )
        .returning('seq'),
    )
    .selectFrom(['b', 'head'])
    .selectAll('b')
    .select('head.seq as v_seq');
};
const storeFileAndHead = prepared((db: Executor, ...args: StoreArgs) => storeAll(db, args, null));
const storeInlineFileAndHead = prepared((db: Executor, ...[data, ...args]: [Buffer, ...StoreArgs]) => storeAll(db, args, data));

/** What storeAll answers: the bucket's row as its lock left it, and the new version's seq. */
type StoreResult = Selectable<BucketTable> & { v_seq: number };
/** One upload's part of a batch: storeAll's arguments and its inline bytes. */
interface StoreBatchArgs {
  args: StoreArgs;
  content: Buffer | undefined;
}

/** Batches storeBatch has run in this process, and the uploads they held (observability, tests). */
export const storeBatchStats = { batches: 0, uploads: 0, largestInlineBytes: 0 };

/**
 * The statement of storeBatch, one text whatever the batch's length (its arguments are arrays), so
 * that it goes out as a named prepared statement (db/prepared.ts). Each key's head is found by bucket
 * and key for that key alone (a subquery per key) and retired by its seq: given the keys as a list,
 * `key = any(…)`, PostgreSQL read every head of the bucket whenever its statistics were missing or
 * stale, as in a new database (EXPLAIN ANALYZE: 1 920 heads read to retire none, 19 ms for 15
 * uploads; `--only W3` on PostgreSQL went from 1 033 to 569 uploads a second).
 */
const storeBatchQuery = prepared(
  (db: Executor, now: number[], keys: string[], versionIds: string[], mimetypes: string[], tags: string[], metadata: (string | null)[], fileIds: string[], locationIds: string[], uris: string[], sizes: number[], checksums: string[], data: (Buffer | null)[], bucketId: string) => ({
    compile: () =>
      sql<StoreResult & { v_version_id: string }>`
    with input as (
      select * from unnest(${now}::bigint[], ${keys}::text[], ${versionIds}::text[], ${mimetypes}::text[], ${tags}::text[],
        ${metadata}::text[], ${fileIds}::text[], ${locationIds}::text[], ${uris}::text[], ${sizes}::bigint[], ${checksums}::text[], ${data}::bytea[])
        as t(now, key, version_id, mimetype, tags, metadata, file_id, location_id, uri, size, checksum, data)
    ),
    b as (
      update buckets set updated = (select max(now) from input), size = size + (select sum(size) from input)
      where id = ${bucketId} returning *
    ),
    retired as (
      update object_versions o set is_head = 0, updated = (select i.now from input i where i.key = o.key)
      where o.seq = any(array(
        select (select v.seq from object_versions v where v.bucket_id = ${bucketId} and v.key = i.key and v.is_head = 1) from input i
      ))
      returning o.seq
    ),
    bytes as (
      insert into inline_files (uri, data, created) select i.uri, i.data, i.now from input i, b where i.data is not null
    ),
    file as (
      insert into files (id, location_id, uri, storage_class, size, checksum, readable, writable, last_check_at, last_check, created, updated)
      select i.file_id, i.location_id, i.uri, b.default_storage_class, i.size, i.checksum, 1, 0, null, null, i.now, i.now from input i, b
    ),
    head as (
      insert into object_versions (version_id, bucket_id, key, file_id, mimetype, is_head, tags, created, updated, metadata)
      select i.version_id, b.id, i.key, i.file_id, i.mimetype, 1, i.tags, i.now, i.now, i.metadata
      from input i, (select count(*) as n from retired) r, b
      returning seq, version_id
    )
    select b.*, head.seq as v_seq, head.version_id as v_version_id from b, head`.compile(db),
  }),
);

/**
 * Inline bytes one batch carries at most; a group with more commits one upload at a time. The bytes
 * of an array parameter go as text, hex-escaped (pg sends a lone Buffer in binary): a group of 256
 * uploads of FILES_REST_INLINE_MAX_SIZE's 1 MiB at most would have made a string of over 512 MiB,
 * past what V8 can hold, where its one-by-one statements send each upload's bytes alone.
 */
export const STORE_BATCH_MAX_INLINE_BYTES = 1024 * 1024;

/**
 * PostgreSQL: the commits of several uploads to one bucket in one statement, what storeAll does for
 * each in turn (GroupCommit runs it for a group of such commits: BatchedTransaction). The uploads
 * come in as arrays (unnest); the bucket's row takes the sum of their bytes; the heads of their keys
 * are retired, each with its own upload's time; the files (with their inline bytes)
 * and the new heads are inserted. Each upload's result is the bucket's row as it would be after its
 * own store, in the group's order (its size less the bytes of those after it), so its checks
 * (bucketBeforeStore, in `finish`) are those of storing them one by one; should one refuse, the group
 * runs again one transaction at a time. Two uploads of one key in the group, uploads of another
 * bucket, or more inline bytes than STORE_BATCH_MAX_INLINE_BYTES: declined (null), and the group runs
 * each on its own.
 *
 * It runs without the group's bucket lock first (a round trip less per group): its own UPDATE of the
 * bucket's row takes it. When that waits for another process's group, the statement's other parts
 * keep their older snapshot, and it fails rather than writes wrongly: the bucket's row is the latest
 * (an UPDATE re-reads the row it waited for: size, quota, lock and deletion as now); a head the other
 * group retired is retired again (no harm) while the head it inserted is not, so the new head breaks
 * the one-head index; a first head the other group inserted breaks it too. The group is then rolled
 * back and runs again with the lock first (GroupCommit), as multinode.test.ts checks.
 */
async function storeBatch(tx: Tx, batch: StoreBatchArgs[]): Promise<StoreResult[] | null> {
  if (batch.length < 2) return null;
  const bucketId = batch[0]!.args[1];
  const keys = new Set<string>();
  let inline = 0;
  for (const { args, content } of batch) {
    if (args[1] !== bucketId || keys.has(args[2])) return null;
    keys.add(args[2]);
    inline += content?.length ?? 0;
  }
  if (inline > STORE_BATCH_MAX_INLINE_BYTES) return null;
  const col = <K extends keyof StoreArgs & number>(i: K) => batch.map((b) => b.args[i]);
  const rows = await storeBatchQuery.execute(tx, col(0), col(2), col(3), col(4), col(5), col(6), col(7), col(8), col(9), col(10), col(11), batch.map((b) => b.content ?? null), bucketId);
  // No bucket (removed meanwhile): no row. The group is rolled back and its uploads run one by one, refused there.
  if (rows.length !== batch.length) throw new AppError('BUCKET_NOT_FOUND');
  storeBatchStats.batches++;
  storeBatchStats.uploads += batch.length;
  storeBatchStats.largestInlineBytes = Math.max(storeBatchStats.largestInlineBytes, inline);
  const byVersion = new Map(rows.map((r) => [r.v_version_id, r]));
  let after = 0;
  for (const { args } of batch) after += args[10];
  return batch.map(({ args }) => {
    const r = byVersion.get(args[3])!;
    after -= args[10];
    const { v_version_id: _v, ...row } = r;
    return { ...row, size: Number(r.size) - after, v_seq: Number(r.v_seq) };
  });
}

const insertHeadVersion = prepared(
  (db: Executor, versionId: string, bucketId: string, key: string, fileId: string, mimetype: string, tags: string, created: number, updated: number, metadata: string | null) =>
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
      metadata,
    }).returning(VERSION_COLUMNS),
);

export interface NewFile {
  id: string;
  locationId: string;
  uri: string;
  size: number;
  checksum: string;
  /** The bytes of a file kept in the database (storage/inline), written in the commit's transaction. */
  content?: Buffer;
}

/** The file instance of an upload's bytes: readable, of its bucket's default storage class. */
const newFile = (f: NewFile, bucket: Bucket): NewFileInstance => ({ id: f.id, locationId: f.locationId, uri: f.uri, storageClass: bucket.defaultStorageClass, size: f.size, checksum: f.checksum, state: 'readable' });

/**
 * The metadata half of an upload: in one transaction, under the bucket's row lock, re-check the
 * limits and the precondition against the current bucket and head, add the size, insert the file
 * instance and the version, and make it the head. Two API processes can't both pass a quota, both
 * win an `If-None-Match: *`, or leave two heads.
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
    /** Refused (412, nothing written) unless the head at this moment meets it. */
    precondition?: Precondition | null;
    /** Stored in the version's metadata column (JSON). */
    metadata?: Record<string, string>;
  },
  hooks: { inTransaction?: (tx: import('../db/schema.js').Tx) => Promise<void> } = {},
): Promise<ObjectVersion> {
  const now = nowMicros();
  const versionId = input.versionId ?? newOrderedId();
  let required = 1;
  const size = input.file.size;
  // The metadata goes in with the row, not as a second statement in the write transaction.
  const metadata = input.metadata ? JSON.stringify(input.metadata) : null;
  const tags = JSON.stringify(input.tags);
  const f = input.file;
  // Every commit ends here: the further copies the bucket's policy requires (the worker makes them: no
  // lost replication after a crash), the version answered (built from the new file instance and head
  // as inserted, without reading them back) and the outbox's record.
  const finishCommit = async (tx: Tx, fileId: string, inserted: FileInstance | null, row: VersionRow): Promise<ObjectVersion> => {
    await queueReplication(ctx, tx, fileId, required);
    const version = inserted ? toVersionOf(row, inserted) : (await findVersion(tx, input.bucketId, input.key, versionId))!;
    await ctx.outbox?.record(tx, 'file-uploaded', { obj: version });
    return version;
  };
  let commit: (tx: Tx) => Promise<ObjectVersion>;
  let batch: BatchedTransaction<StoreBatchArgs, StoreResult, ObjectVersion> | undefined;
  if (ctx.dialect === 'postgres' && !('existingId' in f) && !hooks.inTransaction && input.releaseReservation === undefined) {
    // PostgreSQL, a new file with nothing to run between its writes: one statement (storeAll),
    // after the lock and the head's check when there is a precondition.
    const args: StoreArgs = [now, input.bucketId, input.key, versionId, input.mimetype, tags, metadata, f.id, f.locationId, f.uri, size, f.checksum];
    // The bucket's row as the statement left it, with the new version's seq beside it (toBucket reads only the bucket's columns).
    const stored = async (tx: Tx, r: StoreResult | undefined): Promise<ObjectVersion> => {
      const bucket = bucketBeforeStore(r, size);
      required = requiredCopies(ctx.config, bucket);
      const row: VersionRow = { seq: r!.v_seq, version_id: versionId, bucket_id: bucket.id, key: input.key, file_id: f.id, mimetype: input.mimetype, is_head: 1, tags, created: now, updated: now };
      return finishCommit(tx, f.id, newFileInstance(newFile(f, bucket), now), row);
    };
    commit = async (tx) => {
      if (hasPrecondition(input.precondition)) {
        const locked = await lockBucketForWrite(tx, input.bucketId);
        checkPrecondition(await findHead(tx, locked.id, input.key), input.precondition);
      }
      return stored(tx, f.content ? await storeInlineFileAndHead.first(tx, f.content, ...args) : await storeFileAndHead.first(tx, ...args));
    };
    // Without a precondition, the uploads of one group commit in one statement (storeBatch).
    if (!hasPrecondition(input.precondition)) batch = { run: storeBatch, args: { args, content: f.content }, finish: stored };
  } else {
    commit = async (tx) => {
      const bucket = await lockBucketAndStore(tx, input.bucketId, size, input.releaseReservation);
      required = requiredCopies(ctx.config, bucket);
      if (hasPrecondition(input.precondition)) checkPrecondition(await findHead(tx, bucket.id, input.key), input.precondition);
      let fileId: string;
      let inserted: FileInstance | null = null;
      if ('existingId' in f) {
        fileId = f.existingId;
      } else {
        fileId = f.id;
        inserted = await insertFileInstance(tx, newFile(f, bucket), now);
        if (f.content) await insertInlineFile(tx, f.uri, f.content, now);
      }
      if (hooks.inTransaction) await hooks.inTransaction(tx);
      await retireHead.execute(tx, now, bucket.id, input.key);
      const row = (await insertHeadVersion.first(tx, versionId, bucket.id, input.key, fileId, input.mimetype, tags, now, now, metadata))!;
      return finishCommit(tx, fileId, inserted, row);
    };
  }
  // Statements only (an outbox handler's writes are in `tx` too): it may run again after its group's
  // rollback. A hook may keep state of its own, so a commit with one is not.
  const version = await transaction(ctx.db, commit, { bucket: input.bucketId, rerunnable: !hooks.inTransaction, batch: batch as AnyBatch | undefined });
  if (required > 1) ctx.queue.wake();
  return version;
}

/**
 * FILES_REST_UPLOAD_WAIT_COPIES: the upload makes `wanted` copies itself before it is acknowledged
 * (the worker's job finds them made). When they cannot be made, COPIES_NOT_MADE: the version is
 * stored and the worker keeps trying. Every way of making a version from uploaded bytes calls it
 * after its commit: a PUT (here), a multipart completion (multipart.ts's `completionOutcome`, for
 * both doors) and the last append of a tus upload (resumable.ts).
 */
export async function waitForCopies(ctx: DomainContext, version: ObjectVersion): Promise<void> {
  if (ctx.config.uploadWaitCopies <= 1 || !version.fileId) return;
  const wanted = Math.min(ctx.config.uploadWaitCopies, await fileRequiredCopies(ctx, ctx.db, version.fileId));
  if (wanted <= 1) return;
  let made = 1;
  try {
    made = (await replicateFile(ctx, version.fileId!, { upTo: wanted })).good;
  } catch (e) {
    ctx.log.warn({ err: e, fileId: version.fileId, wanted }, 'an upload could not make the copies it waits for');
  }
  if (made < wanted) throw new AppError('COPIES_NOT_MADE', { version: version.versionId, made, wanted });
}

/** The metadata a door stored with a version (commitNewVersion's `metadata`), or null. */
const versionMetadataQuery = prepared((db: Executor, versionId: string) => db.selectFrom('object_versions').select('metadata').where('version_id', '=', versionId));

export async function getVersionMetadata(db: Executor, versionId: string): Promise<Record<string, string> | null> {
  const r = await versionMetadataQuery.first(db, versionId);
  return parseMetadata(r?.metadata);
}

function parseMetadata(text: string | null | undefined): Record<string, string> | null {
  if (text === null || text === undefined) return null;
  try {
    return JSON.parse(text) as Record<string, string>;
  } catch {
    return null;
  }
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

const findHeadWithMetadataQuery = prepared((db: Executor, bucketId: string, key: string) =>
  versionsQuery(db)
    .select('object_versions.metadata')
    .where('object_versions.bucket_id', '=', bucketId)
    .where('object_versions.key', '=', key)
    .where('object_versions.is_head', '=', TRUE_LITERAL),
);

/**
 * The head version of a key with the metadata a door stored with it ({@link getVersionMetadata}),
 * in one statement; null when the key has no versions.
 */
export async function findHeadWithMetadata(db: Executor, bucketId: string, key: string): Promise<{ version: ObjectVersion; metadata: Record<string, string> | null } | null> {
  const r = await findHeadWithMetadataQuery.first(db, bucketId, key);
  if (!r) return null;
  return { version: toVersion(r as VersionWithFileRow), metadata: parseMetadata(r.metadata) };
}

/** The head version of a key, delete marker or not; null when the key has no versions. */
export async function findHead(db: Executor, bucketId: string, key: string): Promise<ObjectVersion | null> {
  const r = await findHeadQuery.first(db, bucketId, key);
  return r ? toVersion(r as VersionWithFileRow) : null;
}

/** A bucket joined with the head version of a key and its file (none when the key has no versions). */
function bucketWithHead(db: Executor, key: string) {
  return db
    .selectFrom('buckets')
    .leftJoin('object_versions', (j) =>
      j
        .onRef('object_versions.bucket_id', '=', 'buckets.id')
        .on('object_versions.key', '=', key)
        .on('object_versions.is_head', '=', TRUE_LITERAL),
    )
    .leftJoin('files', 'files.id', 'object_versions.file_id');
}

/**
 * The bytes of an inline file, read in the statement that found its version (a download of a small
 * object: one statement instead of two, a round trip less on PostgreSQL); `openContent` serves them
 * instead of asking the inline backend. Kept beside the file instance, not in it: a version is
 * serialised in places (events, answers) where bytes have no business.
 */
const bytesReadWithFile = new WeakMap<FileInstance, BytesRead>();

/**
 * An inline file's bytes as read with its version, and their MD5 (`md5:<hex>`) computed by the
 * statement that read them (sqlite-functions.ts; PostgreSQL's own md5), not on the event loop.
 */
export interface BytesRead {
  data: Buffer;
  md5: string;
}

/** The bytes of an inline file that were read with its version, if they were. */
export function bytesReadWith(file: FileInstance): BytesRead | undefined {
  return bytesReadWithFile.get(file);
}

/** The version of a row, the inline bytes read with it (columns `f_bytes`, `f_bytes_md5`) remembered beside its file. */
function versionWithBytes(r: VersionWithFileRow & { f_bytes?: Uint8Array | null; f_bytes_md5?: string | null }): ObjectVersion {
  const v = toVersion(r);
  if (r.f_bytes && r.f_bytes_md5 && v.file) {
    const data = Buffer.isBuffer(r.f_bytes) ? r.f_bytes : Buffer.from(r.f_bytes.buffer, r.f_bytes.byteOffset, r.f_bytes.byteLength);
    bytesReadWithFile.set(v.file, { data, md5: `md5:${r.f_bytes_md5}` });
  }
  return v;
}
/** The bytes of the inline file joined as `inline_files`, and their MD5 in hex. */
const INLINE_BYTES_COLUMNS = ['inline_files.data as f_bytes', sql<string | null>`md5(inline_files.data)`.as('f_bytes_md5')] as const;

const liveBucketHeadQuery = prepared((db: Executor, bucketId: string, key: string) =>
  bucketWithHead(db, key).select(['buckets.deleted as b_deleted', ...VERSION_WITH_FILE_COLUMNS]).where('buckets.id', '=', bucketId),
);
const liveBucketHeadWithBytesQuery = prepared((db: Executor, bucketId: string, key: string) =>
  bucketWithHead(db, key)
    .leftJoin('inline_files', 'inline_files.uri', 'files.uri')
    .select(['buckets.deleted as b_deleted', ...VERSION_WITH_FILE_COLUMNS, ...INLINE_BYTES_COLUMNS])
    .where('buckets.id', '=', bucketId),
);

/**
 * The head version of a key together with its bucket's liveness, in one statement (the download of
 * a head runs two lookups otherwise: a sixth of a small download's CPU was SQLite). Throws
 * BUCKET_NOT_FOUND for a missing or deleted bucket; null when the key has no versions.
 * With `bytes` (a download), an inline file's bytes come with it (`bytesReadWith`).
 * The caller checks permissions before it reveals anything about the key.
 */
export async function findHeadInLiveBucket(db: Executor, bucketId: string, key: string, bytes = false): Promise<ObjectVersion | null> {
  const r = (await (bytes ? liveBucketHeadWithBytesQuery : liveBucketHeadQuery).first(db, bucketId, key)) as (VersionWithFileRow & { b_deleted: number }) | undefined;
  if (!r || r.b_deleted) throw new AppError('BUCKET_NOT_FOUND');
  return r.seq === null ? null : versionWithBytes(r);
}

function liveBucketWithHead(db: Executor, key: string) {
  return bucketWithHead(db, key).select(['buckets.id as b_id', ...VERSION_WITH_FILE_COLUMNS, 'object_versions.metadata']).where('buckets.deleted', '=', 0);
}
function liveBucketWithHeadAndBytes(db: Executor, key: string) {
  return liveBucketWithHead(db, key).leftJoin('inline_files', 'inline_files.uri', 'files.uri').select([...INLINE_BYTES_COLUMNS]);
}
const liveBucketWithHeadById = prepared((db: Executor, bucketId: string, key: string) => liveBucketWithHead(db, key).where('buckets.id', '=', bucketId));
const liveBucketWithHeadByName = prepared((db: Executor, name: string, key: string) => liveBucketWithHead(db, key).where('buckets.name', '=', name));
const liveBucketWithHeadAndBytesById = prepared((db: Executor, bucketId: string, key: string) => liveBucketWithHeadAndBytes(db, key).where('buckets.id', '=', bucketId));
const liveBucketWithHeadAndBytesByName = prepared((db: Executor, name: string, key: string) => liveBucketWithHeadAndBytes(db, key).where('buckets.name', '=', name));

/**
 * A live bucket's id, the bucket addressed by its id or its name, with the head version of a key and
 * the metadata stored with it, in one statement (the S3 door's GetObject would run two). Null when
 * no live bucket has that id or name; `head` null when the key has no versions. The caller checks
 * permissions before it reveals anything about the key. Only the bucket's id is read: a wider select
 * cost PostgreSQL about 80 µs more per GetObject than the REST door's download of a head.
 */
export async function findLiveBucketWithHead(
  db: Executor,
  bucket: { id: string } | { name: string },
  key: string,
  bytes = false,
): Promise<{ bucket: Pick<Bucket, 'id'>; head: { version: ObjectVersion; metadata: Record<string, string> | null } | null } | null> {
  const r =
    'id' in bucket
      ? await (bytes ? liveBucketWithHeadAndBytesById : liveBucketWithHeadById).first(db, bucket.id, key)
      : await (bytes ? liveBucketWithHeadAndBytesByName : liveBucketWithHeadByName).first(db, bucket.name, key);
  if (!r) return null;
  const b = { id: r.b_id };
  const head = r.seq === null ? null : { version: versionWithBytes(r as unknown as VersionWithFileRow), metadata: parseMetadata(r.metadata) };
  return { bucket: b, head };
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
  const markerId = newOrderedId();
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
  }, { bucket: bucketId });
  ctx.signals.send('file-deleted', { obj: result.deleted, kind: 'soft' });
  return result;
}

/**
 * S3's DeleteObject in a versioned bucket: a delete marker becomes the head whatever the key holds
 * (a live version, a delete marker already, or nothing at all: the key is validated then, as an
 * upload's). `deleted` is the live version it hid, or null. The REST door's soft delete keeps
 * invenio's answer for a key with nothing live ({@link softDeleteObject}: OBJECT_NOT_FOUND).
 */
export async function placeDeleteMarker(
  ctx: DomainContext,
  bucketId: string,
  key: string,
  opts: { check?: DeleteCheck } = {},
): Promise<{ deleted: ObjectVersion | null; marker: ObjectVersion }> {
  validateKey(key, ctx.config.objectKeyMaxLen);
  const now = nowMicros();
  const markerId = newOrderedId();
  const result = await transaction(ctx.db, async (tx) => {
    const bucket = await lockBucketForWrite(tx, bucketId);
    const head = await findHead(tx, bucket.id, key);
    if (opts.check) await opts.check(head, tx);
    if (head) await tx.updateTable('object_versions').set({ is_head: 0, updated: now }).where('seq', '=', head.seq).execute();
    await tx
      .insertInto('object_versions')
      .values({ version_id: markerId, bucket_id: bucket.id, key, file_id: null, mimetype: null, is_head: 1, tags: '{}', created: now, updated: now })
      .execute();
    const marker = (await findVersion(tx, bucket.id, key, markerId))!;
    const deleted = head && head.fileId !== null ? { ...head, isHead: false } : null;
    if (deleted) await ctx.outbox?.record(tx, 'file-deleted', { obj: deleted, kind: 'soft' });
    return { deleted, marker };
  }, { bucket: bucketId });
  if (result.deleted) ctx.signals.send('file-deleted', { obj: result.deleted, kind: 'soft' });
  return result;
}

/**
 * A door's condition on a delete (S3's conditional DeleteObject: If-Match, last-modified time,
 * size), run inside the delete's transaction under the bucket's row lock with the version the delete
 * addresses (the head, or null when the key has none; or the version named): it throws to refuse,
 * and nothing is deleted.
 */
export type DeleteCheck = (target: ObjectVersion | null, tx: Executor) => Promise<void>;

/**
 * What a hard delete does with a version whose file instance other versions share (a snapshot, a
 * copy within one location): `refuse` it (FILE_SHARED, 409: the REST door, as SPEC.md says), or
 * `release` the version alone (the S3 door: S3's versions are independent, and two versions sharing
 * a file could otherwise never be deleted, each refused while the other exists); the file and its
 * bytes stay for the others, and go with the last of them.
 */
export type SharedFileRule = 'refuse' | 'release';

/**
 * Hard delete of one version. When its file instance is shared with another version, refused (409)
 * or the version alone goes (`shared`, above); otherwise the version and its file instance go in one
 * transaction, and the removal of the bytes is queued in the same transaction. Either way the bucket
 * size drops by the file's size (each version counted it), and the newest remaining version becomes
 * head if this one was. A release locks the file's row before its other versions are counted, so
 * that two versions released at once in two buckets cannot both leave the file to the other.
 */
export async function hardDeleteVersion(
  ctx: DomainContext,
  bucketId: string,
  key: string,
  versionId: string,
  opts: { shared?: SharedFileRule; check?: DeleteCheck } = {},
): Promise<ObjectVersion> {
  const now = nowMicros();
  const removed = await transaction(ctx.db, async (tx) => {
    const bucket = await lockBucketForWrite(tx, bucketId);
    const v = await findVersion(tx, bucket.id, key, versionId);
    if (!v) throw new AppError('OBJECT_NOT_FOUND');
    if (opts.check) await opts.check(v, tx);
    const release = opts.shared === 'release';
    let shared = false;
    if (v.fileId !== null) {
      // A release takes the file's row lock (PostgreSQL; SQLite has one writer) before counting, so
      // releases of versions sharing the file run one after the other. A refusal leaves nothing.
      if (release) await tx.updateTable('files').set({ updated: now }).where('id', '=', v.fileId).execute();
      const others = await tx
        .selectFrom('object_versions')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('file_id', '=', v.fileId)
        .where('seq', '!=', v.seq)
        .executeTakeFirstOrThrow();
      const n = Number(others.n);
      if (n > 0 && !release) throw new AppError('FILE_SHARED', { count: n });
      shared = n > 0;
    }
    await tx.deleteFrom('object_versions').where('seq', '=', v.seq).execute();
    if (v.file) await removeStored(tx, bucket.id, v.file.size);
    if (v.file && !shared) {
      // Its further copies go with it.
      const copies = await tx.deleteFrom('file_copies').where('file_id', '=', v.file.id).returning('uri').execute();
      await tx.deleteFrom('files').where('id', '=', v.file.id).execute();
      if (v.file.uri) await ctx.queue.enqueue(tx, 'remove-file-data', { uri: v.file.uri });
      for (const c of copies) await ctx.queue.enqueue(tx, 'remove-file-data', { uri: c.uri });
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
  }, { bucket: bucketId });
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
    if (Array.isArray(v) && typeof v[0] === 'string' && keyTextProblem(v[0]) === null && (shape === 'key' ? v.length === 1 : v.length === 2 && Number.isSafeInteger(v[1]))) {
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
