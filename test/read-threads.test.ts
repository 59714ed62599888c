import { after, before, describe, it } from 'node:test';
import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { threadsNamed } from './support/threads.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, readThreadStats, transaction, type DatabaseHandle } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrations.js';
import { BUSY_WINDOW_MS, BUSY_WINDOW_READS, MAX_SQL_TEXTS, ReadThreads } from '../src/db/read-threads.js';
import { loadConfig } from '../src/config.js';
import { createServer, startServer } from '../src/service.js';

/** TEST_SQLITE_DRIVER=node runs these tests on node:sqlite. */
const driver: 'better-sqlite3' | 'node' = process.env.TEST_SQLITE_DRIVER === 'node' ? 'node' : 'better-sqlite3';

/** Read threads of this process (Linux: their names). */
const readThreads = () => threadsNamed('files-rest-read');

async function waitUntil(ok: () => boolean, ms: number): Promise<void> {
  for (const end = Date.now() + ms; !ok() && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
}

function location(id: string) {
  return { id, name: id, uri: `/tmp/${id}`, is_default: 0, created: 0, updated: 0 };
}

const linux = process.platform === 'linux';

describe('FILES_REST_SQLITE_READ_THREADS', () => {
  it('is 1 by default; 0 turns the threads off; anything else than 0–64 is refused naming the setting', () => {
    assert.equal(loadConfig({}).sqliteReadThreads, 1);
    assert.equal(loadConfig({ FILES_REST_SQLITE_READ_THREADS: '0' }).sqliteReadThreads, 0);
    assert.equal(loadConfig({ FILES_REST_SQLITE_READ_THREADS: '3' }).sqliteReadThreads, 3);
    assert.throws(() => loadConfig({ FILES_REST_SQLITE_READ_THREADS: '-1' }), /FILES_REST_SQLITE_READ_THREADS/);
    assert.throws(() => loadConfig({ FILES_REST_SQLITE_READ_THREADS: 'many' }), /FILES_REST_SQLITE_READ_THREADS/);
  });
});

describe('SQLite reads on read threads', () => {
  let dir: string;
  let h: DatabaseHandle;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'files-rest-reads-'));
    h = await openDatabase(`sqlite:${join(dir, 'meta.db')}`, { sqliteDriver: driver });
    await migrateToLatest(h.db, h.dialect);
    for (let i = 0; i < 20; i++) await transaction(h.db, (tx) => tx.insertInto('locations').values(location(`l${i}`)).execute());
  });
  after(async () => {
    await h?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** Overlapping reads until a read thread has answered one. */
  async function threadReady(): Promise<void> {
    const stats = readThreadStats(h.db)!;
    const before = stats.reads;
    for (const end = Date.now() + 10_000; stats.reads === before && Date.now() < end; ) {
      await Promise.all(Array.from({ length: 8 }, () => h.db.selectFrom('locations').select('id').execute()));
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.ok(stats.reads > before, 'no read ran on a read thread');
  }

  it('reads now and then stay on the server’s connection; many at once start a thread, which answers what the connection would', async () => {
    const stats = readThreadStats(h.db)!;
    assert.equal(stats.started, 0, 'the inserts and lone reads started a thread');
    const alone = await h.db.selectFrom('locations').selectAll().orderBy('id').execute();
    assert.equal(stats.started, 0);
    assert.equal(alone.length, 20);
    await threadReady();
    assert.equal(stats.started, 1);
    if (linux) assert.equal(readThreads(), 1);
    const onThread = await Promise.all(Array.from({ length: 16 }, () => h.db.selectFrom('locations').selectAll().orderBy('id').execute()));
    for (const rows of onThread) assert.deepEqual(rows, alone);
    // A query with parameters and a join, as the hot paths run them.
    const one = await h.db.selectFrom('locations').select(['id', 'uri']).where('id', '=', 'l7').executeTakeFirst();
    assert.deepEqual(one, { id: 'l7', uri: '/tmp/l7' });
  });

  it('a transaction reads its own writes on the server’s connection; a read outside it sees only what is committed', async () => {
    await threadReady();
    const stats = readThreadStats(h.db)!;
    let inside: string[] = [];
    let outside: string[] = [];
    await h.db.transaction().execute(async (tx) => {
      await tx.insertInto('locations').values(location('uncommitted')).execute();
      inside = (await tx.selectFrom('locations').select('id').where('id', '=', 'uncommitted').execute()).map((r) => r.id);
      const reads = stats.reads;
      // Outside the transaction, while it holds the server's connection: a read thread answers.
      outside = (await h.db.selectFrom('locations').select('id').where('id', '=', 'uncommitted').execute()).map((r) => r.id);
      assert.equal(stats.reads, reads + 1, 'the read outside the transaction did not run on the read thread');
    });
    assert.deepEqual(inside, ['uncommitted']);
    assert.deepEqual(outside, []);
    const after = await h.db.selectFrom('locations').select('id').where('id', '=', 'uncommitted').execute();
    assert.deepEqual(after, [{ id: 'uncommitted' }]);
  });

  it('a write outside a transaction is seen by the next read (read-your-writes across connections)', async () => {
    await threadReady();
    await h.db.insertInto('locations').values(location('autocommit')).execute();
    const r = await h.db.selectFrom('locations').select('id').where('id', '=', 'autocommit').execute();
    assert.deepEqual(r, [{ id: 'autocommit' }]);
  });

  it('blobs come back as Buffers, and a failing read fails with SQLite’s error and code', async () => {
    await threadReady();
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    await transaction(h.db, (tx) => tx.insertInto('inline_files').values({ uri: 'inline:test-blob', data: bytes, created: 0 }).execute());
    const reads = readThreadStats(h.db)!.reads;
    const row = await h.db.selectFrom('inline_files').select('data').where('uri', '=', 'inline:test-blob').executeTakeFirstOrThrow();
    assert.equal(readThreadStats(h.db)!.reads, reads + 1);
    assert.ok(Buffer.isBuffer(row.data), 'not a Buffer');
    assert.ok(bytes.equals(row.data as Buffer));
    // md5(blob) is defined on the thread's connection too (sqlite-functions.ts).
    const digest = await h.db.selectFrom('inline_files').select(sql<string>`md5(data)`.as('h')).where('uri', '=', 'inline:test-blob').executeTakeFirstOrThrow();
    assert.equal(readThreadStats(h.db)!.reads, reads + 2);
    assert.equal(digest.h, createHash('md5').update(bytes).digest('hex'));
    await assert.rejects(
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      h.db.selectFrom('no_such_table' as any).selectAll().execute(),
      (e: Error & { code?: string }) => /no such table/.test(e.message) && e.code === 'SQLITE_ERROR',
    );
  });

  it('closing the database stops its threads', { skip: !linux && 'threads are counted by name in /proc' }, async () => {
    const d = await mkdtemp(join(tmpdir(), 'files-rest-reads-close-'));
    const other = await openDatabase(`sqlite:${join(d, 'meta.db')}`, { sqliteDriver: driver });
    try {
      await migrateToLatest(other.db, other.dialect);
      const before = readThreads();
      const stats = readThreadStats(other.db)!;
      await waitUntil(() => {
        void Promise.all(Array.from({ length: BUSY_WINDOW_READS }, () => other.db.selectFrom('locations').select('id').execute()));
        return stats.reads > 0;
      }, 10_000);
      assert.ok(stats.reads > 0);
      assert.equal(readThreads(), before + 1);
      await other.close();
      await waitUntil(() => readThreads() === before, 2_000);
      assert.equal(readThreads(), before);
    } finally {
      await rm(d, { recursive: true, force: true });
    }
  });
});

describe('A server’s read threads', () => {
  it('the start-up’s reads start none; many small downloads at once do, and they get the same bytes', async () => {
    const d = await mkdtemp(join(tmpdir(), 'files-rest-reads-server-'));
    const server = await createServer(
      loadConfig({ DATABASE_URL: `sqlite:${join(d, 'db.sqlite')}`, FILES_REST_DATA_DIR: join(d, 'files'), HOST: '127.0.0.1', PORT: '0', FILES_REST_S3_PORT: 'off', LOG_LEVEL: 'silent', FILES_REST_SQLITE_DRIVER: driver, FILES_REST_PERMISSION_FACTORY: 'allow-all' }),
    );
    try {
      await startServer(server);
      const stats = readThreadStats(server.core.database.db)!;
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(stats.started, 0, 'the start-up started a read thread');
      const bucket = (await (await fetch(`${server.url}/files`, { method: 'POST' })).json()) as { id: string };
      const bodies = Array.from({ length: 20 }, (_, i) => Buffer.alloc(1000 + i, i));
      for (const [i, b] of bodies.entries()) {
        const r = await fetch(`${server.url}/files/${bucket.id}/k${i}`, { method: 'PUT', body: b });
        assert.equal(r.status, 200);
      }
      // Rounds of 20 downloads at once until a read thread has answered some (or 20 s).
      for (let round = 0; round < 5 || (stats.reads === 0 && round < 1000); round++) {
        const got = await Promise.all(bodies.map(async (_, i) => Buffer.from(await (await fetch(`${server.url}/files/${bucket.id}/k${i}`)).arrayBuffer())));
        got.forEach((g, i) => assert.ok(g.equals(bodies[i]!), `k${i}: other bytes`));
      }
      assert.ok(stats.started >= 1, 'no read thread started');
      assert.ok(stats.reads > 0, 'no read ran on a read thread');
    } finally {
      await server.stop();
      await rm(d, { recursive: true, force: true });
    }
  });
});

describe('FILES_REST_SQLITE_READ_THREADS=0', () => {
  it('many reads at once all run on the server’s connection: no thread starts', async () => {
    const d = await mkdtemp(join(tmpdir(), 'files-rest-reads-off-'));
    const h = await openDatabase(`sqlite:${join(d, 'meta.db')}`, { sqliteDriver: driver, sqliteReadThreads: 0 });
    try {
      await migrateToLatest(h.db, h.dialect);
      const before = linux ? readThreads() : 0;
      for (let i = 0; i < 5; i++) await Promise.all(Array.from({ length: 16 }, () => h.db.selectFrom('locations').select('id').execute()));
      assert.equal(readThreadStats(h.db), null);
      if (linux) assert.equal(readThreads(), before);
    } finally {
      await h.close();
      await rm(d, { recursive: true, force: true });
    }
  });
});

describe('ReadThreads', () => {
  /** A pool of at most one thread (idle after 200 ms) on a new database, closed after `fn`. */
  async function withPool(fn: (pool: ReadThreads, q: string) => Promise<void>): Promise<void> {
    const d = await mkdtemp(join(tmpdir(), 'files-rest-reads-pool-'));
    const file = join(d, 'meta.db');
    const h = await openDatabase(`sqlite:${file}`, { sqliteDriver: driver, sqliteReadThreads: 0 });
    await migrateToLatest(h.db, h.dialect);
    const pool = new ReadThreads(file, driver, 0, 1, 200);
    try {
      await fn(pool, 'select count(*) as n from locations');
    } finally {
      await pool.close();
      await h.close();
      await rm(d, { recursive: true, force: true });
    }
  }

  it('a thread stops after its idle time and starts again when reads come fast', () =>
    withPool(async (pool, q) => {
      assert.equal(pool.run(q, []), null, 'a lone read started a thread');
      assert.equal(pool.stats.started, 0);
      for (let i = 1; i < BUSY_WINDOW_READS; i++) assert.equal(pool.run(q, []), null, 'no thread is ready yet');
      assert.equal(pool.stats.started, 1);
      let rows: Record<string, unknown>[] | null = null;
      await waitUntil(() => {
        const r = pool.run(q, []);
        if (r) void r.then((x) => (rows = x));
        return r !== null;
      }, 10_000);
      await waitUntil(() => rows !== null, 5_000);
      assert.deepEqual(rows, [{ n: 0 }]);
      await waitUntil(() => pool.stats.running === 0, 5_000);
      assert.equal(pool.stats.running, 0, 'the idle thread did not stop');
      for (let i = 0; i < BUSY_WINDOW_READS; i++) assert.equal(pool.run(q, []), null);
      assert.equal(pool.stats.started, 2, 'reads that came fast did not start a thread again');
    }));

  it(`${BUSY_WINDOW_READS} reads within ${BUSY_WINDOW_MS} ms start a thread; as many spaced out do not`, () =>
    withPool(async (pool, q) => {
      for (let i = 1; i < BUSY_WINDOW_READS; i++) assert.equal(pool.run(q, []), null);
      assert.equal(pool.stats.started, 0, `${BUSY_WINDOW_READS - 1} reads started a thread`);
      // Spaced out, they never do.
      await new Promise((r) => setTimeout(r, BUSY_WINDOW_MS + 20));
      for (let i = 1; i < BUSY_WINDOW_READS; i++) assert.equal(pool.run(q, []), null);
      assert.equal(pool.stats.started, 0);
      pool.run(q, []);
      assert.equal(pool.stats.started, 1, `${BUSY_WINDOW_READS} reads within ${BUSY_WINDOW_MS} ms started no thread`);
    }));

  it(`past ${MAX_SQL_TEXTS} SQL texts the threads are replaced, and every text keeps getting its own rows`, () =>
    withPool(async (pool) => {
      /** Asks until a thread answers (the reads asked meanwhile start one: about one a millisecond). */
      const ask = async (text: string) => {
        for (const end = Date.now() + 10_000; Date.now() < end; ) {
          const r = pool.run(text, []);
          if (r) return r;
          await new Promise((res) => setTimeout(res, 1));
        }
        throw new Error(`no thread answered ${text}`);
      };
      for (let i = 0; i < MAX_SQL_TEXTS + 50; i++) {
        const rows = await ask(`select ${i} as n`);
        assert.deepEqual(rows, [{ n: i }], `select ${i}`);
      }
      assert.equal(pool.stats.started, 2, 'the threads were not replaced past the bound');
      // Texts asked before the replacement get their own rows on the new thread too.
      for (const i of [0, 7, MAX_SQL_TEXTS - 1]) assert.deepEqual(await ask(`select ${i} as n`), [{ n: i }]);
    }));
});
