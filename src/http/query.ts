import type { FastifyRequest } from 'fastify';
import { AppError, validationError } from '../errors.js';
import { parseUuid } from '../util/ids.js';
import { validateKeyFilter } from '../domain/keys.js';

export type Query = Record<string, string | string[] | undefined>;

export function query(req: FastifyRequest): Query {
  return (req.query ?? {}) as Query;
}

export function has(q: Query, name: string): boolean {
  return q[name] !== undefined;
}

/** A single-valued parameter; repeating it is refused rather than guessed at. */
export function one(q: Query, name: string): string | undefined {
  const v = q[name];
  if (Array.isArray(v)) throw validationError(name, 'Given more than once.');
  return v;
}

/**
 * A presence flag (`?download`, `?versions`): present with no value or any value but an explicit
 * no (`0`, `false`, `no`). The reference took `?download=0` as yes.
 */
export function flag(q: Query, name: string): boolean {
  const v = one(q, name);
  if (v === undefined) return false;
  return !['0', 'false', 'no', 'off'].includes(v.toLowerCase());
}

export function uuidParam(q: Query, name: string): string | null {
  const v = one(q, name);
  if (v === undefined) return null;
  const id = parseUuid(v);
  if (!id) throw validationError(name, 'Not a valid UUID.');
  return id;
}

export function intParam(q: Query, name: string, opts: { min?: number; max?: number } = {}): number | null {
  const v = one(q, name);
  if (v === undefined || v === '') return null;
  if (!/^\d+$/.test(v)) throw validationError(name, 'Not a valid integer.');
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw validationError(name, 'Number too large.');
  if (opts.min !== undefined && n < opts.min) throw validationError(name, `Must be at least ${opts.min}.`);
  if (opts.max !== undefined && n > opts.max) throw validationError(name, `Must be at most ${opts.max}.`);
  return n;
}

/** Parses a Content-Length header (digits only); null when absent. */
export function contentLength(req: FastifyRequest): number | null {
  const v = req.headers['content-length'];
  if (v === undefined) return null;
  if (!/^\d+$/.test(v)) throw new AppError('INVALID_HEADER', { header: 'Content-Length', reason: 'not a number' });
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new AppError('INVALID_HEADER', { header: 'Content-Length', reason: 'too large' });
  return n;
}

/** A listing's `prefix` or `after`: key text (no control character, valid Unicode), or null when absent or empty. */
export function keyFilterParam(q: Query, name: string): string | null {
  const v = one(q, name);
  if (v === undefined || v === '') return null;
  validateKeyFilter(v, name);
  return v;
}

/** The object key of a URL path segment, percent-decoded once as UTF-8 (Node refuses raw bytes above 0x7F in a path). */
export function decodeKeySegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new AppError('INVALID_KEY', { reason: 'malformed percent-encoding' });
  }
}
