import { AppError, type ErrorCode } from '../errors.js';
import type { Bucket } from './models.js';

export interface SizeLimit {
  /** Most bytes a new file may have. */
  bytes: number;
  reason: ErrorCode;
}

/**
 * A size limiter: the per-bucket limits that apply to a new file. Replaceable: any function of this
 * shape can be passed where the default is used.
 */
export type SizeLimiter = (bucket: Bucket) => SizeLimit[];

/**
 * Default limiter: the quota left (quota minus stored and reserved bytes) and the bucket's maximum
 * file size. Both are inclusive; a quota of 0 means zero bytes, not unlimited.
 */
export const defaultSizeLimiter: SizeLimiter = (bucket) => {
  const limits: SizeLimit[] = [];
  if (bucket.quotaSize !== null) {
    limits.push({ bytes: Math.max(bucket.quotaSize - bucket.size - bucket.reservedSize, 0), reason: 'QUOTA_EXCEEDED' });
  }
  if (bucket.maxFileSize !== null) limits.push({ bytes: bucket.maxFileSize, reason: 'MAX_FILE_SIZE_EXCEEDED' });
  return limits;
};

/** The tightest limit, or null when the bucket has none. */
export function tightestLimit(bucket: Bucket, limiter: SizeLimiter = defaultSizeLimiter): SizeLimit | null {
  let best: SizeLimit | null = null;
  for (const l of limiter(bucket)) if (best === null || l.bytes < best.bytes) best = l;
  return best;
}

/** Throws when a file of `size` bytes would break a limit of the bucket. */
export function checkSize(bucket: Bucket, size: number, limiter: SizeLimiter = defaultSizeLimiter): void {
  for (const l of limiter(bucket)) if (size > l.bytes) throw new AppError(l.reason);
}
