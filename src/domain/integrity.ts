import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { isStorageError } from '../storage/backend.js';
import { nowMicros, DAY_MICROS } from '../util/time.js';
import type { DomainContext } from './context.js';
import { copiesOf, recordCopyResult } from './replicas.js';

export interface CopyCheck {
  location: string;
  uri: string;
  /** true: matches; false: corrupted, truncated or missing; null: could not be read now. */
  ok: boolean | null;
  reason?: string;
}

export interface CheckResult {
  fileId: string;
  /** The first copy's URI. */
  uri: string | null;
  /** true: every copy matches; false: a copy is corrupted, truncated or missing; null: could not be checked now. */
  ok: boolean | null;
  reason?: string;
  /** Each copy's result, the first copy first. */
  copies?: CopyCheck[];
}

/** Reads one copy and compares its MD5 and size with what was stored at upload. */
async function checkCopy(
  ctx: DomainContext,
  file: { size: number; checksum: string },
  uri: string,
  signal?: AbortSignal,
): Promise<{ ok: boolean | null; reason?: string; found?: string }> {
  const backend = ctx.storage.forUri(uri);
  const [algo, expected] = file.checksum.split(':');
  try {
    const h = createHash(algo === 'md5' ? 'md5' : 'sha256');
    let bytes = 0;
    const stream = await backend.open(uri);
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (signal?.aborted) {
        stream.destroy();
        throw signal.reason;
      }
      bytes += chunk.length;
      h.update(chunk);
    }
    const actual = h.digest('hex');
    const found = `${algo}:${actual}`;
    if (actual === expected && bytes === file.size) return { ok: true, found };
    return { ok: false, found, reason: bytes !== file.size ? `size ${bytes}, expected ${file.size}` : `checksum ${found}, expected ${file.checksum}` };
  } catch (e) {
    if (signal?.aborted) throw e;
    if (isStorageError(e, 'missing')) return { ok: false, reason: 'the stored file is missing' };
    ctx.log.warn({ err: e, uri }, 'integrity check could not read a copy');
    return { ok: null, reason: `storage unavailable: ${(e as Error).message}` };
  }
}

/**
 * Re-reads every copy of one file instance and compares its MD5 and size with what was stored at
 * upload. Each copy's `last_check` (true/false) and `last_check_at` are recorded with a fixity event;
 * a failed copy gets a `repair-copy` job (domain/replicas.ts). A copy whose storage cannot be reached
 * keeps its old result and reports null. A failure is logged at error level.
 */
export async function verifyFile(ctx: DomainContext, fileId: string, signal?: AbortSignal): Promise<CheckResult> {
  const state = await copiesOf(ctx.db, fileId);
  if (!state) return { fileId, uri: null, ok: null, reason: 'the file instance no longer exists' };
  const first = state.copies.find((c) => c.primary) ?? null;
  if (!state.file.readable || !first || !state.file.checksum) return { fileId, uri: first?.uri ?? null, ok: null, reason: 'not readable' };
  const file = { size: state.file.size, checksum: state.file.checksum };
  const results: CopyCheck[] = [];
  for (const c of state.copies) {
    const r = await checkCopy(ctx, file, c.uri, signal);
    results.push({ location: c.location, uri: c.uri, ok: r.ok, ...(r.reason ? { reason: r.reason } : {}) });
    if (r.ok !== null) {
      await recordCopyResult(ctx, { fileId, locationId: c.locationId, uri: c.uri, ok: r.ok, checksumFound: r.found ?? null, ...(r.reason ? { detail: r.reason } : {}) });
    }
  }
  const failed = results.find((r) => r.ok === false);
  const unknown = results.find((r) => r.ok === null);
  const ok = failed ? false : unknown ? null : true;
  const worst = failed ?? unknown;
  const reason = worst?.reason ? (results.length > 1 ? `${worst.location}: ${worst.reason}` : worst.reason) : undefined;
  return { fileId, uri: first.uri, ok, ...(reason ? { reason } : {}), copies: results };
}

export interface SelectOptions {
  /** Every readable file. */
  all?: boolean;
  /** Files never checked or last checked more than this many days ago. */
  olderThanDays?: number;
  limit?: number;
  maxBytes?: number;
}

/**
 * Files due for a check, least recently checked first (never-checked first). Without options: the
 * files never checked.
 */
export async function filesToVerify(ctx: DomainContext, opts: SelectOptions): Promise<{ id: string; size: number }[]> {
  let q = ctx.db
    .selectFrom('files')
    .select(['id', 'size'])
    .where('readable', '=', 1)
    .orderBy(sql`coalesce(last_check_at, 0)`)
    .orderBy('id');
  if (!opts.all) {
    if (opts.olderThanDays !== undefined) {
      const cutoff = nowMicros() - Math.round(opts.olderThanDays * DAY_MICROS);
      q = q.where((eb) => eb.or([eb('last_check_at', 'is', null), eb('last_check_at', '<', cutoff)]));
    } else {
      q = q.where('last_check_at', 'is', null);
    }
  }
  if (opts.limit !== undefined) q = q.limit(opts.limit);
  const rows = await q.execute();
  if (opts.maxBytes === undefined) return rows;
  const out: { id: string; size: number }[] = [];
  let bytes = 0;
  for (const r of rows) {
    if (out.length > 0 && bytes + r.size > opts.maxBytes) break;
    out.push(r);
    bytes += r.size;
  }
  return out;
}

/**
 * One run of the periodic check: its fair share of the files so that all are covered once per
 * FILES_REST_CHECKSUM_VERIFY_PERIOD days, within the per-run limits on files and bytes, oldest-checked
 * first, always at least one. Queues one verify task per file.
 */
export async function scheduleVerification(ctx: DomainContext): Promise<number> {
  const { config } = ctx;
  const total = Number(
    (await ctx.db.selectFrom('files').select((eb) => eb.fn.countAll<number>().as('n')).where('readable', '=', 1).executeTakeFirstOrThrow()).n,
  );
  if (total === 0) return 0;
  const runsPerPeriod = Math.max(1, (config.checksumVerifyPeriod * 86400) / config.checksumVerifyInterval);
  const share = Math.max(1, Math.min(config.checksumVerifyMaxFiles, Math.ceil(total / runsPerPeriod)));
  const due = await filesToVerify(ctx, { all: true, limit: share, maxBytes: config.checksumVerifyMaxBytes });
  if (due.length === 0) return 0;
  await ctx.db.transaction().execute(async (tx) => {
    for (const f of due) await ctx.queue.enqueue(tx, 'verify-checksum', { fileId: f.id });
  });
  ctx.queue.wake();
  return due.length;
}
