import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { Precondition } from '../domain/preconditions.js';

/** One header's value: `*`, or a comma-separated list of entity tags (`"x"`, `W/"x"`). */
function tags(header: string, value: string | string[] | undefined): '*' | string[] | undefined {
  if (value === undefined) return undefined;
  const raw = Array.isArray(value) ? value.join(',') : value;
  if (raw.trim() === '*') return '*';
  const list = raw.split(',').map((t) => t.trim()).filter(Boolean);
  if (list.length === 0 || !list.every((t) => /^(W\/)?"[^"]*"$/.test(t))) {
    throw new AppError('INVALID_HEADER', { header, reason: 'expected * or a list of quoted entity tags, such as "md5:<hex>"' });
  }
  return list;
}

/**
 * The precondition of a write (PUT, multipart initiation and completion) from `If-Match` and
 * `If-None-Match`; null when neither is sent. The domain decides what it means (domain/preconditions.ts).
 */
export function writePrecondition(req: FastifyRequest): Precondition | null {
  const ifMatch = tags('If-Match', req.headers['if-match']);
  const ifNoneMatch = tags('If-None-Match', req.headers['if-none-match']);
  if (ifMatch === undefined && ifNoneMatch === undefined) return null;
  const p: Precondition = {};
  if (ifMatch !== undefined) p.ifMatch = ifMatch;
  if (ifNoneMatch !== undefined) p.ifNoneMatch = ifNoneMatch;
  return p;
}
