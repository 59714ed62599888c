import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { CHECKPOINT_IDLE_TICKS, CHECKPOINT_INTERVAL_MS, CHECKPOINT_START_COMMITS, WAL_RESTART_BYTES } from '../src/db/checkpointer.js';
import { checkpointerStats, isUniqueViolation, startupWritesDone, openDatabase, transaction, walDurability, type DatabaseHandle, type WalDurability } from '../src/db/database.js';
import type { Tx } from '../src/db/schema.js';
import { migrateToLatest } from '../src/db/migrations.js';
import { loadConfig } from '../src/config.js';
import { createServer, startServer } from '../src/service.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { threadsNamed } from './support/threads.js';

async function waitUntil(ok: () => boolean, ms: number): Promise<void> {
  for (const end = Date.now() + ms; !ok() && Date.now() < end; ) await new Promise((r) => setTimeout(r, 25));
}
import { findBucket } from '../src/domain/buckets.js';
import { createPgDatabase, testDatabase } from './support/server.js';

/** TEST_SQLITE_DRIVER=node runs these tests on node:sqlite. */
function testDriver(): 'better-sqlite3' | 'node' {
  return process.env.TEST_SQLITE_DRIVER === 'node' ? 'node' : 'better-sqlite3';
}

/** Checkpoint threads of this process (Linux: their names). */
const threads = () =>
  process.platform === 'linux'
    ? threadsNamed('files-rest-ckpt')
    : 0;

describe('FILES_REST_SQLITE_DRIVER', () => {
  it('is better-sqlite3 by default, node on request, and anything else is refused naming the setting', () => {
    assert.equal(loadConfig({}).sqliteDriver, 'better-sqlite3');
    assert.equal(loadConfig({ FILES_REST_SQLITE_DRIVER: 'node' }).sqliteDriver, 'node');
    assert.throws(() => loadConfig({ FILES_REST_SQLITE_DRIVER: 'sqlite3' }), /FILES_REST_SQLITE_DRIVER/);
  });

  it('node:sqlite opens the same database in WAL mode where Node.js has it, and is refused by name where not', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'files-rest-nodesqlite-'));
    try {
      const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
      // 22.13: node:sqlite defines SQL functions (md5, sqlite-functions.ts).
      const hasNodeSqlite = major > 22 || (major === 22 && minor >= 13);
      const url = `sqlite:${join(dir, 'meta.db')}`;
      if (!hasNodeSqlite) {
        await assert.rejects(openDatabase(url, { sqliteDriver: 'node' }), /FILES_REST_SQLITE_DRIVER=node needs Node\.js 22\.13/);
        return;
      }
      const n = await openDatabase(url, { sqliteDriver: 'node' });
      try {
        await migrateToLatest(n.db, n.dialect);
        assert.equal((await sql<{ journal_mode: string }>`pragma journal_mode`.execute(n.db)).rows[0]!.journal_mode, 'wal');
        await transaction(n.db, (tx) => tx.insertInto('locations').values({ id: 'n1', name: 'n1', uri: '/tmp/n1', is_default: 0, created: 0, updated: 0 }).execute());
        const r = await n.db.selectFrom('locations').select(['name']).where('id', '=', 'n1').executeTakeFirstOrThrow();
        assert.equal(r.name, 'n1');
        assert.ok(walDurability(n.db)!.flushes >= 1, 'the commit was flushed before it returned');
        const digest = await sql<{ h: string | null; n: string | null }>`select md5(x'616263') as h, md5(null) as n`.execute(n.db);
        assert.deepEqual({ ...digest.rows[0] }, { h: '900150983cd24fb0d6963f7d28e17f72', n: null });
      } finally {
        await n.close();
      }
      // The file is an ordinary SQLite database: better-sqlite3 reads what node:sqlite wrote.
      const b = await openDatabase(url);
      try {
        assert.equal((await b.db.selectFrom('locations').select(['name']).where('id', '=', 'n1').executeTakeFirstOrThrow()).name, 'n1');
      } finally {
        await b.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

// The embedded database's durability: commits are flushed off the main thread, and nobody hears of a
// commit before the flush that covers it. (SQLite only: PostgreSQL flushes its WAL itself.)
describe('SQLite commits are flushed before they are acknowledged', () => {
  let dir: string;
  let h: DatabaseHandle;
  let wal: WalDurability;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'files-rest-db-'));
    h = await openDatabase(`sqlite:${join(dir, 'meta.db')}`, { sqliteDriver: testDriver() });
    await migrateToLatest(h.db, h.dialect);
    wal = walDurability(h.db)!;
    assert.ok(wal);
  });
  after(async () => {
    await h.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('reads the database file through a memory map of FILES_REST_SQLITE_MMAP_SIZE bytes (0: none)', async () => {
    const mapped = await sql<{ mmap_size: number }>`pragma mmap_size`.execute(h.db);
    assert.equal(mapped.rows[0]!.mmap_size, 1024 ** 3);
    // The same driver as `h`: two SQLite libraries in one process break each other's POSIX locks.
    const other = await openDatabase(`sqlite:${join(dir, 'meta.db')}`, { sqliteMmapSize: 0, sqliteDriver: testDriver() });
    try {
      assert.equal((await sql<{ mmap_size: number }>`pragma mmap_size`.execute(other.db)).rows[0]!.mmap_size, 0);
    } finally {
      await other.close();
    }
    assert.equal(loadConfig({}).sqliteMmapSize, 1024 ** 3);
    assert.equal(loadConfig({ FILES_REST_SQLITE_MMAP_SIZE: '0' }).sqliteMmapSize, 0);
    assert.throws(() => loadConfig({ FILES_REST_SQLITE_MMAP_SIZE: '-1' }), /FILES_REST_SQLITE_MMAP_SIZE/);
  });

  it('checkpoints the WAL on a thread of its own while there are writes: the connection does not (wal_autocheckpoint 0), the pages reach the database file, the thread ends when idle and with the handle, and starts again after enough commits', async () => {
    const own = join(dir, 'checkpointed.db');
    const linux = process.platform === 'linux';
    // The suite's own handle may have its thread too.
    await waitUntil(() => threads() === 0, (CHECKPOINT_IDLE_TICKS * CHECKPOINT_INTERVAL_MS) + 5_000);
    const c = await openDatabase(`sqlite:${own}`, { sqliteDriver: testDriver() });
    try {
      assert.equal((await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(c.db)).rows[0]!.wal_autocheckpoint, 0);
      await sql`create table blobs (id integer primary key, data blob not null)`.execute(c.db);
      // About 8 MiB through the WAL, in commits of 128 KiB.
      for (let i = 0; i < 64; i++) {
        await transaction(c.db, async (tx) => {
          for (let j = 0; j < 32; j++) await sql`insert into blobs (data) values (${randomBytes(4096)})`.execute(tx);
        });
      }
      await waitUntil(() => threads() === 1, 5_000);
      if (linux) assert.equal(threads(), 1, 'a files-rest-ckpt thread runs while there are writes');
      await waitUntil(() => statSync(own).size > 6 * 1024 * 1024, 5_000);
      assert.ok(statSync(own).size > 6 * 1024 * 1024, `the database file holds the checkpointed pages (${statSync(own).size} bytes)`);
      if (linux) {
        await waitUntil(() => threads() === 0, (CHECKPOINT_IDLE_TICKS * CHECKPOINT_INTERVAL_MS) + 5_000);
        assert.equal(threads(), 0, 'the thread ended once nothing was new');
        for (let i = 0; i < CHECKPOINT_START_COMMITS - 1; i++) await sql`insert into blobs (data) values (${randomBytes(10)})`.execute(c.db);
        await new Promise((r) => setTimeout(r, 300));
        assert.equal(threads(), 0, 'a few commits do not start it');
        await sql`insert into blobs (data) values (${randomBytes(10)})`.execute(c.db);
        await waitUntil(() => threads() === 1, 5_000);
        assert.equal(threads(), 1, `the ${CHECKPOINT_START_COMMITS}th commit since it ended starts it again`);
      }
    } finally {
      await c.close();
    }
    assert.equal(threads(), 0, 'the thread ended with the handle');
  });

  it('the commits of a start-up start no checkpoint thread once the server says they are done (startupWritesDone); without that they count', async () => {
    if (process.platform !== 'linux') return;
    await waitUntil(() => threads() === 0, (CHECKPOINT_IDLE_TICKS * CHECKPOINT_INTERVAL_MS) + 5_000);
    for (const [name, done] of [['settled', true], ['counted', false]] as const) {
      const c = await openDatabase(`sqlite:${join(dir, `start-up-${name}.db`)}`, { sqliteDriver: testDriver() });
      try {
        // Each statement outside a transaction is a commit of its own, flushed: one short of the count.
        await sql`create table start_up (n integer)`.execute(c.db);
        for (let i = 0; i < CHECKPOINT_START_COMMITS - 2; i++) await sql`insert into start_up (n) values (${i})`.execute(c.db);
        if (done) startupWritesDone(c.db);
        await sql`insert into start_up (n) values (-1)`.execute(c.db);
        if (done) {
          await new Promise((r) => setTimeout(r, 300));
          assert.equal(threads(), 0, 'no thread for the start-up writes');
        } else {
          await waitUntil(() => threads() === 1, 5_000);
          assert.equal(threads(), 1, `the ${CHECKPOINT_START_COMMITS}th commit starts it`);
        }
      } finally {
        await c.close();
      }
    }
  });

  it('a server started on a new database runs no checkpoint thread', async () => {
    if (process.platform !== 'linux') return;
    await waitUntil(() => threads() === 0, (CHECKPOINT_IDLE_TICKS * CHECKPOINT_INTERVAL_MS) + 5_000);
    const data = join(dir, 'new-server');
    const server = await createServer(
      loadConfig({ DATABASE_URL: `sqlite:${join(data, 'db.sqlite')}`, FILES_REST_DATA_DIR: join(data, 'files'), HOST: '127.0.0.1', PORT: '0', FILES_REST_S3_PORT: 'off', LOG_LEVEL: 'silent', FILES_REST_SQLITE_DRIVER: testDriver() }),
    );
    try {
      await startServer(server);
      await new Promise((r) => setTimeout(r, 500));
      assert.equal(threads(), 0);
    } finally {
      await server.stop();
    }
  });

  it('under steady writes the WAL starts over near WAL_RESTART_BYTES instead of growing with every commit, and is cut back to it', async () => {
    const own = join(dir, 'steady.db');
    const walFile = `${own}-wal`;
    const c = await openDatabase(`sqlite:${own}`, { sqliteDriver: testDriver() });
    try {
      assert.equal((await sql<{ journal_size_limit: number }>`pragma journal_size_limit`.execute(c.db)).rows[0]!.journal_size_limit, WAL_RESTART_BYTES);
      await sql`create table blobs (id integer primary key, data blob not null)`.execute(c.db);
      // Four writers at once, never a pause: the passive checkpoints of the thread never reach the
      // WAL's last frame. Five times the restart length goes through the WAL.
      const total = 5 * WAL_RESTART_BYTES;
      let written = 0;
      let largest = 0;
      const blob = randomBytes(4096);
      const writer = async () => {
        while (written < total) {
          await transaction(c.db, async (tx) => {
            for (let j = 0; j < 64; j++) await sql`insert into blobs (data) values (${blob})`.execute(tx);
          });
          written += 64 * 4096;
          largest = Math.max(largest, statSync(walFile).size);
        }
      };
      // No wait in SQLite's busy handler: a write transaction begun while the thread restarts the WAL
      // fails at once, so none may begin then (the thread pauses this connection's group commit first).
      await sql`pragma busy_timeout = 0`.execute(c.db);
      await Promise.all([writer(), writer(), writer(), writer()]);
      assert.ok(largest <= 2 * WAL_RESTART_BYTES, `the WAL reached ${largest} bytes while ${written} went through it`);
      const stats = checkpointerStats(c.db)!;
      assert.ok(stats.restartsPaused >= 1, `the WAL was restarted with the writer paused (${JSON.stringify(stats)})`);
      assert.equal(stats.restartsUnpaused, 0, 'never without the pause');
      const rows = (await sql<{ n: number }>`select count(*) as n from blobs`.execute(c.db)).rows[0]!.n;
      assert.equal(rows, written / 4096, 'every row is there');
    } finally {
      await c.close();
    }
  });

  const insertLocation = (db: Parameters<typeof transaction>[0], name: string) =>
    db.insertInto('locations').values({ id: name, name, uri: `/tmp/${name}`, is_default: 0, created: 0, updated: 0 }).execute();

  it('defines md5(blob) as PostgreSQL does (hex, null for null) on the server\'s connection (a read thread\'s: read-threads.test.ts)', async () => {
    const digest = await sql<{ h: string | null; n: string | null }>`select md5(x'616263') as h, md5(null) as n`.execute(h.db);
    assert.deepEqual({ ...digest.rows[0] }, { h: '900150983cd24fb0d6963f7d28e17f72', n: null });
  });

  it('runs in WAL mode with synchronous = NORMAL (the flush is ours, not COMMIT’s)', async () => {
    const mode = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(h.db);
    assert.equal(mode.rows[0]!.journal_mode, 'wal');
    const sync = await sql<{ synchronous: number }>`pragma synchronous`.execute(h.db);
    assert.equal(sync.rows[0]!.synchronous, 1);
  });

  it('concurrent transactions share one commit and one flush, and each resolves only after it', async () => {
    const before = wal.flushes;
    const seen: number[] = [];
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        transaction(h.db, async (tx) => {
          await insertLocation(tx, `group-${i}`);
        }).then(() => seen.push(wal.flushes)),
      ),
    );
    assert.equal(seen.length, 20);
    for (const f of seen) assert.ok(f > before, 'resolved before any flush');
    assert.equal(wal.flushes - before, 1, 'one flush for the whole group');
  });

  it('a transaction that fails in a group is rolled back alone; the others commit', async () => {
    const results = await Promise.allSettled([
      transaction(h.db, (tx) => insertLocation(tx, 'ok-1')),
      transaction(h.db, async (tx) => {
        await insertLocation(tx, 'doomed');
        throw new Error('refused');
      }),
      transaction(h.db, (tx) => insertLocation(tx, 'ok-2')),
    ]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    const names = (await h.db.selectFrom('locations').select('name').where('name', 'in', ['ok-1', 'doomed', 'ok-2']).execute()).map((r) => r.name);
    assert.deepEqual(names.sort(), ['ok-1', 'ok-2']);
  });

  it('rerunnable transactions are grouped without savepoints: one that fails rolls its group back, which runs again with them, and fails alone', async () => {
    const runs = new Map<string, number>();
    const put = (name: string, fail = false) =>
      transaction(h.db, async (tx) => {
        runs.set(name, (runs.get(name) ?? 0) + 1);
        await insertLocation(tx, name);
        if (fail) throw new Error('refused');
        return name;
      }, { rerunnable: true }).then((v) => {
        resolvedAfter.push(wal.flushes);
        return v;
      });
    const resolvedAfter: number[] = [];
    const before = wal.flushes;
    const results = await Promise.allSettled([put('re-1'), put('re-doomed', true), put('re-2')]);
    assert.deepEqual(resolvedAfter, [before + 1, before + 1], 'each answered after the flush of its commit');
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled']);
    assert.equal((results[1] as PromiseRejectedResult).reason.message, 'refused');
    // The first ran before the failure in a group without savepoints, and again after its rollback;
    // the third had not run yet. With a savepoint each, none would have run twice.
    assert.deepEqual(Object.fromEntries(runs), { 're-1': 2, 're-doomed': 2, 're-2': 1 });
    assert.equal(wal.flushes - before, 1, 'one flush: the rolled-back group wrote nothing to keep');
    const names = (await h.db.selectFrom('locations').select('name').where('name', 'like', 're-%').execute()).map((r) => r.name);
    assert.deepEqual(names.sort(), ['re-1', 're-2']);
  });

  it('a group with a transaction that is not rerunnable keeps a savepoint for each', async () => {
    const runs = new Map<string, number>();
    const put = (name: string, opts: { fail?: boolean; rerunnable: boolean }) =>
      transaction(h.db, async (tx) => {
        runs.set(name, (runs.get(name) ?? 0) + 1);
        await insertLocation(tx, name);
        if (opts.fail) throw new Error('refused');
      }, { rerunnable: opts.rerunnable });
    const results = await Promise.allSettled([put('mixed-1', { rerunnable: true }), put('mixed-2', { rerunnable: false }), put('mixed-doomed', { fail: true, rerunnable: true })]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'fulfilled', 'rejected']);
    assert.deepEqual(Object.fromEntries(runs), { 'mixed-1': 1, 'mixed-2': 1, 'mixed-doomed': 1 });
  });

  it('a write outside a transaction is flushed before it returns; a read is not', async () => {
    let before = wal.flushes;
    await insertLocation(h.db, 'alone');
    assert.equal(wal.flushes, before + 1);
    before = wal.flushes;
    await h.db.selectFrom('locations').selectAll().execute();
    assert.equal(wal.flushes, before);
    // A write that returns rows (RETURNING) is a write: flushed too.
    before = wal.flushes;
    const r = await h.db.updateTable('locations').set({ updated: 1 }).where('name', '=', 'alone').returning('name').execute();
    assert.deepEqual(r, [{ name: 'alone' }]);
    assert.equal(wal.flushes, before + 1, 'UPDATE … RETURNING flushed before it returns');
    // One that changed no row wrote nothing: no flush.
    before = wal.flushes;
    await h.db.updateTable('locations').set({ updated: 2 }).where('name', '=', 'no-such-location').execute();
    assert.equal(wal.flushes, before, 'an UPDATE that matched no row is not flushed');
  });

  it('a transaction run directly through Kysely is flushed before it returns', async () => {
    const before = wal.flushes;
    await h.db.transaction().execute((tx) => insertLocation(tx, 'direct'));
    assert.equal(wal.flushes, before + 1);
  });

  it('what was acknowledged is there after reopening', async () => {
    await h.close();
    h = await openDatabase(`sqlite:${join(dir, 'meta.db')}`, { sqliteDriver: testDriver() });
    wal = walDurability(h.db)!;
    const n = await h.db.selectFrom('locations').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    assert.equal(Number(n.n), 20 + 2 + 2 + 2 + 2);
  });
});

describe('PostgreSQL: the hot queries are named prepared statements', () => {
  const onPostgres = testDatabase() === 'postgres';
  const skip = onPostgres ? false : 'runs in the PostgreSQL pass (TEST_DATABASE=postgres)';
  let pg: { url: string; drop: () => Promise<void> } | null = null;
  before(async () => {
    if (onPostgres) pg = await createPgDatabase();
  });
  after(async () => {
    await pg?.drop();
  });

  /** Runs findBucket three times on a pool of one connection and returns that connection's prepared statements. */
  async function preparedOnConnection(namedStatements: boolean): Promise<{ name: string; statement: string }[]> {
    const h = await openDatabase(pg!.url, { poolSize: 1, namedStatements });
    try {
      await migrateToLatest(h.db, h.dialect);
      // No such bucket: the statement runs all the same.
      for (let i = 0; i < 3; i++) assert.equal(await findBucket(h.db, randomUUID()), null);
      const r = await sql<{ name: string; statement: string }>`select name, statement from pg_prepared_statements`.execute(h.db);
      return r.rows;
    } finally {
      await h.close();
    }
  }

  it('a bucket read is parsed once on its connection and reused by name', { skip }, async () => {
    const statements = await preparedOnConnection(true);
    const mine = statements.filter((s) => s.name.startsWith('files_rest_'));
    assert.ok(mine.some((s) => /from "buckets" where "id" = \$1/.test(s.statement)), JSON.stringify(statements));
  });

  it('FILES_REST_DB_PREPARED_STATEMENTS=false sends no named statement', { skip }, async () => {
    assert.equal(loadConfig({ FILES_REST_DB_PREPARED_STATEMENTS: 'false' }).dbPreparedStatements, false);
    assert.equal(loadConfig({}).dbPreparedStatements, true);
    const statements = await preparedOnConnection(false);
    assert.deepEqual(statements.filter((s) => s.name.startsWith('files_rest_')), []);
  });
});

describe('PostgreSQL: writes to one bucket are committed in groups', () => {
  const skip = testDatabase() === 'postgres' ? false : 'runs in the PostgreSQL pass (TEST_DATABASE=postgres)';
  let pg: { url: string; drop: () => Promise<void> } | null = null;
  let h: DatabaseHandle;
  before(async () => {
    if (skip) return;
    pg = await createPgDatabase();
    h = await openDatabase(pg.url, {});
    await migrateToLatest(h.db, h.dialect);
    await sql`create table group_probe (n int primary key)`.execute(h.db);
  });
  after(async () => {
    if (skip) return;
    await h.close();
    await pg?.drop();
  });

  /** The id of the real transaction a grouped one ran in. */
  const txid = async (tx: Tx) => (await sql<{ id: string }>`select txid_current()::text as id`.execute(tx)).rows[0]!.id;

  it('transactions of one bucket share one commit; each fails alone', { skip }, async () => {
    const results = await Promise.allSettled(
      Array.from({ length: 12 }, (_, i) =>
        transaction(h.db, async (tx) => {
          const id = await txid(tx);
          // The 6th collides with the 5th (duplicate key): it alone is rolled back.
          await sql`insert into group_probe (n) values (${i === 5 ? 4 : i})`.execute(tx);
          return id;
        }, { bucket: 'one-bucket' }),
      ),
    );
    assert.deepEqual(results.map((r) => r.status), results.map((_, i) => (i === 5 ? 'rejected' : 'fulfilled')));
    assert.ok(isUniqueViolation((results[5] as PromiseRejectedResult).reason));
    const ids = new Set(results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : [])));
    assert.ok(ids.size <= 2, `12 transactions in ${ids.size} commits`);
    const rows = (await sql<{ n: number }>`select n from group_probe order by n`.execute(h.db)).rows.map((r) => r.n);
    assert.deepEqual(rows, [0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11]);
  });

  it('rerunnable transactions of one bucket share one commit without savepoints; after a failure the group runs again and the failed one alone is refused', { skip }, async () => {
    await sql`delete from group_probe`.execute(h.db);
    const runs = new Array<number>(8).fill(0);
    const results = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        transaction(h.db, async (tx) => {
          runs[i]!++;
          const id = await txid(tx);
          // The 4th collides with the 3rd: a statement error aborts the whole transaction on PostgreSQL.
          await sql`insert into group_probe (n) values (${i === 3 ? 2 : i})`.execute(tx);
          return id;
        }, { bucket: 'rerun-bucket', rerunnable: true }),
      ),
    );
    assert.deepEqual(results.map((r) => r.status), results.map((_, i) => (i === 3 ? 'rejected' : 'fulfilled')));
    assert.ok(isUniqueViolation((results[3] as PromiseRejectedResult).reason));
    // The group's first run reached the 4th; all eight ran again, each in its savepoint.
    assert.deepEqual(runs.slice(0, 4), [2, 2, 2, 2]);
    const rows = (await sql<{ n: number }>`select n from group_probe order by n`.execute(h.db)).rows.map((r) => r.n);
    assert.deepEqual(rows, [0, 1, 2, 4, 5, 6, 7]);
  });

  it('transactions of other buckets, or naming none, are not grouped with them', { skip }, async () => {
    const ids = await Promise.all([
      transaction(h.db, txid, { bucket: 'bucket-a' }),
      transaction(h.db, txid, { bucket: 'bucket-b' }),
      transaction(h.db, txid),
      transaction(h.db, txid),
    ]);
    assert.equal(new Set(ids).size, 4);
  });
});
