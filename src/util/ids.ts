import { randomFillSync, randomUUID } from 'node:crypto';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A random UUID (version 4): for ids that may be seen and must say nothing (buckets, tokens, uploads). */
export function newId(): string {
  return randomUUID();
}

/** Random bytes drawn in batches: one system call per 409 ordered ids. */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;
const bytes = Buffer.alloc(16);

/**
 * A time-ordered UUID (version 7, RFC 9562): the milliseconds since 1970 in its first 48 bits, then
 * 74 random bits. For rows written at upload rate (object versions, inline file instances): each new
 * id lands at the right edge of its unique index instead of at a random leaf, so a group commit of
 * many uploads writes a few index pages, not one per upload and index (measured with SQLite's WAL:
 * half the statement time per small upload). Not for a file kept on disk: its path splits the id's
 * first characters into directories, which random ids spread and ordered ones would pile into one.
 */
export function newOrderedId(now: number = Date.now()): string {
  if (poolOffset + 10 > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  bytes.writeUIntBE(now, 0, 6);
  pool.copy(bytes, 6, poolOffset, poolOffset + 10);
  poolOffset += 10;
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const h = bytes.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function isUuid(s: string): boolean {
  return UUID_RE.test(s);
}

/** Canonical (lower-case) form of a UUID string, or null when it is not one. */
export function parseUuid(s: string): string | null {
  return UUID_RE.test(s) ? s.toLowerCase() : null;
}
