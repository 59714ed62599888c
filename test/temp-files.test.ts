// Temporary files of uploads cut short: a shutdown removes those of the uploads it cuts, and a start
// removes those that can be proven abandoned (a process of this host that is gone, or a day old)
// while leaving those another API process sharing the directory may still be writing.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdir, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { processEnv, filesUnder } from './support/fixtures.js';
import { spawnFilesRest, type ServerProcess } from './support/process.js';
import { createBucket, waitFor } from './support/http.js';
import { startTestServer } from './support/server.js';
import { PassThrough } from 'node:stream';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { FsBackend, isAbandonedTemporary, temporaryOwner } from '../src/storage/fs/fs-backend.js';

const MiB = 1024 * 1024;

/** A PUT that sends `first` bytes of `size` and then waits; errors (the server going away) are ignored. */
function stalledPut(url: string, size: number, first: number): http.ClientRequest {
  const u = new URL(url);
  const r = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'PUT', agent: false, headers: { 'content-length': String(size) } });
  r.on('error', () => {});
  r.on('response', (res) => res.resume());
  r.write(Buffer.alloc(first, 1));
  return r;
}

function exited(p: ServerProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve(p.child.exitCode);
    p.child.once('exit', (code) => resolve(code));
  });
}

describe('Temporary files of interrupted uploads', () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void>;
  let data: string;
  const procs: ServerProcess[] = [];
  before(async () => {
    ({ env, dir, drop } = await processEnv({ FILES_REST_WORKER: '0', FILES_REST_BODY_IDLE_TIMEOUT: '600' }));
    data = env.FILES_REST_DATA_DIR!;
  });
  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    await drop();
    await rm(dir, { recursive: true, force: true });
  });
  const temporaries = async () => (await filesUnder(data)).filter((f) => f.endsWith('.tmp'));

  it('an upload cut at the end of the shutdown grace leaves no temporary file', async () => {
    const api = await spawnFilesRest('serve', { ...env, FILES_REST_SHUTDOWN_GRACE: '0.2' });
    procs.push(api);
    const b = await createBucket(api.files);
    const up = stalledPut(`${api.files}/${b}/cut.bin`, 8 * MiB, MiB);
    await waitFor(async () => (await temporaries()).length === 1);
    const code = exited(api);
    api.child.kill('SIGTERM');
    assert.equal(await code, 0);
    up.destroy();
    assert.deepEqual(await temporaries(), []);
  });

  it('a start removes the temporary file of a killed process, and only provably abandoned ones', async () => {
    const api = await spawnFilesRest('serve', env);
    procs.push(api);
    const b = await createBucket(api.files);
    const up = stalledPut(`${api.files}/${b}/killed.bin`, 8 * MiB, MiB);
    await waitFor(async () => (await temporaries()).length === 1);
    const [left] = await temporaries();
    const owner = temporaryOwner(left!);
    assert.equal(owner?.pid, api.child.pid, 'the temporary file names its process');
    const code = exited(api);
    api.child.kill('SIGKILL');
    await code;
    up.destroy();
    assert.deepEqual(await temporaries(), [left], 'a killed process cleans nothing up');

    // Others' files: one of a live process of this host (pid 1), one of another host, one of an
    // older version without an owner, all fresh: they stay. An ownerless one two days old goes.
    const other = join(data, 'zz', 'zz', 'other');
    await mkdir(other, { recursive: true });
    const live = join(other, `data.aaaaaaaaaaaa.${owner!.host}-1.tmp`);
    const elsewhere = join(other, `data.bbbbbbbbbbbb.${owner!.host === '00000000' ? '11111111' : '00000000'}-${api.child.pid}.tmp`);
    const legacy = join(other, 'data.cccccccccccc.tmp');
    const old = join(other, 'data.dddddddddddd.tmp');
    for (const f of [live, elsewhere, legacy, old]) await writeFile(f, 'x');
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    await utimes(old, twoDaysAgo, twoDaysAgo);

    const s = await startTestServer({ DATABASE_URL: env.DATABASE_URL!, FILES_REST_DATA_DIR: data, FILES_REST_STORAGE_FACTORY: 'fs', FILES_REST_WORKER: '0' });
    try {
      await waitFor(async () => !(await temporaries()).includes(left!) && !(await temporaries()).includes(old));
      assert.deepEqual((await temporaries()).sort(), [elsewhere, legacy, live].sort());
    } finally {
      await s.close();
    }
  });

  it('closing the fs backend removes the temporary file of a write that has not settled', async () => {
    const base = await mkdtemp(join(tmpdir(), 'files-rest-close-'));
    try {
      const fs = new FsBackend({ splitLength: 2, dimensions: 2 });
      const uri = fs.makeUri(base, '0123456789abcdef0123456789abcdef');
      const body = new PassThrough();
      const saving = fs.save(uri, body);
      saving.catch(() => {});
      body.write(Buffer.alloc(64 * 1024, 1));
      await waitFor(async () => (await filesUnder(base)).some((f) => f.endsWith('.tmp')));
      // The body never ends (a stalled upload the shutdown did not get to cut): close waits a moment, then removes it.
      await fs.close(100);
      assert.deepEqual(await filesUnder(base), []);
      body.destroy();
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });

  it('isAbandonedTemporary: age, owner host and pid, and this process before it started', () => {
    const now = Date.now();
    const host = temporaryOwner(`x.aaaaaaaaaaaa.${'0'.repeat(8)}-1.tmp`)!.host;
    assert.equal(host, '00000000');
    assert.equal(isAbandonedTemporary('/d/data', now - 3 * 86_400_000, now), false, 'not a temporary file');
    assert.equal(isAbandonedTemporary('/d/data.abc.tmp', now - 3 * 86_400_000, now), true);
    assert.equal(isAbandonedTemporary('/d/data.abc.tmp', now - 1000, now), false);
  });
});
