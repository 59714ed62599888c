/** S3 bucket names: the naming rules, and which files-rest bucket a name addresses. */
import { findLiveBucketByName, findBucket } from '../domain/buckets.js';
import type { Bucket } from '../domain/models.js';
import type { Executor } from '../db/schema.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether a name has the form of a bucket id (a UUID): it always addresses that bucket. */
export function isBucketId(name: string): boolean {
  return UUID.test(name);
}

/** Why a name breaks S3's bucket naming rules, or null when it follows them. */
export function bucketNameProblem(name: string): string | null {
  if (name.length < 3 || name.length > 63) return 'it must be 3 to 63 characters long';
  if (!/^[a-z0-9.-]+$/.test(name)) return 'only lower-case letters, digits, dots and hyphens are allowed';
  if (!/^[a-z0-9]/.test(name) || !/[a-z0-9]$/.test(name)) return 'it must begin and end with a letter or digit';
  if (name.includes('..')) return 'it must not have two adjacent dots';
  if (name.includes('.-') || name.includes('-.')) return 'a dot must not be next to a hyphen';
  if (/^\d+\.\d+\.\d+\.\d+$/.test(name)) return 'it must not have the form of an IP address';
  if (/^(xn--|sthree-|amzn-s3-demo-)/.test(name)) return 'the prefixes xn--, sthree- and amzn-s3-demo- are reserved';
  if (/(-s3alias|--ol-s3|\.mrap|--x-s3)$/.test(name)) return 'the suffixes -s3alias, --ol-s3, .mrap and --x-s3 are reserved';
  return null;
}

/** The live bucket a name addresses: its S3 name, or its id. */
export async function resolveBucket(db: Executor, name: string): Promise<Bucket | null> {
  if (!isBucketId(name)) return findLiveBucketByName(db, name);
  // Names of this shape are refused (they are reserved for ids): the id first, one lookup.
  const b = await findBucket(db, name);
  if (b && !b.deleted) return b;
  return findLiveBucketByName(db, name);
}
