import type { DomainContext } from './context.js';
import { listLocations } from './locations.js';
import { isMarkerUri, sweepRefusal } from './location-owner.js';

export interface ReconcileReport {
  /** Stored files that no file instance row knows, older than the grace period. */
  orphans: { uri: string; size: number; location: string }[];
  /** File instance rows whose bytes are missing. */
  missing: { file_id: string; uri: string; location: string }[];
  /** Orphans deleted (0 with --dry-run). */
  deleted: number;
  /** Locations whose stored files were not examined: their storage is not provably this database's. */
  skipped: { location: string; uri: string; reason: string }[];
}

/**
 * Finds both kinds of orphan in every location: stored files no row refers to (temporary leftovers of
 * interrupted uploads, bytes whose removal never ran) and rows whose bytes are gone. Files younger
 * than the grace period are left alone: they may belong to an upload still in flight. A location whose
 * owner marker does not name this database is not examined for orphans at all (see location-owner.ts).
 */
export async function reconcileStorage(ctx: DomainContext, opts: { dryRun?: boolean; graceSeconds?: number } = {}): Promise<ReconcileReport> {
  const grace = (opts.graceSeconds ?? 24 * 3600) * 1000;
  const report: ReconcileReport = { orphans: [], missing: [], deleted: 0, skipped: [] };
  for (const loc of await listLocations(ctx.db)) {
    const backend = ctx.storage.forUri(loc.uri);
    // Never an orphan of ours unless the storage is provably ours (its owner marker names this database).
    const refusal = backend.list ? await sweepRefusal(ctx, loc) : null;
    if (refusal) report.skipped.push({ location: loc.name, uri: loc.uri, reason: refusal });
    if (backend.list && !refusal) {
      const batch: { uri: string; size: number; modified: number }[] = [];
      const flush = async () => {
        if (batch.length === 0) return;
        const uris = batch.map((b) => b.uri);
        // A file instance's first copy (files.uri) or one of its further copies (file_copies).
        const known = new Set<string | null>([
          ...(await ctx.db.selectFrom('files').select('uri').where('uri', 'in', uris).execute()).map((r) => r.uri),
          ...(await ctx.db.selectFrom('file_copies').select('uri').where('uri', 'in', uris).execute()).map((r) => r.uri),
        ]);
        for (const f of batch) {
          if (known.has(f.uri) || isMarkerUri(f.uri) || Date.now() - f.modified < grace) continue;
          report.orphans.push({ uri: f.uri, size: f.size, location: loc.name });
          if (!opts.dryRun) {
            await backend.delete(f.uri);
            report.deleted++;
          }
        }
        batch.length = 0;
      };
      for await (const f of backend.list(loc.uri)) {
        batch.push(f);
        if (batch.length >= 500) await flush();
      }
      await flush();
    }
    if (backend.stat) {
      let after = '';
      for (;;) {
        const rows = await ctx.db
          .selectFrom('files')
          .select(['id', 'uri'])
          .where('location_id', '=', loc.id)
          .where('readable', '=', 1)
          .where('id', '>', after)
          .orderBy('id')
          .limit(500)
          .execute();
        if (rows.length === 0) break;
        for (const r of rows) {
          // A file kept in the database (storage/inline) belongs to the location without being in it.
          const holder = r.uri ? ctx.storage.forUri(r.uri) : null;
          if (holder?.stat && (await holder.stat(r.uri!)) === null) report.missing.push({ file_id: r.id, uri: r.uri!, location: loc.name });
        }
        after = rows[rows.length - 1]!.id;
      }
    }
  }
  for (const s of report.skipped) ctx.log.error({ location: s.location, uri: s.uri }, `location ${s.location} not swept: ${s.reason}`);
  if (report.missing.length) ctx.log.error({ missing: report.missing.length }, 'file instances whose bytes are missing');
  return report;
}
