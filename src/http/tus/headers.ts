import { AppError } from '../../errors.js';
import { CHECKSUM_ALGORITHMS, type ChecksumAlgorithm } from '../../domain/resumable.js';

/** The protocol this door speaks (tus 1.0.0) and what it announces in OPTIONS. */
export const TUS_VERSION = '1.0.0';
export const TUS_EXTENSIONS = ['creation', 'creation-with-upload', 'creation-defer-length', 'termination', 'expiration', 'checksum'];
export const TUS_CONTENT_TYPE = 'application/offset+octet-stream';

/** Response headers a browser script must read for tus (CORS), and request headers it sends. */
export const TUS_EXPOSED_HEADERS = ['Tus-Resumable', 'Tus-Version', 'Tus-Extension', 'Tus-Max-Size', 'Tus-Checksum-Algorithm', 'Upload-Offset', 'Upload-Length', 'Upload-Defer-Length', 'Upload-Metadata', 'Upload-Expires', 'Location'];
export const TUS_REQUEST_HEADERS = ['Tus-Resumable', 'Upload-Offset', 'Upload-Length', 'Upload-Defer-Length', 'Upload-Metadata', 'Upload-Checksum', 'Upload-Concat', 'X-HTTP-Method-Override', 'X-Requested-With'];

type Headers = Record<string, string | string[] | undefined>;

function one(headers: Headers, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/** Tus-Resumable must name 1.0.0 on every request but OPTIONS (412 with Tus-Version otherwise). */
export function checkTusResumable(headers: Headers): void {
  const v = one(headers, 'tus-resumable');
  if (v !== TUS_VERSION) throw new AppError('TUS_VERSION_UNSUPPORTED', { given: v === undefined ? '(none)' : JSON.stringify(v) }, { headers: { 'tus-version': TUS_VERSION } });
}

/** A non-negative integer header, or null when absent. */
export function sizeHeader(headers: Headers, name: string): number | null {
  const v = one(headers, name.toLowerCase());
  if (v === undefined) return null;
  if (!/^\d{1,16}$/.test(v) || !Number.isSafeInteger(Number(v))) throw new AppError('INVALID_HEADER', { header: name, reason: 'expected a non-negative integer' });
  return Number(v);
}

/** Upload-Metadata: comma-separated `key base64value` pairs (the value may be absent). */
export function parseMetadata(headers: Headers): Record<string, string> {
  const v = one(headers, 'upload-metadata');
  const out: Record<string, string> = {};
  if (v === undefined || v.trim() === '') return out;
  for (const pair of v.split(',')) {
    const m = /^\s*([^\s,]+)(?:\s+([A-Za-z0-9+/]*={0,2}))?\s*$/.exec(pair);
    if (!m || m[1]! in out) throw new AppError('INVALID_HEADER', { header: 'Upload-Metadata', reason: 'expected comma-separated "key base64value" pairs with distinct keys' });
    out[m[1]!] = m[2] ? Buffer.from(m[2], 'base64').toString('utf8') : '';
  }
  return out;
}

/** The object key an upload is for: metadata `key`, else `filename` or `name` (what Uppy sends). */
export function keyFromMetadata(meta: Record<string, string>): string {
  const key = meta.key ?? meta.filename ?? meta.name;
  if (key === undefined || key === '') throw new AppError('INVALID_HEADER', { header: 'Upload-Metadata', reason: 'it must carry the object key (key, or filename)' });
  return key;
}

export function contentTypeFromMetadata(meta: Record<string, string>): string | undefined {
  return meta.contentType ?? meta.filetype ?? meta.type ?? undefined;
}

/** Upload-Checksum: `<algorithm> <base64 digest>` of this request's body. */
export function parseChecksum(headers: Headers): { algorithm: ChecksumAlgorithm; value: Buffer } | null {
  const v = one(headers, 'upload-checksum');
  if (v === undefined) return null;
  const m = /^\s*(\S+)\s+([A-Za-z0-9+/]+={0,2})\s*$/.exec(v);
  if (!m) throw new AppError('INVALID_HEADER', { header: 'Upload-Checksum', reason: 'expected "<algorithm> <base64 digest>"' });
  const algorithm = m[1]!.toLowerCase() as ChecksumAlgorithm;
  if (!CHECKSUM_ALGORITHMS.includes(algorithm)) throw new AppError('TUS_CHECKSUM_UNSUPPORTED', { algorithm: m[1]! });
  return { algorithm, value: Buffer.from(m[2]!, 'base64') };
}

/** Upload-Expires: an HTTP date. */
export function httpDate(micros: number): string {
  return new Date(Math.floor(micros / 1000)).toUTCString();
}
