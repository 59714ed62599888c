// The database goes away and comes back: files-rest answers 503 JSON (never hangs, never crashes)
// while PostgreSQL cannot be reached, and serves again without a restart once it can. PostgreSQL
// is reached through a TCP proxy on 127.0.0.1 that the test cuts (connections reset, new ones
// refused) or silences (connections accepted, nothing answered); the machine's PostgreSQL itself
// is never stopped. SQLite is a file in the process: it has no outage to test.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { createPgDatabase, PG_ADMIN_URL, testDatabase } from './support/server.js';
import { processEnv } from './support/fixtures.js';
import { spawnFilesRest, type ServerProcess } from './support/process.js';
import { createBucket, md5, put, req, waitFor, type Res } from './support/http.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';
import { ERRORS } from '../src/errors.js';

const skip = testDatabase() !== 'postgres' ? 'PostgreSQL only: SQLite is an embedded file and has no outage mode' : false;
if (skip) console.log(`# db-outage: skipped on this run (${skip})`);

/** A request that must answer: a hang fails the test instead of stalling the suite. */
function ask(url: string, init: RequestInit = {}): Promise<Res> {
  return req(url, { ...init, signal: AbortSignal.timeout(60_000) });
}

function assertUnavailable(r: Res, what: string): void {
  assert.equal(r.status, 503, `${what}: ${r.status} ${r.text}`);
  assert.match(r.headers.get('content-type') ?? '', /application\/json/, what);
  assert.deepEqual(r.json, { status: 503, message: ERRORS.DATABASE_UNAVAILABLE.message }, what);
  assert.equal(r.headers.get('retry-after'), '5', what);
}

describe('Database outage (PostgreSQL through a proxy the test cuts)', { skip }, () => {
  let proxy: TcpProxy;
  let server: ServerProcess;
  let dir: string;
  let drop: () => Promise<void> = async () => {};
  let bucket: string;
  let databaseUrl: string;
  const data = Buffer.from('kept through the outage\n'.repeat(1000));

  before(async () => {
    const pgdb = await createPgDatabase();
    drop = pgdb.drop;
    databaseUrl = pgdb.url;
    const admin = new URL(PG_ADMIN_URL);
    proxy = await startTcpProxy(admin.hostname, Number(admin.port || 5432));
    const viaProxy = new URL(pgdb.url);
    viaProxy.host = `127.0.0.1:${proxy.port}`;
    const e = await processEnv({
      DATABASE_URL: viaProxy.toString(),
      FILES_REST_DB_POOL_SIZE: '4',
      FILES_REST_DB_STATEMENT_TIMEOUT: '1000',
      FILES_REST_DB_CONNECT_TIMEOUT: '1000',
    });
    // processEnv made a database of its own for the run; this test uses the one behind the proxy.
    await e.drop();
    dir = e.dir;
    server = await spawnFilesRest('serve', e.env);
    bucket = await createBucket(server.files);
    assert.equal((await put(`${server.files}/${bucket}/a.txt`, data)).status, 200);
  });

  after(async () => {
    await server?.kill('SIGKILL');
    await proxy?.close();
    await drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function serving(): Promise<void> {
    const created = await ask(server.files, { method: 'POST' });
    assert.equal(created.status, 200, created.text);
    const r = await ask(`${server.files}/${bucket}/a.txt`);
    assert.equal(r.status, 200);
    assert.equal(md5(r.text), md5(data));
    assert.equal((await ask(`${server.url}/readyz`)).status, 200);
  }

  async function unavailable(): Promise<void> {
    // Several at once, more than the pool holds.
    const answers = await Promise.all([
      ask(server.files, { method: 'POST' }),
      ask(`${server.files}/${bucket}`),
      ask(`${server.files}/${bucket}/a.txt`),
      ask(`${server.files}/${bucket}/b.txt`, { method: 'PUT', body: 'new bytes' }),
      ask(`${server.files}/${bucket}/a.txt`, { method: 'DELETE' }),
      ask(`${server.files}/${bucket}?versions`),
    ]);
    const names = ['POST /files', 'GET bucket', 'GET object', 'PUT object', 'DELETE object', 'GET ?versions'];
    answers.forEach((r, i) => assertUnavailable(r, names[i]!));
    const health = await ask(`${server.url}/healthz`);
    assert.equal(health.status, 200, 'the process is alive');
    const ready = await ask(`${server.url}/readyz`);
    assert.equal(ready.status, 503);
    assert.equal(ready.json.status, 503);
    assert.match(ready.json.message, /^Not ready: /);
    assert.equal(server.child.exitCode, null, 'the process did not crash');
  }

  it('PostgreSQL stopped (connections reset, new ones refused): 503 JSON, then serves again without restart', async () => {
    await serving();
    proxy.setMode('reset');
    proxy.cutAll();
    await unavailable();
    // Still unavailable on a second round (no cached success, no stuck pool).
    await unavailable();
    proxy.setMode('forward');
    await waitFor(async () => (await ask(`${server.url}/readyz`)).status === 200, 30_000, 200);
    await serving();
    // Nothing of the refused writes happened.
    const listed = await ask(`${server.files}/${bucket}?versions`);
    assert.deepEqual(listed.json.contents.map((v: { key: string }) => v.key), ['a.txt']);
  });

  it('a silent network (nothing answers): 503 JSON after the connect and query timeouts, not a hang; then recovers', async () => {
    await serving();
    // The pooled connections stop carrying bytes and new ones are never answered.
    proxy.setMode('blackhole');
    proxy.freezeAll();
    await unavailable();
    proxy.setMode('forward');
    await waitFor(async () => (await ask(`${server.url}/readyz`)).status === 200, 30_000, 200);
    await serving();
    const up = await put(`${server.files}/${bucket}/after.txt`, 'after the outage');
    assert.equal(up.status, 200);
  });

  it('the in-process worker survives the outage and runs tasks again afterwards', async () => {
    const v1 = (await put(`${server.files}/${bucket}/gone.txt`, 'one')).json.version_id as string;
    await put(`${server.files}/${bucket}/gone.txt`, 'two');
    proxy.setMode('reset');
    proxy.cutAll();
    // The worker polls during the outage (and logs that it cannot claim); it must not exit.
    const before = server.output().split('could not claim a task').length;
    await waitFor(async () => server.output().split('could not claim a task').length > before, 30_000, 100);
    assert.equal(server.child.exitCode, null);
    proxy.setMode('forward');
    await waitFor(async () => (await ask(`${server.url}/readyz`)).status === 200, 30_000, 200);
    // A hard delete queues the removal of the bytes; the worker runs it.
    const del = await ask(`${server.files}/${bucket}/gone.txt?versionId=${v1}`, { method: 'DELETE' });
    assert.equal(del.status, 204);
    const pg = (await import('pg')).default;
    const direct = new pg.Client({ connectionString: databaseUrl });
    await direct.connect();
    try {
      const state = async () =>
        (await direct.query<{ state: string }>("select state from tasks where name = 'remove-file-data' order by id desc limit 1")).rows[0]?.state;
      assert.equal(await waitFor(async () => ((await state()) === 'done' ? 'done' : null), 30_000, 100), 'done');
    } finally {
      await direct.end();
    }
  });
});
