// `serve` with FILES_REST_PROCESSES=2: a node:cluster primary and two server processes sharing the
// port, on the run's database. Real processes, real connections.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { spawnFilesRest, runCli, type ServerProcess } from './support/process.js';
import { testEnvironment } from './support/server.js';
import { waitFor } from './support/http.js';

/** Pids whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // pid (comm) state ppid …: comm may hold spaces, so parse after the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(name));
    } catch {
      // The process ended while we looked.
    }
  }
  return out;
}

function environ(pid: number): string[] {
  return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
}

/** A request on a connection of its own (so the primary hands each to the next process). */
async function fresh(url: string, init: RequestInit = {}): Promise<Response> {
  return fetch(url, { ...init, headers: { connection: 'close', ...(init.headers as Record<string, string> | undefined) } });
}

describe('serve with FILES_REST_PROCESSES=2 (node:cluster)', () => {
  let env: Awaited<ReturnType<typeof testEnvironment>>;
  let srv: ServerProcess;
  before(async () => {
    env = await testEnvironment('files-rest-cluster-');
    srv = await spawnFilesRest('serve', { ...env.env, FILES_REST_PROCESSES: '2' });
    await srv.waitFor(/listening on[\s\S]*listening on/, 20_000);
  });
  after(async () => {
    await srv?.kill('SIGKILL');
    await env?.drop();
    if (env) await rm(env.dir, { recursive: true, force: true });
  });

  it('runs two server processes; only the first runs the background worker', () => {
    const kids = childrenOf(srv.child.pid!);
    assert.equal(kids.length, 2, `children: ${kids.join(',')}`);
    const withoutWorker = kids.filter((k) => environ(k).includes('FILES_REST_WORKER=0'));
    assert.equal(withoutWorker.length, 1);
  });

  it('both processes answer, and they see the same objects: one head per key under concurrent PUTs', async () => {
    const created = await fresh(srv.files, { method: 'POST' });
    assert.equal(created.status, 200);
    const bucket = ((await created.json()) as { id: string }).id;
    const pids = new Set<string>();
    const puts = await Promise.all(
      Array.from({ length: 24 }, (_, i) => fresh(`${srv.files}/${bucket}/k${i % 4}`, { method: 'PUT', body: `body ${i}` })),
    );
    for (const r of puts) assert.equal(r.status, 200, await r.text());
    // The request log says which process answered each request.
    await waitFor(async () => (srv.output().match(/"statusCode":200/g) ?? []).length >= 25, 5000);
    for (const m of srv.output().matchAll(/"pid":(\d+)[^\n]*"statusCode":200/g)) pids.add(m[1]!);
    assert.equal(pids.size, 2, `answered by ${[...pids].join(',')}`);
    const listing = (await (await fresh(`${srv.files}/${bucket}?versions`)).json()) as { contents: { key: string; is_head: boolean }[] };
    assert.equal(listing.contents.length, 24);
    for (let k = 0; k < 4; k++) {
      const heads = listing.contents.filter((c) => c.key === `k${k}` && c.is_head);
      assert.equal(heads.length, 1, `k${k} has one head`);
    }
  });

  it('a server process killed with SIGKILL is replaced; the service keeps answering', async () => {
    const before = childrenOf(srv.child.pid!);
    const victim = before[0]!;
    process.kill(victim, 'SIGKILL');
    await waitFor(async () => {
      const now = childrenOf(srv.child.pid!);
      return now.length === 2 && !now.includes(victim);
    }, 15_000);
    await srv.waitFor(/a server process exited; starting another/, 5000);
    for (let i = 0; i < 6; i++) assert.equal((await fresh(`${srv.url}/healthz`)).status, 200);
    // Still exactly one process runs the background worker.
    await waitFor(async () => childrenOf(srv.child.pid!).filter((k) => environ(k).includes('FILES_REST_WORKER=0')).length === 1, 10_000);
  });

  it('SIGTERM to the primary stops every process; exit 0', async () => {
    const kids = childrenOf(srv.child.pid!);
    const code = await srv.kill('SIGTERM');
    assert.equal(code, 0, `exit ${code} ${srv.child.signalCode}: ${srv.output().slice(-1500)}`);
    for (const k of kids) assert.throws(() => process.kill(k, 0), /ESRCH/, `process ${k} is gone`);
  });
});

describe('FILES_REST_PROCESSES: refusals', () => {
  it('a value out of range is refused with the setting named', async () => {
    const env = await testEnvironment('files-rest-cluster-bad-', { ownDatabase: false });
    try {
      const r = await runCli(['serve'], { ...env.env, FILES_REST_PROCESSES: '0' });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /FILES_REST_PROCESSES/);
    } finally {
      await rm(env.dir, { recursive: true, force: true });
    }
  });

  it('a server process that cannot start (port taken) stops the primary with a non-zero exit', async () => {
    const env = await testEnvironment('files-rest-cluster-port-');
    const blocker = createServer();
    await new Promise<void>((res) => blocker.listen(0, '127.0.0.1', res));
    const port = (blocker.address() as { port: number }).port;
    try {
      const r = await runCli(['serve'], { ...env.env, PORT: String(port), FILES_REST_PROCESSES: '2' });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr + r.stdout, /exited before it listened|address already in use|EADDRINUSE/i);
    } finally {
      blocker.close();
      await env.drop();
      await rm(env.dir, { recursive: true, force: true });
    }
  });
});
