import { randomUUID } from 'node:crypto';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function newId(): string {
  return randomUUID();
}

export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}

/** Canonical (lower-case) form of a UUID string, or null when it is not one. */
export function parseUuid(s: string): string | null {
  return UUID_RE.test(s) ? s.toLowerCase() : null;
}
