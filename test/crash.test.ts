import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { rm } from 'node:fs/promises';
import { loadConfig } from '../src/config.js';
import { openCore, type Core } from '../src/service.js';
import { spawnFilesRest, type ServerProcess } from './support/process.js';
import { createBucket, downloadMd5, req, streamRequest, waitFor } from './support/http.js';
import { patternStream, processEnv } from './support/fixtures.js';

const MiB = 1024 * 1024;

describe('Crashes: kill -9 leaves the old state or the new one', () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void>;
  let core: Core;
  const procs: ServerProcess[] = [];
  before(async () => {
    const e = await processEnv({ FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(MiB), FILES_REST_TASK_LEASE: '2', FILES_REST_WORKER: '0' });
    env = e.env;
    dir = e.dir;
    drop = e.drop;
  });
  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    await core?.close();
    await drop();
    await rm(dir, { recursive: true, force: true });
  });

  async function serve(extra: Record<string, string> = {}) {
    const p = await spawnFilesRest('serve', { ...env, ...extra });
    procs.push(p);
    return p;
  }

  it('small objects kept in the database: a server killed among 16 concurrent uploaders keeps every acknowledged one, byte for byte, and the bucket size matches', async () => {
    let p = await serve();
    const b = await createBucket(p.files);
    const acknowledged = new Map<string, string>();
    let stop = false;
    const uploader = async (w: number) => {
      for (let i = 0; !stop; i++) {
        const key = `w${w}/obj-${i}`;
        const body = createHash('sha256').update(key).digest('hex').repeat(1 + ((w * 7 + i) % 50));
        try {
          const r = await fetch(`${p.files}/${b}/${key}`, { method: 'PUT', body });
          if (r.status === 200) acknowledged.set(key, body);
        } catch {
          return; // the server is gone: this request was never acknowledged
        }
      }
    };
    const running = Array.from({ length: 16 }, (_, w) => uploader(w));
    await waitFor(async () => acknowledged.size >= 200, 20_000);
    await p.kill('SIGKILL');
    stop = true;
    await Promise.all(running);
    p = await serve();
    for (const [key, body] of acknowledged) {
      const r = await fetch(`${p.files}/${b}/${key}`);
      assert.equal(r.status, 200, key);
      assert.equal(await r.text(), body, key);
    }
    // Uploads cut by the kill may have committed without their answer: the bucket's size is the sum of what it holds.
    const listed = await req(`${p.files}/${b}?versions`);
    const held = (listed.json.contents as { size: number }[]).reduce((n, v) => n + v.size, 0);
    assert.equal((await req(`${p.files}/${b}`)).json.size, held);
    assert.ok(listed.json.contents.length >= acknowledged.size);
    await p.kill('SIGTERM');
  });

  it('a server killed mid-part: after restart the part is absent, can be re-sent, and the upload completes', async () => {
    let p = await serve({ FILES_REST_WORKER: '1' });
    const b = await createBucket(p.files);
    const size = 24 * MiB;
    const init = await req(`${p.files}/${b}/k.bin?uploads&size=${size}&partSize=${8 * MiB}`, { method: 'POST' });
    const u = init.json.id as string;
    const partUrl = (n: number) => `${p.files}/${b}/k.bin?uploadId=${u}&partNumber=${n}`;
    assert.equal((await streamRequest(partUrl(0), 'PUT', patternStream(8 * MiB, MiB, 0), 8 * MiB)).status, 200);
    // Part 1: send half the bytes, then kill the server process.
    await new Promise<void>((resolve) => {
      const url = new URL(partUrl(1));
      const r = http.request({ host: url.hostname, port: url.port, path: url.pathname + url.search, method: 'PUT', headers: { 'content-length': String(8 * MiB) } });
      r.on('error', () => resolve());
      r.write(Buffer.alloc(4 * MiB, 9), async () => {
        await new Promise((t) => setTimeout(t, 100));
        await p.kill('SIGKILL');
        r.destroy();
        resolve();
      });
    });
    p = await serve({ FILES_REST_WORKER: '1' });
    const listed = await req(`${p.files}/${b}/k.bin?uploadId=${u}`);
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.json.parts.map((x: { part_number: number }) => x.part_number), [0]);
    for (const n of [1, 2]) {
      const r = await streamRequest(`${p.files}/${b}/k.bin?uploadId=${u}&partNumber=${n}`, 'PUT', patternStream(8 * MiB, MiB, n), 8 * MiB);
      assert.equal(r.status, 200);
    }
    assert.equal((await req(`${p.files}/${b}/k.bin?uploadId=${u}`, { method: 'POST' })).status, 200);
    const want = createHash('md5');
    for (let n = 0; n < 3; n++) for await (const c of patternStream(8 * MiB, MiB, n)) want.update(c as Buffer);
    const d = await downloadMd5(`${p.files}/${b}/k.bin`);
    assert.equal(d.md5, want.digest('hex'));
    assert.equal((await req(`${p.files}/${b}`)).json.size, size);
    await p.kill('SIGTERM');
  });

  it('a worker killed mid-completion: the task runs again after its lease and the upload completes exactly once', async () => {
    const api = await serve();
    const b = await createBucket(api.files);
    const size = 384 * MiB;
    const partSize = 64 * MiB;
    const u = (await req(`${api.files}/${b}/big.bin?uploads&size=${size}&partSize=${partSize}`, { method: 'POST' })).json.id as string;
    const want = createHash('md5');
    for (let n = 0; n < size / partSize; n++) {
      const r = await streamRequest(`${api.files}/${b}/big.bin?uploadId=${u}&partNumber=${n}`, 'PUT', patternStream(partSize, MiB, n), partSize);
      assert.equal(r.status, 200);
      for await (const c of patternStream(partSize, MiB, n)) want.update(c as Buffer);
    }
    const accepted = await req(`${api.files}/${b}/big.bin?uploadId=${u}`, { method: 'POST', headers: { Prefer: 'respond-async' } });
    assert.equal(accepted.status, 202);

    core = await openCore(loadConfig({ ...env, LOG_LEVEL: 'silent' }));
    const runningTask = async () =>
      (await core.ctx.db.selectFrom('tasks').selectAll().where('name', '=', 'complete-multipart').where('payload', 'like', `%${u}%`).where('state', '=', 'running').executeTakeFirst()) ?? null;
    const w1 = await spawnFilesRest('worker', env);
    procs.push(w1);
    await waitFor(runningTask, 20_000, 5);
    await w1.kill('SIGKILL');
    // Killed mid-task: nothing half done.
    assert.equal((await req(`${api.files}/${b}/big.bin`)).status, 404);
    assert.equal((await req(`${api.files}/${b}/big.bin?uploadId=${u}`)).status, 200);

    const w2 = await spawnFilesRest('worker', env);
    procs.push(w2);
    await waitFor(async () => (await req(`${api.files}/${b}/big.bin`)).status === 200, 60_000, 100);
    const d = await downloadMd5(`${api.files}/${b}/big.bin`);
    assert.equal(d.md5, want.digest('hex'));
    const listed = await req(`${api.files}/${b}?versions`);
    assert.equal(listed.json.contents.length, 1);
    assert.equal(listed.json.size, size);
    assert.equal((await req(`${api.files}/${b}/big.bin?uploadId=${u}`)).status, 404);
    const task = await core.ctx.db.selectFrom('tasks').selectAll().where('name', '=', 'complete-multipart').where('payload', 'like', `%${u}%`).executeTakeFirstOrThrow();
    assert.equal(task.state, 'done');
    assert.ok(task.attempts >= 2, `attempts ${task.attempts}: ${JSON.stringify(task)}\n--- w1:\n${w1.output().slice(-3000)}\n--- w2:\n${w2.output().slice(-3000)}`);
    const bucket = await core.ctx.db.selectFrom('buckets').selectAll().where('id', '=', b).executeTakeFirstOrThrow();
    assert.equal(bucket.reserved_size, 0);
    await w2.kill('SIGTERM');
    await api.kill('SIGTERM');
  });
});
