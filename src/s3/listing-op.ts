import type { Bucket } from '../domain/models.js';
import { displayName } from './buckets.js';
import { handleListing } from './listings.js';
import { sendXml, type S3Request } from './request.js';

/**
 * ListObjects, ListObjectsV2 and ListObjectVersions, once the router has resolved the bucket and
 * checked bucket-read (and bucket-read-versions for ?versions): the listing XML of listings.ts,
 * naming the bucket as the client addressed it.
 */
export async function listingOp(r: S3Request, bucket: Bucket): Promise<void> {
  const { xml } = await handleListing(r.ctx, bucket.id, r.query, { bucketName: displayName(bucket) });
  sendXml(r, xml);
}
