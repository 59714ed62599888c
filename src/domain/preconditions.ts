import { AppError } from '../errors.js';
import type { ObjectVersion } from './models.js';

/**
 * A condition on the current head of a key that a write needs (RFC 9110 §13.1): `If-Match` for
 * optimistic concurrency ("only if nobody changed it since I read it"), `If-None-Match: *` for
 * create-if-absent. Entity tags are quoted as in the ETag header (`"md5:<hex>"`).
 */
export interface Precondition {
  /** `*`: the key must have a current version; a list: its ETag must be one of them (strong comparison). */
  ifMatch?: '*' | readonly string[];
  /** `*`: the key must have no current version; a list: its ETag must be none of them (weak comparison). */
  ifNoneMatch?: '*' | readonly string[];
}

/** The ETag of a version's content, as downloads send it; null for a delete marker. */
export function etagOf(v: ObjectVersion | null): string | null {
  return v?.file ? `"${v.file.checksum ?? ''}"` : null;
}

const weak = (tag: string) => tag.replace(/^W\//, '');

/**
 * Refuses (412) a write whose precondition the current head does not meet. A key whose head is a
 * delete marker has no current version. The caller decides when: before the body is read (an early
 * refusal) and again inside the transaction that makes the new version the head, under the bucket's
 * row lock, so that two writers racing with `If-None-Match: *` cannot both win.
 */
export function checkPrecondition(head: ObjectVersion | null, p: Precondition | null | undefined): void {
  if (!p) return;
  const current = etagOf(head);
  if (p.ifMatch !== undefined) {
    if (current === null) throw new AppError('PRECONDITION_FAILED', { reason: 'the object does not exist (If-Match)' });
    if (p.ifMatch !== '*' && !p.ifMatch.includes(current)) {
      throw new AppError('PRECONDITION_FAILED', { reason: `the object's current ETag is ${current} (If-Match)` });
    }
  }
  if (p.ifNoneMatch !== undefined && current !== null) {
    if (p.ifNoneMatch === '*') throw new AppError('PRECONDITION_FAILED', { reason: 'the object already exists (If-None-Match: *)' });
    if (p.ifNoneMatch.some((t) => weak(t) === current)) {
      throw new AppError('PRECONDITION_FAILED', { reason: `the object's current ETag is ${current} (If-None-Match)` });
    }
  }
}

/** True when a precondition says something (absent headers give none). */
export function hasPrecondition(p: Precondition | null | undefined): p is Precondition {
  return !!p && (p.ifMatch !== undefined || p.ifNoneMatch !== undefined);
}
