/**
 * The S3 door's bucket listings: ListObjects (v1), ListObjectsV2 and ListObjectVersions. Parses and
 * checks S3's query parameters (refusals are {@link S3Error}s), asks the domain for one page grouped
 * by the delimiter, and renders S3's XML. Permissions are the caller's: bucket-read for the object
 * listings, bucket-read-versions for `?versions`.
 */
import type { DomainContext } from '../domain/context.js';
import { filterTextProblem, keyTextProblem } from '../domain/keys.js';
import { listLatestDelimited, listVersionsDelimited, type DelimitedPage, type ListPosition } from '../domain/listing.js';
import type { ListedVersion } from '../domain/models.js';
import { findVersion } from '../domain/objects.js';
import { s3EtagsOf } from '../domain/s3-uploads.js';
import { parseUuid } from '../util/ids.js';
import { S3Error, xmlEscape } from './errors.js';

export const S3_XMLNS = 'http://s3.amazonaws.com/doc/2006-03-01/';
const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>';

/** The owner listings show: files-rest has one (the service); its ID is fixed. */
export interface S3Owner {
  id: string;
  displayName: string;
}
export const DEFAULT_S3_OWNER: S3Owner = { id: '66696c65732d72657374'.padEnd(64, '0'), displayName: 'files-rest' };

export interface ListingOptions {
  /** The bucket's name as the client addressed it (the `Name` element); default the bucket id. */
  bucketName?: string;
  /** The most entries one page holds, and the default (S3: 1000). */
  maxKeysLimit?: number;
  owner?: S3Owner;
}

// ---------------------------------------------------------------- encoding

const HEX = '0123456789ABCDEF';
const KEEP = new Uint8Array(256);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./*') KEEP[c.charCodeAt(0)] = 1;

/**
 * S3's `encoding-type=url` form of a key: its UTF-8 bytes, letters, digits and `- _ . / *` as they
 * are, a space as `+`, every other byte `%XX`. Clients decode it as a form value (`+` is a space).
 */
export function s3UrlEncode(text: string): string {
  let out = '';
  for (const b of Buffer.from(text, 'utf8')) {
    if (KEEP[b]) out += String.fromCharCode(b);
    else if (b === 0x20) out += '+';
    else out += `%${HEX[b >> 4]}${HEX[b & 15]}`;
  }
  return out;
}

/** The ETag S3 shows for a version: a multipart object's own S3 ETag when it has one, else the quoted MD5 of its content. */
export function s3ETag(v: Pick<ListedVersion, 'versionId' | 'file'>, multipart?: string | null): string {
  if (multipart) return multipart.startsWith('"') ? multipart : `"${multipart}"`;
  const checksum = v.file?.checksum ?? null;
  if (checksum !== null && checksum.startsWith('md5:')) return `"${checksum.slice(4)}"`;
  // No MD5 recorded (a file whose checksum is still being computed): a stable tag of the version.
  return `"${v.versionId.replace(/-/g, '')}"`;
}

/** Microseconds since the epoch as S3's LastModified: ISO 8601 with milliseconds, UTC. */
export function s3Timestamp(us: number): string {
  return new Date(Math.floor(us / 1000)).toISOString();
}

function el(name: string, value: string | number | boolean): string {
  return `<${name}>${typeof value === 'string' ? xmlEscape(value) : String(value)}</${name}>`;
}

// ---------------------------------------------------------------- parameters

/** A query parameter: its value, or null when absent. */
function param(q: URLSearchParams, name: string): string | null {
  return q.get(name);
}

/** A key-like parameter (prefix, marker, delimiter): '' when absent; refused when no key could contain it. */
function textParam(q: URLSearchParams, name: string): string {
  const v = q.get(name) ?? '';
  const problem = filterTextProblem(v);
  if (problem) throw new S3Error('InvalidArgument', `Invalid ${name}: ${problem}.`, { ArgumentName: name, ArgumentValue: v });
  return v;
}

const MAX_INT32 = 2147483647;

function parseMaxKeys(q: URLSearchParams, limit: number): number {
  const raw = q.get('max-keys');
  if (raw === null) return limit;
  if (!/^[0-9]+$/.test(raw) || Number(raw) > MAX_INT32) {
    throw new S3Error('InvalidArgument', 'Provided max-keys not an integer or within integer range', { ArgumentName: 'max-keys', ArgumentValue: raw });
  }
  return Math.min(Number(raw), limit);
}

function parseEncodingType(q: URLSearchParams): boolean {
  const raw = q.get('encoding-type');
  if (raw === null) return false;
  if (raw.toLowerCase() === 'url') return true;
  throw new S3Error('InvalidArgument', 'Invalid Encoding Method specified in Request', { ArgumentName: 'encoding-type', ArgumentValue: raw });
}

interface Common {
  prefix: string;
  delimiter: string;
  maxKeys: number;
  url: boolean;
}

function commonParams(q: URLSearchParams, limit: number): Common {
  return { prefix: textParam(q, 'prefix'), delimiter: textParam(q, 'delimiter'), maxKeys: parseMaxKeys(q, limit), url: parseEncodingType(q) };
}

/** A continuation token: base64 of the position's JSON, opaque to clients. */
export function encodeContinuationToken(key: string): string {
  return Buffer.from(JSON.stringify({ k: key }), 'utf8').toString('base64');
}

export function decodeContinuationToken(token: string): string {
  try {
    if (/^[A-Za-z0-9+/]+={0,2}$/.test(token)) {
      const v = JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as unknown;
      if (v && typeof v === 'object' && typeof (v as { k?: unknown }).k === 'string' && keyTextProblem((v as { k: string }).k) === null) return (v as { k: string }).k;
    }
  } catch {
    /* fall through */
  }
  throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect', { ArgumentName: 'continuation-token' });
}

// ---------------------------------------------------------------- rendering

/**
 * The S3 ETags of a page's versions that were completed through S3 multipart, so that a listing
 * shows the ETag GetObject and HeadObject give (`"<md5 of md5s>-<count>"`), not the plain MD5.
 */
async function multipartEtags(ctx: DomainContext, page: DelimitedPage): Promise<Map<string, string>> {
  const ids: string[] = [];
  for (const e of page.entries) if (e.kind === 'version' && e.version.fileId !== null) ids.push(e.version.versionId);
  return ids.length === 0 ? new Map() : s3EtagsOf(ctx.db, ids);
}

function renderContents(v: ListedVersion, etags: Map<string, string>, enc: (s: string) => string, owner: S3Owner | null): string {
  return (
    `<Contents>${el('Key', enc(v.key))}${el('LastModified', s3Timestamp(v.created))}${el('ETag', s3ETag(v, etags.get(v.versionId)))}` +
    `${el('Size', v.file?.size ?? 0)}${owner ? renderOwner(owner) : ''}<StorageClass>STANDARD</StorageClass></Contents>`
  );
}

export function renderOwner(owner: S3Owner): string {
  return `<Owner>${el('ID', owner.id)}${el('DisplayName', owner.displayName)}</Owner>`;
}

function renderPrefixes(page: DelimitedPage, enc: (s: string) => string): string {
  let xml = '';
  for (const e of page.entries) if (e.kind === 'prefix') xml += `<CommonPrefixes>${el('Prefix', enc(e.prefix))}</CommonPrefixes>`;
  return xml;
}

function encoder(url: boolean): (s: string) => string {
  return url ? s3UrlEncode : (s) => s;
}

// ---------------------------------------------------------------- the three listings

/** ListObjectsV2 (`list-type=2`). */
export async function listObjectsV2(ctx: DomainContext, bucketId: string, q: URLSearchParams, opts: ListingOptions = {}): Promise<string> {
  const c = commonParams(q, opts.maxKeysLimit ?? 1000);
  const token = param(q, 'continuation-token');
  const startAfter = textParam(q, 'start-after');
  const fetchOwner = q.get('fetch-owner') === 'true';
  // The token wins over start-after (it continues a listing that started after it). An empty one
  // continues nothing: the listing starts as without it (and it is echoed), as S3 answers it.
  const afterKey = token !== null && token !== '' ? decodeContinuationToken(token) : startAfter !== '' ? startAfter : null;
  const page = await listLatestDelimited(ctx.db, bucketId, {
    prefix: c.prefix,
    delimiter: c.delimiter,
    after: afterKey === null ? null : { key: afterKey },
    maxEntries: c.maxKeys,
  });
  const enc = encoder(c.url);
  const owner = fetchOwner ? (opts.owner ?? DEFAULT_S3_OWNER) : null;
  let xml = `${XML_DECLARATION}<ListBucketResult xmlns="${S3_XMLNS}">${el('Name', opts.bucketName ?? bucketId)}${el('Prefix', enc(c.prefix))}`;
  if (c.delimiter) xml += el('Delimiter', enc(c.delimiter));
  xml += `${el('MaxKeys', c.maxKeys)}`;
  if (c.url) xml += el('EncodingType', 'url');
  xml += `${el('KeyCount', page.entries.length)}${el('IsTruncated', page.truncated)}`;
  if (token !== null) xml += el('ContinuationToken', token);
  if (page.truncated && page.last) xml += el('NextContinuationToken', encodeContinuationToken(page.last.key));
  if (startAfter !== '') xml += el('StartAfter', enc(startAfter));
  const etags = await multipartEtags(ctx, page);
  for (const e of page.entries) if (e.kind === 'version') xml += renderContents(e.version, etags, enc, owner);
  return `${xml}${renderPrefixes(page, enc)}</ListBucketResult>`;
}

/** ListObjects (v1). */
export async function listObjectsV1(ctx: DomainContext, bucketId: string, q: URLSearchParams, opts: ListingOptions = {}): Promise<string> {
  const c = commonParams(q, opts.maxKeysLimit ?? 1000);
  const marker = textParam(q, 'marker');
  const page = await listLatestDelimited(ctx.db, bucketId, {
    prefix: c.prefix,
    delimiter: c.delimiter,
    after: marker === '' ? null : { key: marker },
    maxEntries: c.maxKeys,
  });
  const enc = encoder(c.url);
  let xml = `${XML_DECLARATION}<ListBucketResult xmlns="${S3_XMLNS}">${el('Name', opts.bucketName ?? bucketId)}${el('Prefix', enc(c.prefix))}${el('Marker', enc(marker))}`;
  // S3 gives NextMarker only with a delimiter; without one a client continues after the last key.
  if (c.delimiter && page.truncated && page.last) xml += el('NextMarker', enc(page.last.key));
  xml += el('MaxKeys', c.maxKeys);
  if (c.delimiter) xml += el('Delimiter', enc(c.delimiter));
  if (c.url) xml += el('EncodingType', 'url');
  xml += el('IsTruncated', page.truncated);
  const owner = opts.owner ?? DEFAULT_S3_OWNER;
  const etags = await multipartEtags(ctx, page);
  for (const e of page.entries) if (e.kind === 'version') xml += renderContents(e.version, etags, enc, owner);
  return `${xml}${renderPrefixes(page, enc)}</ListBucketResult>`;
}

/** ListObjectVersions (`?versions`). */
export async function listObjectVersions(ctx: DomainContext, bucketId: string, q: URLSearchParams, opts: ListingOptions = {}): Promise<string> {
  const c = commonParams(q, opts.maxKeysLimit ?? 1000);
  const keyMarker = textParam(q, 'key-marker');
  const versionIdMarker = q.get('version-id-marker') ?? '';
  let after: ListPosition | null = keyMarker === '' ? null : { key: keyMarker };
  if (versionIdMarker !== '') {
    if (keyMarker === '') throw new S3Error('InvalidArgument', 'A version-id marker cannot be specified without a key marker.', { ArgumentName: 'version-id-marker', ArgumentValue: versionIdMarker });
    const id = parseUuid(versionIdMarker);
    if (id === null) throw new S3Error('InvalidArgument', 'Invalid version id specified', { ArgumentName: 'version-id-marker', ArgumentValue: versionIdMarker });
    // A marker whose version has been deleted since (a client that deletes each page before asking
    // for the next, as the Ceph S3 suite's clean-up does) still positions the listing, as on S3: at
    // the first of the key's versions left, so none is skipped (one newer than the vanished marker,
    // listed before, may come again).
    const v = await findVersion(ctx.db, bucketId, keyMarker, id);
    after = { key: keyMarker, seq: v ? v.seq : Number.MAX_SAFE_INTEGER };
  }
  const page = await listVersionsDelimited(ctx.db, bucketId, { prefix: c.prefix, delimiter: c.delimiter, after, maxEntries: c.maxKeys });
  const enc = encoder(c.url);
  const owner = renderOwner(opts.owner ?? DEFAULT_S3_OWNER);
  let xml = `${XML_DECLARATION}<ListVersionsResult xmlns="${S3_XMLNS}">${el('Name', opts.bucketName ?? bucketId)}${el('Prefix', enc(c.prefix))}`;
  xml += `${el('KeyMarker', enc(keyMarker))}${el('VersionIdMarker', versionIdMarker)}`;
  if (page.truncated && page.last) {
    xml += el('NextKeyMarker', enc(page.last.key));
    if (page.last.versionId) xml += el('NextVersionIdMarker', page.last.versionId);
  }
  xml += el('MaxKeys', c.maxKeys);
  if (c.delimiter) xml += el('Delimiter', enc(c.delimiter));
  if (c.url) xml += el('EncodingType', 'url');
  xml += el('IsTruncated', page.truncated);
  const etags = await multipartEtags(ctx, page);
  for (const e of page.entries) {
    if (e.kind !== 'version') continue;
    const v = e.version;
    const head = `${el('Key', enc(v.key))}${el('VersionId', v.versionId)}${el('IsLatest', v.isHead)}${el('LastModified', s3Timestamp(v.created))}`;
    if (v.fileId === null) xml += `<DeleteMarker>${head}${owner}</DeleteMarker>`;
    else xml += `<Version>${head}${el('ETag', s3ETag(v, etags.get(v.versionId)))}${el('Size', v.file?.size ?? 0)}<StorageClass>STANDARD</StorageClass>${owner}</Version>`;
  }
  return `${xml}${renderPrefixes(page, enc)}</ListVersionsResult>`;
}

/**
 * The door's entry point for `GET /{bucket}` listings: ListObjectVersions with `versions`,
 * ListObjectsV2 with `list-type=2`, ListObjects otherwise. Throws {@link S3Error} for bad parameters.
 */
export async function handleListing(ctx: DomainContext, bucketId: string, query: URLSearchParams, opts: ListingOptions = {}): Promise<{ xml: string }> {
  if (query.has('versions')) return { xml: await listObjectVersions(ctx, bucketId, query, opts) };
  const listType = query.get('list-type');
  if (listType === '2') return { xml: await listObjectsV2(ctx, bucketId, query, opts) };
  if (listType !== null && listType !== '1') throw new S3Error('InvalidArgument', 'Invalid List Type specified in Request', { ArgumentName: 'list-type', ArgumentValue: listType });
  return { xml: await listObjectsV1(ctx, bucketId, query, opts) };
}
