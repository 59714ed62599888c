import { createHash } from 'node:crypto';

/**
 * The SQL functions files-rest's queries use that SQLite lacks and PostgreSQL has, registered on
 * every SQLite connection that runs them (the server's and each read thread's):
 *
 * - `md5(blob)`: the hex MD5 of the bytes, as PostgreSQL's `md5(bytea)`; null for null. A download of
 *   a file kept in the database reads its bytes with its version and checks them against the file's
 *   MD5 (FILES_REST_CHECK_DOWNLOADS=small); the digest is computed where the statement runs, on a
 *   read thread or in PostgreSQL, instead of on the event loop (objects.ts, `bytesReadWith`).
 */
export interface FunctionRegistry {
  function(name: string, options: { deterministic: boolean }, fn: (...args: never[]) => unknown): unknown;
}

function md5Hex(bytes: Uint8Array | null): string | null {
  return bytes === null || bytes === undefined ? null : createHash('md5').update(bytes).digest('hex');
}

export function registerSqlFunctions(db: FunctionRegistry): void {
  db.function('md5', { deterministic: true }, md5Hex as (...args: never[]) => unknown);
}
