import type { Compilable } from 'kysely';
import { prepared } from '../db/prepared.js';
import { TRUE_LITERAL, type Executor } from '../db/schema.js';
import { prefixUpperBound } from './keys.js';
import type { ListedVersion } from './models.js';
import { LISTED_VERSION_COLUMNS, toListedVersion, type ListedVersionRow } from './rows.js';

/**
 * Listings grouped by a delimiter, as S3 lists a bucket: every key under the prefix either appears
 * itself or, when the rest of it after the prefix holds the delimiter, is rolled up into one common
 * prefix (the prefix, the rest up to and including the first delimiter). Keys compare by UTF-8
 * bytes on every database (the key column is collated "C" on PostgreSQL; SQLite compares bytes).
 *
 * A common prefix costs one index seek, never a scan of the keys under it: once it is emitted the
 * next query starts at `prefixUpperBound(commonPrefix)`. Each query reads at most as many rows as
 * entries are still wanted, plus one.
 */

/** Where a listing continues: after `key`; for versions, with `seq`, after that version of `key` (older versions of it follow). */
export interface ListPosition {
  key: string;
  /** Versions listing only: the `seq` of the last version listed of `key`; absent: after every version of `key`. */
  seq?: number | null;
}

export interface DelimitedListOptions {
  /** Only keys starting with this ('' for all). */
  prefix: string;
  /** Group keys by this ('' or null: no grouping). */
  delimiter?: string | null;
  /** Exclusive start. A position inside a common prefix skips the rest of that prefix (it was listed). */
  after?: ListPosition | null;
  /** At most this many entries, a common prefix counting once (0: none). */
  maxEntries: number;
}

export type ListingEntry = { kind: 'version'; version: ListedVersion } | { kind: 'prefix'; prefix: string };

export interface DelimitedPage {
  /** In key order (versions of one key newest first); a common prefix where its first key would be. */
  entries: ListingEntry[];
  /** Whether entries follow after the last one. */
  truncated: boolean;
  /** The position of the last entry (a common prefix: `{ key: prefix }`); null when there is none. */
  last: (ListPosition & { versionId?: string }) | null;
}

type Mode = 'latest' | 'versions';

/** Query shapes: lower bound inclusive (`ge`), exclusive (`gt`) or after a version (`gs`); with an upper bound (`u`) or not. */
type Shape = `${'ge' | 'gt' | 'gs'}${'u' | ''}`;

function build(db: Executor, mode: Mode, shape: Shape, args: unknown[]): Compilable<unknown> {
  let i = 0;
  let q =
    mode === 'latest'
      ? db
          .selectFrom('object_versions')
          .innerJoin('files', 'files.id', 'object_versions.file_id')
          .select(LISTED_VERSION_COLUMNS)
          .where('object_versions.bucket_id', '=', args[i++] as string)
          .where('object_versions.is_head', '=', TRUE_LITERAL)
      : db
          .selectFrom('object_versions')
          .leftJoin('files', 'files.id', 'object_versions.file_id')
          .select(LISTED_VERSION_COLUMNS)
          .where('object_versions.bucket_id', '=', args[i++] as string);
  const lower = args[i++] as string;
  if (shape.startsWith('ge')) q = q.where('object_versions.key', '>=', lower);
  else if (shape.startsWith('gt')) q = q.where('object_versions.key', '>', lower);
  else {
    // After version `seq` of `lower`: its older versions, then later keys. The `>=` keeps it an index range.
    const seq = args[i++] as number;
    q = q
      .where('object_versions.key', '>=', lower)
      .where((eb) => eb.or([eb('object_versions.key', '>', lower), eb('object_versions.seq', '<', seq)]));
  }
  if (shape.endsWith('u')) q = q.where('object_versions.key', '<', args[i++] as string);
  q = q.orderBy('object_versions.key');
  if (mode === 'versions') q = q.orderBy('object_versions.seq', 'desc');
  return q.limit(args[i++] as number);
}

const queries = new Map<string, ReturnType<typeof prepared<unknown[], unknown>>>();
function query(mode: Mode, shape: Shape) {
  const name = `${mode}:${shape}`;
  let q = queries.get(name);
  if (!q) {
    q = prepared((db: Executor, ...args: unknown[]) => build(db, mode, shape, args));
    queries.set(name, q);
  }
  return q;
}

/** A lower bound of the scan: a key, inclusive or not, or a version of a key. */
type Lower = { key: string; inclusive: boolean; seq?: number };

async function fetchRows(db: Executor, mode: Mode, bucketId: string, lower: Lower, upper: string | null, limit: number): Promise<ListedVersion[]> {
  const withSeq = mode === 'versions' && lower.seq !== undefined && !lower.inclusive;
  const shape = `${withSeq ? 'gs' : lower.inclusive ? 'ge' : 'gt'}${upper !== null ? 'u' : ''}` as Shape;
  const args: unknown[] = [bucketId, lower.key];
  if (withSeq) args.push(lower.seq);
  if (upper !== null) args.push(upper);
  args.push(limit);
  const rows = await query(mode, shape).execute(db, ...args);
  return rows.map((r) => toListedVersion(r as ListedVersionRow));
}

/** Compares keys as the databases do: by UTF-8 bytes, which is code point order (not JavaScript's UTF-16 order). */
export function compareKeys(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** The common prefix `key` rolls up into, or null when it appears itself. */
function commonPrefixOf(key: string, prefix: string, delimiter: string | null): string | null {
  if (!delimiter || !key.startsWith(prefix)) return null;
  const at = key.indexOf(delimiter, prefix.length);
  return at === -1 ? null : key.slice(0, at + delimiter.length);
}

/** The bound just past every key under `cp`: inclusive at its upper bound, or the end of the listing. */
function pastPrefix(cp: string): Lower | null {
  const ub = prefixUpperBound(cp);
  return ub === null ? null : { key: ub, inclusive: true };
}

/** Where the scan starts: the prefix, or after the position (past its whole common prefix when it lies in one). */
function startBound(opts: DelimitedListOptions, delimiter: string | null): Lower | null {
  const prefix = opts.prefix;
  const after = opts.after;
  if (!after || compareKeys(after.key, prefix) < 0) return { key: prefix, inclusive: true };
  const cp = commonPrefixOf(after.key, prefix, delimiter);
  if (cp !== null) return pastPrefix(cp);
  return after.seq === undefined || after.seq === null ? { key: after.key, inclusive: false } : { key: after.key, inclusive: false, seq: after.seq };
}

async function list(db: Executor, mode: Mode, bucketId: string, opts: DelimitedListOptions): Promise<DelimitedPage> {
  const prefix = opts.prefix;
  const delimiter = opts.delimiter ? opts.delimiter : null;
  const upper = prefix === '' ? null : prefixUpperBound(prefix);
  const entries: ListingEntry[] = [];
  const max = Math.max(0, opts.maxEntries);
  let lower = startBound(opts, delimiter);
  // The position of the last entry; an upper bound that the start already passed means nothing follows.
  if (max === 0 || lower === null || (upper !== null && compareKeys(lower.key, upper) >= 0)) return { entries, truncated: false, last: null };

  let lastPrefix: string | null = null;
  for (;;) {
    const wanted = max - entries.length;
    // One row more than wanted entries tells whether anything follows.
    const rows = await fetchRows(db, mode, bucketId, lower, upper, wanted + 1);
    let next: Lower | null = null;
    for (const v of rows) {
      if (lastPrefix !== null && v.key.startsWith(lastPrefix)) continue;
      const cp = commonPrefixOf(v.key, prefix, delimiter);
      if (entries.length === max) return finish(entries, true);
      if (cp !== null) {
        entries.push({ kind: 'prefix', prefix: cp });
        lastPrefix = cp;
      } else {
        entries.push({ kind: 'version', version: v });
        lastPrefix = null;
      }
    }
    if (rows.length <= wanted) return finish(entries, false);
    // Rows remain beyond this batch: continue past the last common prefix with one seek, or after the last row.
    if (lastPrefix !== null) {
      next = pastPrefix(lastPrefix);
      if (next === null || (upper !== null && compareKeys(next.key, upper) >= 0)) return finish(entries, false);
    } else {
      const last = rows[rows.length - 1]!;
      next = mode === 'versions' ? { key: last.key, inclusive: false, seq: last.seq } : { key: last.key, inclusive: false };
    }
    lower = next;
  }
}

function finish(entries: ListingEntry[], truncated: boolean): DelimitedPage {
  const e = entries[entries.length - 1];
  const last = !e ? null : e.kind === 'prefix' ? { key: e.prefix } : { key: e.version.key, seq: e.version.seq, versionId: e.version.versionId };
  return { entries, truncated, last };
}

/** The latest version of every key that has one with a file (no delete markers), grouped by `delimiter`. */
export function listLatestDelimited(db: Executor, bucketId: string, opts: DelimitedListOptions): Promise<DelimitedPage> {
  return list(db, 'latest', bucketId, opts);
}

/** Every version, delete markers included, by key and newest first, grouped by `delimiter`; each version counts as an entry. */
export function listVersionsDelimited(db: Executor, bucketId: string, opts: DelimitedListOptions): Promise<DelimitedPage> {
  return list(db, 'versions', bucketId, opts);
}
