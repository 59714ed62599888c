import { AppError } from '../errors.js';
import { transaction } from '../db/database.js';
import { nowMicros } from '../util/time.js';
import { lockBucketForWrite } from './ledger.js';
import type { DomainContext } from './context.js';
import type { ObjectVersion } from './models.js';
import { findHead, findVersion } from './objects.js';

/**
 * Replaces the tags of one version (the head when `versionId` is null): the same tags the REST door
 * stores from its tags header at upload and shows in a version's `tags`. A delete marker has none
 * (VERSION_IS_DELETE_MARKER); a locked bucket refuses (BUCKET_LOCKED). The door checks its limits.
 */
export async function setVersionTags(
  ctx: DomainContext,
  addr: { bucketId: string; key: string; versionId: string | null },
  tags: Record<string, string>,
): Promise<ObjectVersion> {
  return transaction(ctx.db, async (tx) => {
    const bucket = await lockBucketForWrite(tx, addr.bucketId);
    const v = addr.versionId === null ? await findHead(tx, bucket.id, addr.key) : await findVersion(tx, bucket.id, addr.key, addr.versionId);
    if (!v || (addr.versionId === null && v.fileId === null)) throw new AppError('OBJECT_NOT_FOUND');
    if (v.fileId === null) throw new AppError('VERSION_IS_DELETE_MARKER');
    await tx.updateTable('object_versions').set({ tags: JSON.stringify(tags), updated: nowMicros() }).where('seq', '=', v.seq).execute();
    return { ...v, tags };
  });
}
