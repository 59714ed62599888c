import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { isStorageError } from '../storage/backend.js';
import { nowMicros, DAY_MICROS } from '../util/time.js';
import type { DomainContext } from './context.js';

export interface CheckResult {
  fileId: string;
  uri: string | null;
  /** true: matches; false: corrupted, truncated or missing; null: could not be checked now. */
  ok: boolean | null;
  reason?: string;
}

/**
 * Re-reads one file instance and compares its MD5 and size with what was stored at upload. Records
 * `last_check` (true/false) and `last_check_at`; when the storage cannot be reached the old result
 * stays and the check reports null. A failure is logged at error level.
 */
export async function verifyFile(ctx: DomainContext, fileId: string, signal?: AbortSignal): Promise<CheckResult> {
  const file = await ctx.db.selectFrom('files').selectAll().where('id', '=', fileId).executeTakeFirst();
  if (!file) return { fileId, uri: null, ok: null, reason: 'the file instance no longer exists' };
  if (file.readable !== 1 || !file.uri || !file.checksum) return { fileId, uri: file.uri, ok: null, reason: 'not readable' };
  const backend = ctx.storage.forUri(file.uri);
  const [algo, expected] = file.checksum.split(':');
  let ok: boolean;
  let reason: string | undefined;
  try {
    const h = createHash(algo === 'md5' ? 'md5' : 'sha256');
    let bytes = 0;
    const stream = await backend.open(file.uri);
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (signal?.aborted) {
        stream.destroy();
        throw signal.reason;
      }
      bytes += chunk.length;
      h.update(chunk);
    }
    const actual = h.digest('hex');
    ok = actual === expected && bytes === file.size;
    if (!ok) reason = bytes !== file.size ? `size ${bytes}, expected ${file.size}` : `checksum ${algo}:${actual}, expected ${file.checksum}`;
  } catch (e) {
    if (isStorageError(e, 'missing')) {
      ok = false;
      reason = 'the stored file is missing';
    } else {
      ctx.log.warn({ err: e, fileId, uri: file.uri }, 'integrity check could not read the file');
      return { fileId, uri: file.uri, ok: null, reason: `storage unavailable: ${(e as Error).message}` };
    }
  }
  await ctx.db.updateTable('files').set({ last_check: ok ? 1 : 0, last_check_at: nowMicros() }).where('id', '=', fileId).execute();
  if (!ok) ctx.log.error({ fileId, uri: file.uri, reason }, 'integrity check failed');
  return { fileId, uri: file.uri, ok, ...(reason ? { reason } : {}) };
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
    for (const f of due) await ctx.queue.enqueue(tx, 'verify-checksum', { fileId: f.id }, { maxAttempts: 3 });
  });
  ctx.queue.wake();
  return due.length;
}
