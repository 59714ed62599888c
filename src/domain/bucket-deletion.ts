import { AppError } from '../errors.js';
import { transaction } from '../db/database.js';
import { nowMicros } from '../util/time.js';
import type { DomainContext } from './context.js';
import { lockBucketForWrite } from './ledger.js';
import { abortUploadsOfBucket } from './multipart.js';

/**
 * Deletes a bucket that holds nothing (S3's DeleteBucket): no version at all, delete markers
 * included, no multipart upload being completed (it is about to become a version) and no tus upload
 * in progress, checked under the bucket's row lock; BUCKET_NOT_EMPTY otherwise. Multipart uploads
 * still in progress are aborted with it, in the same transaction, as S3 does (AWS deletes a bucket
 * whose multipart uploads were never completed, and clients such as the Ceph S3 suite's clean-up
 * rely on it: they delete every version, then the bucket). The bucket is deleted logically, as
 * `setBucketDeleted`, and its name is freed.
 */
export async function deleteEmptyBucket(ctx: DomainContext, id: string): Promise<void> {
  const aborted = await transaction(ctx.db, async (tx) => {
    const bucket = await lockBucketForWrite(tx, id);
    const version = await tx.selectFrom('object_versions').select('seq').where('bucket_id', '=', bucket.id).limit(1).executeTakeFirst();
    const completing = await tx
      .selectFrom('multipart_uploads')
      .select('id')
      .where('bucket_id', '=', bucket.id)
      .where('state', '=', 'completing')
      .limit(1)
      .executeTakeFirst();
    const resumable = await tx.selectFrom('resumable_uploads').select('id').where('bucket_id', '=', bucket.id).limit(1).executeTakeFirst();
    if (version || completing || resumable) throw new AppError('BUCKET_NOT_EMPTY');
    const ids = await abortUploadsOfBucket(tx, ctx, bucket.id);
    await tx.updateTable('buckets').set({ deleted: 1, name: null, updated: nowMicros() }).where('id', '=', bucket.id).execute();
    return ids;
  }, { bucket: id });
  if (aborted.length === 0) return;
  ctx.queue.wake();
  for (const uploadId of aborted) ctx.hasher?.forget(uploadId);
  ctx.log.info({ bucketId: id, uploadIds: aborted }, 'multipart uploads aborted with their bucket');
}
