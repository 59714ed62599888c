/**
 * PostObject: an upload as an HTML form (`POST /<bucket>`, multipart/form-data), signed inside the
 * form rather than in a header, as browsers and the SDKs' presigned POSTs send it
 * (`generate_presigned_post`, `createPresignedPost`). The form's fields come before its `file` part:
 * they are read and checked (signature, policy, permission) before a byte of the file is, and the
 * file is streamed to the domain's upload as a PutObject body would be.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { isAppError } from '../errors.js';
import { formFile, type FormFile } from '../http/form-file.js';
import { watchBody } from '../http/body-watch.js';
import { putObject } from '../domain/objects.js';
import type { Bucket, ObjectVersion } from '../domain/models.js';
import type { Identity } from '../auth/permissions.js';
import type { ExpectedDigest } from '../domain/receive.js';
import { algorithmOfHeader, CHECKSUM_ALGORITHMS, checkChecksum, createChecksumHasher, parseContentMd5, validateChecksumValue, type ChecksumHasher } from './checksums.js';
import { isS3Error, S3Error } from './errors.js';
import { etagOf, metadataOf } from './objects.js';
import { checkPostPolicy, parsePostPolicy, policySizeRange, type PostPolicy } from './post-policy.js';
import { authorize, continueBody, header, sendEmpty, sendXml, type S3Request } from './request.js';
import { parseLongDate } from './sigv4.js';
import { signingKey } from './signing-key.js';
import { parseTagging } from './tagging.js';
import { unsupportedHeaderError } from './unsupported-headers.js';
import { el } from './xml.js';

/** At most this many fields before the file, each at most this long (S3 allows 20 KB of fields). */
const MAX_FIELDS = 100;
const MAX_FIELD_SIZE = 20 * 1024;

/** Whether a request is a form upload (PostObject) rather than another POST to a bucket. */
export function isFormUpload(contentType: string | undefined): boolean {
  return contentType !== undefined && /^multipart\/form-data\s*;/i.test(contentType);
}

/** The form's fields by lower-case name (S3 reads field names without case). */
function fieldMap(form: FormFile): Map<string, string> {
  const m = new Map<string, string>();
  for (const [k, v] of Object.entries(form.fields)) m.set(k.toLowerCase(), v);
  return m;
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Who signed the form: SigV4 (`x-amz-algorithm`, `x-amz-credential`, `x-amz-date`,
 * `x-amz-signature`: HMAC-SHA256 of the policy under the day's signing key) or SigV2
 * (`AWSAccessKeyId`, `signature`: base64 HMAC-SHA1 of the policy); null for an unsigned form.
 */
async function formSigner(r: S3Request, fields: Map<string, string>): Promise<{ identity: Identity; policy: PostPolicy } | null> {
  const policyText = fields.get('policy');
  const v4 = fields.get('x-amz-signature');
  const v2 = fields.get('signature');
  // Temporary credentials (STS) are not offered: a form carrying a session token is refused, as a header's is.
  if (fields.has('x-amz-security-token')) throw new S3Error('InvalidToken', 'Session tokens are not supported.');
  if (v4 === undefined && v2 === undefined && !fields.has('awsaccesskeyid') && !fields.has('x-amz-credential')) return null;
  if (policyText === undefined) throw new S3Error('InvalidArgument', "Bucket POST must contain a field named 'policy'. If it is specified, please check the order of the fields.", { ArgumentName: 'policy' });
  let accessKeyId: string;
  let check: (secret: string) => boolean;
  if (v4 !== undefined || fields.has('x-amz-credential')) {
    const algorithm = fields.get('x-amz-algorithm');
    if (algorithm !== 'AWS4-HMAC-SHA256') throw new S3Error('InvalidArgument', `Bucket POST signed with SigV4 must name x-amz-algorithm AWS4-HMAC-SHA256${algorithm === undefined ? '' : `, not ${algorithm}`}.`, { ArgumentName: 'x-amz-algorithm' });
    const credential = fields.get('x-amz-credential') ?? '';
    const parts = credential.split('/');
    const date = fields.get('x-amz-date') ?? '';
    if (parts.length !== 5 || parts[3] !== 's3' || parts[4] !== 'aws4_request' || !/^\d{8}$/.test(parts[1]!) || parts[0] === '' || parts[2] === '') {
      throw new S3Error('InvalidArgument', 'x-amz-credential must be <access key>/<YYYYMMDD>/<region>/s3/aws4_request.', { ArgumentName: 'x-amz-credential' });
    }
    if (!parseLongDate(date) || date.slice(0, 8) !== parts[1]) throw new S3Error('InvalidArgument', 'x-amz-date must be YYYYMMDDTHHMMSSZ of the day x-amz-credential names.', { ArgumentName: 'x-amz-date' });
    if (v4 === undefined) throw new S3Error('InvalidArgument', "Bucket POST must contain a field named 'x-amz-signature'.", { ArgumentName: 'x-amz-signature' });
    accessKeyId = parts[0]!;
    const [, day, region] = parts as [string, string, string];
    check = (secret) => sameText(signingKey(secret, day, region).sign(policyText).toString('hex'), v4.toLowerCase());
  } else {
    const id = fields.get('awsaccesskeyid');
    if (id === undefined || v2 === undefined) throw new S3Error('InvalidArgument', "Bucket POST signed with SigV2 must contain the fields 'AWSAccessKeyId' and 'signature'.");
    accessKeyId = id;
    check = (secret) => sameText(createHmac('sha1', secret).update(policyText).digest('base64'), v2);
  }
  const key = await r.findAccessKey(accessKeyId);
  if (!key) throw new S3Error('InvalidAccessKeyId', undefined, { AWSAccessKeyId: accessKeyId });
  if (!check(key.secret)) throw new S3Error('SignatureDoesNotMatch', 'The request signature we calculated does not match the signature you provided: the form signs its policy field.');
  return { identity: key.identity, policy: parsePostPolicy(policyText) };
}

/**
 * The checksums a form asks to be verified: `Content-MD5` (the domain checks it), and one
 * `x-amz-checksum-<algorithm>` (computed as the file streams, compared before the commit, stored and
 * answered as a PutObject's).
 */
async function checksumFields(fields: Map<string, string>): Promise<{ md5: ExpectedDigest[]; checksums: { header: string; expected: string; hasher: ChecksumHasher }[] }> {
  const md5: ExpectedDigest[] = [];
  const checksums: { header: string; expected: string; hasher: ChecksumHasher }[] = [];
  for (const [name, value] of fields) {
    if (name === 'content-md5') {
      const digest = parseContentMd5(value);
      if (isS3Error(digest)) throw digest;
      md5.push({ algorithm: 'md5', value: digest, header: 'Content-MD5' });
      continue;
    }
    if (!name.startsWith('x-amz-checksum-')) continue;
    const algorithm = algorithmOfHeader(name);
    if (!algorithm) throw new S3Error('InvalidRequest', `The form field ${name} names no checksum algorithm S3 has (${CHECKSUM_ALGORITHMS.join(', ')}).`);
    const bad = validateChecksumValue(algorithm, value);
    if (bad) throw bad;
    checksums.push({ header: name, expected: value, hasher: await createChecksumHasher(algorithm) });
  }
  if (checksums.length > 1) throw new S3Error('InvalidRequest', 'Expecting a single x-amz-checksum- field.');
  return { md5, checksums };
}

/** Fields stored with the object as the headers of a PutObject would be, and answered as headers. */
const HEADER_FIELDS = /^(content-type|content-disposition|content-encoding|content-language|cache-control|expires|x-amz-meta-.+)$/;
/** What a header value may hold, seen as bytes (tab, printable ASCII, and bytes of UTF-8 text). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * The form's fields as the request headers a PutObject would carry (metadata, Content-Type, …).
 * A field's text is UTF-8; a header's value reaches the door as its bytes (one character each), so
 * the field is stored as those bytes, as the same value sent in a header would be. A value no header
 * could carry (a control character, a line break) is InvalidArgument: it could never be answered.
 */
function fieldsAsHeaders(fields: Map<string, string>): Map<string, string[]> {
  const h = new Map<string, string[]>();
  for (const [k, v] of fields) {
    if (!HEADER_FIELDS.test(k)) {
      h.set(k === 'acl' ? 'x-amz-acl' : k, [v]);
      continue;
    }
    const bytes = Buffer.from(v, 'utf8').toString('latin1');
    if (!HEADER_VALUE.test(bytes)) throw new S3Error('InvalidArgument', `The form field ${k} holds a character a header cannot carry.`, { ArgumentName: k });
    h.set(k, [bytes]);
  }
  return h;
}

/** Counts the file's bytes against the policy's content-length-range maximum, refusing past it. */
class SizeCap extends Transform {
  bytes = 0;
  /** The refusal, once the file has passed the maximum. */
  failure: S3Error | null = null;
  constructor(private readonly max: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes <= this.max) return done(null, chunk);
    this.failure = new S3Error('EntityTooLarge', "Your proposed upload exceeds the maximum allowed size (the policy's content-length-range).", { MaxSizeAllowed: String(this.max) });
    done(this.failure);
  }
}

/** Where the redirect of `success_action_redirect` goes: the URL with bucket, key and ETag added. */
function redirectTo(url: string, bucket: string, key: string, etag: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
  u.searchParams.append('bucket', bucket);
  u.searchParams.append('key', key);
  u.searchParams.append('etag', etag);
  return u.toString();
}

export async function postObjectOp(r: S3Request, bucket: Bucket): Promise<void> {
  continueBody(r);
  // A form that stalls, before its file part as within it, is cut after FILES_REST_BODY_IDLE_TIMEOUT.
  const watch = watchBody(r.req, r.ctx.config.bodyIdleTimeout, r.log);
  let form: FormFile;
  try {
    form = await watch.until(formFile(r.req, { fields: MAX_FIELDS, fieldSize: MAX_FIELD_SIZE, fileByName: true }));
  } catch (e) {
    watch.done();
    if (isAppError(e, 'INVALID_UPLOAD_REQUEST')) throw new S3Error('MalformedPOSTRequest', `The body of your POST request is not well-formed multipart/form-data: ${e.message}`);
    throw e;
  }
  let version: ObjectVersion;
  let key: string;
  let cap: SizeCap | null = null;
  const fields = fieldMap(form);
  let metadata: Record<string, string> = {};
  try {
    const rawKey = fields.get('key');
    if (rawKey === undefined || rawKey === '') throw new S3Error('InvalidArgument', "Bucket POST must contain a field named 'key'. If it is specified, please check the order of the fields.", { ArgumentName: 'key' });
    // `${filename}` in the key is the name of the file the browser sent; the policy judges the key it makes.
    key = rawKey.replaceAll('${filename}', (form.filename ?? '').replace(/^.*[\\/]/, ''));
    fields.set('key', key);
    const signer = await formSigner(r, fields);
    const policy = signer?.policy ?? (fields.has('policy') ? parsePostPolicy(fields.get('policy')!) : null);
    if (policy) checkPostPolicy(policy, fields, r.bucketName);
    const asRequest: S3Request = { ...r, key, identity: signer?.identity ?? r.identity, headers: fieldsAsHeaders(fields) };
    await authorize(asRequest, 'bucket-update', { type: 'bucket', bucketId: bucket.id, key });
    const sums = await checksumFields(fields);
    const unsupported = unsupportedHeaderError(asRequest.headers, bucket.publicRead === true);
    if (unsupported) throw unsupported;
    metadata = metadataOf(asRequest);
    const taggingText = fields.get('tagging');
    const tags = taggingText === undefined ? undefined : parseTagging(taggingText);
    const range = policy ? policySizeRange(policy) : null;
    cap = range ? new SizeCap(range.max) : null;
    version = await putObject(r.ctx, {
      bucketId: bucket.id,
      bucket,
      key,
      source: form.stream,
      through: cap ? [cap] : [],
      observers: sums.checksums.map((c) => c.hasher),
      expectedDigests: sums.md5,
      declaredSize: null,
      contentType: header(asRequest, 'content-type'),
      signal: watch.signal,
      ...(tags ? { tags } : {}),
      verify: (meter) => {
        if (range && meter.bytes < range.min) throw new S3Error('EntityTooSmall', "Your proposed upload is smaller than the minimum allowed size (the policy's content-length-range).", { MinSizeAllowed: String(range.min) });
        for (const c of sums.checksums) {
          const actual = c.hasher.digest();
          const refused = checkChecksum(c.hasher.algorithm, c.expected, actual);
          if (refused) throw refused;
          metadata[c.header] = actual;
          metadata['x-amz-checksum-type'] = 'FULL_OBJECT';
        }
      },
      metadata,
    });
  } catch (e) {
    form.stream.destroy();
    if (isAppError(watch.signal.reason, 'UPLOAD_TIMEOUT')) throw watch.signal.reason;
    if (cap?.failure) throw cap.failure;
    if (isAppError(e, 'INVALID_UPLOAD_REQUEST')) throw new S3Error('MalformedPOSTRequest', `The body of your POST request is not well-formed multipart/form-data: ${e.message}`);
    throw e;
  } finally {
    watch.done();
  }
  const etag = etagOf(version);
  const host = r.req.headers.host ?? '';
  const location = `http://${host}/${encodeURIComponent(r.bucketName)}/${key.split('/').map(encodeURIComponent).join('/')}`;
  const headers: Record<string, string> = { etag, location, 'x-amz-version-id': version.versionId };
  for (const [k, v] of Object.entries(metadata)) if (k.startsWith('x-amz-checksum-')) headers[k] = v;
  const redirect = fields.get('success_action_redirect') ?? fields.get('redirect');
  const target = redirect === undefined ? null : redirectTo(redirect, r.bucketName, key, etag);
  if (target) return sendEmpty(r, 303, { ...headers, location: target });
  const status = fields.get('success_action_status');
  if (status === '201') {
    return sendXml(r, `<?xml version="1.0" encoding="UTF-8"?>\n<PostResponse>${el('Location', location)}${el('Bucket', r.bucketName)}${el('Key', key)}${el('ETag', etag)}</PostResponse>`, 201, headers);
  }
  sendEmpty(r, status === '200' ? 200 : 204, headers);
}
