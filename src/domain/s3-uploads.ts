/**
 * Multipart uploads started through the S3 door. Unlike the REST door's, the client declares no
 * total size and no part size: the server learns each part's size as it arrives (its Content-Length).
 *
 * Layout: the same as the REST door's, one file instance with every part written at its offset, so
 * that completing copies nothing. The part size P is fixed by part 1 (every S3 client sends parts of
 * one size, the last one smaller); a part other than part 1 arriving while P is unknown waits up to
 * FILES_REST_S3_MULTIPART_LAYOUT_WAIT ms for part 1, then fixes P with its own size. Part n goes at
 * (n-1)·P. Where the storage can assemble parts (fs), a part larger than P is kept there too, as
 * long as it reaches into no other part's place (s3fs's last part is up to 2·P); elsewhere it is
 * refused. At completion, a
 * list of parts 1..N, every one but the last exactly P bytes, is the file as it lies: it is cut to
 * its size and the REST door's merge ('complete-multipart') makes it the head version, with no copy.
 * Any other list S3 accepts (gaps, a first part other than 1, a smaller part in the middle) is
 * assembled into a new file first (s3-assembly.ts), where the storage can read its parts in place.
 *
 * Quota: there is no declared total, so each part reserves its size before a byte is read, and a
 * part that replaces another releases the old one's. The upload row's `size` is always what it
 * reserves; abort and expiry release it as for the REST door's uploads.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { sql } from 'kysely';
import { AppError, isAppError } from '../errors.js';
import { transaction } from '../db/database.js';
import type { Executor } from '../db/schema.js';
import { isStorageFull } from '../storage/backend.js';
import { newId, newOrderedId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';
import { getLiveBucket } from './buckets.js';
import { assertWritable, insertFileInstance, lockBucketForWrite, releaseReservation, reserveMore } from './ledger.js';
import { receive } from './receive.js';
import type { ByteMeter } from './byte-meter.js';
import type { DomainContext } from './context.js';
import { prefixUpperBound, validateKey } from './keys.js';
import { checkSize } from './limits.js';
import { getLocationById } from './locations.js';
import { checkWritable, findUpload, isExpired, markCompleting, UPLOAD_TAGS_KEY, type CompletionTask, type MultipartUpload, type Part } from './multipart.js';
import { assertNoPartInProgress, claimPart } from './part-claims.js';
import { checkPrecondition, hasPrecondition, type Precondition } from './preconditions.js';
import { findHead, type ExpectedDigest } from './objects.js';
import { assembleParts, canAssemble } from './s3-assembly.js';

/** S3's part numbers: 1 to 10000. */
export const S3_MAX_PART_NUMBER = 10000;
/** S3's largest part: 5 GiB. */
const S3_MAX_PART_SIZE = 5 * 1024 ** 3;

/**
 * Keys of a version's stored metadata (its `metadata` JSON, which the S3 door writes) that are not
 * headers: an object completed through S3 multipart carries its S3 ETag (`"<md5 of md5s>-<count>"`)
 * and its part size. No client header can have these names (stored headers are a fixed list and
 * `x-amz-meta-*`).
 */
export const S3_ETAG_KEY = 'etag';
export const S3_PART_SIZE_KEY = 'mp-part-size';
/** Of an object whose parts were assembled (s3-assembly.ts): every part's size, space-separated in part order. */
export const S3_PART_SIZES_KEY = 'mp-part-sizes';
/** The id of the upload that made the object: a CompleteMultipartUpload repeated after success finds its result by it. */
export const S3_UPLOAD_ID_KEY = 'mp-upload-id';
/**
 * In an upload's metadata: the checksum its parts and its object carry besides MD5, as the door
 * declared it at the start (opaque here; the S3 door's `<ALGORITHM>:<TYPE>`). It stays with the
 * upload: the object gets what the door computes from it at completion.
 */
export const UPLOAD_CHECKSUM_KEY = 'mp-checksum';
/**
 * The parts' checksums (besides MD5) of an object completed through S3 multipart, space-separated in
 * part order, in the door's form: GetObject with `partNumber` answers one part's.
 */
export const S3_PART_CHECKSUMS_KEY = 'mp-part-checksums';
/** The stored metadata that is files-rest's own, never a header of the object (nor copied with it). */
export const S3_INTERNAL_KEYS: ReadonlySet<string> = new Set([S3_ETAG_KEY, S3_PART_SIZE_KEY, S3_PART_SIZES_KEY, S3_UPLOAD_ID_KEY, S3_PART_CHECKSUMS_KEY]);

/** Starts an upload of unknown size: an empty file instance that parts are written into. */
export async function createS3Upload(
  ctx: DomainContext,
  input: {
    bucketId: string;
    key: string;
    metadata: Record<string, string>;
    /** The object's tags (x-amz-tagging), given at completion. */
    tags?: Record<string, string>;
    /** The checksum every part carries besides MD5 (UPLOAD_CHECKSUM_KEY), in the door's form. */
    checksum?: string;
  },
): Promise<MultipartUpload> {
  const bucket = await getLiveBucket(ctx.db, input.bucketId);
  assertWritable(bucket);
  validateKey(input.key, ctx.config.objectKeyMaxLen);
  const location = await getLocationById(ctx.db, bucket.defaultLocation);
  const backend = ctx.storage.forUri(location.uri);
  const fileId = newId();
  const uri = backend.makeUri(location.uri, fileId);
  const storageRef = await backend.initialize(uri, 0, { partSize: ctx.config.s3MultipartMinPartSize }).catch((e: unknown) => {
    throw isStorageFull(e) ? new AppError('STORAGE_FULL', {}, { cause: e }) : e;
  });
  const now = nowMicros();
  const id = newId();
  try {
    await transaction(ctx.db, async (tx) => {
      const b = await lockBucketForWrite(tx, bucket.id);
      await insertFileInstance(
        tx,
        { id: fileId, locationId: location.id, uri, storageClass: b.defaultStorageClass, size: 0, checksum: null, state: 'writable' },
        now,
      );
      await tx
        .insertInto('multipart_uploads')
        .values({
          id, bucket_id: b.id, key: input.key, file_id: fileId, size: 0, part_size: 0, last_part_number: 0, last_part_size: 0,
          state: 'in_progress', version_id: null, storage_ref: storageRef, hashed_bytes: 0, error: null, door: 's3',
          metadata: JSON.stringify({
            ...input.metadata,
            ...(input.tags && Object.keys(input.tags).length > 0 ? { [UPLOAD_TAGS_KEY]: JSON.stringify(input.tags) } : {}),
            ...(input.checksum ? { [UPLOAD_CHECKSUM_KEY]: input.checksum } : {}),
          }),
          created: now, updated: now,
        })
        .execute();
    }, { bucket: bucket.id });
  } catch (e) {
    await (backend.abortInitialized ? backend.abortInitialized(uri, storageRef) : backend.delete(uri)).catch(() => {});
    throw e;
  }
  return (await findUpload(ctx.db, id))!;
}

/**
 * The part size of the upload, fixing it when unknown: part 1 fixes it with its size; another part
 * waits for part 1 a while (FILES_REST_S3_MULTIPART_LAYOUT_WAIT), then fixes it with its own.
 *
 * A part other than part 1 smaller than the least a part other than the last may be
 * (FILES_REST_S3_MULTIPART_MIN_PART_SIZE) is the last part: its size says nothing of the others', and
 * fixing the part size with it would refuse every full part after it (a small last part that overtook
 * part 1, as boto3's threads let it when the machine is busy). Where the storage can assemble parts
 * (`canAssemble`), it waits as long as any part, then fixes the part size at S3's largest part
 * (5 GiB: every part fits in its slot, the file stays sparse, and the completion assembles the
 * parts); a client that never sends a part 1 (the MinIO JavaScript client numbers parts from 2)
 * waits no longer. Elsewhere it waits ten times as long, then is refused with S3_PART_BEFORE_LAYOUT
 * (503: the SDKs send it again).
 */
async function fixPartSize(ctx: DomainContext, u: MultipartUpload, partNumber: number, size: number, assemble: boolean, signal?: AbortSignal): Promise<number> {
  if (u.partSize > 0) return u.partSize;
  let fixed = size;
  if (partNumber !== 1) {
    const surelyLast = size < ctx.config.s3MultipartMinPartSize;
    const until = Date.now() + ctx.config.s3MultipartLayoutWait * (surelyLast && !assemble ? 10 : 1);
    let delay = 10;
    while (Date.now() < until) {
      await new Promise((r) => setTimeout(r, delay));
      if (signal?.aborted) throw isAppError(signal.reason) ? signal.reason : new AppError('CLIENT_DISCONNECTED');
      delay = Math.min(delay * 2, 100);
      const now = await findUpload(ctx.db, u.id);
      if (!now) throw new AppError('UPLOAD_NOT_FOUND');
      if (now.partSize > 0) return now.partSize;
    }
    if (surelyLast && !assemble) throw new AppError('S3_PART_BEFORE_LAYOUT', { partNumber, size });
    if (surelyLast) fixed = S3_MAX_PART_SIZE;
  }
  await ctx.db.updateTable('multipart_uploads').set({ part_size: Math.max(fixed, 1) }).where('id', '=', u.id).where('part_size', '=', 0).execute();
  const now = await findUpload(ctx.db, u.id);
  if (!now) throw new AppError('UPLOAD_NOT_FOUND');
  return now.partSize;
}

/** Moves `delta` bytes into (or out of) the upload's reservation and its bucket's. */
async function reserve(ctx: DomainContext | { db: Executor }, u: MultipartUpload, delta: number, check: boolean): Promise<void> {
  if (delta === 0) return;
  await transaction(ctx.db as DomainContext['db'], async (tx) => {
    const b = await lockBucketForWrite(tx, u.bucketId);
    const row = await tx.selectFrom('multipart_uploads').select(['size', 'state']).where('id', '=', u.id).executeTakeFirst();
    if (!row) {
      if (check) throw new AppError('UPLOAD_NOT_FOUND');
      return; // aborted meanwhile: its removal released everything it held
    }
    if (check && row.state !== 'in_progress') throw new AppError('UPLOAD_NOT_FOUND');
    // The quota counts the new bytes; the maximum file size applies to the whole upload.
    if (delta > 0) await reserveMore(tx, b, delta, Number(row.size));
    else await releaseReservation(tx, u.bucketId, -delta);
    await tx.updateTable('multipart_uploads').set({ size: sql`size + ${delta}` }).where('id', '=', u.id).execute();
  }, { bucket: u.bucketId });
}

/**
 * Part `index` (0-based) of `size` bytes lies at index × `partSize`: S3_PART_OVERLAP when it would
 * reach into a recorded later part's place, or a recorded earlier part (larger than the part size)
 * reaches into its own. A later part sent at the same time is not seen here: the assembly checks
 * every part's bytes against its MD5, so such a race fails the completion, never the object.
 */
async function assertNoOverlap(db: Executor, uploadId: string, index: number, size: number, partSize: number): Promise<void> {
  const overlap = (other: number) => new AppError('S3_PART_OVERLAP', { partNumber: index + 1, size, other: other + 1, partSize });
  if (size > partSize) {
    const later = await db
      .selectFrom('parts')
      .select('part_number')
      .where('upload_id', '=', uploadId)
      .where('part_number', '>', index)
      .where('part_number', '<', index + Math.ceil(size / partSize))
      .orderBy('part_number')
      .limit(1)
      .executeTakeFirst();
    if (later) throw overlap(Number(later.part_number));
  }
  const earlier = await db
    .selectFrom('parts')
    .select('part_number')
    .where('upload_id', '=', uploadId)
    .where('part_number', '<', index)
    .where(sql<number>`CAST(part_number AS BIGINT) * CAST(${partSize} AS BIGINT) + COALESCE(size, 0)`, '>', sql<number>`CAST(${index * partSize} AS BIGINT)`)
    .limit(1)
    .executeTakeFirst();
  if (earlier) throw overlap(Number(earlier.part_number));
}

/**
 * Stores part `partNumber` (1-based) of `size` bytes at its offset, replacing an earlier one of that
 * number. A failed transfer drops only this part (the client re-sends it, as S3 clients do).
 */
export async function uploadS3Part(
  ctx: DomainContext,
  u: MultipartUpload,
  input: {
    partNumber: number;
    size: number;
    source: Readable;
    signal?: AbortSignal;
    /** Digests the client announced (Content-MD5, a signed payload's SHA-256), checked before the part is recorded. */
    expectedDigests?: ExpectedDigest[];
    /** The door's own checks (see `receive`): more digests, observers of every byte, and a check before the part is recorded. */
    extraDigests?: readonly import('./byte-meter.js').DigestAlgorithm[];
    observers?: readonly import('./byte-meter.js').ByteObserver[];
    /** Stages between the source and the meter: the door's decoder of its body framing (aws-chunked). */
    through?: NodeJS.ReadWriteStream[];
    verify?: (meter: ByteMeter) => void | Promise<void>;
    /** The part's checksum besides MD5 to record (Part.clientChecksum), asked for once every byte has been verified. */
    clientChecksum?: () => string | null;
  },
): Promise<Part> {
  // A source that already failed (a door's decoder refused the body) would never end the pipe.
  if (input.source.destroyed || input.source.errored) throw new AppError('CLIENT_DISCONNECTED', {}, { cause: input.source.errored ?? undefined });
  await checkWritable(ctx, u);
  if (isExpired(ctx, u)) throw new AppError('MULTIPART_EXPIRED');
  const n = input.partNumber;
  if (!Number.isSafeInteger(n) || n < 1 || n > S3_MAX_PART_NUMBER) throw new AppError('INVALID_PART_NUMBER', { last: S3_MAX_PART_NUMBER });
  const file = await ctx.db.selectFrom('files').select(['uri']).where('id', '=', u.fileId).executeTakeFirstOrThrow();
  const backend = ctx.storage.forUri(file.uri!);
  const assemble = canAssemble(backend);
  const partSize = await fixPartSize(ctx, u, n, input.size, assemble, input.signal);
  // Where parts can be assembled, a part larger than the part size is kept at its place all the same
  // (s3fs makes its last part up to twice the others; the completion assembles such a list); it must
  // not reach into a later part's place, nor an earlier part into its own.
  if (!assemble && input.size > partSize) throw new AppError('S3_PART_LAYOUT', { partNumber: n, size: input.size, partSize });
  if (assemble) await assertNoOverlap(ctx.db, u.id, n - 1, input.size, partSize);
  await reserve(ctx, u, input.size, true);
  let claim: Awaited<ReturnType<typeof claimPart>>;
  try {
    claim = await claimPart(ctx, u.id, n - 1, input.signal, input.source);
  } catch (e) {
    await reserve(ctx, u, -input.size, false);
    throw e;
  }
  // A failed transfer: its bytes were (partly) overwritten, so an earlier record of this part no
  // longer describes them; the part and its reservation go, before the claim ends.
  const dropPart = async () => {
    await transaction(ctx.db, async (tx) => {
      const old = await tx.selectFrom('parts').select('size').where('upload_id', '=', u.id).where('part_number', '=', n - 1).executeTakeFirst();
      await tx.deleteFrom('parts').where('upload_id', '=', u.id).where('part_number', '=', n - 1).execute();
      const release = input.size + Number(old?.size ?? 0);
      const gone = await tx.updateTable('multipart_uploads').set({ size: sql`size - ${release}` }).where('id', '=', u.id).executeTakeFirst();
      if (Number(gone.numUpdatedRows) === 1) await releaseReservation(tx, u.bucketId, release);
    });
  };
  let received: Awaited<ReturnType<typeof receive<{ etag: string | null }>>>;
  try {
    received = await receive({
      source: input.source,
      store: (body, signal) =>
        backend.update(file.uri!, body, { partNumber: n - 1, offset: (n - 1) * partSize, size: input.size, ref: u.storageRef, signal }),
      discard: dropPart,
      onDiscardError: (x) => ctx.log.error({ err: x, uploadId: u.id }, 'could not clean up after a failed part'),
      limit: { bytes: input.size, error: () => new AppError('FILE_LARGER_THAN_EXPECTED') },
      expected: input.size,
      expectedDigests: input.expectedDigests,
      extraDigests: input.extraDigests,
      observers: input.observers,
      through: input.through,
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
  const clientChecksum = input.clientChecksum?.() ?? null;
  try {
    await transaction(ctx.db, async (tx) => {
      await lockBucketForWrite(tx, u.bucketId);
      const open = await tx.updateTable('multipart_uploads').set({ updated: now }).where('id', '=', u.id).where('state', '=', 'in_progress').executeTakeFirst();
      if (Number(open.numUpdatedRows) !== 1) throw new AppError('UPLOAD_NOT_FOUND');
      await claim.commit(tx);
      const old = await tx.selectFrom('parts').select('size').where('upload_id', '=', u.id).where('part_number', '=', n - 1).executeTakeFirst();
      await tx
        .insertInto('parts')
        .values({ upload_id: u.id, part_number: n - 1, checksum, client_checksum: clientChecksum, storage_etag: stored.etag, size: input.size, created: now, updated: now })
        .onConflict((oc) => oc.columns(['upload_id', 'part_number']).doUpdateSet({ checksum, client_checksum: clientChecksum, storage_etag: stored.etag, size: input.size, updated: now }))
        .execute();
      // The replaced part's reservation goes.
      const release = Number(old?.size ?? 0);
      if (release > 0) {
        await releaseReservation(tx, u.bucketId, release);
        await tx.updateTable('multipart_uploads').set({ size: sql`size - ${release}` }).where('id', '=', u.id).execute();
      }
    }, { bucket: u.bucketId });
  } catch (e) {
    await claim.release();
    await reserve(ctx, u, -input.size, false).catch(() => {});
    throw e;
  }
  if (backend.runningDigests) {
    // The total is not known yet: each part's extent comes from its recorded size.
    ctx.hasher?.partStored({ id: u.id, size: Number.MAX_SAFE_INTEGER, partSize, lastPartNumber: S3_MAX_PART_NUMBER - 1 }, backend.runningDigests, file.uri!, n - 1);
  }
  const start = (n - 1) * partSize;
  return { partNumber: n - 1, checksum, clientChecksum, storageEtag: stored.etag, startByte: start, endByte: start + input.size, created: now, updated: now };
}

/** The S3 ETag of a multipart object: the MD5 of its parts' binary MD5s, then `-<count>`. */
export function multipartEtag(checksums: string[]): string {
  const h = createHash('md5');
  for (const c of checksums) h.update(Buffer.from(c.replace(/^md5:/, ''), 'hex'));
  return `"${h.digest('hex')}-${checksums.length}"`;
}

/** The parts of an S3 upload, 1-based, from `after` on, at most `limit`. */
export async function listS3Parts(
  db: Executor,
  u: MultipartUpload,
  after: number,
  limit: number,
): Promise<{ partNumber: number; checksum: string; clientChecksum: string | null; size: number; updated: number }[]> {
  const rows = await db
    .selectFrom('parts')
    .select(['part_number', 'checksum', 'client_checksum', 'size', 'updated'])
    .where('upload_id', '=', u.id)
    .where('part_number', '>=', after)
    .orderBy('part_number')
    .limit(limit)
    .execute();
  return rows.map((r) => ({ partNumber: Number(r.part_number) + 1, checksum: r.checksum, clientChecksum: r.client_checksum ?? null, size: Number(r.size ?? 0), updated: Number(r.updated) }));
}

/** One entry of an uploads listing: an upload, or a common prefix standing for every upload under it. */
export type S3UploadEntry = { kind: 'upload'; upload: MultipartUpload } | { kind: 'prefix'; prefix: string };

/**
 * Open S3 uploads of a bucket in (key, id) order after the markers, at most `limit` entries. With a
 * delimiter, the keys whose rest after `prefix` holds it are rolled up into one common prefix (the
 * prefix and the rest up to and including the delimiter), counted once, as ListObjects does; the
 * listing then continues after every key under that common prefix (one seek, not a scan). A
 * key marker that is itself under a common prefix continues after that prefix (it was listed).
 */
export async function listS3Uploads(
  db: Executor,
  bucketId: string,
  opts: { prefix: string; delimiter?: string; keyMarker: string; uploadIdMarker: string; limit: number },
): Promise<S3UploadEntry[]> {
  const delimiter = opts.delimiter ?? '';
  /** The common prefix a key rolls up into, or null. */
  const rollUp = (key: string): string | null => {
    if (!delimiter || !key.startsWith(opts.prefix)) return null;
    const i = key.indexOf(delimiter, opts.prefix.length);
    return i === -1 ? null : key.slice(0, i + delimiter.length);
  };
  // Where the listing starts: strictly after (key, id), after every upload of key, or at key.
  type Start = { key: string; id: string | null; inclusive: boolean } | null;
  let start: Start = opts.keyMarker ? { key: opts.keyMarker, id: opts.uploadIdMarker || null, inclusive: false } : null;
  const markerPrefix = opts.keyMarker ? rollUp(opts.keyMarker) : null;
  if (markerPrefix !== null) {
    const next = prefixUpperBound(markerPrefix);
    if (next === null) return [];
    start = { key: next, id: null, inclusive: true };
  }
  const out: S3UploadEntry[] = [];
  while (out.length < opts.limit) {
    let q = db.selectFrom('multipart_uploads').select(['id', 'key']).where('bucket_id', '=', bucketId).where('door', '=', 's3').where('state', '=', 'in_progress');
    if (opts.prefix) {
      q = q.where('key', '>=', opts.prefix);
      const upper = prefixUpperBound(opts.prefix);
      if (upper !== null) q = q.where('key', '<', upper);
    }
    const s = start;
    if (s !== null) {
      if (s.inclusive) q = q.where('key', '>=', s.key);
      else if (s.id !== null) q = q.where((eb) => eb.or([eb('key', '>', s.key), eb.and([eb('key', '=', s.key), eb('id', '>', s.id!)])]));
      else q = q.where('key', '>', s.key);
    }
    const want = opts.limit - out.length;
    const rows = await q.orderBy('key').orderBy('id').limit(want).execute();
    let jumped = false;
    for (const r of rows) {
      const cp = rollUp(r.key);
      if (cp !== null) {
        out.push({ kind: 'prefix', prefix: cp });
        const next = prefixUpperBound(cp);
        if (next === null) return out;
        start = { key: next, id: null, inclusive: true };
        jumped = true;
        break;
      }
      const u = await findUpload(db, r.id);
      if (u) out.push({ kind: 'upload', upload: u });
      start = { key: r.key, id: r.id, inclusive: false };
    }
    if (!jumped && rows.length < want) break;
  }
  return out;
}

/**
 * The object a completed S3 multipart upload made, while that version exists, and its ETag: S3
 * answers a CompleteMultipartUpload repeated after it succeeded (a client whose first answer was
 * lost, and which retries) with the same result, not NoSuchUpload.
 */
export async function findCompletedS3Upload(db: Executor, bucketId: string, key: string, uploadId: string): Promise<{ versionId: string; etag: string } | null> {
  // In the JSON text the pair is `"mp-upload-id":"<id>"`; ids are hex and hyphens (no LIKE wildcard).
  if (!/^[0-9a-f-]{1,64}$/i.test(uploadId)) return null;
  const rows = await db
    .selectFrom('object_versions')
    .select(['version_id', 'metadata'])
    .where('bucket_id', '=', bucketId)
    .where('key', '=', key)
    .where('metadata', 'like', `%"${S3_UPLOAD_ID_KEY}":"${uploadId}"%`)
    .execute();
  for (const r of rows) {
    const m = JSON.parse(r.metadata!) as Record<string, string>;
    if (m[S3_UPLOAD_ID_KEY] === uploadId && m[S3_ETAG_KEY]) return { versionId: r.version_id, etag: m[S3_ETAG_KEY] };
  }
  return null;
}

/** The S3 ETags of those of the given versions completed through S3 multipart (version id → ETag). */
export async function s3EtagsOf(db: Executor, versionIds: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (let i = 0; i < versionIds.length; i += 500) {
    const chunk = versionIds.slice(i, i + 500);
    // Only metadata holding the key is read and parsed (in the JSON text a key is `"etag":`; the same
    // text inside a value would be escaped).
    const rows = await db
      .selectFrom('object_versions')
      .select(['version_id', 'metadata'])
      .where('version_id', 'in', chunk)
      .where('metadata', 'like', `%"${S3_ETAG_KEY}":%`)
      .execute();
    for (const r of rows) {
      const etag = (JSON.parse(r.metadata!) as Record<string, string>)[S3_ETAG_KEY];
      if (etag) out.set(r.version_id, etag);
    }
  }
  return out;
}

/** Where one part of an object lies, as GetObject with `partNumber` serves it. */
export type S3PartRange =
  /** The part's bytes, inclusive; `count`: the object's number of parts, null for an object not made by S3 multipart. */
  | { kind: 'part'; start: number; end: number; count: number | null }
  /** An object not made by S3 multipart is one part: part 1 is all of it (empty here). */
  | { kind: 'whole' }
  /** No such part (beyond the last). */
  | { kind: 'none'; count: number }
  /** A multipart object completed before part sizes were recorded: its part boundaries are not known. */
  | { kind: 'unknown'; count: number };

/** Part `partNumber` (1-based) of an object of `size` bytes with this stored metadata. */
export function s3PartRange(metadata: Record<string, string> | null, size: number, partNumber: number): S3PartRange {
  const m = /-(\d+)"?$/.exec(metadata?.[S3_ETAG_KEY] ?? '');
  if (!m) {
    if (partNumber !== 1) return { kind: 'none', count: 1 };
    return size === 0 ? { kind: 'whole' } : { kind: 'part', start: 0, end: size - 1, count: null };
  }
  const count = Number(m[1]);
  if (partNumber > count) return { kind: 'none', count };
  const sizes = metadata?.[S3_PART_SIZES_KEY]?.split(' ').map(Number);
  if (sizes) {
    // An assembled object: each part's own size.
    if (sizes.length !== count || !sizes.every((n) => Number.isSafeInteger(n) && n >= 0)) return { kind: 'unknown', count };
    const start = sizes.slice(0, partNumber - 1).reduce((a, b) => a + b, 0);
    const end = start + sizes[partNumber - 1]! - 1;
    return end < start ? { kind: 'whole' } : { kind: 'part', start, end, count };
  }
  const partSize = Number(metadata?.[S3_PART_SIZE_KEY] ?? NaN);
  if (!Number.isSafeInteger(partSize) || partSize <= 0) return { kind: 'unknown', count };
  const start = (partNumber - 1) * partSize;
  const end = partNumber === count ? size - 1 : Math.min(start + partSize, size) - 1;
  if (end < start) return { kind: 'whole' };
  return { kind: 'part', start, end, count };
}

/** One entry of CompleteMultipartUpload's part list. */
export interface CompletedPart {
  partNumber: number;
  etag: string;
}

/** A part as the completion lists it, for the door's own checks and the object's checksum. */
export interface ListedPart {
  partNumber: number;
  size: number;
  clientChecksum: string | null;
}

/**
 * The door's last word on a completion, inside its transaction: given the parts in order and the
 * upload's declared checksum (UPLOAD_CHECKSUM_KEY, or null), it throws to refuse, or answers what
 * the object's stored metadata gains (its checksum).
 */
export type CompletionCheck = (parts: readonly ListedPart[], uploadChecksum: string | null) => Promise<Record<string, string>>;

/** A part of the completed list, as recorded. */
interface RecordedPart {
  n: number;
  size: number;
  checksum: string;
  clientChecksum: string | null;
  updated: number;
}

/**
 * The client's list matched against the recorded parts: each must exist with that ETag
 * (INVALID_PART), every one but the last at least `minPartSize` (PART_TOO_SMALL).
 */
async function recordedParts(db: Executor, u: MultipartUpload, list: CompletedPart[], minPartSize: number): Promise<RecordedPart[]> {
  const rows = await db.selectFrom('parts').select(['part_number', 'checksum', 'client_checksum', 'size', 'updated']).where('upload_id', '=', u.id).execute();
  const byNumber = new Map(rows.map((p) => [Number(p.part_number) + 1, p]));
  const listed = list.map((p) => {
    const stored = byNumber.get(p.partNumber);
    const tag = p.etag.trim().replace(/^"|"$/g, '').toLowerCase();
    if (!stored || stored.checksum !== `md5:${tag}`) throw new AppError('INVALID_PART', { partNumber: p.partNumber });
    return { n: p.partNumber, size: Number(stored.size ?? 0), checksum: stored.checksum, clientChecksum: stored.client_checksum ?? null, updated: Number(stored.updated) };
  });
  for (const p of listed.slice(0, -1)) {
    if (p.size < minPartSize) throw new AppError('PART_TOO_SMALL', { partNumber: p.n, min: minPartSize, size: p.size, etag: p.checksum.replace(/^md5:/, '') });
  }
  return listed;
}

/** The first listed part that keeps the list from being the file as it lies (parts 1..N, all but the last `partSize` bytes), or null. */
function misfit(listed: readonly RecordedPart[], partSize: number): RecordedPart | null {
  return (
    listed.find((p, i) => {
      const last = i === listed.length - 1;
      return p.n !== i + 1 || (last ? p.size > partSize : p.size !== partSize);
    }) ?? null
  );
}

/**
 * Asks for completion with the client's part list: each part must exist with that ETag (INVALID_PART),
 * in ascending order (INVALID_PART_ORDER), every one but the last at least the minimum part size
 * (PART_TOO_SMALL). A list that is the upload's file as it lies (parts 1..N, all but the last of the
 * upload's part size) is completed in place; any other (gaps, a first part other than 1, parts of
 * other sizes) is first assembled into a new file (s3-assembly.ts), where the storage allows it,
 * else refused (S3_PART_LAYOUT). In one transaction the upload takes its final size (and its new
 * file), parts not listed go (their reservation with them), the multipart ETag is stored with the
 * metadata, and the REST door's merge task is queued.
 */
export async function requestS3Completion(
  ctx: DomainContext,
  u: MultipartUpload,
  list: CompletedPart[],
  precondition?: Precondition | null,
  check?: CompletionCheck,
): Promise<{ upload: MultipartUpload; etag: string; metadata: Record<string, string> }> {
  await checkWritable(ctx, u);
  for (let i = 1; i < list.length; i++) if (list[i]!.partNumber <= list[i - 1]!.partNumber) throw new AppError('INVALID_PART_ORDER');
  // The storage's own minimum too: the S3 backend completes a native multipart upload underneath.
  const file = await ctx.db.selectFrom('files').select(['uri', 'location_id', 'storage_class']).where('id', '=', u.fileId).executeTakeFirstOrThrow();
  const backend = ctx.storage.forUri(file.uri!);
  const minPartSize = Math.max(ctx.config.s3MultipartMinPartSize, backend.minPartSize ?? 0);
  const before = await findUpload(ctx.db, u.id);
  if (!before || before.state !== 'in_progress') throw new AppError('MULTIPART_ALREADY_COMPLETED');
  const planned = await recordedParts(ctx.db, u, list, minPartSize);
  const out = misfit(planned, before.partSize);
  let assembled: { fileId: string; uri: string; checksum: string; locationId: string } | null = null;
  if (out) {
    const locationId = file.location_id;
    if (!canAssemble(backend) || locationId === null) throw new AppError('S3_PART_LAYOUT', { partNumber: out.n, size: out.size, partSize: before.partSize });
    // The running digest follows the upload's file, which the assembled one replaces.
    ctx.hasher?.forget(u.id);
    const fileId = newId();
    const location = await getLocationById(ctx.db, locationId);
    const uri = backend.makeUri(location.uri, fileId);
    const parts = planned.map((p) => ({ partNumber: p.n, offset: (p.n - 1) * before.partSize, size: p.size, checksum: p.checksum }));
    const r = await assembleParts(backend, file.uri!, uri, parts).catch((e: unknown) => {
      throw isStorageFull(e) ? new AppError('STORAGE_FULL', {}, { cause: e }) : e;
    });
    assembled = { fileId, uri, checksum: r.checksum, locationId };
  }
  const versionId = newOrderedId();
  const now = nowMicros();
  let etag = '';
  let metadata: Record<string, string> = {};
  try {
    await transaction(ctx.db, async (tx) => {
      await markCompleting(tx, u, versionId, now);
      const row = (await findUpload(tx, u.id))!;
      const listed = await recordedParts(tx, u, list, minPartSize);
      // A part sent again since the list was read (or the part size fixed meanwhile): the bytes
      // planned for are not the ones recorded.
      const changed = listed.find((p, i) => p.checksum !== planned[i]!.checksum || p.updated !== planned[i]!.updated);
      if (changed || row.partSize !== before.partSize) throw new AppError('MULTIPART_PART_IN_PROGRESS', { part: changed?.n ?? list[0]?.partNumber ?? 1 });
      const { [UPLOAD_CHECKSUM_KEY]: uploadChecksum, ...uploadMetadata } = row.metadata ?? {};
      const gained = check ? await check(listed.map((p) => ({ partNumber: p.n, size: p.size, clientChecksum: p.clientChecksum })), uploadChecksum ?? null) : {};
      const total = listed.reduce((s, p) => s + p.size, 0);
      checkSize({ ...(await getLiveBucket(tx, u.bucketId)), quotaSize: null }, total);
      await assertNoPartInProgress(tx, u.id);
      if (hasPrecondition(precondition)) checkPrecondition(await findHead(tx, u.bucketId, u.key), precondition);
      // The reservation shrinks to the object's size.
      await releaseReservation(tx, u.bucketId, row.size - total);
      const last = listed[listed.length - 1]!;
      etag = multipartEtag(listed.map((p) => p.checksum));
      // The ETag and the part sizes go with the object: they locate each part (GetObject with
      // partNumber) once the upload's rows are gone.
      metadata = { ...uploadMetadata, ...gained, [S3_ETAG_KEY]: etag, [S3_UPLOAD_ID_KEY]: u.id };
      if (assembled) {
        metadata[S3_PART_SIZES_KEY] = listed.map((p) => p.size).join(' ');
        // The upload is now one part: the assembled file, whose MD5 the merge checks once more.
        await insertFileInstance(
          tx,
          { id: assembled.fileId, locationId: assembled.locationId, uri: assembled.uri, storageClass: file.storage_class, size: total, checksum: null, state: 'writable' },
          now,
        );
        await tx.deleteFrom('parts').where('upload_id', '=', u.id).execute();
        await tx
          .insertInto('parts')
          .values({ upload_id: u.id, part_number: 0, checksum: assembled.checksum, client_checksum: null, storage_etag: null, size: total, created: now, updated: now })
          .execute();
        await tx
          .updateTable('multipart_uploads')
          .set({ file_id: assembled.fileId, size: total, part_size: Math.max(total, 1), last_part_number: 0, last_part_size: total, storage_ref: null, metadata: JSON.stringify(metadata) })
          .where('id', '=', u.id)
          .execute();
        await tx.deleteFrom('files').where('id', '=', u.fileId).execute();
        await ctx.queue.enqueue(tx, 'remove-file-data', { uri: file.uri!, multipartRef: u.storageRef ?? undefined, initialized: true });
      } else {
        // Parts not listed go.
        await tx.deleteFrom('parts').where('upload_id', '=', u.id).where('part_number', '>=', listed.length).execute();
        metadata[S3_PART_SIZE_KEY] = String(row.partSize);
        await tx
          .updateTable('multipart_uploads')
          .set({ size: total, last_part_number: listed.length - 1, last_part_size: last.size, metadata: JSON.stringify(metadata) })
          .where('id', '=', u.id)
          .execute();
      }
      const payload: CompletionTask = hasPrecondition(precondition) ? { uploadId: u.id, precondition } : { uploadId: u.id };
      await ctx.queue.enqueue(tx, 'complete-multipart', payload);
    }, { bucket: u.bucketId });
  } catch (e) {
    if (assembled) await backend.delete(assembled.uri).catch((x: unknown) => ctx.log.error({ err: x, uri: assembled.uri }, 'could not remove an assembled file'));
    throw e;
  }
  ctx.queue.wake();
  if (!ctx.config.worker) ctx.hasher?.forget(u.id);
  return { upload: { ...u, state: 'completing', versionId }, etag, metadata };
}
