/**
 * CORS on the S3 door, as S3 does it: a bucket's CORS configuration (PutBucketCors, GetBucketCors,
 * DeleteBucketCors) says which web origins may send which requests; a browser's preflight
 * (OPTIONS, never signed) is answered from it, and every request from an allowed origin gets the
 * Access-Control-* headers that let the page read the answer. A bucket without a configuration
 * follows FILES_REST_CORS_ORIGINS (the REST door's setting) when it is set.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Config } from '../config.js';
import type { Executor } from '../db/schema.js';
import { CORS_METHODS, findBucketCors, setBucketCors, type CorsRule } from '../domain/bucket-cors.js';
import type { Bucket } from '../domain/models.js';
import { S3Error } from './errors.js';
import { isBucketId } from './names.js';
import { readSmallBody } from './payload.js';
import { authorize, sendEmpty, sendXml, type S3Request } from './request.js';
import { headerText, type RequestHeaders } from './sigv4.js';
import { doc, el, parseXml, type XmlElement } from './xml.js';

/** The response headers a page may read under the default rule (FILES_REST_CORS_ORIGINS). */
export const S3_EXPOSED_HEADERS = [
  'ETag', 'Content-Length', 'Content-Range', 'Content-Disposition', 'Content-Encoding', 'Last-Modified',
  'x-amz-version-id', 'x-amz-delete-marker', 'x-amz-request-id', 'x-amz-id-2', 'x-amz-mp-parts-count', 'x-amz-tagging-count',
  'x-amz-checksum-crc32', 'x-amz-checksum-crc32c', 'x-amz-checksum-crc64nvme', 'x-amz-checksum-sha1', 'x-amz-checksum-sha256', 'x-amz-checksum-type',
];

/** The rule a bucket without a configuration follows when FILES_REST_CORS_ORIGINS is set, else null. */
export function defaultCorsRule(config: Pick<Config, 'corsOrigins'>): CorsRule | null {
  if (config.corsOrigins.length === 0) return null;
  return {
    allowedOrigins: [...config.corsOrigins],
    allowedMethods: [...CORS_METHODS],
    allowedHeaders: ['*'],
    exposeHeaders: S3_EXPOSED_HEADERS,
    maxAgeSeconds: 600,
  };
}

/** Whether `value` matches `pattern`, whose one `*` (if any) stands for any text. */
function wildcardMatch(pattern: string, value: string): boolean {
  const star = pattern.indexOf('*');
  if (star === -1) return pattern === value;
  const head = pattern.slice(0, star);
  const tail = pattern.slice(star + 1);
  return value.length >= head.length + tail.length && value.startsWith(head) && value.endsWith(tail);
}

/** A request's `Access-Control-Request-Headers`, split (lower case, as browsers send them). */
function requestedHeaders(value: string | undefined): string[] {
  if (value === undefined) return [];
  return value
    .split(',')
    .map((h) => h.trim().toLowerCase())
    .filter((h) => h !== '');
}

/**
 * The first rule allowing a request from `origin` with `method` (and, for a preflight, every header
 * it asks for), as S3 evaluates a configuration: in order, the first match wins.
 */
export function matchCorsRule(rules: readonly CorsRule[], origin: string, method: string, headers: readonly string[] = []): CorsRule | null {
  for (const rule of rules) {
    if (!rule.allowedOrigins.some((o) => wildcardMatch(o, origin))) continue;
    if (!rule.allowedMethods.includes(method)) continue;
    const allowed = rule.allowedHeaders.map((h) => h.toLowerCase());
    if (!headers.every((h) => allowed.some((a) => wildcardMatch(a, h)))) continue;
    return rule;
  }
  return null;
}

/** The CORS answer headers for an allowed request. */
function allowHeaders(rule: CorsRule, origin: string, signed: boolean, fromBucket: boolean): Record<string, string> {
  // A rule for any origin answers `*`, unless the request is signed (then the origin itself, as RGW).
  const any = rule.allowedOrigins.includes('*') && !rule.allowedOrigins.some((o) => wildcardMatch(o, origin) && o !== '*');
  const h: Record<string, string> = {
    'access-control-allow-origin': any && !signed ? '*' : origin,
    'access-control-allow-methods': rule.allowedMethods.join(', '),
  };
  // A bucket's own rule for named origins allows credentials, as S3; the default rule never does (as the REST door).
  if (fromBucket && h['access-control-allow-origin'] !== '*') h['access-control-allow-credentials'] = 'true';
  if (rule.exposeHeaders.length > 0) h['access-control-expose-headers'] = rule.exposeHeaders.join(', ');
  if (rule.maxAgeSeconds !== undefined) h['access-control-max-age'] = String(rule.maxAgeSeconds);
  return h;
}

/** The rules a request to `bucketName` is judged by: the bucket's, else the default; null when none. */
async function rulesFor(db: Executor, config: Config, bucketName: string): Promise<{ rules: CorsRule[]; fromBucket: boolean } | null> {
  const found = bucketName === '' ? null : await findBucketCors(db, isBucketId(bucketName) ? { id: bucketName } : { name: bucketName });
  if (found?.rules) return { rules: found.rules, fromBucket: true };
  const fallback = defaultCorsRule(config);
  return fallback ? { rules: [fallback], fromBucket: false } : null;
}

const VARY = 'Origin, Access-Control-Request-Headers, Access-Control-Request-Method';

/** Whether a request is signed (an Authorization header, or a presigned URL's signature). */
function isSigned(headers: RequestHeaders, query: URLSearchParams): boolean {
  return headers.has('authorization') || query.has('X-Amz-Signature') || query.has('Signature');
}

/**
 * A browser's preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`), answered
 * without authentication as S3 does: 200 with the Access-Control-* headers when a rule allows it,
 * otherwise 403 AccessForbidden; 400 when the request names no origin or no valid method.
 */
export async function answerPreflight(
  db: Executor,
  config: Config,
  res: ServerResponse,
  headers: RequestHeaders,
  query: URLSearchParams,
  bucketName: string,
): Promise<void> {
  const origin = headerText(headers, 'origin');
  if (origin === undefined || origin === '') throw new S3Error('BadRequest', 'Insufficient information. Origin request header needed.');
  const method = headerText(headers, 'access-control-request-method');
  if (method === undefined || !(CORS_METHODS as readonly string[]).includes(method)) {
    throw new S3Error('BadRequest', `Invalid Access-Control-Request-Method: ${method ?? '(none)'}`);
  }
  const asked = requestedHeaders(headerText(headers, 'access-control-request-headers'));
  const judged = await rulesFor(db, config, bucketName);
  const rule = judged ? matchCorsRule(judged.rules, origin, method, asked) : null;
  if (!judged || !rule) {
    throw new S3Error(
      'AccessForbidden',
      judged ? undefined : 'CORSResponse: This CORS request is not allowed: the bucket has no CORS configuration.',
      { Method: method, ResourceType: 'BUCKET' },
    );
  }
  const h = allowHeaders(rule, origin, isSigned(headers, query), judged.fromBucket);
  if (asked.length > 0) h['access-control-allow-headers'] = asked.join(', ');
  h.vary = VARY;
  res.writeHead(200, { ...h, 'content-length': '0' });
  res.end();
}

/**
 * Sets the Access-Control-* headers on the answer to a request from a web page (one with an
 * `Origin`) when a rule allows its origin and method, before the operation runs, so that a
 * refusal is readable by the page too. Nothing is set otherwise: the browser then hides the answer.
 */
export async function applyCors(db: Executor, config: Config, req: IncomingMessage, res: ServerResponse, headers: RequestHeaders, query: URLSearchParams, bucketName: string): Promise<void> {
  const origin = headerText(headers, 'origin');
  if (origin === undefined || origin === '') return;
  const judged = await rulesFor(db, config, bucketName);
  if (!judged) return;
  res.setHeader('vary', VARY);
  const rule = matchCorsRule(judged.rules, origin, req.method ?? 'GET');
  if (!rule) return;
  for (const [name, value] of Object.entries(allowHeaders(rule, origin, isSigned(headers, query), judged.fromBucket))) res.setHeader(name, value);
}

// ---- PutBucketCors, GetBucketCors, DeleteBucketCors ----

const RULE_FIELDS: Record<string, keyof CorsRule> = {
  ID: 'id',
  AllowedOrigin: 'allowedOrigins',
  AllowedMethod: 'allowedMethods',
  AllowedHeader: 'allowedHeaders',
  ExposeHeader: 'exposeHeaders',
  MaxAgeSeconds: 'maxAgeSeconds',
};

function parseRule(node: XmlElement): CorsRule {
  const rule: CorsRule = { allowedOrigins: [], allowedMethods: [], allowedHeaders: [], exposeHeaders: [] };
  for (const child of node.children) {
    const field = RULE_FIELDS[child.name];
    if (field === undefined || child.children.length > 0) throw new S3Error('MalformedXML');
    const text = child.text.trim();
    if (field === 'id') {
      if (rule.id !== undefined) throw new S3Error('MalformedXML');
      rule.id = text;
    } else if (field === 'maxAgeSeconds') {
      if (rule.maxAgeSeconds !== undefined || !/^\d{1,10}$/.test(text)) throw new S3Error('MalformedXML');
      rule.maxAgeSeconds = Number(text);
    } else {
      rule[field].push(text);
    }
  }
  return rule;
}

/** A CORSConfiguration document's rules; MalformedXML when it is not one. */
export function parseCorsConfiguration(body: string): CorsRule[] {
  const root = parseXml(body);
  if (root.name !== 'CORSConfiguration') throw new S3Error('MalformedXML');
  return root.children.map((c) => {
    if (c.name !== 'CORSRule') throw new S3Error('MalformedXML');
    return parseRule(c);
  });
}

/** A configuration as S3's CORSConfiguration document. */
export function renderCorsConfiguration(rules: readonly CorsRule[]): string {
  const ruleXml = rules.map((rule) => {
    let x = rule.id !== undefined ? el('ID', rule.id) : '';
    for (const h of rule.allowedHeaders) x += el('AllowedHeader', h);
    for (const m of rule.allowedMethods) x += el('AllowedMethod', m);
    for (const o of rule.allowedOrigins) x += el('AllowedOrigin', o);
    for (const h of rule.exposeHeaders) x += el('ExposeHeader', h);
    if (rule.maxAgeSeconds !== undefined) x += el('MaxAgeSeconds', rule.maxAgeSeconds);
    return `<CORSRule>${x}</CORSRule>`;
  });
  return doc('CORSConfiguration', ruleXml.join(''));
}

export async function putBucketCorsOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id });
  const body = await readSmallBody(r);
  await setBucketCors(r.ctx, bucket.id, parseCorsConfiguration(body.toString('utf8')));
  sendEmpty(r, 200);
}

export async function getBucketCorsOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-read', { type: 'bucket', bucketId: bucket.id });
  const found = await findBucketCors(r.ctx.db, { id: bucket.id });
  if (!found?.rules) throw new S3Error('NoSuchCORSConfiguration', undefined, { BucketName: r.bucketName });
  sendXml(r, renderCorsConfiguration(found.rules));
}

export async function deleteBucketCorsOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id });
  await setBucketCors(r.ctx, bucket.id, null);
  sendEmpty(r, 204);
}
