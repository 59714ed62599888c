import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { AppError, isAppError } from '../errors.js';
import { transaction } from '../db/database.js';
import type { Executor, Tx } from '../db/schema.js';
import type { Readable } from 'node:stream';
import { firstBytes } from '../util/first-bytes.js';
import { nowMicros } from '../util/time.js';
import type { DomainContext } from './context.js';

/**
 * Re-sends of one multipart part are serialised through the database, so that two API processes on
 * two machines sharing it never write the same bytes of the upload's file at once (their bytes
 * interleaved, and the part's record matched neither). A write first claims its part: a row in
 * `part_writes`, taken under the upload row's lock and only while the upload is in progress. Another
 * write of the part waits until the claim ends; completion is refused while any part is claimed.
 * The last write to finish is the part. A claim lives while its writer renews it; one not renewed
 * for CLAIM_LEASE_MICROS belongs to a process that is gone and is taken over.
 *
 * A write claims its part once the first bytes of its body have arrived, not before: a re-send that
 * starts while an earlier write of the part has sent nothing yet goes first, and the earlier one,
 * finishing last, is the part, as S3 keeps the write that finishes last (a client that sends the
 * re-send from inside the first one's body, as Ceph's S3 suite does, would otherwise wait for itself
 * until the body's idle timeout). A re-send while an earlier write is sending its bytes waits for it.
 */
export const CLAIM_LEASE_MICROS = 30_000_000;
const HEARTBEAT_MS = 5_000;
const POLL_MS = 50;

/** Claims that end in this process wake its waiters at once; other processes' are seen by polling. */
const released = new EventEmitter();
released.setMaxListeners(0);
const claimKey = (uploadId: string, partNumber: number) => `${uploadId}/${partNumber}`;

export interface PartClaim {
  /** Aborted when the claim is lost (not renewed within the lease): the write must stop. */
  readonly lost: AbortSignal;
  /** Ends the claim inside the transaction that records the part; refuses when it was lost. */
  commit(tx: Tx): Promise<void>;
  /** Ends the claim after a failed write. */
  release(): Promise<void>;
}

async function refuseClosed(tx: Executor, uploadId: string): Promise<never> {
  const u = await tx.selectFrom('multipart_uploads').select('state').where('id', '=', uploadId).executeTakeFirst();
  throw new AppError(u?.state === 'completing' ? 'MULTIPART_ALREADY_COMPLETED' : 'UPLOAD_NOT_FOUND');
}

/** One attempt: true when the part is now claimed by `writer`. */
async function tryClaim(ctx: DomainContext, uploadId: string, partNumber: number, writer: string): Promise<boolean> {
  return transaction(ctx.db, async (tx) => {
    const now = nowMicros();
    // The upload row's lock orders this against completion and other claims (PostgreSQL; SQLite has one writer).
    const open = await tx
      .updateTable('multipart_uploads')
      .set({ updated: sql`updated` })
      .where('id', '=', uploadId)
      .where('state', '=', 'in_progress')
      .executeTakeFirst();
    if (Number(open.numUpdatedRows) !== 1) await refuseClosed(tx, uploadId);
    const held = await tx
      .selectFrom('part_writes')
      .select(['heartbeat'])
      .where('upload_id', '=', uploadId)
      .where('part_number', '=', partNumber)
      .executeTakeFirst();
    if (held && Number(held.heartbeat) >= now - CLAIM_LEASE_MICROS) return false;
    if (held) {
      await tx.updateTable('part_writes').set({ writer, heartbeat: now }).where('upload_id', '=', uploadId).where('part_number', '=', partNumber).execute();
    } else {
      await tx.insertInto('part_writes').values({ upload_id: uploadId, part_number: partNumber, writer, heartbeat: now }).execute();
    }
    return true;
  });
}

async function liveClaim(db: Executor, uploadId: string, partNumber: number): Promise<boolean> {
  const held = await db
    .selectFrom('part_writes')
    .select('heartbeat')
    .where('upload_id', '=', uploadId)
    .where('part_number', '=', partNumber)
    .executeTakeFirst();
  return held !== undefined && Number(held.heartbeat) >= nowMicros() - CLAIM_LEASE_MICROS;
}

/** Waits for the next chance to claim: a release in this process, a poll, or the caller's abort. */
function nextChance(key: string, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      released.off(key, done);
      signal?.removeEventListener('abort', onAbort);
      resolve();
    };
    const onAbort = () => {
      done();
      // The idle timeout's refusal, or a client that went away while it waited.
      reject(isAppError(signal!.reason) ? signal!.reason : new AppError('CLIENT_DISCONNECTED'));
    };
    const timer = setTimeout(done, POLL_MS + Math.random() * POLL_MS);
    released.once(key, done);
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Claims a part for writing once its body's first bytes are there, waiting while another write of it
 * runs (here or in another process). Rejects when the upload is no longer in progress, or with the
 * signal's reason when it aborts first.
 */
export async function claimPart(
  ctx: DomainContext,
  uploadId: string,
  partNumber: number,
  signal: AbortSignal | undefined,
  /** The write's body: the claim waits for its first bytes (or its end, when it is empty). */
  body: Readable,
): Promise<PartClaim> {
  await firstBytes(body, signal).catch((reason: unknown) => {
    // The idle timeout's refusal, or a client that went away before sending a byte.
    throw isAppError(reason) ? reason : new AppError('CLIENT_DISCONNECTED');
  });
  const writer = randomBytes(12).toString('hex');
  const key = claimKey(uploadId, partNumber);
  for (;;) {
    // A plain read first: a waiter does not take the upload row's lock (nor SQLite's writer) to learn it must wait.
    if (!(await liveClaim(ctx.db, uploadId, partNumber)) && (await tryClaim(ctx, uploadId, partNumber, writer))) break;
    await nextChance(key, signal);
  }

  const lost = new AbortController();
  let renewed = Date.now();
  const ours = (db: Executor) =>
    db.deleteFrom('part_writes').where('upload_id', '=', uploadId).where('part_number', '=', partNumber).where('writer', '=', writer);
  const heartbeat = setInterval(() => {
    ctx.db
      .updateTable('part_writes')
      .set({ heartbeat: nowMicros() })
      .where('upload_id', '=', uploadId)
      .where('part_number', '=', partNumber)
      .where('writer', '=', writer)
      .executeTakeFirst()
      .then((r) => {
        if (Number(r.numUpdatedRows) === 1) renewed = Date.now();
        else lost.abort(new AppError('MULTIPART_PART_IN_PROGRESS', { part: partNumber }));
      })
      .catch((err) => {
        ctx.log.warn({ err, uploadId, partNumber }, 'could not renew the claim on a part being written');
        if ((Date.now() - renewed) * 1000 > CLAIM_LEASE_MICROS) lost.abort(new AppError('DATABASE_UNAVAILABLE'));
      });
  }, HEARTBEAT_MS);
  heartbeat.unref();
  let ended = false;
  const end = () => {
    ended = true;
    clearInterval(heartbeat);
  };
  return {
    lost: lost.signal,
    async commit(tx) {
      end();
      if (lost.signal.aborted) throw lost.signal.reason;
      const r = await ours(tx).executeTakeFirst();
      // Taken over after our lease ran out: the bytes may be the other write's; record nothing.
      if (Number(r.numDeletedRows) !== 1) throw new AppError('MULTIPART_PART_IN_PROGRESS', { part: partNumber });
      // Waiters in this process retry once this transaction has committed (they poll otherwise).
      setImmediate(() => released.emit(key));
    },
    async release() {
      if (!ended) end();
      try {
        await ours(ctx.db).execute();
      } catch (err) {
        ctx.log.warn({ err, uploadId, partNumber }, 'could not release the claim on a part; it lapses after its lease');
      }
      released.emit(key);
    },
  };
}

/**
 * Inside the completion's transaction, after the upload row is locked: refuses while a part is
 * being written, and drops the claims of writers that are gone.
 */
export async function assertNoPartInProgress(tx: Tx, uploadId: string): Promise<void> {
  const live = await tx
    .selectFrom('part_writes')
    .select('part_number')
    .where('upload_id', '=', uploadId)
    .where('heartbeat', '>=', nowMicros() - CLAIM_LEASE_MICROS)
    .orderBy('part_number')
    .executeTakeFirst();
  if (live) throw new AppError('MULTIPART_PART_IN_PROGRESS', { part: live.part_number });
  await tx.deleteFrom('part_writes').where('upload_id', '=', uploadId).execute();
}

/** With the upload's rows: its claims go too. */
export async function removePartClaims(tx: Executor, uploadId: string): Promise<void> {
  await tx.deleteFrom('part_writes').where('upload_id', '=', uploadId).execute();
}
