import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { ExpectedDigest } from '../domain/objects.js';
import { contentLength } from './query.js';
import { watchBody, type UploadWatch } from './body-watch.js';

/** What an upload adapter extracts from a request: the bytes and what is known about them. */
export interface UploadRequest {
  stream: Readable;
  /** Exact size in bytes, when announced. */
  size: number | null;
  contentType?: string;
}

/**
 * An upload adapter (FILES_REST_UPLOAD_FACTORIES). Adapters are tried in order; the first that
 * returns a request wins. Return null to let the next one try.
 */
export interface UploadAdapter {
  name: string;
  parse(req: FastifyRequest): Promise<UploadRequest | null>;
}

function isForm(req: FastifyRequest): boolean {
  return /^multipart\/form-data/i.test(req.headers['content-type'] ?? '');
}

/** The raw adapter: the request body is the file; Content-Length is required (SPEC rule 3). */
export const rawUploadAdapter: UploadAdapter = {
  name: 'raw',
  async parse(req) {
    if (isForm(req)) return null;
    const size = contentLength(req);
    if (size === null) return null;
    return { stream: req.raw, size, contentType: req.headers['content-type'] };
  },
};

export type { UploadWatch } from './body-watch.js';

/** Watches an upload's body (PUT, multipart part, form upload): see `watchBody`. */
export function watchUpload(req: FastifyRequest, idleSeconds: number): UploadWatch {
  return watchBody(req.raw, idleSeconds, req.log);
}

export async function parseUpload(req: FastifyRequest, adapters: readonly UploadAdapter[]): Promise<UploadRequest> {
  for (const a of adapters) {
    const r = await a.parse(req);
    if (r) return r;
  }
  throw new AppError('CONTENT_LENGTH_REQUIRED');
}

function decodeMd5(value: string, header: string): Buffer {
  const v = value.trim();
  if (/^[0-9a-f]{32}$/i.test(v)) return Buffer.from(v, 'hex');
  if (/^[A-Za-z0-9+/]{22}==$/.test(v)) return Buffer.from(v, 'base64');
  throw new AppError('INVALID_HEADER', { header, reason: 'expected the base64 (RFC 1864) or hex MD5 digest' });
}

const DIGEST_ALGOS: Record<string, ExpectedDigest['algorithm']> = { md5: 'md5', 'sha-256': 'sha256' };
const DIGEST_LEN: Record<string, number> = { md5: 16, sha256: 32 };

/**
 * Digests the client sent to be checked: Content-MD5 (RFC 1864, hex tolerated) and RFC 9530
 * Content-Digest / Repr-Digest (md5, sha-256; other algorithms are ignored, as the RFC allows).
 */
export function expectedDigests(req: FastifyRequest): ExpectedDigest[] {
  const out: ExpectedDigest[] = [];
  const md5 = req.headers['content-md5'];
  if (typeof md5 === 'string') out.push({ algorithm: 'md5', value: decodeMd5(md5, 'Content-MD5'), header: 'Content-MD5' });
  for (const header of ['content-digest', 'repr-digest']) {
    const v = req.headers[header];
    if (typeof v !== 'string') continue;
    const name = header === 'content-digest' ? 'Content-Digest' : 'Repr-Digest';
    for (const member of v.split(',')) {
      const m = /^\s*([a-z0-9-]+)\s*=\s*:([A-Za-z0-9+/]*={0,2}):\s*$/i.exec(member);
      if (!m) throw new AppError('INVALID_HEADER', { header: name, reason: 'expected algorithm=:base64:' });
      const algorithm = DIGEST_ALGOS[m[1]!.toLowerCase()];
      if (!algorithm) continue;
      const value = Buffer.from(m[2]!, 'base64');
      if (value.length !== DIGEST_LEN[algorithm]) throw new AppError('INVALID_HEADER', { header: name, reason: `wrong ${m[1]} digest length` });
      out.push({ algorithm, value, header: name });
    }
  }
  return out;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** One percent-decoded component of the tags header; the header's bytes are read as UTF-8. */
function tagText(s: string): string {
  let text: string;
  try {
    // Node hands header bytes over as Latin-1 characters: back to bytes, then strictly UTF-8.
    text = decodeURIComponent(utf8.decode(Buffer.from(s.replace(/\+/g, ' '), 'latin1')));
  } catch {
    throw new AppError('INVALID_TAGS');
  }
  // Stored as text on every database: no NUL (PostgreSQL cannot hold it) nor any other control character.
  if (/[\u0000-\u001f\u007f]/.test(text)) throw new AppError('INVALID_TAGS');
  return text;
}

/** Tags from the tags header (query-string encoded, `a=1&b=two`, UTF-8). */
export function parseTags(value: string | string[] | undefined): Record<string, string> {
  if (value === undefined) return {};
  if (Array.isArray(value)) value = value.join('&');
  const tags: Record<string, string> = {};
  for (const pair of value.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const k = tagText(eq === -1 ? pair : pair.slice(0, eq));
    const v = eq === -1 ? '' : tagText(pair.slice(eq + 1));
    if (k.length === 0 || k.length >= 256 || v.length === 0 || v.length >= 256) throw new AppError('INVALID_TAGS');
    if (Object.hasOwn(tags, k)) throw new AppError('DUPLICATE_TAG');
    tags[k] = v;
  }
  return tags;
}
