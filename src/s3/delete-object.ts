/**
 * DeleteObject: a delete marker, or with `versionId` that version; and S3's conditional deletes: DeleteObject's `If-Match`, `x-amz-if-match-last-modified-time` and
 * `x-amz-if-match-size`, and the same conditions per object in DeleteObjects (`ETag`,
 * `LastModifiedTime`, `Size`). They are checked in the delete's transaction against the version it
 * addresses (the key's current version, a delete marker included, or the version named): one that
 * does not hold is PreconditionFailed and nothing is deleted. A key or version that is not there is
 * deleted already (204, nothing placed), as Ceph's RGW answers a conditional delete of it.
 */
import { AppError, isAppError } from '../errors.js';
import type { Bucket, ObjectVersion } from '../domain/models.js';
import { getVersionMetadata, hardDeleteVersion, placeDeleteMarker, type DeleteCheck } from '../domain/objects.js';
import { S3Error } from './errors.js';
import { etagMatches, s3EtagOf } from './objects.js';
import { authorize, header, sendEmpty, versionIdOf, type S3Request } from './request.js';

export interface DeleteCondition {
  /** An ETag (or `*`) the version must have. */
  ifMatch?: string;
  /** Its last-modified time, in whole seconds. */
  lastModified?: number;
  /** Its size in bytes (0 for a delete marker). */
  size?: number;
}

/** Reads the conditions from their texts (headers, or a DeleteObjects entry's elements); null for none. */
export function parseDeleteCondition(texts: { ifMatch?: string; lastModified?: string; size?: string }): DeleteCondition | null {
  const c: DeleteCondition = {};
  if (texts.ifMatch !== undefined) c.ifMatch = texts.ifMatch.trim();
  if (texts.lastModified !== undefined) {
    const ms = Date.parse(texts.lastModified.trim());
    if (Number.isNaN(ms)) throw new S3Error('InvalidArgument', `Invalid last-modified time condition: ${texts.lastModified}.`, { ArgumentName: 'x-amz-if-match-last-modified-time' });
    c.lastModified = Math.floor(ms / 1000);
  }
  if (texts.size !== undefined) {
    const t = texts.size.trim();
    if (!/^\d{1,16}$/.test(t)) throw new S3Error('InvalidArgument', `Invalid size condition: ${texts.size}.`, { ArgumentName: 'x-amz-if-match-size' });
    c.size = Number(t);
  }
  return Object.keys(c).length > 0 ? c : null;
}

/** Whether a version meets the conditions (its S3 ETag read from its metadata within the delete's transaction). */
async function meets(c: DeleteCondition, v: ObjectVersion, tx: Parameters<DeleteCheck>[1]): Promise<boolean> {
  if (c.ifMatch !== undefined && c.ifMatch !== '*') {
    if (!v.file) return false;
    if (!etagMatches(c.ifMatch, s3EtagOf(v, await getVersionMetadata(tx, v.versionId)))) return false;
  }
  if (c.lastModified !== undefined && Math.floor(v.created / 1_000_000) !== c.lastModified) return false;
  if (c.size !== undefined && (v.file?.size ?? 0) !== c.size) return false;
  return true;
}

/**
 * The domain's check for a conditional delete: OBJECT_NOT_FOUND when there is nothing to delete (the
 * door answers it as deleted already), PRECONDITION_FAILED when a condition does not hold.
 */
export function deleteCheck(c: DeleteCondition): DeleteCheck {
  return async (v, tx) => {
    if (!v) throw new AppError('OBJECT_NOT_FOUND');
    if (!(await meets(c, v, tx))) throw new AppError('PRECONDITION_FAILED', { reason: 'the object does not meet the delete\'s conditions' });
  };
}

export async function deleteObjectOp(r: S3Request, bucket: Bucket): Promise<void> {
  const versionId = versionIdOf(r);
  const condition = parseDeleteCondition({
    ifMatch: header(r, 'if-match'),
    lastModified: header(r, 'x-amz-if-match-last-modified-time'),
    size: header(r, 'x-amz-if-match-size'),
  });
  const check = condition ? { check: deleteCheck(condition) } : {};
  if (versionId !== null) {
    await authorize(r, 'object-delete-version', { type: 'object', bucketId: bucket.id, key: r.key, id: versionId });
    try {
      const removed = await hardDeleteVersion(r.ctx, bucket.id, r.key, versionId, { shared: 'release', ...check });
      const headers: Record<string, string> = { 'x-amz-version-id': removed.versionId };
      if (!removed.file) headers['x-amz-delete-marker'] = 'true';
      sendEmpty(r, 204, headers);
    } catch (e) {
      // S3 answers 204 for a version that is not there.
      if (isAppError(e, 'OBJECT_NOT_FOUND')) return sendEmpty(r, 204, { 'x-amz-version-id': versionId });
      throw e;
    }
    return;
  }
  await authorize(r, 'object-delete', { type: 'object', bucketId: bucket.id, key: r.key });
  try {
    // As S3 with versioning enabled: a new delete marker even when nothing live is under the key.
    const { marker } = await placeDeleteMarker(r.ctx, bucket.id, r.key, check);
    sendEmpty(r, 204, { 'x-amz-delete-marker': 'true', 'x-amz-version-id': marker.versionId });
  } catch (e) {
    // A conditional delete of a key that has never had anything: deleted already, nothing placed.
    if (condition && isAppError(e, 'OBJECT_NOT_FOUND')) return sendEmpty(r, 204);
    throw e;
  }
}
