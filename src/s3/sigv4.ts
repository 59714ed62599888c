/**
 * AWS Signature Version 4 verification for S3 requests, signed in the Authorization header or
 * presigned in the query string. Region-agnostic: the region is whatever the credential scope names;
 * the service must be `s3`. No HTTP framework here: the door passes the method, the path and query as
 * they came on the wire, and the headers.
 *
 * Two steps, with the secret looked up in between:
 *
 * @example
 * ```ts
 * const parsed = parseSigV4({ method, rawPath, rawQuery, headers: req.raw.headersDistinct });
 * if (parsed === null) return anonymous();
 * if (isS3Error(parsed)) return fail(parsed);
 * const secret = await secrets.lookup(parsed.accessKeyId);
 * if (!secret) return fail(new S3Error('InvalidAccessKeyId'));
 * const auth = verifySigV4(parsed, secret, new Date());
 * if (isS3Error(auth)) return fail(auth);
 * // auth.payload says how the body is framed and checked (see chunked.ts for the STREAMING-* ones)
 * ```
 */
import * as crypto from 'node:crypto';
import { timingSafeEqual } from 'node:crypto';
import { S3Error } from './errors.js';
import { signingKey } from './signing-key.js';
import type { HmacSha256Key } from '../util/hmac.js';
import { canonicalizeComponent } from './uri.js';

/** A header value as Node gives it (`req.headers`, or better `req.headersDistinct`). */
export type HeaderValue = string | readonly string[] | undefined;

/** The parts of a request SigV4 covers, as they came on the wire. */
export interface SigV4Input {
  /** The HTTP method, e.g. `PUT`. */
  readonly method: string;
  /**
   * The path exactly as sent, percent-encoding intact, without the query: `/bucket/a%20b`
   * (`req.url` up to the `?`). Characters outside ASCII, which clients do not send unencoded, are
   * taken as UTF-8 text.
   */
  readonly rawPath: string;
  /** The query string exactly as sent, without the `?` (empty when none). */
  readonly rawQuery: string;
  /**
   * The request headers: an object with names in any case (repeated headers best given as arrays,
   * `headersDistinct`: SigV4 joins repeated values with `,`, Node's `headers` joins with `, `), or
   * the map {@link headersFromRaw} builds (lower-case names, every value in order).
   */
  readonly headers: Readonly<Record<string, HeaderValue>> | RequestHeaders;
}

/** A request's headers by lower-case name, each with its values in the order sent. */
export type RequestHeaders = ReadonlyMap<string, readonly string[]>;

/**
 * The headers of a request from Node's `rawHeaders` (name, value, name, value, …), in one pass: what
 * `headersDistinct` gives, without building an object per request (the S3 door reads its headers
 * through this map).
 */
export function headersFromRaw(raw: readonly string[]): RequestHeaders {
  const out = new Map<string, string[]>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    const list = out.get(name);
    if (list === undefined) out.set(name, [raw[i + 1]!]);
    else list.push(raw[i + 1]!);
  }
  return out;
}

/** Values of `x-amz-content-sha256` that say how the body is framed; `sha256` is a hex digest. */
export type PayloadMode =
  | 'sha256'
  | 'UNSIGNED-PAYLOAD'
  | 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD'
  | 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER'
  | 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';

/** A request's SigV4 credentials, parsed and syntactically valid, not yet verified. */
export interface ParsedSigV4 {
  readonly kind: 'header' | 'presigned';
  readonly accessKeyId: string;
  /** The region the credential scope names (any). */
  readonly region: string;
  /** `YYYYMMDD` from the credential scope. */
  readonly shortDate: string;
  /** `YYYYMMDDTHHMMSSZ`: the request time as signed. */
  readonly longDate: string;
  /** The request time. */
  readonly date: Date;
  /** `YYYYMMDD/region/s3/aws4_request`. */
  readonly scope: string;
  readonly signedHeaders: readonly string[];
  /** The signature given, lower-case hex. */
  readonly signature: string;
  /** X-Amz-Expires of a presigned request, in seconds. */
  readonly expiresSeconds: number | undefined;
  readonly payload: PayloadMode;
  /** The payload hash as it enters the canonical request. */
  readonly payloadHash: string;
  /**
   * The canonical request(s) the signature may cover: S3's normalised form (path segments and query
   * decoded, then URI-encoded once) and, when it differs, the form as sent (for clients that sign
   * their own, differently-escaped, wire form).
   */
  readonly canonicalRequests: readonly string[];
}

/** A verified SigV4 request: who signed it, and what the body decoder needs to go on verifying. */
export interface VerifiedSigV4 {
  readonly accessKeyId: string;
  readonly region: string;
  readonly scope: string;
  readonly longDate: string;
  /** The derived signing key, prepared (chunk and trailer signatures are keyed with it). */
  readonly signingKey: HmacSha256Key;
  /** The request's own signature, which seeds the chain of chunk signatures. */
  readonly seedSignature: string;
  readonly payload: PayloadMode;
  /** For `payload === 'sha256'`: the lower-case hex SHA-256 the body must have (else XAmzContentSHA256Mismatch). */
  readonly payloadSha256: string | undefined;
}

/** The largest difference S3 allows between a request's time and the server's: 15 minutes. */
export const MAX_CLOCK_SKEW_MS = 15 * 60 * 1000;
/** The longest a presigned URL may live: one week, in seconds. */
export const MAX_PRESIGNED_EXPIRES = 604800;

const ALGORITHM = 'AWS4-HMAC-SHA256';
const ECDSA_ALGORITHM = 'AWS4-ECDSA-P256-SHA256';
const QUERY_AUTH_PARAMS = ['X-Amz-Algorithm', 'X-Amz-Credential', 'X-Amz-Signature'];
const QUERY_PARAMS_REQUIRED =
  'Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.';
const STREAMING_MODES = new Set<PayloadMode>([
  'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
  'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER',
  'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
]);
const SHA256_HEX = /^[0-9a-fA-F]{64}$/;
const SIGNATURE_HEX = /^[0-9a-fA-F]{64}$/;
const HEADER_NAME = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;
const LONG_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;
const STANDARD_AUTHORIZATION = /^AWS4-HMAC-SHA256 Credential=([^\s,=]+), ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$/;

// ---------------------------------------------------------------------------------------------
// Canonical request pieces

/**
 * S3's canonical URI: each `/`-separated segment of the path as sent, percent-decoded and then
 * URI-encoded once (S3 does not double-encode, and keeps empty segments: `/b//k` stays as is).
 */
export function canonicalUri(rawPath: string): string {
  if (rawPath === '') return '/';
  // Only unreserved characters and `/`: already canonical (the common case).
  if (PLAIN_PATH.test(rawPath)) return rawPath;
  return rawPath.split('/').map(canonicalizeComponent).join('/');
}

const PLAIN_PATH = /^[A-Za-z0-9._~/-]*$/;

/** One `name=value` pair of a query string as sent (`value` is `''` for a bare `name`). */
interface RawParam {
  readonly name: string;
  readonly value: string;
}

function splitQuery(rawQuery: string): RawParam[] {
  const out: RawParam[] = [];
  if (rawQuery === '') return out;
  for (const piece of rawQuery.split('&')) {
    if (piece === '') continue;
    const eq = piece.indexOf('=');
    out.push(eq < 0 ? { name: piece, value: '' } : { name: piece.slice(0, eq), value: piece.slice(eq + 1) });
  }
  return out;
}

function joinSorted(pairs: Array<[string, string]>): string {
  pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return pairs.map(([n, v]) => `${n}=${v}`).join('&');
}

/**
 * The canonical query string: every parameter's name and value decoded then URI-encoded once,
 * `name=` for a parameter without a value, sorted by encoded name then value. `X-Amz-Signature` is
 * left out when `presigned`.
 */
export function canonicalQuery(rawQuery: string, presigned: boolean): string {
  const pairs: Array<[string, string]> = [];
  for (const p of splitQuery(rawQuery)) {
    // A `+` in a query is a space, as the door reads it (URLSearchParams) and as S3 reads it: signed
    // as %20 (aws4fetch and the AWS SDK for Java v1 send `+` and sign %20). A plus is sent as %2B.
    const name = canonicalizeComponent(plusAsSpace(p.name));
    if (presigned && name === 'X-Amz-Signature') continue;
    pairs.push([name, canonicalizeComponent(plusAsSpace(p.value))]);
  }
  return joinSorted(pairs);
}

function plusAsSpace(text: string): string {
  return text.includes('+') ? text.replaceAll('+', '%20') : text;
}

/** The canonical query built from the parameters exactly as sent (the fallback form). */
function rawCanonicalQuery(rawQuery: string, presigned: boolean): string {
  const pairs: Array<[string, string]> = [];
  for (const p of splitQuery(rawQuery)) {
    if (presigned && p.name === 'X-Amz-Signature') continue;
    pairs.push([p.name, p.value]);
  }
  return joinSorted(pairs);
}

/** A header value the SigV4 way: CR/LF to spaces, runs of blanks collapsed, ends trimmed; repeats joined by `,`. */
function canonicalHeaderValue(values: readonly string[]): string {
  if (values.length === 1 && !NEEDS_TRIM.test(values[0]!)) return values[0]!;
  return values.map((v) => v.replace(/[\r\n]/g, ' ').replace(/[ \t]+/g, ' ').replace(/^ | $/g, '')).join(',');
}

/** A header value the canonical form would change: CR, LF, a tab, two blanks, a blank at either end. */
const NEEDS_TRIM = /[\r\n\t]|  |^ | $/;

/** The SigV4 string to sign for a canonical request. */
export function stringToSign(longDate: string, scope: string, canonicalRequest: string): string {
  return `${ALGORITHM}\n${longDate}\n${scope}\n${sha256Hex(canonicalRequest)}`;
}

/**
 * Node's one-shot digest, in every Node this runs on (20.12+, 22, 24): no Hash object per request.
 * Typed here because the installed @types/node predates it.
 */
const oneShotHash = (crypto as unknown as { hash: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

function sha256Hex(text: string): string {
  return oneShotHash('sha256', text, 'hex');
}

// ---------------------------------------------------------------------------------------------
// Parsing

type Headers = RequestHeaders;

/** The headers as a map by lower-case name, whichever form they came in (SigV4Input's `headers`). */
export function requestHeaders(headers: SigV4Input['headers']): Headers {
  if (headers instanceof Map) return headers as RequestHeaders;
  const record = headers as Readonly<Record<string, HeaderValue>>;
  const out = new Map<string, string[]>();
  for (const name in record) {
    const value = record[name];
    if (value === undefined) continue;
    const key = name.toLowerCase();
    const list = out.get(key);
    if (list === undefined) out.set(key, typeof value === 'string' ? [value] : [...value]);
    else if (typeof value === 'string') list.push(value);
    else list.push(...value);
  }
  return out;
}

/** The SHA-256 of no bytes, hex: the payload hash of a request without a body. */
export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** The request announces no body: no Transfer-Encoding, and no Content-Length or a length of 0. */
export function carriesNoBody(headers: Headers): boolean {
  const length = headerText(headers, 'content-length');
  return !headers.has('transfer-encoding') && (length === undefined || length.trim() === '0');
}

/** One header as text, repeated values joined with `,` (as SigV4 joins them); undefined when absent. */
export function headerText(headers: Headers, name: string): string | undefined {
  const v = headers.get(name);
  return v === undefined ? undefined : v.length === 1 ? v[0] : v.join(',');
}

/** Parses `YYYYMMDDTHHMMSSZ`, or returns undefined. */
export function parseLongDate(text: string): Date | undefined {
  // Requests of one second share their date: the last one parsed is kept.
  if (text === lastLongDate.text) return new Date(lastLongDate.ms);
  const date = parseLongDateUncached(text);
  if (date) lastLongDate = { text, ms: date.getTime() };
  return date;
}

let lastLongDate = { text: '', ms: 0 };

function parseLongDateUncached(text: string): Date | undefined {
  const m = LONG_DATE.exec(text);
  if (!m) return undefined;
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number) as [number, number, number, number, number, number];
  const date = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d) return undefined;
  if (h > 23 || mi > 59 || s > 59) return undefined;
  return date;
}

/** Formats a time as `YYYYMMDDTHHMMSSZ`. */
export function formatLongDate(date: Date): string {
  const two = (n: number) => (n < 10 ? `0${n}` : String(n));
  const y = date.getUTCFullYear();
  return `${y < 1000 ? String(y).padStart(4, '0') : y}${two(date.getUTCMonth() + 1)}${two(date.getUTCDate())}T${two(date.getUTCHours())}${two(date.getUTCMinutes())}${two(date.getUTCSeconds())}Z`;
}

interface Credential {
  accessKeyId: string;
  shortDate: string;
  region: string;
}

/** Parses `AKID/YYYYMMDD/region/s3/aws4_request`, or explains what is wrong. */
function parseCredential(value: string): Credential | string {
  const parts = value.split('/');
  const expecting = 'the Credential is mal-formed; expecting "<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request".';
  if (parts.length < 5) return expecting;
  const [shortDate, region, service, terminal] = parts.slice(-4) as [string, string, string, string];
  const accessKeyId = parts.slice(0, -4).join('/');
  if (accessKeyId === '' || region === '' || !/^\d{8}$/.test(shortDate) || terminal !== 'aws4_request') return expecting;
  if (!/^[\x21-\x7e]+$/.test(region)) return expecting;
  if (service !== 's3') return `incorrect service "${service}". This endpoint belongs to "s3".`;
  return { accessKeyId, shortDate, region };
}

function parseSignedHeaders(value: string): string[] | undefined {
  const list = value.split(';');
  return list.every((h) => HEADER_NAME.test(h)) ? list : undefined;
}

function parsePayload(value: string): { mode: PayloadMode; hash: string } | S3Error {
  if (SHA256_HEX.test(value)) return { mode: 'sha256', hash: value };
  if (value === 'UNSIGNED-PAYLOAD' || STREAMING_MODES.has(value as PayloadMode)) return { mode: value as PayloadMode, hash: value };
  if (value.startsWith('STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD')) {
    return new S3Error('NotImplemented', 'SigV4a (AWS4-ECDSA-P256-SHA256) streaming payloads are not implemented.');
  }
  return new S3Error(
    'InvalidArgument',
    'x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, or a valid sha256 value.',
    { ArgumentName: 'x-amz-content-sha256', ArgumentValue: value },
  );
}

/** Names of x-amz-* headers present in the request but not signed. */
function unsignedAmzHeaders(headers: Headers, signed: readonly string[], exempt: readonly string[]): string[] {
  const set = new Set(signed);
  return [...headers.keys()].filter((h) => h.startsWith('x-amz-') && !set.has(h) && !exempt.includes(h));
}

function buildCanonicalRequests(
  input: SigV4Input,
  headers: Headers,
  signedHeaders: readonly string[],
  payloadHash: string,
  presigned: boolean,
): string[] {
  let headerBlock = '';
  for (const name of signedHeaders) headerBlock += `${name}:${canonicalHeaderValue(headers.get(name) ?? [])}\n`;
  const tail = `${headerBlock}\n${signedHeaders.join(';')}\n${payloadHash}`;
  // A plain path without a query is its own canonical form, as sent: one candidate.
  if (input.rawQuery === '' && input.rawPath !== '' && PLAIN_PATH.test(input.rawPath)) return withSentBytes([`${input.method}\n${input.rawPath}\n\n${tail}`]);
  const normal = `${input.method}\n${canonicalUri(input.rawPath)}\n${canonicalQuery(input.rawQuery, presigned)}\n${tail}`;
  const sentPath = input.rawPath === '' ? '/' : input.rawPath;
  const raw = `${input.method}\n${sentPath}\n${rawCanonicalQuery(input.rawQuery, presigned)}\n${tail}`;
  const candidates = raw === normal ? [normal] : [normal, raw];
  // curl's --aws-sigv4 before 8.1 signs the query string exactly as sent: not sorted, a bare
  // `versions` without its `=`. The signature still covers every byte of it.
  if (!presigned && input.rawQuery !== '') {
    const asSent = `${input.method}\n${sentPath}\n${input.rawQuery}\n${tail}`;
    if (!candidates.includes(asSent)) candidates.push(asSent);
  }
  return withSentBytes(candidates);
}

/** Any byte 0x80–0xFF: Node.js gives each header byte as one character (latin1). */
const HIGH_BYTE = /[\u0080-\u00ff]/;

/**
 * With a header value that is not ASCII, also the canonical request over the bytes as they were
 * sent. A signed value is hashed by clients as UTF-8: one that sent those UTF-8 bytes (botocore
 * does, for `x-amz-meta-*` with an accent) signed the sent bytes, which Node.js decoded one
 * character per byte; one that sent the value in latin1 signed its UTF-8 form, which the first
 * candidate is. The second candidate exists only when the bytes are valid UTF-8.
 */
function withSentBytes(candidates: string[]): string[] {
  if (!candidates.some((c) => HIGH_BYTE.test(c))) return candidates;
  const out = [...candidates];
  for (const c of candidates) {
    const bytes = Buffer.from(c, 'latin1');
    const asUtf8 = bytes.toString('utf8');
    if (Buffer.from(asUtf8, 'utf8').equals(bytes)) out.push(asUtf8);
  }
  return out;
}

/** The first value of a query parameter, decoded; undefined when absent. */
function queryParam(params: readonly RawParam[], name: string): string | undefined {
  const p = params.find((x) => x.name === name);
  return p === undefined ? undefined : decodeQueryValue(p.value);
}

function decodeQueryValue(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * Parses a request's SigV4 credentials, from the Authorization header or the presigned query.
 *
 * @returns `null` when the request carries no credentials at all (anonymous); an {@link S3Error}
 * when it carries credentials that cannot be used (malformed, SigV2, both mechanisms at once, a
 * session token, an unsigned x-amz-* header, a missing x-amz-content-sha256, …); otherwise the
 * parsed credentials, ready for {@link verifySigV4} once the caller has found the secret for
 * `accessKeyId`.
 */
export function parseSigV4(input: SigV4Input): ParsedSigV4 | S3Error | null {
  const headers = requestHeaders(input.headers);
  const params = splitQuery(input.rawQuery);
  const authorization = headerText(headers, 'authorization');
  const hasQueryAuth = params.some((p) => QUERY_AUTH_PARAMS.includes(p.name));
  if (authorization !== undefined && hasQueryAuth) return oneMechanismOnly();
  if (authorization !== undefined) return parseHeaderAuth(input, headers, authorization);
  if (hasQueryAuth) return parseQueryAuth(input, headers, params);
  if (params.some((p) => p.name === 'AWSAccessKeyId' || p.name === 'Signature')) return unsupportedMechanism();
  return null;
}

/** A request carrying credentials in the header and in the query (SigV4 or SigV2, either way). */
export function oneMechanismOnly(): S3Error {
  return new S3Error(
    'InvalidArgument',
    'Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified',
    { ArgumentName: 'Authorization' },
  );
}

function unsupportedMechanism(): S3Error {
  return new S3Error('InvalidRequest', 'The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.');
}

function headerMalformed(reason: string): S3Error {
  return new S3Error('AuthorizationHeaderMalformed', `The authorization header is malformed; ${reason}`);
}

function parseHeaderAuth(input: SigV4Input, headers: Headers, authorization: string): ParsedSigV4 | S3Error {
  const auth = authorization.trim();
  if (auth.startsWith('AWS ')) return unsupportedMechanism();
  if (auth.startsWith(`${ECDSA_ALGORITHM} `)) return new S3Error('NotImplemented', 'SigV4a (AWS4-ECDSA-P256-SHA256) is not implemented.');
  if (!auth.startsWith(`${ALGORITHM} `)) return new S3Error('InvalidArgument', 'Unsupported Authorization Type', { ArgumentName: 'Authorization' });

  // The form every SDK sends, read with one expression; anything else goes through the parser below.
  const standard = STANDARD_AUTHORIZATION.exec(auth);
  const fields = new Map<string, string>();
  if (standard) {
    fields.set('Credential', standard[1]!);
    fields.set('SignedHeaders', standard[2]!);
    fields.set('Signature', standard[3]!);
  } else for (const part of auth.slice(ALGORITHM.length + 1).split(',')) {
    const item = part.trim();
    const eq = item.indexOf('=');
    if (eq <= 0) return headerMalformed(`the authorization component "${item}" is malformed.`);
    const name = item.slice(0, eq);
    if (!['Credential', 'SignedHeaders', 'Signature'].includes(name) || fields.has(name)) {
      return headerMalformed(`the authorization component "${item}" is malformed.`);
    }
    fields.set(name, item.slice(eq + 1));
  }
  for (const name of ['Credential', 'SignedHeaders', 'Signature']) {
    if (!fields.has(name)) return headerMalformed(`the ${name} component is missing.`);
  }
  const credential = parseCredential(fields.get('Credential')!);
  if (typeof credential === 'string') return headerMalformed(credential);
  const signedHeaders = parseSignedHeaders(fields.get('SignedHeaders')!);
  if (!signedHeaders) return headerMalformed('the SignedHeaders component is malformed.');
  if (!signedHeaders.includes('host')) return headerMalformed('the SignedHeaders component must include host.');
  const signature = fields.get('Signature')!;
  if (!SIGNATURE_HEX.test(signature)) return headerMalformed('the Signature component is malformed.');

  if (headers.has('x-amz-security-token')) return new S3Error('InvalidToken', 'Session tokens are not supported.');

  let date: Date | undefined;
  let longDate = '';
  const amzDate = headerText(headers, 'x-amz-date');
  if (amzDate !== undefined) {
    // A valid X-Amz-Date is already in the long form the string to sign uses.
    longDate = amzDate.trim();
    date = parseLongDate(longDate);
  } else {
    const httpDate = headerText(headers, 'date');
    const ms = httpDate === undefined ? NaN : Date.parse(httpDate);
    if (!Number.isNaN(ms)) {
      date = new Date(Math.floor(ms / 1000) * 1000);
      longDate = formatLongDate(date);
    }
  }
  if (!date) return new S3Error('AccessDenied', 'AWS authentication requires a valid Date or x-amz-date header');
  if (longDate.slice(0, 8) !== credential.shortDate) {
    return headerMalformed('Invalid credential date. Date is not the same as X-Amz-Date.');
  }

  // S3 requires the header. A request without a body is taken without it, signed over the hash of no
  // bytes (as MinIO does): curl's --aws-sigv4 before 8.x sends none, and so GETs, HEADs, listings and
  // deletes work from Debian 12's curl. A body's hash cannot be guessed: still refused.
  const sha = headerText(headers, 'x-amz-content-sha256') ?? (carriesNoBody(headers) ? EMPTY_SHA256 : undefined);
  if (sha === undefined) return new S3Error('InvalidRequest', 'Missing required header for this request: x-amz-content-sha256');
  const payload = parsePayload(sha.trim());
  if (payload instanceof S3Error) return payload;

  const unsigned = unsignedAmzHeaders(headers, signedHeaders, []);
  if (unsigned.length > 0) {
    return new S3Error('AccessDenied', 'There were headers present in the request which were not signed', {
      HeadersNotSigned: unsigned.join(', '),
    });
  }

  return {
    kind: 'header',
    accessKeyId: credential.accessKeyId,
    region: credential.region,
    shortDate: credential.shortDate,
    longDate,
    date,
    scope: `${credential.shortDate}/${credential.region}/s3/aws4_request`,
    signedHeaders,
    signature: signature.toLowerCase(),
    expiresSeconds: undefined,
    payload: payload.mode,
    payloadHash: payload.hash,
    canonicalRequests: buildCanonicalRequests(input, headers, signedHeaders, payload.hash, false),
  };
}

function queryError(message: string): S3Error {
  return new S3Error('AuthorizationQueryParametersError', message);
}

function parseQueryAuth(input: SigV4Input, headers: Headers, params: readonly RawParam[]): ParsedSigV4 | S3Error {
  const algorithm = queryParam(params, 'X-Amz-Algorithm');
  const credentialText = queryParam(params, 'X-Amz-Credential');
  const dateText = queryParam(params, 'X-Amz-Date');
  const expiresText = queryParam(params, 'X-Amz-Expires');
  const signedText = queryParam(params, 'X-Amz-SignedHeaders');
  const signature = queryParam(params, 'X-Amz-Signature');
  if (algorithm === ECDSA_ALGORITHM) return new S3Error('NotImplemented', 'SigV4a (AWS4-ECDSA-P256-SHA256) is not implemented.');
  if (
    algorithm === undefined ||
    credentialText === undefined ||
    dateText === undefined ||
    expiresText === undefined ||
    signedText === undefined ||
    signature === undefined
  ) {
    return queryError(QUERY_PARAMS_REQUIRED);
  }
  if (algorithm !== ALGORITHM) return queryError('X-Amz-Algorithm only supports "AWS4-HMAC-SHA256"');
  const credential = parseCredential(credentialText);
  if (typeof credential === 'string') return queryError(`Error parsing the X-Amz-Credential parameter; ${credential}`);
  const date = parseLongDate(dateText);
  if (!date) return queryError('X-Amz-Date must be in the ISO8601 Long Format "yyyyMMdd\'T\'HHmmss\'Z\'"');
  if (dateText.slice(0, 8) !== credential.shortDate) {
    return queryError('Error parsing the X-Amz-Credential parameter; Invalid credential date. Date is not the same as X-Amz-Date.');
  }
  if (!/^\d{1,7}$/.test(expiresText) || Number(expiresText) < 1) return queryError('X-Amz-Expires must be a number of seconds from 1 to 604800');
  const expiresSeconds = Number(expiresText);
  if (expiresSeconds > MAX_PRESIGNED_EXPIRES) return queryError('X-Amz-Expires must be less than a week (in seconds) that is 604800');
  const signedHeaders = parseSignedHeaders(signedText);
  if (!signedHeaders) return queryError('X-Amz-SignedHeaders is malformed.');
  if (!signedHeaders.includes('host')) return queryError('X-Amz-SignedHeaders must include host.');
  if (!SIGNATURE_HEX.test(signature)) return queryError('X-Amz-Signature is malformed.');
  if (params.some((p) => p.name === 'X-Amz-Security-Token') || headers.has('x-amz-security-token')) {
    return new S3Error('InvalidToken', 'Session tokens are not supported.');
  }

  // The SDK's presigner hoists `x-amz-content-sha256: UNSIGNED-PAYLOAD` into the query; a signed
  // header would be used as the SDK's signer uses it; otherwise the payload is unsigned.
  let payloadHash = queryParam(params, 'X-Amz-Content-Sha256');
  if (payloadHash === undefined && signedHeaders.includes('x-amz-content-sha256')) payloadHash = headerText(headers, 'x-amz-content-sha256')?.trim();
  payloadHash ??= 'UNSIGNED-PAYLOAD';
  const payload = parsePayload(payloadHash);
  if (payload instanceof S3Error) return payload;
  if (STREAMING_MODES.has(payload.mode)) return new S3Error('InvalidRequest', 'Presigned requests cannot use a streaming (aws-chunked) payload.');

  const unsigned = unsignedAmzHeaders(headers, signedHeaders, ['x-amz-content-sha256']);
  if (unsigned.length > 0) {
    return new S3Error('AccessDenied', 'There were headers present in the request which were not signed', {
      HeadersNotSigned: unsigned.join(', '),
    });
  }

  return {
    kind: 'presigned',
    accessKeyId: credential.accessKeyId,
    region: credential.region,
    shortDate: credential.shortDate,
    longDate: dateText,
    date,
    scope: `${credential.shortDate}/${credential.region}/s3/aws4_request`,
    signedHeaders,
    signature: signature.toLowerCase(),
    expiresSeconds,
    payload: payload.mode,
    payloadHash: payload.hash,
    canonicalRequests: buildCanonicalRequests(input, headers, signedHeaders, payload.hash, true),
  };
}

// ---------------------------------------------------------------------------------------------
// Verification

/**
 * Verifies parsed credentials with the secret of their access key, at time `now`.
 *
 * Refuses with `RequestTimeTooSkewed` a header-signed request more than 15 minutes off `now`; with
 * `AccessDenied` ("Request has expired") a presigned one when `now` is past its date plus
 * X-Amz-Expires, or ("Request is not valid yet") when its date is more than 15 minutes ahead; with
 * `SignatureDoesNotMatch` (carrying S3's `StringToSign` and `CanonicalRequest` details) when the
 * signature is wrong. Signatures are compared in constant time.
 */
export function verifySigV4(parsed: ParsedSigV4, secret: string, now: Date = new Date()): VerifiedSigV4 | S3Error {
  const t = parsed.date.getTime();
  if (parsed.kind === 'header') {
    if (Math.abs(now.getTime() - t) > MAX_CLOCK_SKEW_MS) {
      return new S3Error('RequestTimeTooSkewed', undefined, {
        RequestTime: parsed.longDate,
        ServerTime: formatLongDate(now),
        MaxAllowedSkewMilliseconds: String(MAX_CLOCK_SKEW_MS),
      });
    }
  } else {
    if (t - now.getTime() > MAX_CLOCK_SKEW_MS) return new S3Error('AccessDenied', 'Request is not valid yet');
    if (now.getTime() > t + (parsed.expiresSeconds ?? 0) * 1000) {
      return new S3Error('AccessDenied', 'Request has expired', {
        'X-Amz-Expires': String(parsed.expiresSeconds),
        Expires: new Date(t + (parsed.expiresSeconds ?? 0) * 1000).toISOString(),
        ServerTime: now.toISOString(),
      });
    }
  }

  const key = signingKey(secret, parsed.shortDate, parsed.region);
  const given = Buffer.from(parsed.signature, 'hex');
  let match = false;
  let first: { sts: string; cr: string } | undefined;
  for (const cr of parsed.canonicalRequests) {
    const sts = stringToSign(parsed.longDate, parsed.scope, cr);
    first ??= { sts, cr };
    if (timingSafeEqual(key.sign(sts), given)) match = true;
  }
  if (!match) {
    return new S3Error('SignatureDoesNotMatch', undefined, {
      AWSAccessKeyId: parsed.accessKeyId,
      StringToSign: first?.sts ?? '',
      SignatureProvided: parsed.signature,
      CanonicalRequest: first?.cr ?? '',
    });
  }
  return {
    accessKeyId: parsed.accessKeyId,
    region: parsed.region,
    scope: parsed.scope,
    longDate: parsed.longDate,
    signingKey: key,
    seedSignature: parsed.signature,
    payload: parsed.payload,
    payloadSha256: parsed.payload === 'sha256' ? parsed.payloadHash.toLowerCase() : undefined,
  };
}
