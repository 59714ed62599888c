import { existsSync, mkdirSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import {
  CompiledQuery,
  sql,
  Kysely,
  PostgresDialect,
  SqliteDialect,
  SqliteDriver,
  SelectQueryNode,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
} from 'kysely';
import type { Database, Db, Dialect, Executor, Tx } from './schema.js';
import { DatabaseMissingError } from './presence.js';
import { statementName } from './prepared.js';
import { Checkpointer, WAL_RESTART_BYTES, type CheckpointerStats } from './checkpointer.js';
import { openNodeSqlite, type SqliteStatement } from './node-sqlite.js';
import { registerSqlFunctions, type FunctionRegistry } from './sqlite-functions.js';
import { ReadThreads, ReadThreadLost } from './read-threads.js';

type SqliteDialectDatabase = NonNullable<ConstructorParameters<typeof SqliteDialect>[0]['database']>;

/**
 * SQLite's default `BEGIN` is deferred: a transaction that reads and then writes can fail with
 * SQLITE_BUSY when another process wrote in between. `BEGIN IMMEDIATE` takes the write lock up front,
 * so the API process and a separate worker process serialise cleanly (busy_timeout makes them wait).
 */
class ImmediateSqliteDriver extends SqliteDriver {
  readonly #durability: WalDurability;
  readonly #reads: ReadThreads | null;
  constructor(config: ConstructorParameters<typeof SqliteDriver>[0], durability: WalDurability, reads: ReadThreads | null) {
    super(config);
    this.#durability = durability;
    this.#reads = reads;
  }
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    if (connection instanceof RoutedConnection) await connection.pin();
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
  override async acquireConnection(): Promise<DatabaseConnection> {
    if (this.#reads) return new RoutedConnection(this);
    return this.lockMain();
  }
  override async releaseConnection(connection?: DatabaseConnection): Promise<void> {
    if (connection instanceof RoutedConnection) connection.unpin();
    else this.unlockMain();
  }
  override async destroy(): Promise<void> {
    await this.#reads?.close();
    await super.destroy();
  }

  /** The server's own connection, held until unlockMain (Kysely's mutex: one holder at a time). */
  async lockMain(): Promise<DatabaseConnection> {
    const inner = await super.acquireConnection();
    const d = this.#durability;
    return {
      executeQuery: async (q) => {
        const r = await inner.executeQuery(q);
        if (d.needsSyncAfter(q.sql, r.numAffectedRows)) await d.sync();
        return r;
      },
      streamQuery: (q, chunkSize) => inner.streamQuery(q, chunkSize),
    } as DatabaseConnection;
  }

  unlockMain(): void {
    void super.releaseConnection();
  }

  /** A SELECT on a read thread: its result, or null when no thread took it (run it on the server's connection). */
  read<R>(q: CompiledQuery): Promise<QueryResult<R>> | null {
    const rows = this.#reads?.run(q.sql, q.parameters);
    return rows ? rows.then((r) => ({ rows: r as R[] })) : null;
  }
}

/**
 * A connection as Kysely sees it when SQLite's reads may go to read threads (read-threads.ts): a
 * SELECT outside a transaction runs on a read thread when one is ready; every other statement takes
 * the server's connection for itself alone; a transaction holds the server's connection from its
 * BEGIN to its release, and all its statements, SELECTs included, run there.
 */
class RoutedConnection implements DatabaseConnection {
  #main: DatabaseConnection | null = null;
  constructor(private readonly driver: ImmediateSqliteDriver) {}

  async pin(): Promise<void> {
    if (!this.#main) this.#main = await this.driver.lockMain();
  }

  unpin(): void {
    if (!this.#main) return;
    this.#main = null;
    this.driver.unlockMain();
  }

  async executeQuery<R>(q: CompiledQuery): Promise<QueryResult<R>> {
    if (this.#main) return this.#main.executeQuery<R>(q);
    if (SelectQueryNode.is(q.query)) {
      const read = this.driver.read<R>(q);
      if (read) {
        try {
          return await read;
        } catch (e) {
          // Lost with its thread: run here instead.
          if (!(e instanceof ReadThreadLost)) throw e;
        }
      }
    }
    const main = await this.driver.lockMain();
    try {
      return await main.executeQuery<R>(q);
    } finally {
      this.driver.unlockMain();
    }
  }

  async *streamQuery<R>(q: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    if (this.#main) {
      yield* this.#main.streamQuery<R>(q, chunkSize);
      return;
    }
    const main = await this.driver.lockMain();
    try {
      yield* main.streamQuery<R>(q, chunkSize);
    } finally {
      this.driver.unlockMain();
    }
  }
}

const DML = /^\s*(insert|update|delete)\b/i;

class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: ConstructorParameters<typeof SqliteDialect>[0];
  constructor(
    config: ConstructorParameters<typeof SqliteDialect>[0],
    private readonly durability: WalDurability,
    private readonly reads: ReadThreads | null,
  ) {
    super(config);
    this.#config = config;
  }
  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config, this.durability, this.reads);
  }
}

/** The part of better-sqlite3 that WalDurability uses. */
interface SqliteHandle {
  readonly inTransaction: boolean;
  prepare(text: string): { readonly reader: boolean; all(params?: readonly unknown[]): unknown[] };
}

/**
 * Durable commits without stalling the event loop. With `synchronous = FULL` SQLite fsyncs the WAL
 * inside COMMIT, and better-sqlite3 runs COMMIT on the main thread: every commit froze the whole
 * server for one disk flush (a tenth of the small-upload benchmark's time). Instead the connection
 * runs with `synchronous = NORMAL` (commits are written to the WAL, not flushed), and the WAL is
 * flushed here, with fdatasync on libuv's thread pool, before any caller learns of its commit:
 * - a group commit (all of `transaction()`) waits for a flush started after its COMMIT, outside the
 *   connection, so the next group runs while this one's flush is in flight;
 * - a write outside a transaction (or a transaction not run by `transaction()`) is flushed before its
 *   statement returns.
 * Flushes are shared: callers that arrive while one runs wait for the next, which covers them all.
 * SQLite itself still flushes the WAL before each checkpoint (NORMAL does that), so checkpoints stay safe.
 */
export class WalDurability {
  #running: Promise<void> | null = null;
  #next: Promise<void> | null = null;
  #dirSynced = false;
  /** Completed flushes (tests, observability). */
  flushes = 0;
  /** Called after each flush (the checkpoint thread's wake-up). */
  afterFlush: (() => void) | null = null;
  /** Set while a group commit holds the connection: its COMMIT is flushed by the group, after release. */
  deferCommit = false;
  constructor(private readonly sqlite: SqliteHandle, private readonly walPath: string | null) {}

  /**
   * True when a statement that just ran changed the database outside a transaction and must be
   * flushed now; `affected` is the rows it changed, when the driver says.
   */
  needsSyncAfter(text: string, affected?: bigint): boolean {
    if (this.walPath === null || this.sqlite.inTransaction) return false;
    if (DML.test(text)) {
      // A write, with RETURNING or not; one that changed no row (a task poll that found nothing) wrote nothing to flush.
      return affected !== 0n;
    }
    if (this.sqlite.prepare(text).reader) return false;
    if (this.deferCommit && /^\s*(commit|end)\b/i.test(text)) {
      this.deferCommit = false;
      return false;
    }
    return !/^\s*(rollback|release)\b/i.test(text);
  }

  /**
   * Rows inserted, updated or deleted on the connection so far (SQLite's total_changes()): a group
   * commit during which it did not move wrote nothing, and has nothing to flush (a task poll that
   * found no task). Statements that change no row but the schema never run in a group.
   */
  totalChanges(): number {
    const [row] = this.sqlite.prepare('select total_changes() as n').all() as { n: number | bigint }[];
    return Number(row!.n);
  }

  /** Resolves once everything committed before the call is on stable storage. */
  sync(): Promise<void> {
    if (this.walPath === null) return Promise.resolve();
    if (!this.#running) return (this.#running = this.#flush());
    if (!this.#next) {
      this.#next = this.#running
        .catch(() => {})
        .then(() => {
          this.#next = null;
          return (this.#running = this.#flush());
        });
    }
    return this.#next;
  }

  async #flush(): Promise<void> {
    try {
      let h: FileHandle;
      try {
        h = await open(this.walPath!, 'r');
      } catch (e) {
        // No WAL file: nothing was written since the last checkpoint reset it (or SQLite is not in WAL mode).
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw e;
      }
      try {
        await h.datasync();
      } finally {
        await h.close();
      }
      this.flushes++;
      this.afterFlush?.();
      if (!this.#dirSynced) {
        // The WAL file's own directory entry, once: it is created on the first write after opening.
        const d = await open(dirname(this.walPath!), 'r');
        try {
          await d.sync();
        } finally {
          await d.close();
        }
        this.#dirSynced = true;
      }
    } finally {
      this.#running = null;
    }
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
  /** PostgreSQL: send the compiled hot queries as named prepared statements (default true). */
  namedStatements?: boolean;
  /** SQLite: bytes of the database file read through a memory map (0: none). */
  sqliteMmapSize?: number;
  /** SQLite: the driver, better-sqlite3 (default) or Node's built-in node:sqlite. */
  sqliteDriver?: 'better-sqlite3' | 'node';
  /** SQLite: fail (DatabaseMissingError) instead of creating the file when it does not exist. */
  mustExist?: boolean;
  /** SQLite: WAL checkpoints on a thread of their own (db/checkpointer.ts) instead of inside a COMMIT; default true. */
  checkpointThread?: boolean;
  /** SQLite: at most this many threads run SELECTs outside transactions (db/read-threads.ts); 0: all on the event loop. Default 1. */
  sqliteReadThreads?: number;
  /** SQLite: no read thread starts until startupWritesDone (a server's start-up reads fast, then may idle). */
  sqliteReadThreadsHeld?: boolean;
  /** SQLite: no checkpoint thread starts until startupWritesDone (a server's start-up writes its migrations one statement at a time, then may idle). */
  sqliteCheckpointsHeld?: boolean;
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

/** How much of a SQLite database file is read through a memory map (the rest is read with pread). */
const DEFAULT_SQLITE_MMAP_BYTES = 1024 ** 3;

/** Client-side bound on a query beyond the server's statement timeout: catches a silent network. */
const QUERY_TIMEOUT_MARGIN_MS = 5_000;

export async function openDatabase(url: string, opts: DatabaseOptions = {}): Promise<DatabaseHandle> {
  if (url.startsWith('sqlite:')) {
    const file = url.slice('sqlite:'.length);
    const inMemory = file === ':memory:' || file === '';
    if (opts.mustExist && !inMemory && !existsSync(file)) throw new DatabaseMissingError(url, `no database file at ${resolve(file)}`);
    if (!inMemory) mkdirSync(dirname(resolve(file)), { recursive: true });
    const sqlite = opts.sqliteDriver === 'node' ? openNodeSqlite(file) : new (await import('better-sqlite3')).default(file);
    sqlite.pragma('journal_mode = WAL');
    registerSqlFunctions(sqlite as unknown as FunctionRegistry);
    // NORMAL, and WalDurability flushes the WAL off the main thread before any commit is acknowledged:
    // an acknowledged upload survives a power cut, as with FULL, without freezing the event loop.
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 15000');
    // Savepoint and statement journals in memory. A group commit runs each upload under a savepoint;
    // its journal (the pages' contents before that upload) spilled to a temporary file past 64 KiB,
    // and those writes, two system calls per page on the event loop, outnumbered the WAL's own
    // (traced in the 4 KiB PUT benchmark: 50 000 journal pages against 20 000 WAL frames). The
    // journals live only as long as one transaction, whose size the server bounds.
    sqlite.pragma('temp_store = MEMORY');
    // Reads through a memory map of the database file instead of a pread() per page: a listing page
    // of 1000 objects visits a few thousand B-tree pages, and the system calls were a quarter of its
    // time. The mapped pages are the kernel's page cache (shared, reclaimable), but they count in the
    // process's RSS once read.
    const mmapSize = Math.max(0, Math.floor(opts.sqliteMmapSize ?? DEFAULT_SQLITE_MMAP_BYTES));
    sqlite.pragma(`mmap_size = ${mmapSize}`);
    // Kysely's driver prepares every statement anew; preparing is a large share of the cost of a small
    // query (14% of a busy server's CPU in the 4 KiB PUT benchmark). Prepared statements are reusable,
    // and the set of distinct SQL texts is small (parameters are bound, not inlined).
    const statements = new Map<string, SqliteStatement>();
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
    // Checkpoints off the event loop (db/checkpointer.ts); if that thread fails, SQLite's own again.
    let checkpointer: Checkpointer | null = null;
    if (!inMemory && opts.checkpointThread !== false) {
      sqlite.pragma('wal_autocheckpoint = 0');
      // Once the thread has restarted the WAL, the next commit cuts the file back to this length.
      sqlite.pragma(`journal_size_limit = ${WAL_RESTART_BYTES}`);
      checkpointer = new Checkpointer(resolve(file), opts.sqliteDriver ?? 'better-sqlite3', opts.sqliteCheckpointsHeld ?? false, (err) => {
        process.emitWarning(`files-rest: SQLite's checkpoint thread stopped (${String((err as Error)?.message ?? err)}); checkpoints run inside commits again`);
        try {
          sqlite.pragma('wal_autocheckpoint = 1000');
        } catch {
          // The connection is closed already.
        }
      });
    }
    const durability = new WalDurability({ get inTransaction() { return sqlite.inTransaction; }, prepare: (t) => cached.prepare(t) }, inMemory ? null : `${resolve(file)}-wal`);
    if (checkpointer) durability.afterFlush = () => checkpointer!.wake();
    const readThreads = opts.sqliteReadThreads ?? 1;
    const reads = inMemory || readThreads <= 0 ? null : new ReadThreads(resolve(file), opts.sqliteDriver ?? 'better-sqlite3', mmapSize, readThreads);
    const db = new Kysely<Database>({ dialect: new ImmediateSqliteDialect({ database: cached as unknown as SqliteDialectDatabase }, durability, reads) });
    if (reads) {
      reads.held = opts.sqliteReadThreadsHeld ?? false;
      readThreadPools.set(db, reads);
    }
    const group = new GroupCommit(db, durability);
    // The checkpoint thread's RESTART holds SQLite's writer: new groups wait for it here, not in
    // SQLite's busy handler, which sleeps on the event loop.
    if (checkpointer) {
      checkpointer.writer = group;
      checkpointers.set(db, checkpointer);
    }
    groupCommits.set(db, group);
    durabilities.set(db, durability);
    return {
      db,
      dialect: 'sqlite',
      close: async () => {
        await durability.sync();
        await checkpointer?.stop();
        await db.destroy();
      },
    };
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
    Client: BoundedClient(pg.default.Client, opts.namedStatements ?? true),
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
  bucketGroups.set(db, new BucketGroups(db));
  pools.set(db, () => ({ max, total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }));
  return { db, dialect: 'postgres', close: () => db.destroy() };
}

type PgClientClass = typeof import('pg').default.Client;

/**
 * A pg Client that closes its connection when a query hits the client-side query_timeout: the
 * query may still be running (or lost) on that connection, so the connection cannot be reused.
 * Closing it makes the client unqueryable and the pool replaces it.
 *
 * With `named`, a query compiled once by `prepared()` goes out as a named prepared statement: pg
 * parses it on the connection's first use and then sends only Bind and Execute, so PostgreSQL
 * neither parses nor plans it again (it keeps a generic plan once that is as good as a custom one).
 */
function BoundedClient(Base: PgClientClass, named: boolean): PgClientClass {
  class Bounded extends Base {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override query(...args: any[]): any {
      if (named && typeof args[0] === 'string' && Array.isArray(args[1]) && args.length === 2) {
        const name = statementName(args[0]);
        if (name !== undefined) args = [{ name, text: args[0], values: args[1] }];
      }
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

export interface TransactionOptions {
  /** The transaction begins with this bucket's row lock: on PostgreSQL it is grouped with the bucket's others. */
  bucket?: string;
  /**
   * `fn` does nothing but its statements in `tx` (no change outside the database, no state kept
   * between runs), so it may run again, whole, after a rollback it did not cause. A group of such
   * transactions runs without a savepoint per transaction (see GroupCommit).
   */
  rerunnable?: boolean;
  /**
   * With `rerunnable`: the same transaction as one of many that one statement can run together (see
   * `BatchedTransaction`). A group whose transactions all carry a batch with the same `run` runs them so.
   */
  batch?: AnyBatch;
}

/** A BatchedTransaction of any kind (the group compares their `run`s, and never looks inside). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyBatch = BatchedTransaction<any, any, any>;

/**
 * A transaction that a group may run together with others of its kind: `run` executes the statements
 * of all of them at once, given each one's `args` (in the group's order), and answers one result per
 * transaction, or null to decline (the group then runs each transaction's own `fn`); then each one's
 * `finish` is given its result, in order, and may run further statements. `fn` must do exactly what
 * `run` for its `args` alone and its `finish` do, so that either way gives the same outcome: should
 * `run` or a `finish` throw, the group is rolled back and run again as without batches (each `fn` in
 * its savepoint). `run` comes before the group's `begin` (PostgreSQL: the bucket's row lock), which
 * runs only if it declines: its statement takes the locks it needs, and must fail, not write wrongly,
 * when what it read was changed by a transaction it waited for (storeBatch: a second head).
 * PostgreSQL: N uploads' commits to one bucket in one statement instead of N (objects.ts, storeBatch),
 * a round trip per upload less under the bucket's lock.
 */
export interface BatchedTransaction<A, R, T> {
  run: (tx: Tx, args: A[]) => Promise<R[] | null>;
  args: A;
  finish: (tx: Tx, result: R) => Promise<T>;
}

/**
 * Runs `fn` in one transaction; retries a few times on PostgreSQL serialization failures and
 * deadlocks, which are the database telling us to try again.
 *
 * `bucket`: the transaction begins with that bucket's row lock (`lockBucketForWrite`). On
 * PostgreSQL the transactions of one bucket are then committed in groups (GroupCommit), since the
 * lock would make them commit one by one; on SQLite every transaction is grouped anyway.
 */
export async function transaction<T>(db: Executor, fn: (tx: Tx) => Promise<T>, opts: TransactionOptions = {}): Promise<T> {
  if (db.isTransaction) return fn(db as Tx);
  const rerunnable = opts.rerunnable === true;
  const batch = rerunnable ? opts.batch : undefined;
  const group = groupCommits.get(db);
  if (group) return group.run(fn, rerunnable, batch);
  if (opts.bucket !== undefined) {
    const groups = bucketGroups.get(db);
    if (groups) return groups.run(opts.bucket, fn, rerunnable, batch);
  }
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
  /** May run again after a rollback of its group (TransactionOptions.rerunnable). */
  rerunnable: boolean;
  /** TransactionOptions.batch. */
  batch?: AnyBatch;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  /** PostgreSQL: the how-many-th run of this transaction (deadlocks and serialization failures are retried). */
  attempt: number;
}

/**
 * Group commit. Transactions that arrive while one runs are executed one after another inside a
 * single real transaction, each in a savepoint of its own, so a transaction that fails is rolled
 * back alone and reports its own error; every caller is answered only after the shared commit, so an
 * acknowledged change is durable.
 *
 * - SQLite has one writer and every commit waits for a flush of the WAL (WalDurability): one commit
 *   per upload would cap a server at a few hundred uploads a second. SQLite already serialises
 *   transactions, so running them in sequence changes nothing else.
 * - PostgreSQL would group the WAL flushes of concurrent commits by itself, but every write to a
 *   bucket's objects holds the bucket's row lock until its commit (ledger.ts), so writers to one
 *   bucket commit one by one, each waiting for its own flush (W3 on PostgreSQL: 300 uploads a
 *   second). So the transactions that name their bucket (`transaction(db, fn, { bucket })`) are
 *   grouped per bucket, and share one flush; a group holds one connection, and every other
 *   transaction runs alone, as before. A group holds only its bucket's lock first, as each of its
 *   transactions alone would, so groups of other processes wait for it rather than deadlock. An
 *   item that PostgreSQL fails as a deadlock or serialization failure is run again in a later
 *   group, as `transaction` retries a lone one.
 *
 * A savepoint per transaction costs a statement (on PostgreSQL a round trip of about 150 µs while the
 * bucket's lock is held, on SQLite two statements on the event loop). A group whose transactions are
 * all rerunnable (an upload's commit) runs without them: should one of its transactions fail, the
 * whole group is rolled back and run again, each transaction in its savepoint as above, and so are the
 * next few groups (CAREFUL_GROUPS_AFTER_FAILURE), since failures come in runs (a full bucket, a key
 * raced by If-None-Match). A transaction is answered only after the commit that kept it, as before.
 */
const CAREFUL_GROUPS_AFTER_FAILURE = 8;

class GroupCommit {
  #pending: PendingTransaction[] = [];
  #running = false;
  #scheduled = false;
  /** Set by `pause()`: no group starts until `resume()`. */
  #paused = false;
  /** Who waits in `pause()` for the group under way to end. */
  #pausing: Array<() => void> = [];
  /** Transactions given to this group and not yet answered (retries included). */
  #unanswered = 0;
  /** How many more groups run with a savepoint per transaction, whatever they hold (after a failure). */
  #careful = 0;
  constructor(
    private readonly db: Db,
    private readonly durability: WalDurability | null,
    private readonly maxBatch = 256,
    /** Called when the last transaction given to this group has been answered. */
    private readonly onIdle?: () => void,
    /**
     * Release a savepoint and open the next in one statement text (PostgreSQL's simple query runs
     * several; SQLite's prepared statements take one). Each item then costs one round trip less.
     */
    private readonly combineSavepoints = false,
    /**
     * Run first in each group's transaction (PostgreSQL: the bucket's row lock). A statement that
     * waits for a lock keeps the snapshot it began with for its other parts; once the group holds the
     * lock, every statement of its transactions begins after the last writer's commit and sees it.
     */
    private readonly begin?: (tx: Tx) => Promise<void>,
  ) {}

  run<T>(fn: (tx: Tx) => Promise<T>, rerunnable = false, batch?: AnyBatch): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#unanswered++;
      const answered = () => {
        if (--this.#unanswered === 0) this.onIdle?.();
      };
      this.#pending.push({
        fn,
        rerunnable,
        batch,
        resolve: (v) => {
          answered();
          resolve(v as T);
        },
        reject: (e) => {
          answered();
          reject(e);
        },
        attempt: 1,
      });
      this.#kick();
    });
  }

  /**
   * Starts no group until `resume()`; resolves once the group under way (if any) has committed. The
   * transactions given meanwhile wait, without blocking the event loop (SQLite's checkpoint thread
   * holds the writer while it restarts the WAL: see checkpointer.ts).
   */
  pause(): Promise<void> {
    this.#paused = true;
    if (!this.#running) return Promise.resolve();
    return new Promise((resolve) => this.#pausing.push(resolve));
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#kick();
  }

  #kick(): void {
    if (this.#paused || this.#running || this.#scheduled || this.#pending.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (this.#paused) return;
      void this.#flush();
    });
  }

  async #flush(): Promise<void> {
    this.#running = true;
    const batch = this.#pending.splice(0, this.maxBatch);
    const outcomes: Array<{ ok: true; value: unknown } | { ok: false; error: unknown }> = [];
    let failure: { error: unknown } | null = null;
    const changesBefore = this.durability?.totalChanges() ?? 0;
    // Without savepoints (see the class's comment): set when one of its transactions threw.
    const optimistic = batch.length > 1 && this.#careful === 0 && batch.every((item) => item.rerunnable);
    if (this.#careful > 0) this.#careful--;
    let optimisticFailed = false;
    try {
      await this.db.transaction().execute(async (tx) => {
        // SQLite: this transaction's COMMIT is flushed below, once the connection is free for the next group.
        if (this.durability) this.durability.deferCommit = true;
        // A group that runs as one batch lets its statement take what it locks (BatchedTransaction).
        const batchRun = optimistic && batch[0]!.batch && batch.every((item) => item.batch?.run === batch[0]!.batch!.run) ? batch[0]!.batch.run : null;
        if (this.begin && !batchRun) await this.begin(tx);
        if (batch.length === 1) {
          outcomes.push({ ok: true, value: await batch[0]!.fn(tx) });
          return;
        }
        if (optimistic) {
          // Transactions of one kind, all of them: one statement for the group (BatchedTransaction).
          if (batchRun) {
            let results: unknown[] | null;
            try {
              results = await batchRun(tx, batch.map((item) => item.batch!.args));
              if (results !== null) {
                if (results.length !== batch.length) throw new Error(`a batch answered ${results.length} results for ${batch.length} transactions`);
                for (const [i, item] of batch.entries()) outcomes.push({ ok: true, value: await item.batch!.finish(tx, results[i]) });
              }
            } catch (error) {
              optimisticFailed = true;
              throw error;
            }
            if (results !== null) return;
            // Declined (before any statement): one by one, after the group's own first statement.
            if (this.begin) await this.begin(tx);
          }
          for (const item of batch) {
            try {
              outcomes.push({ ok: true, value: await item.fn(tx) });
            } catch (error) {
              optimisticFailed = true;
              throw error;
            }
          }
          return;
        }
        // Set when the previous item's release also opened this item's savepoint.
        let opened = false;
        for (const [i, item] of batch.entries()) {
          if (!opened) await sql`savepoint group_item`.execute(tx);
          opened = false;
          try {
            const value = await item.fn(tx);
            if (this.combineSavepoints && i < batch.length - 1) {
              // One round trip instead of two: PostgreSQL runs both in one simple query.
              await sql.raw('release group_item; savepoint group_item').execute(tx);
              opened = true;
            } else await sql`release group_item`.execute(tx);
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
      failure = { error: e };
    }
    if (this.durability) this.durability.deferCommit = false;
    this.#running = false;
    for (const paused of this.#pausing.splice(0)) paused();
    if (optimisticFailed) {
      // Rolled back whole: every transaction of the group runs again, first, each in its savepoint.
      this.#careful = CAREFUL_GROUPS_AFTER_FAILURE;
      this.#pending.unshift(...batch);
      this.#kick();
      return;
    }
    if (failure) {
      batch.forEach((item) => this.#fail(item, failure.error));
      this.#kick();
      return;
    }
    this.#kick();
    try {
      if (this.durability && this.durability.totalChanges() !== changesBefore) await this.durability.sync();
    } catch (e) {
      for (const item of batch) item.reject(e);
      return;
    }
    batch.forEach((item, i) => {
      const o = outcomes[i]!;
      if (o.ok) item.resolve(o.value);
      else this.#fail(item, o.error);
    });
    this.#kick();
  }

  /** Rejects an item, or queues it again when PostgreSQL asks for a retry (as `transaction` does). */
  #fail(item: PendingTransaction, error: unknown): void {
    const code = (error as { code?: string }).code;
    if (item.attempt < 5 && code && RETRYABLE_PG.has(code)) {
      item.attempt++;
      this.#pending.push(item);
      return;
    }
    item.reject(error);
  }
}

/** PostgreSQL: a GroupCommit per bucket with transactions waiting or running, dropped when it drains. */
class BucketGroups {
  readonly #groups = new Map<string, GroupCommit>();
  constructor(private readonly db: Db) {}

  run<T>(bucketId: string, fn: (tx: Tx) => Promise<T>, rerunnable: boolean, batch?: AnyBatch): Promise<T> {
    let g = this.#groups.get(bucketId);
    if (!g) {
      g = new GroupCommit(
        this.db,
        null,
        256,
        () => {
          if (this.#groups.get(bucketId) === g) this.#groups.delete(bucketId);
        },
        true,
        // The lock each of its transactions would take first (ledger.ts's lockBucketForWrite holds the
        // same row in the same mode): an upload's commit is then one statement (objects.ts, storeAll).
        async (tx) => {
          await sql`select 1 from buckets where id = ${bucketId} for no key update`.execute(tx);
        },
      );
      this.#groups.set(bucketId, g);
    }
    return g.run(fn, rerunnable, batch);
  }
}

const groupCommits = new WeakMap<object, GroupCommit>();
const bucketGroups = new WeakMap<object, BucketGroups>();
const durabilities = new WeakMap<object, WalDurability>();
const checkpointers = new WeakMap<object, Checkpointer>();
const readThreadPools = new WeakMap<object, ReadThreads>();

/** What the read threads of a SQLite database opened by openDatabase have done; null without them. */
export function readThreadStats(db: Db): ReadThreads['stats'] | null {
  return readThreadPools.get(db)?.stats ?? null;
}

/** What the checkpoint thread of a SQLite database opened by openDatabase has done; null without one. */
export function checkpointerStats(db: Db): CheckpointerStats | null {
  return checkpointers.get(db)?.stats ?? null;
}

/**
 * After a server's start-up (migrations, first location and token, the first lookups): its writes
 * start no checkpoint thread (checkpointer.ts), and from now on reads may start read threads
 * (read-threads.ts; the start-up's reads came fast enough to start one in every new server).
 */
export function startupWritesDone(db: Db): void {
  checkpointers.get(db)?.forgetStartupCommits();
  readThreadPools.get(db)?.release();
}

/** The WAL flusher of a SQLite database opened by openDatabase; null on PostgreSQL. */
export function walDurability(db: Db): WalDurability | null {
  return durabilities.get(db) ?? null;
}

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
