/**
 * A bucket's tags: key–value pairs about the bucket itself (cost centre, project, owner), set and
 * read through the S3 door (PutBucketTagging, GetBucketTagging, DeleteBucketTagging). They describe
 * the bucket and change nothing of what it does; they go with the bucket when it is deleted. The
 * door checks S3's limits on a tag set, as it does for objects' tags.
 */
import { AppError } from '../errors.js';
import { transaction } from '../db/database.js';
import type { Executor } from '../db/schema.js';
import { nowMicros } from '../util/time.js';
import type { DomainContext } from './context.js';

/** Replaces a live bucket's tags; null (or none) removes them. BUCKET_NOT_FOUND for no live bucket. */
export async function setBucketTags(ctx: DomainContext, bucketId: string, tags: Readonly<Record<string, string>> | null): Promise<void> {
  const value = tags === null || Object.keys(tags).length === 0 ? null : JSON.stringify(tags);
  await transaction(ctx.db, async (tx) => {
    const r = await tx
      .updateTable('buckets')
      .set({ tags: value, updated: nowMicros() })
      .where('id', '=', bucketId)
      .where('deleted', '=', 0)
      .returning('id')
      .executeTakeFirst();
    if (!r) throw new AppError('BUCKET_NOT_FOUND');
  });
}

/** A live bucket's tags, or null when it has none. BUCKET_NOT_FOUND for no live bucket. */
export async function findBucketTags(db: Executor, bucketId: string): Promise<Record<string, string> | null> {
  const r = await db.selectFrom('buckets').select('tags').where('id', '=', bucketId).where('deleted', '=', 0).executeTakeFirst();
  if (!r) throw new AppError('BUCKET_NOT_FOUND');
  return r.tags ? (JSON.parse(r.tags) as Record<string, string>) : null;
}
