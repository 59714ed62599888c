// Prometheus metrics at /metrics: request counts by route pattern and status, latency histogram,
// bytes uploaded and downloaded, uploads in flight, task queue depth and failures by task name,
// integrity check results, database pool use. Runs on both databases.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startTestServer, testDatabase, type TestServer } from './support/server.js';
import { createBucket, put, req, waitFor } from './support/http.js';
import { TaskQueue } from '../src/tasks/queue.js';
import type { JobPayloads } from '../src/domain/jobs.js';
import { nowMicros } from '../src/util/time.js';

/** Parses the text exposition format into `name{labels}` → value (labels as written). */
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^(\S+?(?:\{.*\})?) (\S+)$/.exec(line);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

async function scrape(s: TestServer): Promise<Map<string, number>> {
  const r = await req(`${s.url}/metrics`);
  assert.equal(r.status, 200);
  return parse(r.text);
}

const OBJECT_ROUTE = '/files/:bucketId/*';

describe('/metrics', () => {
  let s: TestServer;
  before(async () => {
    // No in-process worker: nothing changes tasks or integrity results behind the test's back.
    s = await startTestServer({ FILES_REST_WORKER: '0' });
  });
  after(() => s.close());

  it('is served at the server root in the Prometheus text format, without a credential', async () => {
    const r = await req(`${s.url}/metrics`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    assert.match(r.text, /^# HELP files_rest_http_requests_total /m);
    assert.match(r.text, /^# TYPE files_rest_http_request_duration_seconds histogram$/m);
    assert.match(r.text, /^process_cpu_seconds_total /m, 'Node process metrics are included');
    const m = parse(r.text);
    assert.equal(m.get('files_rest_database_up'), 1);
  });

  it('counts requests by route pattern and status, times them, and counts bytes up and down exactly', async () => {
    const b = await createBucket(s.files);
    const before = await scrape(s);
    const data = Buffer.alloc(10_000, 7);
    assert.equal((await put(`${s.files}/${b}/dir/a.bin`, data)).status, 200);
    assert.equal((await put(`${s.files}/${b}/b.bin`, data.subarray(0, 1234))).status, 200);
    assert.equal((await req(`${s.files}/${b}/dir/a.bin`)).status, 200);
    const part = await req(`${s.files}/${b}/dir/a.bin`, { headers: { range: 'bytes=0-99' } });
    assert.equal(part.status, 206);
    assert.equal((await req(`${s.files}/${b}/missing.bin`)).status, 404);
    assert.equal((await req(`${s.files}/${b}/dir/a.bin`, { method: 'HEAD' })).status, 200);
    // Listings are API JSON, not downloaded content.
    assert.equal((await req(`${s.files}/${b}`)).status, 200);
    assert.equal((await req(`${s.files}/${b}?versions`)).status, 200);
    // A refused upload counts no uploaded bytes.
    assert.equal((await put(`${s.files}/00000000-0000-4000-8000-000000000000/x`, data)).status, 404);
    const m = await scrape(s);
    const delta = (k: string) => (m.get(k) ?? 0) - (before.get(k) ?? 0);
    assert.equal(delta(`files_rest_http_requests_total{method="PUT",route="${OBJECT_ROUTE}",status="200"}`), 2);
    assert.equal(delta(`files_rest_http_requests_total{method="GET",route="${OBJECT_ROUTE}",status="200"}`), 1);
    assert.equal(delta(`files_rest_http_requests_total{method="GET",route="${OBJECT_ROUTE}",status="206"}`), 1);
    assert.equal(delta(`files_rest_http_requests_total{method="GET",route="${OBJECT_ROUTE}",status="404"}`), 1);
    assert.equal(delta(`files_rest_http_requests_total{method="PUT",route="${OBJECT_ROUTE}",status="404"}`), 1);
    assert.equal(delta(`files_rest_http_requests_total{method="HEAD",route="${OBJECT_ROUTE}",status="200"}`), 1);
    assert.equal(delta('files_rest_uploaded_bytes_total'), 10_000 + 1234);
    assert.equal(delta('files_rest_downloaded_bytes_total'), 10_000 + 100);
    assert.equal(delta(`files_rest_http_request_duration_seconds_count{method="PUT",route="${OBJECT_ROUTE}"}`), 3);
    assert.equal(delta(`files_rest_http_request_duration_seconds_bucket{le="+Inf",method="PUT",route="${OBJECT_ROUTE}"}`), 3);
    // An unknown path is one series, whatever the URL.
    await req(`${s.url}/no/such/${b}`);
    const after = await scrape(s);
    assert.equal((after.get('files_rest_http_requests_total{method="GET",route="unmatched",status="404"}') ?? 0) >= 1, true);
    // Labels carry route patterns, never ids or keys.
    for (const k of after.keys()) {
      assert.ok(!k.includes(b) && !k.includes('a.bin'), `no id or key in a series name: ${k}`);
    }
  });

  it('shows uploads in flight while their bytes arrive', async () => {
    const b = await createBucket(s.files);
    const u = new URL(`${s.files}/${b}/slow.bin`);
    const done = new Promise<number>((resolve, reject) => {
      const r = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'PUT', headers: { 'content-length': '2000' } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      r.on('error', reject);
      r.write(Buffer.alloc(1000, 1));
      waitFor(async () => (await scrape(s)).get('files_rest_uploads_in_flight') === 1, 10_000).then(
        () => r.end(Buffer.alloc(1000, 2)),
        reject,
      );
    });
    assert.equal(await done, 200);
    await waitFor(async () => (await scrape(s)).get('files_rest_uploads_in_flight') === 0, 10_000);
  });

  it('counts object downloads in flight, not the scrape or other GETs', async () => {
    // The scrape is a GET too: it must not count itself.
    assert.equal((await scrape(s)).get('files_rest_downloads_in_flight'), 0);
    const b = await createBucket(s.files);
    assert.equal((await put(`${s.files}/${b}/held.bin`, Buffer.alloc(16 * 1024 * 1024, 3))).status, 200);
    const u = new URL(`${s.files}/${b}/held.bin`);
    // A client that reads nothing: the download stays in flight until it goes away.
    const held = http.get({ host: u.hostname, port: u.port, path: u.pathname }, (res) => res.pause());
    held.on('error', () => {});
    try {
      await waitFor(async () => (await scrape(s)).get('files_rest_downloads_in_flight') === 1, 10_000);
      assert.equal((await req(`${s.files}/${b}`)).status, 200);
      assert.equal((await scrape(s)).get('files_rest_downloads_in_flight'), 1);
    } finally {
      held.destroy();
    }
    await waitFor(async () => (await scrape(s)).get('files_rest_downloads_in_flight') === 0, 10_000);
  });

  it('reads task queue depth, failures by task name and integrity check results from the database', async () => {
    const { db } = s.server.core.ctx;
    const queue = new TaskQueue<JobPayloads & { 'metrics-test-task': { i: number }; 'metrics-test-later': Record<string, never> }>(db, s.server.core.ctx.dialect);
    const b = await createBucket(s.files);
    await put(`${s.files}/${b}/one.txt`, 'one');
    await put(`${s.files}/${b}/two.txt`, 'two');
    // Two tasks that failed for good, of one made-up name (no worker runs it).
    const now = nowMicros();
    for (let i = 0; i < 2; i++) {
      const id = await queue.enqueue(db, 'metrics-test-task', { i }, { runAt: now + 3_600_000_000 });
      await db.updateTable('tasks').set({ state: 'failed', last_error: 'made to fail' }).where('id', '=', id).execute();
    }
    await queue.enqueue(db, 'metrics-test-later', {}, { runAt: now + 3_600_000_000 });
    // Integrity results: one file checked and good, one checked and bad.
    const files = await db.selectFrom('files').select('id').orderBy('id').execute();
    assert.ok(files.length >= 2);
    await db.updateTable('files').set({ last_check: 1, last_check_at: now }).where('id', '=', files[0]!.id).execute();
    await db.updateTable('files').set({ last_check: 0, last_check_at: now }).where('id', '=', files[1]!.id).execute();

    const m = await scrape(s);
    const depth = await queue.depth();
    for (const state of ['queued', 'running', 'done', 'failed']) {
      assert.equal(m.get(`files_rest_task_queue_depth{state="${state}"}`), depth[state] ?? 0, state);
    }
    assert.ok(m.get('files_rest_task_queue_depth{state="queued"}')! >= 1);
    assert.ok(m.get('files_rest_task_queue_depth{state="failed"}')! >= 2);
    assert.equal(m.get('files_rest_tasks_failed{task="metrics-test-task"}'), 2);
    assert.equal(m.has('files_rest_tasks_failed{task="metrics-test-later"}'), false);
    const counted = await db.selectFrom('files').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    const ok = m.get('files_rest_integrity_checks{result="ok"}')!;
    const bad = m.get('files_rest_integrity_checks{result="failed"}')!;
    const unchecked = m.get('files_rest_integrity_checks{result="unchecked"}')!;
    assert.equal(ok, 1);
    assert.equal(bad, 1);
    assert.equal(ok + bad + unchecked, Number(counted.n));
  });

  it('shows the database pool (PostgreSQL) or no pool series (SQLite)', async () => {
    const m = await scrape(s);
    if (testDatabase() === 'postgres') {
      assert.equal(m.get('files_rest_db_pool_connections{state="max"}'), 10);
      const total = m.get('files_rest_db_pool_connections{state="total"}')!;
      const idle = m.get('files_rest_db_pool_connections{state="idle"}')!;
      assert.ok(total >= 1 && total <= 10 && idle <= total, `total ${total}, idle ${idle}`);
      assert.ok(m.has('files_rest_db_pool_connections{state="waiting"}'));
    } else {
      assert.equal([...m.keys()].some((k) => k.startsWith('files_rest_db_pool_connections')), false);
    }
  });
});

describe('/metrics turned off', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_METRICS: '0', FILES_REST_URL_PREFIX: '/api' });
  });
  after(() => s.close());

  it('FILES_REST_METRICS=0: /metrics is 404 and the OpenAPI document leaves it out', async () => {
    assert.equal((await req(`${s.url}/metrics`)).status, 404);
    const doc = await req(`${s.url}/openapi.json`);
    assert.equal(doc.status, 200);
    assert.equal(doc.json.paths['/metrics'], undefined);
    assert.ok(doc.json.paths['/api/files/{bucket_id}/{key}']);
  });

  it('a bad value names the setting', async () => {
    const { loadConfig } = await import('../src/config.js');
    assert.throws(() => loadConfig({ FILES_REST_METRICS: 'maybe' }), /FILES_REST_METRICS/);
    assert.throws(() => loadConfig({ FILES_REST_DB_POOL_SIZE: '0' }), /FILES_REST_DB_POOL_SIZE/);
    assert.throws(() => loadConfig({ FILES_REST_DB_STATEMENT_TIMEOUT: '-1' }), /FILES_REST_DB_STATEMENT_TIMEOUT/);
    assert.throws(() => loadConfig({ FILES_REST_DB_CONNECT_TIMEOUT: 'x' }), /FILES_REST_DB_CONNECT_TIMEOUT/);
    const c = loadConfig({});
    assert.equal(c.dbPoolSize, 10);
    assert.equal(c.dbStatementTimeout, 30_000);
    assert.equal(c.metrics, true);
  });
});
