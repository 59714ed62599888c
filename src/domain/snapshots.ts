import { AppError } from '../errors.js';
import { transaction } from '../db/database.js';
import { TRUE_LITERAL, type Executor } from '../db/schema.js';
import { newId, newOrderedId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';
import { findBucket } from './buckets.js';
import type { DomainContext } from './context.js';
import type { Bucket } from './models.js';
import { commitNewVersion, findHead, softDeleteObject } from './objects.js';
import { toBucket } from './rows.js';
import { addCopied, assertWritable, EMPTY_ACCOUNT } from './ledger.js';

const PAGE = 1000;

/** One page of a bucket's head versions by key (delete markers only with `markers`), with their file sizes. */
function headsPage(db: Executor, bucketId: string, after: string | null, markers: boolean) {
  let q = db
    .selectFrom('object_versions')
    .leftJoin('files', 'files.id', 'object_versions.file_id')
    .select(['object_versions.key', 'object_versions.file_id', 'object_versions.mimetype', 'object_versions.tags', 'files.size'])
    .where('object_versions.bucket_id', '=', bucketId)
    .where('object_versions.is_head', '=', TRUE_LITERAL)
    .orderBy('object_versions.key')
    .limit(PAGE);
  if (!markers) q = q.where('object_versions.file_id', 'is not', null);
  if (after !== null) q = q.where('object_versions.key', '>', after);
  return q.execute();
}

/**
 * Snapshot: a new bucket holding the latest version of every object of `sourceId`, pointing at the
 * same file instances (no byte is copied). Quota and maximum file size are copied; the new bucket
 * is locked when asked, otherwise it takes the source's lock state. One transaction.
 */
export async function snapshotBucket(ctx: DomainContext, sourceId: string, opts: { lock?: boolean } = {}): Promise<Bucket> {
  const now = nowMicros();
  const id = newId();
  await transaction(ctx.db, async (tx) => {
    const src = await findBucket(tx, sourceId);
    if (!src) throw new AppError('BUCKET_NOT_FOUND');
    if (src.deleted) throw new AppError('BUCKET_DELETED', { id: sourceId });
    await tx
      .insertInto('buckets')
      .values({
        id, default_location: src.defaultLocation, default_storage_class: src.defaultStorageClass, ...EMPTY_ACCOUNT,
        quota_size: src.quotaSize, max_file_size: src.maxFileSize, locked: 0, deleted: 0, created: now, updated: now,
      })
      .execute();
    let after: string | null = null;
    let total = 0;
    for (;;) {
      const rows = await headsPage(tx, sourceId, after, false);
      if (rows.length === 0) break;
      await tx
        .insertInto('object_versions')
        .values(rows.map((r) => ({
          version_id: newOrderedId(), bucket_id: id, key: r.key, file_id: r.file_id, mimetype: r.mimetype, is_head: 1, tags: r.tags, created: now, updated: now,
        })))
        .execute();
      total += rows.reduce((n, r) => n + (r.size ?? 0), 0);
      after = rows[rows.length - 1]!.key;
      if (rows.length < PAGE) break;
    }
    const locked = opts.lock ?? src.locked;
    await addCopied(tx, id, total);
    await tx.updateTable('buckets').set({ locked: locked ? 1 : 0 }).where('id', '=', id).execute();
  });
  return toBucket((await ctx.db.selectFrom('buckets').selectAll().where('id', '=', id).executeTakeFirstOrThrow()));
}

export interface SyncChange {
  action: 'add' | 'delete';
  key: string;
  versionId?: string;
}

/**
 * Sync: makes the destination's live objects mirror the source's. A key whose source head points at
 * a different file instance than the destination's (or is absent there) gets a new version sharing
 * the source's file; a key deleted in the source is soft-deleted in the destination; with
 * `deleteExtras`, keys only the destination has are soft-deleted. Running it twice changes nothing.
 */
export async function syncBuckets(ctx: DomainContext, sourceId: string, destId: string, opts: { deleteExtras?: boolean } = {}): Promise<SyncChange[]> {
  const src = await findBucket(ctx.db, sourceId);
  if (!src) throw new AppError('BUCKET_NOT_FOUND');
  if (src.deleted) throw new AppError('BUCKET_DELETED', { id: sourceId });
  const dst = await findBucket(ctx.db, destId);
  if (!dst || dst.deleted) throw new AppError('BUCKET_NOT_FOUND');
  assertWritable(dst);
  const changes: SyncChange[] = [];
  const heads = (bucketId: string, after: string | null) => headsPage(ctx.db, bucketId, after, true);
  for (let after: string | null = null; ; ) {
    const rows = await heads(sourceId, after);
    for (const r of rows) {
      const d = await findHead(ctx.db, destId, r.key);
      if (r.file_id === null) {
        if (d && d.fileId !== null) {
          await softDeleteObject(ctx, destId, r.key);
          changes.push({ action: 'delete', key: r.key });
        }
      } else if (!d || d.fileId !== r.file_id) {
        const v = await commitNewVersion(ctx, {
          bucketId: destId, key: r.key, file: { existingId: r.file_id, size: r.size ?? 0 }, mimetype: r.mimetype ?? 'application/octet-stream',
          tags: JSON.parse(r.tags) as Record<string, string>,
        });
        changes.push({ action: 'add', key: r.key, versionId: v.versionId });
      }
    }
    if (rows.length < PAGE) break;
    after = rows[rows.length - 1]!.key;
  }
  if (opts.deleteExtras) {
    for (let after: string | null = null; ; ) {
      const rows = await heads(destId, after);
      for (const r of rows) {
        if (r.file_id === null) continue;
        const s = await findHead(ctx.db, sourceId, r.key);
        if (!s) {
          await softDeleteObject(ctx, destId, r.key);
          changes.push({ action: 'delete', key: r.key });
        }
      }
      if (rows.length < PAGE) break;
      after = rows[rows.length - 1]!.key;
    }
  }
  return changes;
}

