/**
 * AWS Signature Version 2 (HMAC-SHA1), the signature of S3's older clients and of presigned URLs
 * that boto3 and s3cmd still make by default (`generate_presigned_url`, `s3cmd signurl`):
 * `?AWSAccessKeyId=…&Expires=…&Signature=…` in the query, or `Authorization: AWS <id>:<signature>`.
 *
 * The string to sign is the method, Content-MD5, Content-Type, the date (a presigned URL's Expires),
 * the `x-amz-*` headers (lower-case, sorted, repeated values joined with `,`), and the resource: the
 * path as sent, then the sub-resources S3 signs (`?acl`, `?uploadId=…`, `response-*` overrides, …)
 * sorted, their values decoded. SigV2 does not sign the body: a request so signed is an
 * UNSIGNED-PAYLOAD request (a Content-MD5 it carries is signed, and checked against the body).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { S3Error } from './errors.js';
import { headerText, MAX_CLOCK_SKEW_MS, oneMechanismOnly, parseLongDate, type RequestHeaders } from './sigv4.js';

/** A request's SigV2 credentials, parsed, not yet verified. */
export interface ParsedSigV2 {
  readonly version: 2;
  readonly kind: 'header' | 'presigned';
  readonly accessKeyId: string;
  /** The signature given, base64 of the HMAC-SHA1. */
  readonly signature: Buffer;
  /** The strings the signature may sign (the date position of a header-signed request read two ways). */
  readonly stringsToSign: readonly string[];
  /** Header: the request time; presigned: when the URL expires. */
  readonly date: Date;
}

/** A verified SigV2 request: its body is not signed. */
export interface VerifiedSigV2 {
  readonly version: 2;
  readonly accessKeyId: string;
  readonly payload: 'UNSIGNED-PAYLOAD';
  readonly payloadSha256: undefined;
}

/**
 * The query parameters that are part of the signed resource, as botocore's HmacV1Auth and S3 list
 * them; any other parameter is not signed.
 */
const SIGNED_SUBRESOURCES = new Set([
  'accelerate', 'acl', 'analytics', 'cors', 'defaultObjectAcl', 'delete', 'inventory', 'lifecycle', 'location', 'logging', 'metrics',
  'notification', 'object-lock', 'partNumber', 'policy', 'replication', 'requestPayment', 'restore', 'select', 'select-type', 'storageClass',
  'tagging', 'torrent', 'uploadId', 'uploads', 'versionId', 'versioning', 'versions', 'website',
  'response-cache-control', 'response-content-disposition', 'response-content-encoding', 'response-content-language', 'response-content-type', 'response-expires',
]);

/** A query naming a SigV2 parameter (AWSAccessKeyId, Signature). */
const SIGV2_QUERY = /(?:^|&)(?:AWSAccessKeyId|Signature)(?:=|&|$)/;
const SIGNATURE_BASE64 = /^[A-Za-z0-9+/]{27}=$/;
const ACCESS_KEY_ID = /^[\x21-\x7e]{1,128}$/;

/** Percent-decoding as botocore's `unquote` does it: a `+` stays a `+`. */
function decode(value: string): string | null {
  try {
    return decodeURIComponent(value);
  } catch {
    return null;
  }
}

/**
 * `x-amz-*` headers as SigV2 signs them: lower-case names, sorted, values trimmed, repeated ones joined
 * with `,`. A presigned URL's `x-amz-meta-*` query parameters count as headers (boto 2's generate_url
 * moves the metadata it signs there; S3 and Ceph RGW sign them so), unless sent as headers as well.
 */
function canonicalAmzHeaders(headers: RequestHeaders, fromQuery: readonly { name: string; value: string | null }[] = []): string {
  const all = new Map<string, readonly string[]>();
  for (const [n, v] of headers) if (n.startsWith('x-amz-')) all.set(n, v);
  for (const p of fromQuery) {
    const n = p.name.toLowerCase();
    if (!n.startsWith('x-amz-meta-') || headers.has(n)) continue;
    all.set(n, [...(all.get(n) ?? []), p.value === null ? '' : decode(p.value) ?? p.value]);
  }
  const names = [...all.keys()].sort();
  return names.map((n) => `${n}:${all.get(n)!.map((v) => v.replace(/\s+/g, ' ').trim()).join(',')}\n`).join('');
}

/**
 * The path as sent, then the signed sub-resources sorted by name, values decoded. A bucket's own
 * path is `/bucket/` (botocore signs that for `/bucket`, as virtual-hosted requests sign it).
 */
function canonicalResources(rawPath: string, params: readonly { name: string; value: string | null }[]): string[] | S3Error {
  const signed: [string, string | null][] = [];
  for (const p of params) {
    if (!SIGNED_SUBRESOURCES.has(p.name)) continue;
    const v = p.value === null ? null : decode(p.value);
    if (p.value !== null && v === null) return new S3Error('InvalidArgument', `The query parameter ${p.name} is not URL-encoded.`, { ArgumentName: p.name });
    signed.push([p.name, v]);
  }
  signed.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const query = signed.length === 0 ? '' : `?${signed.map(([n, v]) => (v === null ? n : `${n}=${v}`)).join('&')}`;
  const paths = /^\/[^/]+$/.test(rawPath) ? [`${rawPath}/`, rawPath] : [rawPath];
  return paths.map((path) => `${path}${query}`);
}

function splitQuery(rawQuery: string): { name: string; value: string | null }[] {
  if (rawQuery === '') return [];
  return rawQuery.split('&').filter((s) => s !== '').map((item) => {
    const eq = item.indexOf('=');
    const rawName = eq < 0 ? item : item.slice(0, eq);
    return { name: decode(rawName) ?? rawName, value: eq < 0 ? null : item.slice(eq + 1) };
  });
}

function parseSignature(text: string): Buffer | S3Error {
  if (!SIGNATURE_BASE64.test(text)) return new S3Error('AccessDenied', 'The SigV2 signature is not the base64 of an HMAC-SHA1.');
  return Buffer.from(text, 'base64');
}

/**
 * The request's SigV2 credentials: null when it has none (the caller tries SigV4, or takes it as
 * anonymous); an S3Error when they cannot be used.
 */
export function parseSigV2(input: { method: string; rawPath: string; rawQuery: string; headers: RequestHeaders }): ParsedSigV2 | S3Error | null {
  const { headers } = input;
  const authorization = headerText(headers, 'authorization')?.trim();
  const headerSigned = authorization !== undefined && authorization.startsWith('AWS ');
  // Most requests are SigV4: they cost this test, not a parse of their query.
  if (!headerSigned && !SIGV2_QUERY.test(input.rawQuery)) return null;
  const params = splitQuery(input.rawQuery);
  const param = (name: string) => params.find((p) => p.name === name);
  const querySigned = param('AWSAccessKeyId') !== undefined || param('Signature') !== undefined;
  if (!headerSigned && !querySigned) return null;
  if ((headerSigned && (querySigned || param('X-Amz-Algorithm') !== undefined)) || (querySigned && (authorization !== undefined || param('X-Amz-Algorithm') !== undefined))) {
    return oneMechanismOnly();
  }
  if (headers.has('x-amz-security-token') || param('x-amz-security-token') !== undefined) return new S3Error('InvalidToken', 'Session tokens are not supported.');
  const resources = canonicalResources(input.rawPath, params);
  if (resources instanceof S3Error) return resources;
  const head = `${input.method}\n${headerText(headers, 'content-md5')?.trim() ?? ''}\n${headerText(headers, 'content-type')?.trim() ?? ''}\n`;
  const amz = canonicalAmzHeaders(headers, headerSigned ? [] : params);

  if (headerSigned) {
    const credentials = authorization.slice(4).trim();
    const colon = credentials.lastIndexOf(':');
    const accessKeyId = colon > 0 ? credentials.slice(0, colon) : '';
    if (!ACCESS_KEY_ID.test(accessKeyId)) return new S3Error('InvalidArgument', 'AWS authorization header is invalid.  Expected AwsAccessKeyId:signature', { ArgumentName: 'Authorization' });
    const signature = parseSignature(credentials.slice(colon + 1));
    if (signature instanceof S3Error) return signature;
    // x-amz-date, when sent, is the request's time, and the date position is empty (S3's rule); some
    // clients put the Date header's value there anyway (botocore always sends Date).
    const amzDate = headerText(headers, 'x-amz-date')?.trim();
    const httpDate = headerText(headers, 'date')?.trim();
    const dateText = amzDate ?? httpDate;
    const date = dateText === undefined ? undefined : parseLongDate(dateText) ?? parseHttpDate(dateText);
    // A date before 1970 is no valid request time (S3 and RGW: AccessDenied, not a skew).
    if (!date || date.getTime() < 0) return new S3Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
    const positions = new Set<string>(amzDate !== undefined ? ['', httpDate ?? ''] : [httpDate ?? '']);
    const stringsToSign = [...positions].flatMap((d) => resources.map((resource) => `${head}${d}\n${amz}${resource}`));
    return { version: 2, kind: 'header', accessKeyId, signature, date, stringsToSign };
  }

  const id = param('AWSAccessKeyId')?.value;
  const sig = param('Signature')?.value;
  const expires = param('Expires')?.value;
  if (id == null || sig == null || expires == null) {
    return new S3Error('AccessDenied', 'Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters');
  }
  const accessKeyId = decode(id);
  const signatureText = decode(sig);
  if (accessKeyId === null || !ACCESS_KEY_ID.test(accessKeyId) || signatureText === null) return new S3Error('AccessDenied', 'The AWSAccessKeyId or Signature parameter is malformed.');
  const signature = parseSignature(signatureText);
  if (signature instanceof S3Error) return signature;
  if (!/^\d{1,12}$/.test(expires)) return new S3Error('AccessDenied', 'Invalid date (should be seconds since epoch): ' + expires.slice(0, 40));
  return { version: 2, kind: 'presigned', accessKeyId, signature, date: new Date(Number(expires) * 1000), stringsToSign: resources.map((resource) => `${head}${expires}\n${amz}${resource}`) };
}

function parseHttpDate(text: string): Date | undefined {
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : new Date(ms);
}

/** Checks the time (skew, or expiry) and the signature under `secret`. */
export function verifySigV2(parsed: ParsedSigV2, secret: string, now: Date): VerifiedSigV2 | S3Error {
  if (parsed.kind === 'header') {
    if (Math.abs(now.getTime() - parsed.date.getTime()) > MAX_CLOCK_SKEW_MS) {
      return new S3Error('RequestTimeTooSkewed', undefined, { RequestTime: parsed.date.toUTCString(), ServerTime: now.toUTCString(), MaxAllowedSkewMilliseconds: String(MAX_CLOCK_SKEW_MS) });
    }
  } else if (now.getTime() > parsed.date.getTime()) {
    return new S3Error('AccessDenied', 'Request has expired', { Expires: parsed.date.toISOString(), ServerTime: now.toISOString() });
  }
  const match = parsed.stringsToSign.some((sts) => timingSafeEqual(createHmac('sha1', secret).update(sts, 'utf8').digest(), parsed.signature));
  if (!match) {
    return new S3Error('SignatureDoesNotMatch', undefined, {
      AWSAccessKeyId: parsed.accessKeyId,
      StringToSign: parsed.stringsToSign[0]!,
      SignatureProvided: parsed.signature.toString('base64'),
    });
  }
  return { version: 2, accessKeyId: parsed.accessKeyId, payload: 'UNSIGNED-PAYLOAD', payloadSha256: undefined };
}
