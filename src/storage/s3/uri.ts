/**
 * `s3://bucket/key` URIs. A location is `s3://bucket` or `s3://bucket/prefix`; a file instance is an
 * object key under it. Parsed by hand rather than with `URL`, which would percent-encode the key.
 */

export const S3_SCHEME = 's3://';

export interface S3Address {
  bucket: string;
  /** Object key (or key prefix for a location), without leading or trailing '/'; '' for a bucket's root. */
  key: string;
}

/** S3 bucket naming rules (3–63 characters of a-z, 0-9, '.', '-'; letter or digit at both ends). */
const BUCKET_RE = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

export function isS3Uri(uri: string): boolean {
  return uri.startsWith(S3_SCHEME);
}

/** Splits an `s3://` URI into bucket and key, collapsing repeated and outer '/' in the key. */
export function parseS3Uri(uri: string): S3Address {
  if (!isS3Uri(uri)) throw new Error(`not an s3:// URI: ${JSON.stringify(uri)}`);
  const rest = uri.slice(S3_SCHEME.length);
  const slash = rest.indexOf('/');
  const bucket = slash < 0 ? rest : rest.slice(0, slash);
  if (!BUCKET_RE.test(bucket) || bucket.includes('..')) {
    throw new Error(`invalid S3 bucket name ${JSON.stringify(bucket)} in ${JSON.stringify(uri)}`);
  }
  const key = slash < 0 ? '' : rest.slice(slash + 1).split('/').filter(Boolean).join('/');
  return { bucket, key };
}

export function formatS3Uri(a: S3Address): string {
  return a.key ? `${S3_SCHEME}${a.bucket}/${a.key}` : `${S3_SCHEME}${a.bucket}`;
}

/** The key prefix that every object of a location starts with: '' or `prefix/`. */
export function locationPrefix(location: S3Address): string {
  return location.key ? `${location.key}/` : '';
}

/**
 * The key of a file instance: `<prefix>/<split>/<split>/…/<rest of the id>/data`, the same layout as
 * the file-system backend (FILES_REST_STORAGE_PATH_SPLIT_LENGTH and _DIMENSIONS).
 */
export function fileKey(location: S3Address, fileId: string, splitLength: number, dimensions: number): string {
  const parts: string[] = [];
  for (let i = 0; i < dimensions; i++) parts.push(fileId.slice(i * splitLength, (i + 1) * splitLength));
  parts.push(fileId.slice(dimensions * splitLength));
  return `${locationPrefix(location)}${parts.join('/')}/data`;
}

/** `x-amz-copy-source` value: bucket and key, each key segment percent-encoded. */
export function copySource(a: S3Address): string {
  return `${a.bucket}/${a.key.split('/').map(encodeURIComponent).join('/')}`;
}
