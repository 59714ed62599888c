import { createHash, type Hash } from 'node:crypto';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { Transform, type Readable, type TransformCallback } from 'node:stream';
import type { Selectable } from 'kysely';
import { AppError, isAppError } from '../errors.js';
import { transaction } from '../db/database.js';
import type { Executor, ResumableUploadTable, Tx } from '../db/schema.js';
import { isStorageError, isStorageFull, type StorageBackend } from '../storage/backend.js';
import { newId } from '../util/ids.js';
import { DAY_MICROS, nowMicros } from '../util/time.js';
import { getLiveBucket } from './buckets.js';
import { assertWritable, insertFileInstance, lockBucketForWrite, releaseReservation, reserve } from './ledger.js';
import type { DomainContext } from './context.js';
import { validateKey } from './keys.js';
import { checkSize, tightestLimit } from './limits.js';
import { getLocationById } from './locations.js';
import { chooseMimetype } from './mimetype.js';
import type { Bucket, ObjectVersion } from './models.js';
import { commitNewVersion, waitForCopies } from './objects.js';

/**
 * Resumable uploads (the tus door's domain): an upload is a row and its own file instance (a `files`
 * row, not readable) that PATCHes append to in place. Bytes first: each append is written at its
 * offset and synced to disk before the new offset is committed, so the offset a client is told never
 * exceeds what survives a crash (bytes past it are overwritten by the resumed append, or cut at the
 * end). The last append turns the file into a new object version through commitNewVersion, with the
 * length reserved against the quota since it was known. Needs a backend that writes in place
 * (`truncate`: fs); S3 locations refuse resumable uploads.
 */

export type ChecksumAlgorithm = 'md5' | 'sha1' | 'sha256';
export const CHECKSUM_ALGORITHMS: readonly ChecksumAlgorithm[] = ['md5', 'sha1', 'sha256'];

export interface ResumableUpload {
  id: string;
  bucketId: string;
  key: string;
  fileId: string;
  /** null while deferred (Upload-Defer-Length). */
  length: number | null;
  offset: number;
  reserved: number;
  mimetype: string | null;
  /** The Upload-Metadata header as given at creation. */
  metadata: string | null;
  /** Microseconds since the epoch. */
  expires: number;
  created: number;
}

function toUpload(r: Selectable<ResumableUploadTable>): ResumableUpload {
  return {
    id: r.id,
    bucketId: r.bucket_id,
    key: r.key,
    fileId: r.file_id,
    length: r.length === null ? null : Number(r.length),
    offset: Number(r.upload_offset),
    reserved: Number(r.reserved),
    mimetype: r.mimetype,
    metadata: r.metadata,
    expires: Number(r.expires),
    created: Number(r.created),
  };
}

/** A claim not renewed for this long belongs to a writer that is gone and is taken over. */
const CLAIM_LEASE_MICROS = 30_000_000;
const HEARTBEAT_MS = 5_000;
const HOST = hostname();

function expiresFrom(ctx: DomainContext, now: number): number {
  return now + Math.round(ctx.config.tusExpires * DAY_MICROS);
}

/** The backend of a file instance, when it can take appends in place. */
function inPlaceBackend(ctx: DomainContext, uri: string): StorageBackend {
  const backend = ctx.storage.forUri(uri);
  if (!backend.truncate || backend.finalize) throw new AppError('RESUMABLE_LOCATION_UNSUPPORTED');
  return backend;
}

/** Limits a new upload of `length` bytes (or of unknown length) must pass before anything is stored. */
async function checkCreateAllowed(ctx: DomainContext, bucketId: string, key: string, length: number | null): Promise<Bucket> {
  const bucket = await getLiveBucket(ctx.db, bucketId);
  if (length !== null) checkSize(bucket, length);
  assertWritable(bucket);
  validateKey(key, ctx.config.objectKeyMaxLen);
  return bucket;
}

/**
 * Creates an upload: checks the key, the lock and (for a declared length) the limits, creates its
 * empty file, and in one transaction reserves the length against the quota and inserts the rows.
 */
export async function createResumable(
  ctx: DomainContext,
  input: { bucketId: string; key: string; length: number | null; contentType?: string; metadata?: string | null },
): Promise<ResumableUpload> {
  const bucket = await checkCreateAllowed(ctx, input.bucketId, input.key, input.length);
  const location = await getLocationById(ctx.db, bucket.defaultLocation);
  const backend = ctx.storage.forUri(location.uri);
  if (!backend.truncate || backend.finalize) throw new AppError('RESUMABLE_LOCATION_UNSUPPORTED');
  const fileId = newId();
  const uri = backend.makeUri(location.uri, fileId);
  await backend.initialize(uri, 0, { partSize: 0 }).catch((e: unknown) => {
    throw isStorageFull(e) ? new AppError('STORAGE_FULL', {}, { cause: e }) : e;
  });
  const now = nowMicros();
  const id = newId();
  const reserved = input.length ?? 0;
  const mimetype = chooseMimetype(input.key, input.contentType);
  try {
    await transaction(ctx.db, async (tx) => {
      const b = await lockBucketForWrite(tx, bucket.id);
      await reserve(tx, b, reserved);
      await insertFileInstance(
        tx,
        { id: fileId, locationId: location.id, uri, storageClass: b.defaultStorageClass, size: reserved, checksum: null, state: 'writable' },
        now,
      );
      await tx
        .insertInto('resumable_uploads')
        .values({
          id, bucket_id: b.id, key: input.key, file_id: fileId, length: input.length, upload_offset: 0, reserved, mimetype,
          metadata: input.metadata ?? null, writer: null, heartbeat: null, expires: expiresFrom(ctx, now), created: now, updated: now,
        })
        .execute();
    }, { bucket: bucket.id });
  } catch (e) {
    await backend.delete(uri).catch(() => {});
    throw e;
  }
  return { id, bucketId: bucket.id, key: input.key, fileId, length: input.length, offset: 0, reserved, mimetype, metadata: input.metadata ?? null, expires: expiresFrom(ctx, now), created: now };
}

/** The upload in this bucket; BUCKET_NOT_FOUND for a missing bucket, UPLOAD_NOT_FOUND (finished, terminated, swept) or RESUMABLE_EXPIRED. */
export async function getResumable(ctx: DomainContext, bucketId: string, id: string): Promise<ResumableUpload> {
  await getLiveBucket(ctx.db, bucketId);
  const r = await ctx.db.selectFrom('resumable_uploads').selectAll().where('id', '=', id).where('bucket_id', '=', bucketId).executeTakeFirst();
  if (!r) throw new AppError('UPLOAD_NOT_FOUND');
  const u = toUpload(r);
  if (u.expires < nowMicros()) throw new AppError('RESUMABLE_EXPIRED');
  return u;
}

/** Counts the bytes of one append, refuses past a limit, and hashes them for Upload-Checksum. */
class AppendMeter extends Transform {
  bytes = 0;
  readonly #hash: Hash | null;
  constructor(private readonly limit: number | null, private readonly limitError: () => Error, algorithm: ChecksumAlgorithm | null) {
    super({ highWaterMark: 1024 * 1024 });
    this.#hash = algorithm ? createHash(algorithm) : null;
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.limit !== null && this.bytes > this.limit) return cb(this.limitError());
    this.#hash?.update(chunk);
    cb(null, chunk);
  }
  digest(): Buffer | null {
    return this.#hash?.digest() ?? null;
  }
}

/** Running MD5s kept by this process: bytes hashed, in order from 0, per upload (see RunningDigests). */
const hashedUpTo = new Map<string, number>();

function writerAlive(writer: string | null): boolean {
  if (!writer) return false;
  const [host, pid] = writer.split(':');
  if (host !== HOST) return true;
  try {
    process.kill(Number(pid), 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Claims the upload for one append at `offset`: refused with UPLOAD_OFFSET_MISMATCH when the offset
 * is not the upload's, RESUMABLE_BUSY while another append runs (a writer on this host whose process
 * is gone, after a kill -9, or one silent for the lease, is taken over at once).
 */
async function claim(ctx: DomainContext, u: ResumableUpload, offset: number, writer: string): Promise<void> {
  await transaction(ctx.db, async (tx) => {
    const r = await tx.selectFrom('resumable_uploads').select(['upload_offset', 'writer', 'heartbeat']).where('id', '=', u.id).executeTakeFirst();
    if (!r) throw new AppError('UPLOAD_NOT_FOUND');
    if (Number(r.upload_offset) !== offset) throw new AppError('UPLOAD_OFFSET_MISMATCH', { given: offset, offset: Number(r.upload_offset) });
    const live = r.writer !== null && Number(r.heartbeat) >= nowMicros() - CLAIM_LEASE_MICROS && writerAlive(r.writer);
    if (live) throw new AppError('RESUMABLE_BUSY');
    const taken = await tx
      .updateTable('resumable_uploads')
      .set({ writer, heartbeat: nowMicros() })
      .where('id', '=', u.id)
      .where('upload_offset', '=', offset)
      .where((eb) => (r.writer === null ? eb('writer', 'is', null) : eb('writer', '=', r.writer)))
      .executeTakeFirst();
    if (Number(taken.numUpdatedRows) !== 1) throw new AppError('RESUMABLE_BUSY');
  });
}

export interface AppendInput {
  offset: number;
  source: Readable;
  /** Content-Length of the request, or null. */
  declaredSize: number | null;
  /** Upload-Length sent with this PATCH (the deferred length becomes known). */
  length?: number | null;
  checksum?: { algorithm: ChecksumAlgorithm; value: Buffer } | null;
  signal?: AbortSignal;
}

export interface AppendResult {
  upload: ResumableUpload;
  /** The new object version when this append completed the upload. */
  version: ObjectVersion | null;
}

/** Declares a deferred length: reserved against the quota now, under the bucket's lock. */
async function declareLength(ctx: DomainContext, u: ResumableUpload, length: number): Promise<ResumableUpload> {
  if (u.length !== null) {
    if (u.length !== length) throw new AppError('INVALID_HEADER', { header: 'Upload-Length', reason: `the upload's length is already ${u.length}` });
    return u;
  }
  if (length < u.offset) throw new AppError('INVALID_HEADER', { header: 'Upload-Length', reason: `${u.offset} bytes were already received` });
  await transaction(ctx.db, async (tx) => {
    const b = await lockBucketForWrite(tx, u.bucketId);
    const r = await tx.updateTable('resumable_uploads').set({ length, reserved: length }).where('id', '=', u.id).where('length', 'is', null).executeTakeFirst();
    if (Number(r.numUpdatedRows) !== 1) throw new AppError('UPLOAD_NOT_FOUND');
    await reserve(tx, b, length);
    await tx.updateTable('files').set({ size: length }).where('id', '=', u.fileId).execute();
  }, { bucket: u.bucketId });
  return { ...u, length, reserved: length };
}

/** How many bytes this append may carry: up to the length, or (deferred) what the bucket's limits leave. */
async function appendLimit(ctx: DomainContext, u: ResumableUpload): Promise<{ bytes: number | null; error: () => Error }> {
  if (u.length !== null) return { bytes: u.length - u.offset, error: () => new AppError('UPLOAD_LENGTH_EXCEEDED', { length: u.length! }) };
  const limit = tightestLimit(await getLiveBucket(ctx.db, u.bucketId));
  return limit ? { bytes: Math.max(limit.bytes - u.offset, 0), error: () => new AppError(limit.reason) } : { bytes: null, error: () => new Error('no limit') };
}

/**
 * Appends the bytes of one PATCH at `offset`: written in place and synced, checked against the
 * Upload-Checksum, then the new offset committed. A failed append (disconnect, checksum, limit)
 * commits nothing: the upload stays at its offset and the client resumes from there. The append that
 * reaches the length finishes the upload.
 */
export async function appendResumable(ctx: DomainContext, u0: ResumableUpload, input: AppendInput): Promise<AppendResult> {
  let u = u0;
  assertWritable(await getLiveBucket(ctx.db, u.bucketId));
  if (input.offset !== u.offset) throw new AppError('UPLOAD_OFFSET_MISMATCH', { given: input.offset, offset: u.offset });
  if (input.length !== undefined && input.length !== null) u = await declareLength(ctx, u, input.length);
  const limit = await appendLimit(ctx, u);
  if (input.declaredSize !== null && limit.bytes !== null && input.declaredSize > limit.bytes) throw limit.error();

  const file = await ctx.db.selectFrom('files').select(['uri']).where('id', '=', u.fileId).executeTakeFirstOrThrow();
  const uri = file.uri!;
  const backend = inPlaceBackend(ctx, uri);
  const writer = `${HOST}:${process.pid}:${randomBytes(8).toString('hex')}`;
  await claim(ctx, u, u.offset, writer);
  const heartbeat = setInterval(() => {
    ctx.db.updateTable('resumable_uploads').set({ heartbeat: nowMicros() }).where('id', '=', u.id).where('writer', '=', writer).execute().catch(() => {});
  }, HEARTBEAT_MS);
  heartbeat.unref();
  const release = () => ctx.db.updateTable('resumable_uploads').set({ writer: null, heartbeat: null }).where('id', '=', u.id).where('writer', '=', writer).execute().catch(() => {});

  let written: number;
  try {
    const meter = new AppendMeter(limit.bytes, limit.error, input.checksum?.algorithm ?? null);
    meter.on('error', () => {});
    const forward = (e: Error) => meter.destroy(e);
    input.source.once('error', forward);
    try {
      // `update` writes in place at the offset and syncs before it resolves (the backend's contract).
      await backend.update(uri, input.source.pipe(meter), { partNumber: 0, offset: u.offset, size: limit.bytes ?? 0, ref: null, signal: input.signal });
    } catch (e) {
      input.source.unpipe(meter);
      // Whatever reached the disk before the failure is past the committed offset: unseen, overwritten by the resume.
      throw appendFailure(e, input.source, meter, input.signal);
    } finally {
      input.source.off('error', forward);
    }
    if (input.checksum && !meter.digest()!.equals(input.checksum.value)) throw new AppError('TUS_CHECKSUM_MISMATCH', { algorithm: input.checksum.algorithm });
    written = meter.bytes;
    const offset = u.offset + written;
    const now = nowMicros();
    const r = await ctx.db
      .updateTable('resumable_uploads')
      .set({ upload_offset: offset, writer: null, heartbeat: null, expires: expiresFrom(ctx, now), updated: now })
      .where('id', '=', u.id)
      .where('writer', '=', writer)
      .executeTakeFirst();
    if (Number(r.numUpdatedRows) !== 1) throw new AppError('UPLOAD_NOT_FOUND');
    u = { ...u, offset, expires: expiresFrom(ctx, now) };
  } catch (e) {
    await release();
    throw e;
  } finally {
    clearInterval(heartbeat);
  }
  extendDigest(ctx, backend, u, uri, u.offset - written, u.offset);
  if (u.length !== null && u.offset === u.length) return { upload: u, version: await finishResumable(ctx, u) };
  return { upload: u, version: null };
}

/** Keeps this process's running MD5 of the upload when the append follows the bytes it has hashed. */
function extendDigest(ctx: DomainContext, backend: StorageBackend, u: ResumableUpload, uri: string, start: number, end: number): void {
  const digests = backend.runningDigests;
  if (!digests || start === end) return;
  const upTo = hashedUpTo.get(u.id) ?? 0;
  if (upTo !== start) {
    digests.drop(u.id);
    hashedUpTo.delete(u.id);
    return;
  }
  hashedUpTo.set(u.id, end);
  digests.extend(u.id, uri, start, end).catch((err: unknown) => {
    ctx.log.warn({ err, uploadId: u.id }, 'running digest of a resumable upload lost; the file is hashed at the end');
    hashedUpTo.delete(u.id);
    digests.drop(u.id);
  });
}

function appendFailure(e: unknown, source: Readable, meter: AppendMeter, signal?: AbortSignal): unknown {
  if (isAppError(e)) return e;
  if (isStorageFull(e)) return new AppError('STORAGE_FULL', {}, { cause: e });
  if (signal?.aborted && isAppError(signal.reason)) return signal.reason;
  if (meter.errored && isAppError(meter.errored)) return meter.errored;
  const err = e as NodeJS.ErrnoException;
  if (source.errored || source.destroyed || err?.code === 'ECONNRESET' || err?.code === 'ABORT_ERR' || err?.name === 'AbortError') {
    return new AppError('CLIENT_DISCONNECTED', {}, { cause: e });
  }
  if (isStorageError(e)) return new AppError('STORAGE_UNAVAILABLE', {}, { cause: e });
  return e;
}

/** The MD5 of the whole file: the running digest when this process hashed every byte, else one read of the file. */
async function fileChecksum(backend: StorageBackend, u: ResumableUpload, uri: string): Promise<string> {
  const running = hashedUpTo.get(u.id) === u.length && backend.runningDigests ? await backend.runningDigests.digest(u.id) : null;
  hashedUpTo.delete(u.id);
  if (running) return `md5:${running}`;
  backend.runningDigests?.drop(u.id);
  const h = createHash('md5');
  if (u.length! > 0) {
    const stream = await backend.open(uri, { start: 0, end: u.length! - 1 });
    for await (const chunk of stream) h.update(chunk as Buffer);
  }
  return `md5:${h.digest('hex')}`;
}

/**
 * Makes the complete upload a new object version: the file cut to its length (bytes of an append
 * that failed may lie past it), hashed, and committed through commitNewVersion with the
 * reservation released, the upload row removed in the same transaction.
 */
export async function finishResumable(ctx: DomainContext, u: ResumableUpload): Promise<ObjectVersion> {
  const file = await ctx.db.selectFrom('files').select(['uri']).where('id', '=', u.fileId).executeTakeFirstOrThrow();
  const uri = file.uri!;
  const backend = inPlaceBackend(ctx, uri);
  await backend.truncate!(uri, u.length!);
  const checksum = await fileChecksum(backend, u, uri);
  const now = nowMicros();
  const version = await commitNewVersion(
    ctx,
    {
      bucketId: u.bucketId,
      key: u.key,
      file: { existingId: u.fileId, size: u.length! },
      mimetype: u.mimetype ?? chooseMimetype(u.key, undefined),
      tags: {},
      releaseReservation: u.reserved,
    },
    {
      inTransaction: async (tx) => {
        const r = await tx.deleteFrom('resumable_uploads').where('id', '=', u.id).where('upload_offset', '=', u.length!).executeTakeFirst();
        if (Number(r.numDeletedRows) !== 1) throw new AppError('UPLOAD_NOT_FOUND');
        await tx.updateTable('files').set({ readable: 1, writable: 0, size: u.length!, checksum, updated: now }).where('id', '=', u.fileId).execute();
      },
    },
  );
  ctx.signals.send('file-uploaded', { obj: version });
  // Committed: a failure here leaves the version stored (COPIES_NOT_MADE says so), as for a PUT.
  await waitForCopies(ctx, version);
  return version;
}

async function removeUpload(tx: Tx, ctx: DomainContext, id: string): Promise<string | null> {
  const r = await tx.selectFrom('resumable_uploads').selectAll().where('id', '=', id).executeTakeFirst();
  if (!r) return null;
  const u = toUpload(r);
  await tx.deleteFrom('resumable_uploads').where('id', '=', id).execute();
  const file = await tx.selectFrom('files').select(['uri']).where('id', '=', u.fileId).executeTakeFirst();
  await releaseReservation(tx, u.bucketId, u.reserved);
  await tx.deleteFrom('files').where('id', '=', u.fileId).execute();
  if (file?.uri) await ctx.queue.enqueue(tx, 'remove-file-data', { uri: file.uri });
  return file?.uri ?? null;
}

/** Termination: the upload, its reservation and its file go (the bytes by the queued removal). */
export async function terminateResumable(ctx: DomainContext, u: ResumableUpload): Promise<void> {
  await transaction(ctx.db, async (tx) => {
    await lockBucketForWrite(tx, u.bucketId);
    if ((await removeUpload(tx, ctx, u.id)) === null) throw new AppError('UPLOAD_NOT_FOUND');
  }, { bucket: u.bucketId });
  forgetDigest(ctx, u.id);
  ctx.queue.wake();
}

function forgetDigest(ctx: DomainContext, id: string): void {
  hashedUpTo.delete(id);
  for (const b of ctx.storage.all()) b.runningDigests?.drop(id);
}

/** The sweep: uploads past their expiry with no live writer are removed like a termination. Returns how many. */
export async function expireResumables(ctx: DomainContext): Promise<number> {
  const now = nowMicros();
  const rows = await ctx.db.selectFrom('resumable_uploads').select(['id', 'writer', 'heartbeat']).where('expires', '<', now).limit(1000).execute();
  let n = 0;
  for (const r of rows) {
    if (r.writer !== null && Number(r.heartbeat) >= now - CLAIM_LEASE_MICROS) continue;
    const removed = await transaction(ctx.db, async (tx) => {
      const again = await tx.selectFrom('resumable_uploads').select('expires').where('id', '=', r.id).executeTakeFirst();
      if (!again || Number(again.expires) >= now) return false;
      await removeUpload(tx, ctx, r.id);
      return true;
    });
    if (removed) {
      forgetDigest(ctx, r.id);
      n++;
    }
  }
  if (n) ctx.queue.wake();
  return n;
}

/** Uploads in progress in a bucket (the bucket is not empty while there are any). */
export async function hasResumables(db: Executor, bucketId: string): Promise<boolean> {
  return (await db.selectFrom('resumable_uploads').select('id').where('bucket_id', '=', bucketId).limit(1).executeTakeFirst()) !== undefined;
}
