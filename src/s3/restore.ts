/**
 * RestoreObject (`POST /<bucket>/<key>?restore`): a copy of an archived object made readable for some
 * days. files-rest archives nothing: every object is stored for immediate access (STANDARD), so an
 * existing object or version is refused as S3 refuses one not in an archive class, InvalidObjectState
 * (403), which a script restoring a whole tree (s3cmd restore --recursive) reads as "nothing to do";
 * a missing one is NoSuchKey / NoSuchVersion. The request body is read (bounded) and not judged.
 */
import type { Bucket } from '../domain/models.js';
import { S3Error } from './errors.js';
import { readSmallBody } from './payload.js';
import { addressedObject, authorize, versionIdOf, type S3Request } from './request.js';

export async function restoreObjectOp(r: S3Request, bucket: Bucket): Promise<void> {
  const versionId = versionIdOf(r);
  await authorize(r, versionId !== null ? 'object-read-version' : 'object-read', { type: 'object', bucketId: bucket.id, key: r.key, ...(versionId ? { id: versionId } : {}) });
  await readSmallBody(r);
  await addressedObject(r, bucket.id, versionId);
  throw new S3Error('InvalidObjectState', "Restore is not allowed for the object's current storage class", { StorageClass: 'STANDARD' });
}
