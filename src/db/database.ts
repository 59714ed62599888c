import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import {
  CompiledQuery,
  sql,
  Kysely,
  PostgresDialect,
  SqliteDialect,
  SqliteDriver,
  type DatabaseConnection,
  type Driver,
} from 'kysely';
import type { Database, Db, Dialect, Executor, Tx } from './schema.js';

/**
 * SQLite's default `BEGIN` is deferred: a transaction that reads and then writes can fail with
 * SQLITE_BUSY when another process wrote in between. `BEGIN IMMEDIATE` takes the write lock up front,
 * so the API process and a separate worker process serialise cleanly (busy_timeout makes them wait).
 */
class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: ConstructorParameters<typeof SqliteDialect>[0];
  constructor(config: ConstructorParameters<typeof SqliteDialect>[0]) {
    super(config);
    this.#config = config;
  }
  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config);
  }
}

export interface DatabaseHandle {
  db: Db;
  dialect: Dialect;
  close(): Promise<void>;
}

export interface DatabaseOptions {
  /** PostgreSQL pool size. */
  poolSize?: number;
  /** PostgreSQL statement timeout in milliseconds (0: none). */
  statementTimeout?: number;
  /** Milliseconds to wait for a connection (a new one, or a free one of a full pool). */
  connectTimeout?: number;
}

/** What a PostgreSQL pool is doing, for /metrics. */
export interface PoolStats {
  max: number;
  total: number;
  idle: number;
  waiting: number;
}

const pools = new WeakMap<object, () => PoolStats>();

/** The connection pool's use for a database opened by openDatabase; null on SQLite (no pool). */
export function poolStats(db: Db): PoolStats | null {
  return pools.get(db)?.() ?? null;
}

/** Client-side bound on a query beyond the server's statement timeout: catches a silent network. */
const QUERY_TIMEOUT_MARGIN_MS = 5_000;

export async function openDatabase(url: string, opts: DatabaseOptions = {}): Promise<DatabaseHandle> {
  if (url.startsWith('sqlite:')) {
    const { default: SQLite } = await import('better-sqlite3');
    const file = url.slice('sqlite:'.length);
    if (file !== ':memory:') mkdirSync(dirname(resolve(file)), { recursive: true });
    const sqlite = new SQLite(file);
    sqlite.pragma('journal_mode = WAL');
    // FULL: every commit is fsynced, so an acknowledged upload survives a power cut.
    sqlite.pragma('synchronous = FULL');
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 15000');
    // Kysely's driver prepares every statement anew; preparing is a large share of the cost of a small
    // query (14% of a busy server's CPU in the 4 KiB PUT benchmark). Prepared statements are reusable,
    // and the set of distinct SQL texts is small (parameters are bound, not inlined).
    const statements = new Map<string, ReturnType<typeof sqlite.prepare>>();
    const cached = {
      prepare(text: string) {
        let st = statements.get(text);
        if (!st) {
          st = sqlite.prepare(text);
          if (statements.size >= 2000) statements.delete(statements.keys().next().value!);
          statements.set(text, st);
        }
        return st;
      },
      close() {
        statements.clear();
        sqlite.close();
      },
    };
    const db = new Kysely<Database>({ dialect: new ImmediateSqliteDialect({ database: cached as unknown as typeof sqlite }) });
    groupCommits.set(db, new GroupCommit(db));
    return { db, dialect: 'sqlite', close: () => db.destroy() };
  }
  const pg = await import('pg');
  const Pool = pg.default.Pool;
  const int8 = 20;
  const statementTimeout = opts.statementTimeout ?? 30_000;
  const max = opts.poolSize ?? 10;
  const pool = new Pool({
    connectionString: url,
    max,
    // Server side: a statement running longer is cancelled (57014). 0 leaves PostgreSQL's default.
    ...(statementTimeout > 0 ? { statement_timeout: statementTimeout } : {}),
    // Client side: a query whose answer never comes (a silent network, a frozen server) fails
    // instead of hanging the request; BoundedClient then drops that connection.
    ...(statementTimeout > 0 ? { query_timeout: statementTimeout + QUERY_TIMEOUT_MARGIN_MS } : {}),
    connectionTimeoutMillis: opts.connectTimeout ?? 5_000,
    keepAlive: true,
    Client: BoundedClient(pg.default.Client),
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === int8 ? (v: string) => Number(v) : pg.default.types.getTypeParser(oid, format)) as typeof pg.default.types.getTypeParser,
    },
  });
  // An idle client that loses its connection must not crash the process.
  pool.on('error', () => {});
  // Nor one that is checked out: pg emits 'error' on a client whose connection ends, and a client
  // in use has no pool listener. The query in flight (if any) gets the error; the client is not
  // queryable any more, so the pool drops it when it is released.
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  pools.set(db, () => ({ max, total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }));
  return { db, dialect: 'postgres', close: () => db.destroy() };
}

type PgClientClass = typeof import('pg').default.Client;

/**
 * A pg Client that closes its connection when a query hits the client-side query_timeout: the
 * query may still be running (or lost) on that connection, so the connection cannot be reused.
 * Closing it makes the client unqueryable and the pool replaces it.
 */
function BoundedClient(Base: PgClientClass): PgClientClass {
  class Bounded extends Base {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override query(...args: any[]): any {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const result = (Base.prototype.query as (...a: any[]) => any).apply(this, args);
      if (result && typeof (result as Promise<unknown>).then === 'function') {
        (result as Promise<unknown>).then(undefined, (e: unknown) => {
          if ((e as Error)?.message === 'Query read timeout') this.#drop();
        });
      }
      return result;
    }
    #drop(): void {
      const stream = (this as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream;
      stream?.destroy();
    }
  }
  return Bounded as unknown as PgClientClass;
}

const RETRYABLE_PG = new Set(['40001', '40P01']);

/**
 * Runs `fn` in one transaction; retries a few times on PostgreSQL serialization failures and
 * deadlocks, which are the database telling us to try again.
 */
export async function transaction<T>(db: Executor, fn: (tx: Tx) => Promise<T>): Promise<T> {
  if (db.isTransaction) return fn(db as Tx);
  const group = groupCommits.get(db);
  if (group) return group.run(fn);
  for (let attempt = 1; ; attempt++) {
    try {
      return await (db as Db).transaction().execute(fn);
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (attempt < 5 && code && RETRYABLE_PG.has(code)) {
        await new Promise((r) => setTimeout(r, 5 * attempt * Math.random()));
        continue;
      }
      throw e;
    }
  }
}

interface PendingTransaction {
  fn: (tx: Tx) => Promise<unknown>;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/**
 * Group commit for SQLite. SQLite has one writer, and with synchronous=FULL every commit waits for an
 * fsync, on the main thread (better-sqlite3 is synchronous): one commit per upload would cap a
 * server at a few hundred uploads a second and stall everything else meanwhile. Transactions that
 * arrive while one runs are executed one after another inside a single real transaction, each in a
 * savepoint of its own, so a transaction that fails is rolled back alone and reports its own error;
 * every caller is answered only after the shared commit, so an acknowledged change is durable.
 * SQLite already serialises transactions, so running them in sequence changes nothing else.
 * (PostgreSQL groups WAL flushes of concurrent commits by itself; this is SQLite only.)
 */
class GroupCommit {
  #pending: PendingTransaction[] = [];
  #running = false;
  #scheduled = false;
  constructor(private readonly db: Db, private readonly maxBatch = 256) {}

  run<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#pending.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      this.#kick();
    });
  }

  #kick(): void {
    if (this.#running || this.#scheduled || this.#pending.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    this.#running = true;
    const batch = this.#pending.splice(0, this.maxBatch);
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    try {
      await this.db.transaction().execute(async (tx) => {
        if (batch.length === 1) {
          outcomes.push({ ok: true, value: await batch[0]!.fn(tx) });
          return;
        }
        for (const item of batch) {
          await sql`savepoint group_item`.execute(tx);
          try {
            const value = await item.fn(tx);
            await sql`release group_item`.execute(tx);
            outcomes.push({ ok: true, value });
          } catch (error) {
            await sql`rollback to group_item`.execute(tx);
            await sql`release group_item`.execute(tx);
            outcomes.push({ ok: false, error });
          }
        }
      });
    } catch (e) {
      // A lone transaction that threw (rolled back whole, as on its own), or a commit that failed.
      for (const item of batch) item.reject(e);
      this.#running = false;
      this.#kick();
      return;
    }
    batch.forEach((item, i) => {
      const o = outcomes[i]!;
      if (o.ok) item.resolve(o.value);
      else item.reject(o.error);
    });
    this.#running = false;
    this.#kick();
  }
}

const groupCommits = new WeakMap<object, GroupCommit>();

/** True when the error is a unique-constraint violation (either database). */
export function isUniqueViolation(e: unknown): boolean {
  const err = e as { code?: string };
  return err?.code === '23505' || err?.code === 'SQLITE_CONSTRAINT_UNIQUE' || err?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/**
 * True when the error means the database could not be reached or did not answer in time (a
 * statement timeout, 57014, included): the HTTP layer answers 503 with Retry-After.
 */
export function isConnectionError(e: unknown): boolean {
  const err = e as { code?: string; message?: string };
  const code = err?.code ?? '';
  return (
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', '57P01', '57P02', '57P03', '08006', '08001', '08003', '08000', '53300', '57014'].includes(code) ||
    /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Query read timeout|Client was closed and is not queryable/i.test(err?.message ?? '')
  );
}
