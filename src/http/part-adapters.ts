import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { contentLength, one, query } from './query.js';

/** One part of a multipart upload, as an adapter extracts it from a request. */
export interface PartRequest {
  partNumber: number;
  stream: Readable;
  size: number | null;
  contentType?: string;
}

/**
 * A part adapter (FILES_REST_MULTIPART_PART_FACTORIES): tried in order, the first that returns a
 * part wins; return null to let the next one try.
 */
export interface PartAdapter {
  name: string;
  parse(req: FastifyRequest): Promise<PartRequest | null>;
}

/** Raw part: the body is the part; `partNumber` (or SPEC's `part`) in the query string. */
export const rawPartAdapter: PartAdapter = {
  name: 'raw',
  async parse(req) {
    if (/^multipart\/form-data/i.test(req.headers['content-type'] ?? '')) return null;
    const q = query(req);
    const v = one(q, 'partNumber') ?? one(q, 'part');
    if (v === undefined) return null;
    const size = contentLength(req);
    if (size === null) throw new AppError('CONTENT_LENGTH_REQUIRED');
    // Not a number: NaN, which the domain refuses with the valid range of this upload.
    const partNumber = /^-?\d+$/.test(v) ? Number(v) : NaN;
    return { partNumber, stream: req.raw, size, contentType: req.headers['content-type'] };
  },
};

export async function parsePart(req: FastifyRequest, adapters: readonly PartAdapter[]): Promise<PartRequest> {
  for (const a of adapters) {
    const r = await a.parse(req);
    if (r) return r;
  }
  throw new AppError('NO_PART_DETECTED');
}
