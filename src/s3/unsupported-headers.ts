/**
 * Request headers that ask for something files-rest does not offer: answered NotImplemented (501)
 * before anything is read or stored, never a silent success. A client that asked for server-side
 * encryption, an object lock or a public ACL and got 200 would believe its object encrypted,
 * undeletable or public while it is none of these (Ceph's S3 suite found them accepted and ignored).
 * A canned ACL that says what files-rest does anyway (`private`, and the bucket-owner ones: an
 * installation's keys share its buckets; for an object of a publicly readable bucket `public-read`
 * instead) is accepted: tools such as rclone and s3cmd can be set to send it.
 */
import { S3Error } from './errors.js';
import type { RequestHeaders } from './sigv4.js';

/** S3's canned ACLs; a value not among them is InvalidArgument (400), as S3 answers. */
const CANNED_ACLS: ReadonlySet<string> = new Set([
  'private', 'public-read', 'public-read-write', 'authenticated-read', 'aws-exec-read', 'bucket-owner-read', 'bucket-owner-full-control', 'log-delivery-write',
]);
/** The canned ACLs that say what files-rest does anyway; the others are NotImplemented. */
const ACCEPTED_CANNED_ACLS: ReadonlySet<string> = new Set(['private', 'bucket-owner-full-control', 'bucket-owner-read']);

/**
 * The refusal of an `x-amz-acl` value, or null when it says what files-rest does anyway: one S3
 * does not know is InvalidArgument (400), as S3 answers. For an object of a publicly readable
 * bucket (`publicObject`) only `public-read` is true (anyone may read it already); elsewhere
 * `private` and the bucket-owner ones are, and one granting more is NotImplemented. A client told
 * its object is private, or public, must be able to rely on it.
 */
export function cannedAclError(value: string, publicObject = false): S3Error | null {
  const v = value.trim().toLowerCase();
  if (!CANNED_ACLS.has(v)) return new S3Error('InvalidArgument', `x-amz-acl must be one of S3's canned ACLs (${[...CANNED_ACLS].join(', ')}).`, { ArgumentName: 'x-amz-acl', ArgumentValue: value });
  if (publicObject) {
    if (v === 'public-read') return null;
    return new S3Error('NotImplemented', `The canned ACL ${value} (x-amz-acl) is not supported here: this bucket is publicly readable, so each of its objects is readable by anyone (public-read); \`files-rest bucket set ID --public-read off\` makes them private.`);
  }
  if (ACCEPTED_CANNED_ACLS.has(v)) return null;
  const how = v === 'public-read' ? ' (an object is readable by anyone when its bucket is: `files-rest bucket set ID --public-read on`)' : '';
  return new S3Error('NotImplemented', `The canned ACL ${value} (x-amz-acl) is not supported by files-rest: every object is private to the installation's keys${how}.`);
}

/** True when a request carries a canned ACL (whose answer, for an object, depends on its bucket). */
export function carriesCannedAcl(headers: RequestHeaders): boolean {
  return headers.has('x-amz-acl');
}

/** Header name → what it asks for; any value is refused. */
const REFUSED: ReadonlyMap<string, string> = new Map([
  ['x-amz-server-side-encryption', 'Server-side encryption'],
  ['x-amz-server-side-encryption-aws-kms-key-id', 'Server-side encryption with KMS keys'],
  ['x-amz-server-side-encryption-context', 'Server-side encryption with KMS keys'],
  ['x-amz-server-side-encryption-bucket-key-enabled', 'Server-side encryption with bucket keys'],
  ['x-amz-server-side-encryption-customer-algorithm', 'Server-side encryption with customer keys (SSE-C)'],
  ['x-amz-server-side-encryption-customer-key', 'Server-side encryption with customer keys (SSE-C)'],
  ['x-amz-server-side-encryption-customer-key-md5', 'Server-side encryption with customer keys (SSE-C)'],
  ['x-amz-copy-source-server-side-encryption-customer-algorithm', 'Server-side encryption with customer keys (SSE-C)'],
  ['x-amz-copy-source-server-side-encryption-customer-key', 'Server-side encryption with customer keys (SSE-C)'],
  ['x-amz-copy-source-server-side-encryption-customer-key-md5', 'Server-side encryption with customer keys (SSE-C)'],
  ['x-amz-object-lock-mode', 'Object Lock'],
  ['x-amz-object-lock-retain-until-date', 'Object Lock'],
  ['x-amz-object-lock-legal-hold', 'Object Lock legal hold'],
  ['x-amz-grant-read', 'Access control grants (ACLs)'],
  ['x-amz-grant-write', 'Access control grants (ACLs)'],
  ['x-amz-grant-read-acp', 'Access control grants (ACLs)'],
  ['x-amz-grant-write-acp', 'Access control grants (ACLs)'],
  ['x-amz-grant-full-control', 'Access control grants (ACLs)'],
  ['x-amz-website-redirect-location', 'Website redirects'],
  // S3 Express One Zone's append: ignored, a PutObject would replace the object it meant to extend.
  ['x-amz-write-offset-bytes', 'Appending to an object'],
]);

/**
 * S3's storage classes of immediate access: they differ from STANDARD in price and in how many
 * copies AWS keeps, not in what a client may do with the object. files-rest has one way of storing
 * an object, so a request for one of them is served and the object reported as STANDARD, as it is.
 */
const IMMEDIATE_CLASSES: ReadonlySet<string> = new Set(['STANDARD', 'REDUCED_REDUNDANCY', 'STANDARD_IA', 'ONEZONE_IA', 'INTELLIGENT_TIERING', 'GLACIER_IR']);
/** The others: archives (an object must be restored before it is read) and special hardware. */
const OTHER_CLASSES: ReadonlySet<string> = new Set(['GLACIER', 'DEEP_ARCHIVE', 'OUTPOSTS', 'SNOW', 'EXPRESS_ONEZONE', 'FSX_OPENZFS']);

/**
 * The refusal of an `x-amz-storage-class` value, or null for a class of immediate access: a name S3
 * does not know is InvalidStorageClass (400), as S3 answers; an archive or hardware class is
 * NotImplemented: a client that archived an object expects its rules (a restore before a read), and
 * a 200 would leave it believing the object archived.
 */
function storageClassError(value: string): S3Error | null {
  const v = value.trim();
  if (IMMEDIATE_CLASSES.has(v)) return null;
  if (!OTHER_CLASSES.has(v)) return new S3Error('InvalidStorageClass', 'The storage class you specified is not valid', { StorageClassRequested: value });
  return new S3Error('NotImplemented', `The storage class ${v} (x-amz-storage-class) is not supported by files-rest: objects are stored for immediate access (STANDARD, REDUCED_REDUNDANCY, STANDARD_IA, ONEZONE_IA, INTELLIGENT_TIERING and GLACIER_IR are accepted and stored as STANDARD).`);
}

/**
 * The refusal of a header's values, each judged by `judge`: an unknown value's (4xx) before a
 * NotImplemented, as S3 refuses the unknown value first; null when every value is accepted.
 */
function valueRefusal(values: readonly string[] | undefined, judge: (value: string) => S3Error | null): S3Error | null {
  const refusals = (values ?? []).map(judge).filter((e) => e !== null);
  return refusals.find((e) => e.status < 500) ?? refusals[0] ?? null;
}

/**
 * The NotImplemented answer for a request carrying such a header, or null. `publicObject`: the
 * request writes an object of a publicly readable bucket (see cannedAclError).
 */
export function unsupportedHeaderError(headers: RequestHeaders, publicObject = false): S3Error | null {
  for (const name of headers.keys()) {
    const what = REFUSED.get(name);
    if (what) return new S3Error('NotImplemented', `${what} (${name}) is not supported by files-rest.`);
  }
  const refusal = valueRefusal(headers.get('x-amz-acl'), (v) => cannedAclError(v, publicObject)) ?? valueRefusal(headers.get('x-amz-storage-class'), storageClassError);
  if (refusal) return refusal;
  const lock = headers.get('x-amz-bucket-object-lock-enabled');
  if (lock && lock.some((v) => v.trim().toLowerCase() !== 'false')) {
    return new S3Error('NotImplemented', 'Object Lock (x-amz-bucket-object-lock-enabled) is not supported by files-rest.');
  }
  return null;
}
