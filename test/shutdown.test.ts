// Graceful shutdown. `files-rest serve` on SIGTERM: stops accepting connections, lets the upload
// and the download in flight finish (within FILES_REST_SHUTDOWN_GRACE), then exits 0.
// `files-rest worker` on SIGTERM: finishes its current task or gives it back to the queue, exits 0.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { rm } from 'node:fs/promises';
import { loadConfig } from '../src/config.js';
import { openCore, type Core } from '../src/service.js';
import { processEnv, patternStream } from './support/fixtures.js';
import { spawnFilesRest, type ServerProcess } from './support/process.js';
import { createBucket, downloadMd5, md5, put, req, streamRequest, waitFor } from './support/http.js';

const MiB = 1024 * 1024;

function exitCode(p: ServerProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve(p.child.exitCode);
    p.child.once('exit', (code) => resolve(code));
  });
}

/** Whether a new TCP connection to the server is accepted. */
function accepts(url: string): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const s = net.connect({ host: u.hostname, port: Number(u.port) });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

describe('Graceful shutdown', () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void>;
  let core: Core | null = null;
  const procs: ServerProcess[] = [];

  before(async () => {
    const e = await processEnv({ FILES_REST_WORKER: '0', FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(MiB), FILES_REST_TASK_LEASE: '60' });
    ({ env, dir, drop } = e);
  });
  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    await core?.close();
    await drop();
    await rm(dir, { recursive: true, force: true });
  });

  async function start(command: 'serve' | 'worker', extra: Record<string, string> = {}): Promise<ServerProcess> {
    const p = await spawnFilesRest(command, { ...env, ...extra });
    procs.push(p);
    return p;
  }

  it('serve: SIGTERM refuses new connections, the upload and download in flight finish, exit 0', async () => {
    const api = await start('serve', { FILES_REST_SHUTDOWN_GRACE: '60' });
    const b = await createBucket(api.files);
    const big = Buffer.alloc(16 * MiB);
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE((i * 2654435761) >>> 0, i);
    assert.equal((await put(`${api.files}/${b}/big.bin`, big)).status, 200);

    // A download that reads its first bytes and then waits.
    const dl = new URL(`${api.files}/${b}/big.bin`);
    const hash = createHash('md5');
    let received = 0;
    let reader: http.IncomingMessage | null = null;
    const download = new Promise<{ status: number; bytes: number; md5: string }>((resolve, reject) => {
      http
        .get({ host: dl.hostname, port: dl.port, path: dl.pathname, agent: false }, (res) => {
          reader = res;
          let pausedOnce = false;
          res.on('data', (d: Buffer) => {
            received += d.length;
            hash.update(d);
            if (received >= MiB && !pausedOnce) {
              pausedOnce = true;
              res.pause();
            }
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes: received, md5: hash.digest('hex') }));
          res.on('error', reject);
        })
        .on('error', reject);
    });
    await waitFor(async () => received >= MiB, 10_000);

    // An upload that sends half of its bytes and then waits.
    const first = Buffer.alloc(2 * MiB, 1);
    const second = Buffer.alloc(2 * MiB, 2);
    const up = new URL(`${api.files}/${b}/up.bin`);
    const upload = http.request({ host: up.hostname, port: up.port, path: up.pathname, method: 'PUT', agent: false, headers: { 'content-length': String(4 * MiB) } });
    const uploaded = new Promise<{ status: number; text: string }>((resolve, reject) => {
      upload.on('response', (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      upload.on('error', reject);
    });
    await new Promise<void>((resolve) => upload.write(first, () => resolve()));
    await waitFor(async () => (await req(`${api.url}/metrics`)).text.includes('files_rest_uploads_in_flight 1'), 10_000);

    const exited = exitCode(api);
    api.child.kill('SIGTERM');
    await waitFor(async () => /"signal":"SIGTERM".*shutting down|shutting down.*SIGTERM/.test(api.output()), 10_000);
    await waitFor(async () => !(await accepts(api.url)), 10_000);
    assert.equal(api.child.exitCode, null, 'still running while requests are in flight');

    upload.end(second);
    const u = await uploaded;
    assert.equal(u.status, 200, u.text);
    assert.equal(JSON.parse(u.text).checksum, `md5:${md5(Buffer.concat([first, second]))}`);
    (reader as http.IncomingMessage | null)!.resume();
    const d = await download;
    assert.equal(d.status, 200);
    assert.equal(d.bytes, big.length);
    assert.equal(d.md5, md5(big));
    assert.equal(await exited, 0);

    // What was acknowledged is there after a restart.
    const again = await start('serve');
    const listed = await req(`${again.files}/${b}`);
    assert.deepEqual(listed.json.contents.map((v: { key: string; size: number }) => [v.key, v.size]), [['big.bin', 16 * MiB], ['up.bin', 4 * MiB]]);
    assert.equal((await downloadMd5(`${again.files}/${b}/up.bin`)).md5, md5(Buffer.concat([first, second])));
    assert.equal(await again.kill('SIGTERM'), 0);
  });

  it('serve: SIGTERM with nothing in flight exits 0 at once', async () => {
    const api = await start('serve');
    assert.equal((await req(`${api.url}/healthz`)).status, 200);
    assert.equal(await api.kill('SIGTERM'), 0);
  });

  it('worker: SIGTERM mid-task finishes the task or gives it back; another worker completes it exactly once', async () => {
    const api = await start('serve');
    const b = await createBucket(api.files);
    const partSize = 64 * MiB;
    const parts = 4;
    const size = partSize * parts;
    const u = (await req(`${api.files}/${b}/w.bin?uploads&size=${size}&partSize=${partSize}`, { method: 'POST' })).json.id as string;
    const want = createHash('md5');
    for (let n = 0; n < parts; n++) {
      const r = await streamRequest(`${api.files}/${b}/w.bin?uploadId=${u}&partNumber=${n}`, 'PUT', patternStream(partSize, MiB, n), partSize);
      assert.equal(r.status, 200);
      for await (const c of patternStream(partSize, MiB, n)) want.update(c as Buffer);
    }
    assert.equal((await req(`${api.files}/${b}/w.bin?uploadId=${u}`, { method: 'POST', headers: { Prefer: 'respond-async' } })).status, 202);

    core = await openCore(loadConfig({ ...env, LOG_LEVEL: 'silent' }));
    const task = async () =>
      core!.ctx.db.selectFrom('tasks').selectAll().where('name', '=', 'complete-multipart').where('payload', 'like', `%${u}%`).executeTakeFirstOrThrow();
    // Grace 0: the worker may not wait for the task; it must abort it and hand it back.
    const w1 = await start('worker', { FILES_REST_SHUTDOWN_GRACE: '0' });
    await waitFor(async () => ((await task()).state === 'running' ? true : null), 20_000, 5);
    const code = await w1.kill('SIGTERM');
    assert.equal(code, 0, w1.output().slice(-2000));
    const t = await task();
    console.log(`# worker stopped mid-task: the task was ${t.state === 'done' ? 'finished' : 'given back'} (state ${t.state})`);
    if (t.state === 'done') {
      assert.equal((await req(`${api.files}/${b}/w.bin`)).status, 200);
    } else {
      // Given back: queued again, no lease held, the interrupted attempt not counted.
      assert.equal(t.state, 'queued', JSON.stringify(t));
      assert.equal(t.locked_by, null);
      assert.equal(t.attempts, 0);
      assert.match(w1.output(), /task released at shutdown/);
      assert.equal((await req(`${api.files}/${b}/w.bin`)).status, 404, 'nothing half done');
    }

    const w2 = await start('worker');
    await waitFor(async () => ((await task()).state === 'done' ? true : null), 60_000, 100);
    const d = await downloadMd5(`${api.files}/${b}/w.bin`);
    assert.equal(d.md5, want.digest('hex'));
    const listed = await req(`${api.files}/${b}?versions`);
    assert.equal(listed.json.contents.length, 1);
    assert.equal(listed.json.size, size);
    const bucket = await core.ctx.db.selectFrom('buckets').selectAll().where('id', '=', b).executeTakeFirstOrThrow();
    assert.equal(bucket.reserved_size, 0);
    assert.equal(await w2.kill('SIGTERM'), 0);
    assert.equal(await api.kill('SIGTERM'), 0);
  });
});
