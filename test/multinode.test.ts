// Several nodes on one PostgreSQL database and one storage: two `files-rest serve` processes with
// FILES_REST_WORKER=0 and two `files-rest worker` processes, all started at once on an empty
// database, with the test sending traffic to both API nodes. SQLite is one file on one machine:
// this deployment needs PostgreSQL, so the SQLite run skips it.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { createPgDatabase, testDatabase } from './support/server.js';
import { filesUnder, patternStream } from './support/fixtures.js';
import { runCli, spawnFilesRest, type ServerProcess } from './support/process.js';
import { createBucket, downloadMd5, md5, req, streamRequest, waitFor } from './support/http.js';
import { ERRORS } from '../src/errors.js';

const MiB = 1024 * 1024;
const skip = testDatabase() !== 'postgres' ? 'PostgreSQL only: several nodes share one PostgreSQL database (SQLite is a local file)' : false;
if (skip) console.log(`# multinode: skipped on this run (${skip})`);

describe('Several nodes: 2 API processes + 2 workers on one PostgreSQL database and one storage', { skip }, () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void> = async () => {};
  let db: pg.Client;
  let api: ServerProcess[] = [];
  let workers: ServerProcess[] = [];
  const procs: ServerProcess[] = [];
  /** The API node for the i-th request: alternate between the two. */
  const node = (i: number) => api[i % api.length]!;

  before(async () => {
    const pgdb = await createPgDatabase();
    drop = pgdb.drop;
    dir = await mkdtemp(join(tmpdir(), 'files-rest-multinode-'));
    env = {
      HOST: '127.0.0.1',
      PORT: '0',
      DATABASE_URL: pgdb.url,
      FILES_REST_DATA_DIR: join(dir, 'shared-storage'),
      FILES_REST_PERMISSION_FACTORY: 'allow-all',
      FILES_REST_TASK_POLL_INTERVAL: '50',
      FILES_REST_TASK_LEASE: '2',
      FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(MiB),
      FILES_REST_DB_POOL_SIZE: '10',
    };
    // All four at once on an empty database: migrations (Kysely's advisory lock) and the default
    // location (unique name) are raced for.
    const started = await Promise.all([
      spawnFilesRest('serve', { ...env, FILES_REST_WORKER: '0' }),
      spawnFilesRest('serve', { ...env, FILES_REST_WORKER: '0' }),
      spawnFilesRest('worker', env),
      spawnFilesRest('worker', env),
    ]);
    procs.push(...started);
    api = started.slice(0, 2);
    workers = started.slice(2);
    const { default: pgm } = await import('pg');
    db = new pgm.Client({ connectionString: pgdb.url });
    await db.connect();
  });

  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    await db?.end();
    await drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function one<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T> {
    return (await db.query<T>(sql, params)).rows[0]!;
  }
  async function many<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
    return (await db.query<T>(sql, params)).rows;
  }

  it('started together on an empty database: migrated once, one default location, both nodes ready', async () => {
    const locs = await db.query('select name, is_default from locations');
    assert.deepEqual(locs.rows, [{ name: 'default', is_default: 1 }]);
    const migrations = await db.query('select name from kysely_migration order by name');
    assert.ok(migrations.rows.length >= 1);
    assert.equal(new Set(migrations.rows.map((r) => r.name)).size, migrations.rows.length);
    for (const p of api) assert.equal((await req(`${p.url}/readyz`)).status, 200);
    const created = api.filter((p) => p.output().includes('created default location'));
    assert.equal(created.length, 1, 'exactly one node created the default location');
  });

  it('100 concurrent PUTs to one key over both nodes: 100 versions, exactly one head, exact bucket size', async () => {
    const b = await createBucket(node(0).files);
    const bodies = Array.from({ length: 100 }, (_, i) => Buffer.from(`version ${i} `.repeat(i + 1)));
    const answers = await Promise.all(
      bodies.map((body, i) => req(`${node(i).files}/${b}/same-key.txt`, { method: 'PUT', body: new Uint8Array(body) })),
    );
    answers.forEach((r, i) => assert.equal(r.status, 200, `PUT ${i} via node ${i % 2}: ${r.status} ${r.text}\n${node(i).output().slice(-3000)}`));
    const listed = await req(`${node(1).files}/${b}?versions`);
    const versions = listed.json.contents as { key: string; is_head: boolean; size: number; checksum: string; version_id: string }[];
    assert.equal(versions.length, 100);
    assert.equal(new Set(versions.map((v) => v.version_id)).size, 100);
    const heads = versions.filter((v) => v.is_head);
    assert.equal(heads.length, 1);
    const total = bodies.reduce((n, x) => n + x.length, 0);
    assert.equal(listed.json.size, total);
    assert.equal((await req(`${node(0).files}/${b}`)).json.size, total);
    assert.deepEqual(versions.map((v) => v.checksum).sort(), bodies.map((x) => `md5:${md5(x)}`).sort());
    // The head is the newest version, and both nodes serve it.
    const newest = await one<{ version_id: string }>(
      'select version_id from object_versions where bucket_id = $1 and key = $2 order by seq desc limit 1',
      [b, 'same-key.txt'],
    );
    assert.equal(heads[0]!.version_id, newest.version_id);
    for (const p of api) assert.equal(`md5:${(await downloadMd5(`${p.files}/${b}/same-key.txt`)).md5}`, heads[0]!.checksum);
    const dbHeads = await one<{ n: string }>('select count(*) as n from object_versions where bucket_id = $1 and is_head = 1', [b]);
    assert.equal(Number(dbHeads.n), 1);
  });

  it('30 keys PUT at once through both nodes: every key has one head, its newest version, and the size counts all 60', async () => {
    // Each node commits its uploads to the bucket in groups; on PostgreSQL a group of distinct keys is
    // one statement that takes the bucket's lock itself, and one that waited for the other node's group
    // read the heads before that group's commit: it must fail and run again, never leave two heads.
    const b = await createBucket(node(0).files);
    const puts = Array.from({ length: 60 }, (_, i) => ({ key: `k${i % 30}.txt`, via: Math.floor(i / 30), body: Buffer.from(`upload ${i} `.repeat(1 + (i % 7))) }));
    const answers = await Promise.all(puts.map((p) => req(`${api[p.via]!.files}/${b}/${p.key}`, { method: 'PUT', body: new Uint8Array(p.body) })));
    answers.forEach((r, i) => assert.equal(r.status, 200, `PUT ${i} via node ${puts[i]!.via}: ${r.status} ${r.text}\n${api[puts[i]!.via]!.output().slice(-3000)}`));
    const rows = await many<{ key: string; version_id: string; is_head: number; seq: string }>('select key, version_id, is_head, seq from object_versions where bucket_id = $1', [b]);
    assert.equal(rows.length, 60);
    for (let k = 0; k < 30; k++) {
      const versions = rows.filter((r) => r.key === `k${k}.txt`);
      assert.equal(versions.length, 2);
      const heads = versions.filter((r) => r.is_head === 1);
      assert.equal(heads.length, 1, `k${k}.txt has one head`);
      assert.equal(heads[0]!.seq, versions.map((v) => v.seq).sort((x, y) => Number(y) - Number(x))[0], `k${k}.txt's head is its newest version`);
    }
    assert.equal((await req(`${node(1).files}/${b}`)).json.size, puts.reduce((n, p) => n + p.body.length, 0));
  });

  it('concurrent uploads racing a quota over both nodes: the stored sum never exceeds it, every refusal is clean', async () => {
    const b = await createBucket(node(1).files);
    const quota = 100_000;
    const set = await runCli(['bucket', 'set', b, '--quota-size', String(quota)], env);
    assert.equal(set.code, 0, set.stderr);
    const size = 10_000;
    const n = 40;
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) => req(`${node(i).files}/${b}/f${i}.bin`, { method: 'PUT', body: new Uint8Array(Buffer.alloc(size, i)) })),
    );
    const ok = answers.filter((r) => r.status === 200);
    const refused = answers.filter((r) => r.status !== 200);
    assert.ok(ok.length >= 1, 'some uploads fit');
    assert.ok(ok.length * size <= quota, `${ok.length} stored`);
    for (const r of refused) {
      assert.equal(r.status, 400, r.text);
      assert.deepEqual(r.json, { status: 400, message: ERRORS.QUOTA_EXCEEDED.message });
    }
    const bucket = await one<{ size: number; reserved_size: number }>('select size, reserved_size from buckets where id = $1', [b]);
    assert.equal(Number(bucket.size), ok.length * size);
    assert.ok(Number(bucket.size) <= quota);
    assert.equal(Number(bucket.reserved_size), 0, 'no reservation left behind');
    const listed = await req(`${node(0).files}/${b}`);
    assert.equal(listed.json.contents.length, ok.length);
    // Refused uploads left no bytes behind on the shared storage: every data file is a file row.
    const rows = await db.query<{ uri: string }>('select uri from files where uri is not null');
    const known = new Set(rows.rows.map((r) => r.uri));
    const onDisk = (await filesUnder(join(dir, 'shared-storage'))).filter((f) => !f.endsWith('.tmp'));
    for (const f of onDisk) assert.ok(known.has(f), `stray file ${f}`);
    assert.equal((await filesUnder(join(dir, 'shared-storage'))).filter((f) => f.endsWith('.tmp')).length, 0, 'no temporary file left');
    console.log(`# quota race: ${ok.length} of ${n} uploads stored, ${refused.length} refused`);
  });

  it('a multipart upload whose parts go to different nodes is completed by whichever worker takes the task', async () => {
    const b = await createBucket(node(0).files);
    const partSize = 2 * MiB;
    const parts = 7;
    const size = partSize * parts - 12345;
    const init = await req(`${node(0).files}/${b}/mp.bin?uploads&size=${size}&partSize=${partSize}`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    const u = init.json.id as string;
    const want = createHash('md5');
    const chunks: Buffer[] = [];
    for (let i = 0; i < parts; i++) {
      const len = i === parts - 1 ? size - partSize * (parts - 1) : partSize;
      const c = Buffer.alloc(len);
      for (let j = 0; j < len; j += 4096) c.writeUInt32LE(((i + 1) * 2654435761 + j) >>> 0, j);
      chunks.push(c);
      want.update(c);
    }
    // Parts in reverse order, alternating nodes, in parallel.
    const sent = await Promise.all(
      chunks.map((c, i) => req(`${node(parts - i).files}/${b}/mp.bin?uploadId=${u}&partNumber=${i}`, { method: 'PUT', body: new Uint8Array(c) })),
    );
    sent.forEach((r, i) => assert.equal(r.status, 200, `part ${i}: ${r.text}`));
    const listedParts = await req(`${node(1).files}/${b}/mp.bin?uploadId=${u}`);
    assert.deepEqual(listedParts.json.parts.map((p: { part_number: number }) => p.part_number), [0, 1, 2, 3, 4, 5, 6]);
    const done = await req(`${node(1).files}/${b}/mp.bin?uploadId=${u}`, { method: 'POST' });
    assert.equal(done.status, 200, done.text);
    const md5hex = want.digest('hex');
    for (const p of api) {
      const d = await downloadMd5(`${p.files}/${b}/mp.bin`);
      assert.equal(d.bytes, size);
      assert.equal(d.md5, md5hex);
    }
    const task = await one<{ state: string }>("select state from tasks where name = 'complete-multipart' and payload like $1", [`%${u}%`]);
    assert.equal(task.state, 'done');
    const by = workers.filter((w) => w.output().includes(u));
    assert.equal(by.length, 1, 'one worker completed it');
  });

  it('kill -9 of one API node mid-upload and of one worker mid-task: the others carry on, nothing half-done remains', async () => {
    const [a, bNode] = api as [ServerProcess, ServerProcess];
    const bucket = await createBucket(bNode.files);
    const sizeBefore = (await req(`${bNode.files}/${bucket}`)).json.size as number;

    // 1. API node A dies with an upload half received.
    await new Promise<void>((resolve, reject) => {
      const url = new URL(`${a.files}/${bucket}/half.bin`);
      const r = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'PUT', headers: { 'content-length': String(32 * MiB) } });
      // The connection breaks when the node dies: expected.
      r.on('error', () => {});
      r.on('response', (res) => reject(new Error(`the half upload was answered: ${res.statusCode}`)));
      r.write(Buffer.alloc(8 * MiB, 3), () => {
        waitFor(async () => (await req(`${a.url}/metrics`)).text.includes('files_rest_uploads_in_flight 1'), 10_000)
          .then(() => a.kill('SIGKILL'))
          .then(() => {
            r.destroy();
            resolve();
          }, reject);
      });
    });
    assert.equal(a.child.signalCode, 'SIGKILL');
    // Node B carries on, and the half upload is nowhere.
    assert.equal((await req(`${bNode.files}/${bucket}/half.bin`)).status, 404);
    assert.equal((await req(`${bNode.files}/${bucket}/after-a.txt`, { method: 'PUT', body: 'B still takes uploads' })).status, 200);
    const row = await one<{ size: number; reserved_size: number }>('select size, reserved_size from buckets where id = $1', [bucket]);
    assert.equal(Number(row.size), sizeBefore + 'B still takes uploads'.length);
    assert.equal(Number(row.reserved_size), 0);

    // 2. A worker dies in the middle of completing a multipart upload.
    const partSize = 64 * MiB;
    const parts = 3;
    const size = partSize * parts;
    const u = (await req(`${bNode.files}/${bucket}/big.bin?uploads&size=${size}&partSize=${partSize}`, { method: 'POST' })).json.id as string;
    const want = createHash('md5');
    for (let n = 0; n < parts; n++) {
      const r = await streamRequest(`${bNode.files}/${bucket}/big.bin?uploadId=${u}&partNumber=${n}`, 'PUT', patternStream(partSize, MiB, n), partSize);
      assert.equal(r.status, 200);
      for await (const c of patternStream(partSize, MiB, n)) want.update(c as Buffer);
    }
    assert.equal((await req(`${bNode.files}/${bucket}/big.bin?uploadId=${u}`, { method: 'POST', headers: { Prefer: 'respond-async' } })).status, 202);
    const task = () =>
      one<{ state: string; locked_by: string | null; attempts: number }>(
        "select state, locked_by, attempts from tasks where name = 'complete-multipart' and payload like $1",
        [`%${u}%`],
      );
    const running = await waitFor(async () => {
      const t = await task();
      return t.state === 'running' ? t : null;
    }, 20_000, 5);
    const holder = workers.find((w) => running.locked_by!.includes(`:${w.child.pid}:`))!;
    const other = workers.find((w) => w !== holder)!;
    assert.ok(holder, `a worker holds the task (${running.locked_by})`);
    await holder.kill('SIGKILL');
    // Nothing half done: no object yet, the upload still there.
    assert.equal((await req(`${bNode.files}/${bucket}/big.bin`)).status, 404);

    // The other worker takes the task over once the lease runs out, and completes it once.
    const finished = await waitFor(async () => {
      const t = await task();
      return t.state === 'done' ? t : null;
    }, 60_000, 100);
    assert.ok(finished.attempts >= 2, `attempts ${finished.attempts}`);
    assert.ok(other.output().includes(u), 'the surviving worker completed it');
    const d = await downloadMd5(`${bNode.files}/${bucket}/big.bin`);
    assert.equal(d.bytes, size);
    assert.equal(d.md5, want.digest('hex'));
    const versions = await req(`${bNode.files}/${bucket}?versions`);
    assert.deepEqual(versions.json.contents.map((v: { key: string }) => v.key).sort(), ['after-a.txt', 'big.bin']);
    assert.equal((await req(`${bNode.files}/${bucket}/big.bin?uploadId=${u}`)).status, 404, 'the upload is gone');
    const after = await one<{ size: number; reserved_size: number }>('select size, reserved_size from buckets where id = $1', [bucket]);
    assert.equal(Number(after.size), sizeBefore + 'B still takes uploads'.length + size);
    assert.equal(Number(after.reserved_size), 0);
    assert.equal(Number((await one<{ n: string }>("select count(*) as n from tasks where state = 'failed'")).n), 0, 'no task failed');
    // The killed API node's half-written temporary file is the only trace on disk (no row, no object).
    const tmp = (await filesUnder(join(dir, 'shared-storage'))).filter((f) => f.endsWith('.tmp'));
    console.log(`# kill -9 mid-upload left ${tmp.length} temporary file(s) on the shared storage (never visible through the API)`);
  });
});
