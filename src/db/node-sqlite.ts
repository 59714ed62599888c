/**
 * node:sqlite (built into Node.js 22.5+, no compiler needed; files-rest needs 22.13+, whose node:sqlite defines SQL functions) behind the small part of better-sqlite3's
 * interface that Kysely's SqliteDialect and files-rest use: `prepare(text)` returning a statement
 * with `reader`, `all(params)`, `run(params)` and `iterate(params)`; `inTransaction`; `pragma`;
 * `close`. Chosen with FILES_REST_SQLITE_DRIVER=node; the default stays better-sqlite3 (README,
 * "SQLite drivers", has the measurements behind that choice).
 */
import { createRequire } from 'node:module';

interface NodeStatement {
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  iterate(...params: unknown[]): IterableIterator<unknown>;
  columns(): unknown[];
}

interface NodeDatabase {
  prepare(text: string): NodeStatement;
  /** Node.js 22.13 and later (absent before). */
  function?(name: string, options: { deterministic: boolean }, fn: (...args: never[]) => unknown): void;
  exec(text: string): void;
  close(): void;
  readonly isTransaction: boolean;
}

/** A statement with better-sqlite3's calling convention (one array of parameters). */
export interface SqliteStatement {
  readonly reader: boolean;
  all(params?: readonly unknown[]): unknown[];
  run(params?: readonly unknown[]): { changes: number | bigint; lastInsertRowid: number | bigint };
  iterate(params?: readonly unknown[]): IterableIterator<unknown>;
}

export interface SqliteConnection {
  prepare(text: string): SqliteStatement;
  /** A scalar SQL function written in JavaScript (sqlite-functions.ts). */
  function(name: string, options: { deterministic: boolean }, fn: (...args: never[]) => unknown): unknown;
  pragma(text: string): void;
  readonly inTransaction: boolean;
  close(): void;
}

/** node:sqlite binds numbers, bigints, strings, null and byte arrays; booleans are stored as SQLite does (0/1). */
function bindable(params: readonly unknown[] | undefined): unknown[] {
  if (!params) return [];
  return params.map((p) => (typeof p === 'boolean' ? (p ? 1 : 0) : p === undefined ? null : p));
}

/** Opens `file` with node:sqlite; throws a message naming the setting when this Node.js has none. */
export function openNodeSqlite(file: string): SqliteConnection {
  const require = createRequire(import.meta.url);
  let mod: { DatabaseSync: { new (path: string): NodeDatabase; prototype: NodeDatabase } };
  try {
    mod = require('node:sqlite') as typeof mod;
  } catch {
    throw new Error(`FILES_REST_SQLITE_DRIVER=node needs Node.js 22.13 or later, with node:sqlite (this is ${process.version})`);
  }
  if (typeof mod.DatabaseSync.prototype.function !== 'function') {
    throw new Error(`FILES_REST_SQLITE_DRIVER=node needs Node.js 22.13 or later, whose node:sqlite can define SQL functions (this is ${process.version})`);
  }
  const db = new mod.DatabaseSync(file);
  return {
    prepare(text: string): SqliteStatement {
      const st = db.prepare(text);
      const reader = st.columns().length > 0;
      return {
        reader,
        all: (params) => st.all(...bindable(params)),
        run: (params) => st.run(...bindable(params)),
        iterate: (params) => st.iterate(...bindable(params)),
      };
    },
    pragma(text: string) {
      db.exec(`pragma ${text}`);
    },
    function(name, options, fn) {
      db.function!(name, options, fn);
    },
    get inTransaction() {
      return db.isTransaction;
    },
    close() {
      db.close();
    },
  };
}
