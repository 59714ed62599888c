import { EventEmitter } from 'node:events';
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Selectable } from 'kysely';
import { AppError, ERRORS, isAppError } from '../errors.js';
import { transaction } from '../db/database.js';
import type { Executor, MultipartUploadTable, PartTable, Tx } from '../db/schema.js';
import { isStorageFull } from '../storage/backend.js';
import type { ByteMeter, ByteObserver, DigestAlgorithm } from './byte-meter.js';
import { receive, type ExpectedDigest, type Received } from './receive.js';
import { newId, newOrderedId } from '../util/ids.js';
import { DAY_MICROS, nowMicros } from '../util/time.js';
import { getLiveBucket } from './buckets.js';
import { assertWritable, insertFileInstance, lockBucketForWrite, releaseReservation, reserve } from './ledger.js';
import type { DomainContext } from './context.js';
import { validateKey } from './keys.js';
import { checkSize } from './limits.js';
import { getLocationById } from './locations.js';
import { chooseMimetype } from './mimetype.js';
import { commitNewVersion, findHead, findVersion, waitForCopies } from './objects.js';
import { checkPrecondition, hasPrecondition, type Precondition } from './preconditions.js';
import type { ObjectVersion } from './models.js';
import type { JobPayloads } from './jobs.js';
import { assertNoPartInProgress, claimPart, removePartClaims } from './part-claims.js';

export type UploadState = 'in_progress' | 'completing' | 'failed';

/** In an upload's metadata: the tags given when it started (JSON), which the object gets at completion. */
export const UPLOAD_TAGS_KEY = 'mp-tags';

/** The object's stored metadata and tags from its upload's metadata. */
function objectMetadataAndTags(metadata: Record<string, string> | null): { tags: Record<string, string>; metadata?: Record<string, string> } {
  if (!metadata) return { tags: {} };
  const { [UPLOAD_TAGS_KEY]: tags, ...rest } = metadata;
  return { tags: tags ? (JSON.parse(tags) as Record<string, string>) : {}, metadata: rest };
}

export interface MultipartUpload {
  id: string;
  bucketId: string;
  key: string;
  fileId: string;
  size: number;
  partSize: number;
  lastPartNumber: number;
  lastPartSize: number;
  state: UploadState;
  versionId: string | null;
  /** What the storage backend's `initialize` returned. */
  storageRef: string | null;
  error: string | null;
  /** `rest`: size and part size declared up front; `s3`: learnt as parts arrive (s3-uploads.ts). */
  door: 'rest' | 's3';
  /** What the S3 door stores with the object at completion (headers, the multipart ETag). */
  metadata: Record<string, string> | null;
  created: number;
  updated: number;
}

export interface Part {
  partNumber: number;
  checksum: string;
  /** A checksum the client asked for besides MD5 (`<ALGORITHM>:<value>`, the door's form), or null. */
  clientChecksum: string | null;
  storageEtag: string | null;
  startByte: number;
  endByte: number;
  created: number;
  updated: number;
}

function toUpload(r: Selectable<MultipartUploadTable>): MultipartUpload {
  return {
    id: r.id,
    bucketId: r.bucket_id,
    key: r.key,
    fileId: r.file_id,
    size: r.size,
    partSize: r.part_size,
    lastPartNumber: r.last_part_number,
    lastPartSize: r.last_part_size,
    state: r.state as UploadState,
    versionId: r.version_id,
    storageRef: r.storage_ref,
    error: r.error,
    door: r.door === 's3' ? 's3' : 'rest',
    metadata: r.metadata ? (JSON.parse(r.metadata) as Record<string, string>) : null,
    created: r.created,
    updated: r.updated,
  };
}

function toPart(u: MultipartUpload, r: Selectable<PartTable>): Part {
  const start = r.part_number * u.partSize;
  return {
    partNumber: r.part_number,
    checksum: r.checksum,
    clientChecksum: r.client_checksum ?? null,
    storageEtag: r.storage_etag,
    startByte: start,
    endByte: r.size !== null && r.size !== undefined ? start + Number(r.size) : Math.min(start + u.partSize, u.size),
    created: r.created,
    updated: r.updated,
  };
}

/** Layout of an upload: zero-based parts of part_size bytes, the last one holding the rest. */
export function partLayout(size: number, partSize: number) {
  const lastPartNumber = Math.max(Math.ceil(size / partSize) - 1, 0);
  return { lastPartNumber, lastPartSize: size - partSize * lastPartNumber };
}

export function expectedPartSize(u: MultipartUpload, partNumber: number): number {
  return partNumber === u.lastPartNumber ? u.lastPartSize : u.partSize;
}

export function isExpired(ctx: DomainContext, u: MultipartUpload, now = nowMicros()): boolean {
  return u.created + ctx.config.multipartExpires * DAY_MICROS < now;
}

/**
 * Starts a multipart upload: validates the sizes, reserves the declared size against the quota and
 * the maximum file size, and creates the one file that all parts are written into, at their offsets.
 */
export async function initiateUpload(
  ctx: DomainContext,
  input: { bucketId: string; key: string; size: number; partSize: number; precondition?: Precondition | null },
): Promise<MultipartUpload> {
  const { config } = ctx;
  const bucket = await getLiveBucket(ctx.db, input.bucketId);
  assertWritable(bucket);
  if (input.partSize < config.multipartChunkSizeMin || input.partSize > config.multipartChunkSizeMax) {
    throw new AppError('INVALID_PART_SIZE', { min: config.multipartChunkSizeMin, max: config.multipartChunkSizeMax });
  }
  if (input.size < 1 || Math.ceil(input.size / input.partSize) > config.multipartMaxParts) {
    throw new AppError('INVALID_FILE_SIZE', { max: input.partSize * config.multipartMaxParts });
  }
  checkSize(bucket, input.size);
  validateKey(input.key, config.objectKeyMaxLen);
  // Last, as RFC 9110 §13.2.1 orders it; checked now only: the completion is made conditional by
  // sending the precondition with it.
  if (hasPrecondition(input.precondition)) checkPrecondition(await findHead(ctx.db, bucket.id, input.key), input.precondition);

  const location = await getLocationById(ctx.db, bucket.defaultLocation);
  const backend = ctx.storage.forUri(location.uri);
  const fileId = newId();
  const uri = backend.makeUri(location.uri, fileId);
  const { lastPartNumber, lastPartSize } = partLayout(input.size, input.partSize);
  const storageRef = await backend.initialize(uri, input.size, { partSize: input.partSize }).catch((e: unknown) => {
    throw isStorageFull(e) ? new AppError('STORAGE_FULL', {}, { cause: e }) : e;
  });
  const now = nowMicros();
  const id = newId();
  try {
    await transaction(ctx.db, async (tx) => {
      const b = await lockBucketForWrite(tx, bucket.id);
      await reserve(tx, b, input.size);
      await insertFileInstance(tx, { id: fileId, locationId: location.id, uri, storageClass: b.defaultStorageClass, size: input.size, checksum: null, state: 'writable' }, now);
      await tx
        .insertInto('multipart_uploads')
        .values({
          id, bucket_id: b.id, key: input.key, file_id: fileId, size: input.size, part_size: input.partSize,
          last_part_number: lastPartNumber, last_part_size: lastPartSize, state: 'in_progress', version_id: null,
          storage_ref: storageRef, hashed_bytes: 0, error: null, metadata: null, created: now, updated: now,
        })
        .execute();
    }, { bucket: bucket.id });
  } catch (e) {
    await (backend.abortInitialized ? backend.abortInitialized(uri, storageRef) : backend.delete(uri)).catch(() => {});
    throw e;
  }
  return {
    id, bucketId: bucket.id, key: input.key, fileId, size: input.size, partSize: input.partSize, lastPartNumber, lastPartSize,
    state: 'in_progress', versionId: null, storageRef, error: null, door: 'rest', metadata: null, created: now, updated: now,
  };
}

export async function findUpload(db: Executor, id: string): Promise<MultipartUpload | null> {
  const r = await db.selectFrom('multipart_uploads').selectAll().where('id', '=', id).executeTakeFirst();
  return r ? toUpload(r) : null;
}

/**
 * The upload at this bucket and key, with its bucket's liveness in the same statement: a missing
 * or logically deleted bucket is BUCKET_NOT_FOUND (as on every route), then an unknown upload (or
 * merged, aborted: its row is gone) UPLOAD_NOT_FOUND.
 */
export async function getUploadInLiveBucket(db: Executor, bucketId: string, key: string, id: string): Promise<MultipartUpload> {
  const r = await db
    .selectFrom('buckets')
    .leftJoin('multipart_uploads', (j) => j.onRef('multipart_uploads.bucket_id', '=', 'buckets.id').on('multipart_uploads.id', '=', id))
    .selectAll('multipart_uploads')
    .select('buckets.deleted as b_deleted')
    .where('buckets.id', '=', bucketId)
    .executeTakeFirst();
  if (!r || Number(r.b_deleted) === 1) throw new AppError('BUCKET_NOT_FOUND');
  if (r.id === null || r.key !== key) throw new AppError('UPLOAD_NOT_FOUND');
  return toUpload(r as Selectable<MultipartUploadTable>);
}

/** The upload at this bucket and key; 404 when unknown (or merged, aborted: its row is gone). */
export async function getUpload(db: Executor, bucketId: string, key: string, id: string): Promise<MultipartUpload> {
  const u = await findUpload(db, id);
  if (!u || u.bucketId !== bucketId || u.key !== key) throw new AppError('UPLOAD_NOT_FOUND');
  return u;
}

export async function listParts(db: Executor, u: MultipartUpload): Promise<Part[]> {
  const rows = await db.selectFrom('parts').selectAll().where('upload_id', '=', u.id).orderBy('part_number').execute();
  return rows.map((r) => toPart(u, r));
}

export async function listUploads(db: Executor, bucketId: string, limit: number): Promise<MultipartUpload[]> {
  const rows = await db
    .selectFrom('multipart_uploads')
    .selectAll()
    .where('bucket_id', '=', bucketId)
    .where('state', 'in', ['in_progress', 'completing'])
    .orderBy('created')
    .limit(limit)
    .execute();
  return rows.map(toUpload);
}

/** Refusals that apply to any change to an upload: state, expiry and the bucket's lock. */
export async function checkWritable(ctx: DomainContext, u: MultipartUpload): Promise<void> {
  if (u.state === 'completing') throw new AppError('MULTIPART_ALREADY_COMPLETED');
  if (u.state !== 'in_progress') throw new AppError('UPLOAD_NOT_FOUND');
  const bucket = await getLiveBucket(ctx.db, u.bucketId);
  assertWritable(bucket);
}

/** Validates a part before a byte of it is read: number in range, exact size, upload open. */
export async function checkPartAllowed(ctx: DomainContext, u: MultipartUpload, partNumber: number, declaredSize: number | null): Promise<void> {
  // An S3 door upload has no declared layout: its parts and completion go through s3-uploads.ts.
  if (u.door !== 'rest') throw new AppError('UPLOAD_NOT_FOUND');
  await checkWritable(ctx, u);
  if (isExpired(ctx, u)) throw new AppError('MULTIPART_EXPIRED');
  if (!Number.isSafeInteger(partNumber) || partNumber < 0 || partNumber > u.lastPartNumber) {
    throw new AppError('INVALID_PART_NUMBER', { last: u.lastPartNumber });
  }
  if (declaredSize !== null && declaredSize !== expectedPartSize(u, partNumber)) throw partSizeMismatch(u, partNumber);
}

function partSizeMismatch(u: MultipartUpload, partNumber: number): AppError {
  return new AppError('PART_SIZE_MISMATCH', { partNumber, expected: expectedPartSize(u, partNumber) });
}

/**
 * Writes one part at its offset into the upload's file and records its checksum. Re-sending a part
 * replaces it. When the transfer fails (disconnect, short body, storage error) the whole upload is
 * aborted, or with FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE=0 only that part is dropped.
 */
export async function uploadPart(
  ctx: DomainContext,
  u: MultipartUpload,
  input: {
    partNumber: number;
    source: Readable;
    declaredSize: number | null;
    signal?: AbortSignal;
    /** A door's own checks (see `receive`): announced digests, more digests, observers, a check before the record. */
    expectedDigests?: readonly ExpectedDigest[];
    extraDigests?: readonly DigestAlgorithm[];
    observers?: readonly ByteObserver[];
    verify?: (meter: ByteMeter) => void | Promise<void>;
  },
): Promise<Part> {
  await checkPartAllowed(ctx, u, input.partNumber, input.declaredSize);
  const expected = expectedPartSize(u, input.partNumber);
  const file = await ctx.db.selectFrom('files').select(['uri']).where('id', '=', u.fileId).executeTakeFirstOrThrow();
  const backend = ctx.storage.forUri(file.uri!);
  // One write of this part at a time, across processes; a failure to get there is not a part failure.
  const claim = await claimPart(ctx, u.id, input.partNumber, input.signal, input.source);
  let received: Received<{ etag: string | null }>;
  try {
    received = await receive({
      source: input.source,
      store: (body, signal) =>
        backend.update(file.uri!, body, {
          partNumber: input.partNumber,
          offset: input.partNumber * u.partSize,
          size: expected,
          ref: u.storageRef,
          signal,
        }),
      // The part's bytes were (partly) overwritten: its record, or the upload, goes, before the claim ends
      // (a completion must not slip in between).
      discard: () => onPartFailure(ctx, u, input.partNumber),
      onDiscardError: (x) => ctx.log.error({ err: x, uploadId: u.id }, 'could not clean up after a failed part'),
      limit: { bytes: expected, error: () => partSizeMismatch(u, input.partNumber) },
      expected,
      expectedDigests: input.expectedDigests,
      extraDigests: input.extraDigests,
      observers: input.observers,
      verify: input.verify,
      signal: input.signal ? AbortSignal.any([input.signal, claim.lost]) : claim.lost,
    });
  } catch (e) {
    await claim.release();
    throw e;
  }
  const stored = received.stored;
  const now = nowMicros();
  const checksum = received.checksum;
  try {
    await transaction(ctx.db, async (tx) => {
      const open = await tx
        .updateTable('multipart_uploads')
        .set({ updated: now })
        .where('id', '=', u.id)
        .where('state', '=', 'in_progress')
        .executeTakeFirst();
      if (Number(open.numUpdatedRows) !== 1) throw new AppError('UPLOAD_NOT_FOUND');
      await claim.commit(tx);
      await tx
        .insertInto('parts')
        .values({ upload_id: u.id, part_number: input.partNumber, checksum, storage_etag: stored.etag, size: null, created: now, updated: now })
        .onConflict((oc) => oc.columns(['upload_id', 'part_number']).doUpdateSet({ checksum, storage_etag: stored.etag, updated: now }))
        .execute();
    });
  } catch (e) {
    await claim.release();
    throw e;
  }
  if (backend.runningDigests) ctx.hasher?.partStored(u, backend.runningDigests, file.uri!, input.partNumber);
  const start = input.partNumber * u.partSize;
  return { partNumber: input.partNumber, checksum, clientChecksum: null, storageEtag: stored.etag, startByte: start, endByte: start + expected, created: now, updated: now };
}

async function onPartFailure(ctx: DomainContext, u: MultipartUpload, partNumber: number): Promise<void> {
  if (ctx.config.multipartAbortOnPartFailure) {
    await abortUpload(ctx, u.id, { reason: `part ${partNumber} failed` }).catch((e) => {
      if (!isAppError(e)) throw e;
    });
    return;
  }
  // The part's bytes were partly overwritten: its old record no longer describes them.
  await ctx.db.deleteFrom('parts').where('upload_id', '=', u.id).where('part_number', '=', partNumber).execute();
}

/**
 * Aborts an upload: in one transaction its parts, its row and its file instance go, the reservation
 * is released, and the removal of the bytes is queued for the worker.
 */
export async function abortUpload(ctx: DomainContext, uploadId: string, opts: { reason?: string; checkLock?: boolean; allowStates?: UploadState[] } = {}): Promise<void> {
  const allow = opts.allowStates ?? ['in_progress'];
  await transaction(ctx.db, async (tx) => {
    const u = await findUpload(tx, uploadId);
    if (!u) throw new AppError('UPLOAD_NOT_FOUND');
    if (!allow.includes(u.state)) {
      throw u.state === 'completing' ? new AppError('MULTIPART_ALREADY_COMPLETED') : new AppError('UPLOAD_NOT_FOUND');
    }
    if (opts.checkLock) await lockBucketForWrite(tx, u.bucketId);
    await removeUploadRows(tx, ctx, u, allow);
  });
  ctx.queue.wake();
  ctx.hasher?.forget(uploadId);
  ctx.log.info({ uploadId, reason: opts.reason ?? 'client request' }, 'multipart upload aborted');
}

/**
 * Aborts, inside the caller's transaction (which holds the bucket's row lock), every multipart upload
 * of the bucket still in progress: their rows, parts, claims and reservations go and their files'
 * removal is queued, as `abortUpload` does one by one. Returns their ids; the caller forgets their
 * running digests (`ctx.hasher`) and wakes the queue once committed. A part still arriving finds its
 * upload gone and leaves nothing, as after any abort.
 */
export async function abortUploadsOfBucket(tx: Tx, ctx: DomainContext, bucketId: string): Promise<string[]> {
  const rows = await tx.selectFrom('multipart_uploads').selectAll().where('bucket_id', '=', bucketId).where('state', '=', 'in_progress').execute();
  for (const r of rows) await removeUploadRows(tx, ctx, toUpload(r), ['in_progress']);
  return rows.map((r) => r.id);
}

async function removeUploadRows(tx: Tx, ctx: DomainContext, u: MultipartUpload, allow: UploadState[]): Promise<void> {
  // The upload's row first, still in an allowed state: two removals at once (two parts failing
  // together) must not both release the reservation; the second finds the row gone.
  const gone = await tx.deleteFrom('multipart_uploads').where('id', '=', u.id).where('state', 'in', allow).executeTakeFirst();
  if (Number(gone.numDeletedRows) !== 1) throw new AppError('UPLOAD_NOT_FOUND');
  const file = await tx.selectFrom('files').select(['uri']).where('id', '=', u.fileId).executeTakeFirst();
  await tx.deleteFrom('parts').where('upload_id', '=', u.id).execute();
  await removePartClaims(tx, u.id);
  // Every upload row holds its reservation until the row goes.
  await releaseReservation(tx, u.bucketId, u.size);
  await tx.deleteFrom('files').where('id', '=', u.fileId).execute();
  if (file?.uri) await ctx.queue.enqueue(tx, 'remove-file-data', { uri: file.uri, multipartRef: u.storageRef ?? undefined, initialized: true });
}

/**
 * The first step of a completion's transaction (both doors): the bucket's write lock, then the upload
 * row moved from in_progress to completing with its version id (MULTIPART_ALREADY_COMPLETED when it
 * is not in progress). The upload row first: its lock orders this against the claims of part writes
 * (part-claims.ts).
 */
export async function markCompleting(tx: Tx, u: MultipartUpload, versionId: string, now: number): Promise<void> {
  await lockBucketForWrite(tx, u.bucketId);
  const r = await tx
    .updateTable('multipart_uploads')
    .set({ state: 'completing', version_id: versionId, updated: now })
    .where('id', '=', u.id)
    .where('state', '=', 'in_progress')
    .executeTakeFirst();
  if (Number(r.numUpdatedRows) !== 1) throw new AppError('MULTIPART_ALREADY_COMPLETED');
}

/**
 * Asks for completion: refused while parts are missing, or when the precondition already fails
 * (412; the upload stays open either way); otherwise the upload moves to `completing` and the merge
 * task is queued in the same transaction, carrying the precondition, which the merge checks again
 * in the transaction that makes the new version the head. The version id is fixed now.
 */
export async function requestCompletion(ctx: DomainContext, u: MultipartUpload, precondition?: Precondition | null): Promise<MultipartUpload> {
  if (u.door !== 'rest') throw new AppError('UPLOAD_NOT_FOUND');
  await checkWritable(ctx, u);
  const versionId = newOrderedId();
  const now = nowMicros();
  await transaction(ctx.db, async (tx) => {
    await markCompleting(tx, u, versionId, now);
    const n = await tx
      .selectFrom('parts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('upload_id', '=', u.id)
      .executeTakeFirstOrThrow();
    if (Number(n.n) !== u.lastPartNumber + 1) {
      const have = await tx.selectFrom('parts').select('part_number').where('upload_id', '=', u.id).orderBy('part_number').execute();
      const missing = missingRanges(have.map((p) => Number(p.part_number)), u.lastPartNumber);
      throw new AppError('MULTIPART_MISSING_PARTS', { missing, last: u.lastPartNumber });
    }
    await assertNoPartInProgress(tx, u.id);
    if (hasPrecondition(precondition)) checkPrecondition(await findHead(tx, u.bucketId, u.key), precondition);
    const payload: CompletionTask = hasPrecondition(precondition) ? { uploadId: u.id, precondition } : { uploadId: u.id };
    await ctx.queue.enqueue(tx, 'complete-multipart', payload);
  }, { bucket: u.bucketId });
  ctx.queue.wake();
  // Without an in-process worker the merge runs in another process, which cannot use this digest.
  if (!ctx.config.worker) ctx.hasher?.forget(u.id);
  return { ...u, state: 'completing', versionId, updated: now };
}

/** The part numbers in 0..last absent from `have` (sorted), as ranges: `1, 4-7, 9`; at most 20 ranges, then `…`. */
export function missingRanges(have: number[], last: number): string {
  const out: string[] = [];
  let next = 0;
  const add = (from: number, to: number) => out.push(from === to ? String(from) : `${from}-${to}`);
  for (const n of [...have, last + 1]) {
    if (n > next) add(next, Math.min(n - 1, last));
    next = Math.max(next, n + 1);
  }
  return out.length > 20 ? `${out.slice(0, 20).join(', ')}, …` : out.join(', ');
}

/**
 * In-process news that an upload's completion ended (merged or failed). A request waiting for the
 * completion polls the database (the merge may run in another process) and also listens here, so
 * that it answers as soon as a merge run by this process commits instead of at its next poll.
 */
const settled = new EventEmitter();
settled.setMaxListeners(0);

/** Resolves when this process ends the upload's completion, or after `ms`, whichever comes first. */
export function completionNews(uploadId: string, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      settled.off(uploadId, done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    settled.once(uploadId, done);
  });
}

/** How the error of an upload whose completion its precondition refused begins. */
const REFUSED = ERRORS.PRECONDITION_FAILED.message.split('{')[0]!;

/** What the `complete-multipart` task carries (declared in the job catalogue). */
export type CompletionTask = JobPayloads['complete-multipart'];

/** Outcome of a completion, as a waiting client sees it. `refused`: the precondition failed at the merge (412). */
export type CompletionStatus =
  | { state: 'completing' }
  | { state: 'completed'; version: ObjectVersion }
  | { state: 'failed'; error: string }
  | { state: 'refused'; refusal: AppError }
  | { state: 'gone' };

export async function completionStatus(db: Executor, u: MultipartUpload): Promise<CompletionStatus> {
  const row = await findUpload(db, u.id);
  if (row?.state === 'completing') return { state: 'completing' };
  if (row?.state === 'failed' && row.error?.startsWith(REFUSED)) {
    return { state: 'refused', refusal: new AppError('PRECONDITION_FAILED', { reason: row.error.slice(REFUSED.length).trim().replace(/\.$/, '') }) };
  }
  if (row?.state === 'failed') return { state: 'failed', error: row.error ?? 'completion failed' };
  if (u.versionId) {
    const v = await findVersion(db, u.bucketId, u.key, u.versionId);
    if (v) return { state: 'completed', version: v };
  }
  return { state: 'gone' };
}

/**
 * What a client waiting for its completion is answered: `completionStatus`, and once the version
 * exists, the copies FILES_REST_UPLOAD_WAIT_COPIES asks for are made first (COPIES_NOT_MADE when
 * they cannot be: the version is stored, the worker makes the rest), as for a PUT. Both doors' waits
 * call this.
 */
export async function completionOutcome(ctx: DomainContext, u: MultipartUpload): Promise<CompletionStatus> {
  const st = await completionStatus(ctx.db, u);
  if (st.state === 'completed') await waitForCopies(ctx, st.version);
  return st;
}

/**
 * The merge, run by the worker: reads the file once, checking every part's MD5 and computing the
 * whole file's MD5 (plain MD5 of the content), then in one transaction makes the file readable,
 * creates the head version pointing at it (no copy), moves the reservation into the bucket size
 * and removes the upload. Idempotent: a second run finds nothing to do.
 */
export async function completeUpload(ctx: DomainContext, uploadId: string, signal?: AbortSignal, precondition?: Precondition | null): Promise<ObjectVersion | null> {
  const u = await findUpload(ctx.db, uploadId);
  if (!u || u.state !== 'completing' || !u.versionId) return null;
  const parts = await listParts(ctx.db, u);
  const file = await ctx.db.selectFrom('files').selectAll().where('id', '=', u.fileId).executeTakeFirstOrThrow();
  const backend = ctx.storage.forUri(file.uri!);
  // An S3 door upload's file may hold parts beyond the completed list (or a longer earlier last part).
  if (backend.truncate) await backend.truncate(file.uri!, u.size);
  if (backend.finalize) {
    await backend.finalize(file.uri!, u.storageRef, parts.map((p) => ({ partNumber: p.partNumber, etag: p.storageEtag })));
  }
  // The digest computed while parts arrived, when it is complete and matches every recorded part;
  // otherwise one pass over the file, checking each part's MD5 on the way.
  let checksum = (await ctx.hasher?.finish(u.id, parts)) ?? null;
  if (checksum === null) {
    const r = await hashWholeFile(backend, file.uri!, u, parts, signal);
    if (r.badPart !== null) {
      const error = `part ${r.badPart} does not match its checksum`;
      // Kept as `failed` so a waiting client learns why; the expiry task removes it and its file.
      await ctx.db.updateTable('multipart_uploads').set({ state: 'failed', error, updated: nowMicros() }).where('id', '=', u.id).where('state', '=', 'completing').execute();
      ctx.log.error({ uploadId: u.id, error }, 'multipart completion failed');
      settled.emit(u.id);
      return null;
    }
    checksum = r.checksum;
  }
  const now = nowMicros();
  let version: ObjectVersion;
  try {
    version = await commitNewVersion(
      ctx,
      {
        bucketId: u.bucketId,
        key: u.key,
        file: { existingId: u.fileId, size: u.size },
        mimetype: chooseMimetype(u.key, u.metadata?.['content-type']),
        ...objectMetadataAndTags(u.metadata),
        versionId: u.versionId,
        releaseReservation: u.size,
        precondition,
      },
      {
        inTransaction: async (tx) => {
          const r = await tx.deleteFrom('multipart_uploads').where('id', '=', u.id).where('state', '=', 'completing').executeTakeFirst();
          if (Number(r.numDeletedRows) !== 1) throw new AppError('UPLOAD_NOT_FOUND');
          await tx.deleteFrom('parts').where('upload_id', '=', u.id).execute();
          await removePartClaims(tx, u.id);
          await tx.updateTable('files').set({ readable: 1, writable: 0, checksum, size: u.size, updated: now }).where('id', '=', u.fileId).execute();
        },
      },
    );
  } catch (e) {
    if (!isAppError(e, 'PRECONDITION_FAILED')) throw e;
    // Another writer changed the head since the completion was asked for: no version was made. The
    // upload is kept as `failed` so the waiting client learns why (412); the expiry task removes it,
    // its file and its reservation (the storage may already have assembled the parts: S3).
    await ctx.db
      .updateTable('multipart_uploads')
      .set({ state: 'failed', error: e.message, updated: nowMicros() })
      .where('id', '=', u.id)
      .where('state', '=', 'completing')
      .execute();
    ctx.log.info({ uploadId: u.id, reason: e.message }, 'multipart completion refused by its precondition');
    settled.emit(u.id);
    return null;
  }
  settled.emit(u.id);
  ctx.signals.send('file-uploaded', { obj: version });
  return version;
}

/** Reads the whole file once: the file's MD5, and the first part whose MD5 differs from its record. */
async function hashWholeFile(
  backend: import('../storage/backend.js').StorageBackend,
  uri: string,
  u: MultipartUpload,
  parts: Part[],
  signal?: AbortSignal,
): Promise<{ checksum: string; badPart: number | null }> {
  const whole = createHash('md5');
  let partHash = createHash('md5');
  let partIndex = 0;
  let inPart = 0;
  let bad: number | null = null;
  const stream = await backend.open(uri);
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    if (signal?.aborted) {
      stream.destroy();
      throw signal.reason;
    }
    whole.update(chunk);
    let off = 0;
    while (off < chunk.length) {
      const take = Math.min(expectedPartSize(u, partIndex) - inPart, chunk.length - off);
      partHash.update(chunk.subarray(off, off + take));
      off += take;
      inPart += take;
      if (inPart === expectedPartSize(u, partIndex)) {
        if (bad === null && `md5:${partHash.digest('hex')}` !== parts[partIndex]?.checksum) bad = partIndex;
        partHash = createHash('md5');
        partIndex++;
        inPart = 0;
      }
    }
  }
  return { checksum: `md5:${whole.digest('hex')}`, badPart: bad };
}

/** Aborts every upload older than FILES_REST_MULTIPART_EXPIRES days, and failed ones. */
export async function expireUploads(ctx: DomainContext): Promise<number> {
  const cutoff = nowMicros() - ctx.config.multipartExpires * DAY_MICROS;
  const rows = await ctx.db
    .selectFrom('multipart_uploads')
    .select(['id', 'state'])
    .where((eb) => eb.or([eb.and([eb('state', '=', 'in_progress'), eb('created', '<', cutoff)]), eb('state', '=', 'failed')]))
    .limit(1000)
    .execute();
  let n = 0;
  for (const r of rows) {
    try {
      await abortUpload(ctx, r.id, { reason: r.state === 'failed' ? 'failed completion' : 'expired', allowStates: ['in_progress', 'failed'] });
      n++;
    } catch (e) {
      if (!isAppError(e)) throw e;
    }
  }
  return n;
}
