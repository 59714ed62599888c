import { sql } from 'kysely';
import { resolve } from 'node:path';
import type { Db, Dialect } from './schema.js';

/**
 * Where DATABASE_URL points, for messages: the SQLite file's absolute path, or PostgreSQL's
 * host:port/database (never the password).
 */
export function describeDatabaseUrl(url: string): string {
  if (url.startsWith('sqlite:')) {
    const file = url.slice('sqlite:'.length);
    return file === ':memory:' || file === '' ? 'an in-memory SQLite database' : resolve(file);
  }
  try {
    const u = new URL(url);
    return `${u.hostname || 'localhost'}:${u.port || 5432}${u.pathname}`;
  } catch {
    return 'an unparsable URL';
  }
}

/**
 * An admin command found no files-rest database where DATABASE_URL points: only `serve`, `worker`
 * and `init` create one, so a command run in the wrong directory does not make an empty database.
 */
export class DatabaseMissingError extends Error {
  constructor(readonly url: string, detail: string) {
    super(
      // The SQLite URL as written (often relative); a PostgreSQL URL is named by its address (detail), never its password.
      `${detail} (${url.startsWith('sqlite:') ? `DATABASE_URL=${url}` : 'DATABASE_URL'}): ` +
        'run the command with the server\'s environment (its directory or its DATABASE_URL); ' +
        '"files-rest init" creates a new database',
    );
    this.name = 'DatabaseMissingError';
  }
}

/** The database could not be reached: names DATABASE_URL and the address, whatever was being done. */
export class DatabaseConnectError extends Error {
  constructor(url: string, cause: unknown) {
    super(`cannot connect to the database at ${describeDatabaseUrl(url)} (DATABASE_URL): ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'DatabaseConnectError';
  }
}

/** True when the database holds a files-rest schema (its migration table), on either database. */
export async function hasSchema(db: Db, dialect: Dialect): Promise<boolean> {
  if (dialect === 'sqlite') {
    const r = await sql<{ n: number }>`select count(*) as n from sqlite_master where type = 'table' and name = 'kysely_migration'`.execute(db);
    return Number(r.rows[0]?.n ?? 0) > 0;
  }
  const r = await sql<{ t: string | null }>`select to_regclass('kysely_migration')::text as t`.execute(db);
  return r.rows[0]?.t != null;
}
