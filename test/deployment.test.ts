// docs/deployment.md followed on this machine: deploy/nginx.conf (with this machine's ports) in a
// real nginx in front of two API nodes and a worker on PostgreSQL and one shared storage directory,
// each started with the command and environment of deploy/files-rest-api@.service,
// deploy/files-rest-worker@.service and deploy/env.example. systemd itself cannot run here (no
// systemd as PID 1): the units are checked with `systemd-analyze verify` when it exists, and their
// ExecStart and Environment lines are what the test runs. Then a client creates a bucket, uploads and
// downloads through nginx, and one node is stopped with SIGTERM while traffic goes on.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createPgDatabase, testDatabase } from './support/server.js';
import { runCli } from './support/process.js';
import { findOrInstall, freePort, waitForPort } from './support/system.js';
import { downloadMd5, md5, req, waitFor } from './support/http.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(ROOT, 'bin', 'files-rest.js');
const MiB = 1024 * 1024;

const skipDb = testDatabase() !== 'postgres' ? 'the deployment guide runs several nodes on PostgreSQL; this is the SQLite run' : false;
if (skipDb) console.log(`# deployment: skipped on this run (${skipDb})`);

/** KEY=VALUE lines of an environment file (systemd's EnvironmentFile= syntax, comments ignored). */
function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) out[m[1]!] = m[2]!.trim();
  }
  return out;
}

/** The [Service] lines of a unit that the test needs: Environment= pairs and ExecStart's files-rest arguments. */
function parseUnit(text: string, instance: string): { env: Record<string, string>; args: string[]; envFile: string } {
  const env: Record<string, string> = {};
  let args: string[] = [];
  let envFile = '';
  for (const raw of text.split('\n')) {
    const line = raw.replaceAll('%i', instance).trim();
    let m = /^Environment=([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) env[m[1]!] = m[2]!;
    // The shared file; an optional one (`-`, the per-instance S3 port) may follow.
    m = /^EnvironmentFile=([^-].*)$/.exec(line);
    if (m) envFile = m[1]!;
    m = /^ExecStart=\S*node \S*\/bin\/files-rest\.js (.*)$/.exec(line);
    if (m) args = m[1]!.split(/\s+/);
  }
  assert.ok(args.length > 0, 'ExecStart runs bin/files-rest.js');
  return { env, args, envFile };
}

interface Node {
  child: ChildProcess;
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `node bin/files-rest.js ARGS` as the unit would; resolves when it is up. */
function startUnit(args: string[], env: Record<string, string>, ready: RegExp): Promise<Node> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let done = false;
    const node: Node = {
      child,
      output: () => out,
      stop: (signal = 'SIGTERM') =>
        new Promise((res) => {
          if (child.exitCode !== null || child.signalCode !== null) return res(child.exitCode);
          child.once('exit', (code) => res(code));
          child.kill(signal);
        }),
    };
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      child.kill('SIGKILL');
      reject(new Error(`files-rest ${args.join(' ')} did not start:\n${out}`));
    }, 30_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (!done && ready.test(out)) {
        done = true;
        clearTimeout(timer);
        resolve(node);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      reject(new Error(`files-rest ${args.join(' ')} exited with ${code}:\n${out}`));
    });
  });
}

describe('Deployment guide (docs/deployment.md): nginx, two API nodes, a worker, PostgreSQL, shared storage', { skip: skipDb }, () => {
  let dir: string;
  let drop: () => Promise<void> = async () => {};
  let nginx: ChildProcess | null = null;
  let nginxUrl = '';
  let skipNginx: string | false = false;
  const nodes: Node[] = [];
  let api: Node[] = [];
  let env: Record<string, string>;
  let token = '';
  let ports: number[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'files-rest-deploy-'));
    const found = await findOrInstall('nginx', ['/usr/sbin/nginx', '/usr/bin/nginx']);
    if (found.skip !== undefined) {
      skipNginx = found.skip;
      console.log(`# deployment: nginx is not available (${found.skip}); the test is skipped`);
      return;
    }
    const pgdb = await createPgDatabase();
    drop = pgdb.drop;

    // deploy/env.example, with this machine's database, storage, addresses.
    const example = parseEnvFile(await readFile(join(ROOT, 'deploy', 'env.example'), 'utf8'));
    ports = [await freePort(), await freePort()];
    const nginxPort = await freePort();
    nginxUrl = `http://127.0.0.1:${nginxPort}`;
    env = {
      ...example,
      DATABASE_URL: pgdb.url,
      HOST: '127.0.0.1',
      FILES_REST_DATA_DIR: join(dir, 'shared', 'data'),
      FILES_REST_BASE_URL: nginxUrl,
    };
    for (const k of ['FILES_REST_PERMISSION_FACTORY', 'FILES_REST_TRUST_PROXY', 'FILES_REST_STORAGE_FACTORY', 'FILES_REST_SHUTDOWN_GRACE']) {
      assert.ok(example[k], `env.example sets ${k}`);
    }

    // deploy/nginx.conf with the two nodes' ports and a local listen address, inside a minimal
    // main configuration (the conf.d file is included in nginx's http block, as installed).
    let site = await readFile(join(ROOT, 'deploy', 'nginx.conf'), 'utf8');
    for (const d of ['client_max_body_size 0;', 'proxy_request_buffering off;', 'proxy_buffering off;', 'X-Forwarded-For', 'X-Forwarded-Proto']) {
      assert.ok(site.includes(d), `nginx.conf has ${d}`);
    }
    const upstreamLines = site.match(/^\s*server 127\.0\.0\.1:\d+ .*;$/gm) ?? [];
    assert.equal(upstreamLines.length, 2, 'two API nodes in the upstream block');
    upstreamLines.forEach((line, i) => (site = site.replace(line, line.replace(/127\.0\.0\.1:\d+/, `127.0.0.1:${ports[i]}`))));
    assert.match(site, /^\s*listen 80;$/m);
    site = site.replace(/^(\s*)listen 80;$/m, `$1listen 127.0.0.1:${nginxPort};`);
    const ngdir = join(dir, 'nginx');
    await mkdir(join(ngdir, 'conf.d'), { recursive: true });
    await writeFile(join(ngdir, 'conf.d', 'files-rest.conf'), site);
    const main = `
${process.getuid?.() === 0 ? 'user root;' : ''}
daemon off;
worker_processes 1;
pid ${join(ngdir, 'nginx.pid')};
error_log ${join(ngdir, 'error.log')} warn;
events { worker_connections 256; }
http {
  access_log ${join(ngdir, 'access.log')};
  client_body_temp_path ${join(ngdir, 'client_body')};
  proxy_temp_path ${join(ngdir, 'proxy')};
  fastcgi_temp_path ${join(ngdir, 'fastcgi')};
  uwsgi_temp_path ${join(ngdir, 'uwsgi')};
  scgi_temp_path ${join(ngdir, 'scgi')};
  include ${join(ngdir, 'conf.d', '*.conf')};
}
`;
    await writeFile(join(ngdir, 'nginx.conf'), main);
    // The guide's `nginx -t`.
    const check = spawnSync(found.path, ['-t', '-c', join(ngdir, 'nginx.conf'), '-p', ngdir, '-e', join(ngdir, 'error.log')], { encoding: 'utf8' });
    assert.equal(check.status, 0, `nginx -t: ${check.stderr}`);
    nginx = spawn(found.path, ['-c', join(ngdir, 'nginx.conf'), '-p', ngdir, '-e', join(ngdir, 'error.log')], { stdio: 'ignore' });
    await waitForPort(nginxPort);

    // The units: two API nodes (instance = port), one worker, all started at once.
    const apiUnit = await readFile(join(ROOT, 'deploy', 'files-rest-api@.service'), 'utf8');
    const workerUnit = await readFile(join(ROOT, 'deploy', 'files-rest-worker@.service'), 'utf8');
    const units = [
      ...ports.map((p) => ({ unit: parseUnit(apiUnit, String(p)), ready: /listening on http/ })),
      { unit: parseUnit(workerUnit, '1'), ready: /task worker started/ },
    ];
    for (const { unit } of units) assert.equal(unit.envFile, '/etc/files-rest/env', 'the units read the shared environment file');
    assert.deepEqual(units[0]!.unit.env, { PORT: String(ports[0]), FILES_REST_WORKER: '0', FILES_REST_S3_PORT: 'off' });
    const started = await Promise.all(units.map(({ unit, ready }) => startUnit(unit.args, { ...env, ...unit.env }, ready)));
    nodes.push(...started);
    api = started.slice(0, 2);
    // The guide: tokens come from the admin command, run with the same environment.
    const created = await runCli(['token', 'create', '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    token = JSON.parse(created.stdout).token as string;
  });

  after(async () => {
    for (const n of nodes) await n.stop('SIGKILL');
    if (nginx && nginx.exitCode === null) {
      const exited = new Promise((r) => nginx!.once('exit', r));
      nginx.kill('SIGTERM');
      await exited;
    }
    await drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the systemd units are valid (systemd-analyze verify) and run the documented commands', async (t) => {
    if (skipNginx) {
      t.skip(skipNginx);
      return;
    }
    const analyze = ['/usr/bin/systemd-analyze', '/bin/systemd-analyze'].find((p) => existsSync(p));
    if (!analyze) {
      t.skip('systemd-analyze is not installed; the units are exercised through their ExecStart lines only');
      return;
    }
    const udir = join(dir, 'units');
    await mkdir(udir, { recursive: true });
    for (const u of ['files-rest-api@.service', 'files-rest-worker@.service']) await copyFile(join(ROOT, 'deploy', u), join(udir, u));
    for (const instance of [`files-rest-api@${ports[0]}.service`, 'files-rest-worker@1.service']) {
      const r: { status: number | null; stdout: string; stderr: string } = spawnSync(analyze, ['verify', join(udir, instance)], { encoding: 'utf8' });
      assert.equal(r.status, 0, `systemd-analyze verify ${instance}: ${r.stdout}${r.stderr}`);
    }
  });

  it('through nginx: create a bucket, upload, download, ranges, multipart completed by the worker', async (t) => {
    if (skipNginx) {
      t.skip(skipNginx);
      return;
    }
    const auth = { authorization: `Bearer ${token}` };
    const made = await req(`${nginxUrl}/files`, { method: 'POST', headers: auth });
    assert.equal(made.status, 200, made.text);
    const b = made.json.id as string;
    assert.equal(made.json.links.self, `${nginxUrl}/files/${b}`, 'links use FILES_REST_BASE_URL');
    assert.match(made.headers.get('x-request-id') ?? '', /^[0-9a-f]{32}$/, "nginx's $request_id reaches files-rest");

    // A 24 MiB upload streamed through nginx, and the download back.
    const size = 24 * MiB;
    const data = Buffer.alloc(size);
    for (let i = 0; i < size; i += 4) data.writeUInt32LE((i * 2654435761) >>> 0, i);
    const up = await req(`${nginxUrl}/files/${b}/dir/big.bin`, { method: 'PUT', body: new Uint8Array(data), headers: auth });
    assert.equal(up.status, 200, up.text);
    assert.equal(up.json.checksum, `md5:${md5(data)}`);
    const down = await downloadMd5(`${nginxUrl}/files/${b}/dir/big.bin`, auth);
    assert.equal(down.status, 200);
    assert.equal(down.bytes, size);
    assert.equal(down.md5, md5(data));
    const range = await req(`${nginxUrl}/files/${b}/dir/big.bin`, { headers: { ...auth, range: 'bytes=100-199' } });
    assert.equal(range.status, 206);
    assert.equal(range.headers.get('content-range'), `bytes 100-199/${size}`);

    // Multipart: parts through nginx (to whichever node), completion by the worker.
    const partSize = 5 * MiB;
    const total = 3 * partSize - 1000;
    const init = await req(`${nginxUrl}/files/${b}/mp.bin?uploads&size=${total}&partSize=${partSize}`, { method: 'POST', headers: auth });
    assert.equal(init.status, 200, init.text);
    const u = init.json.id as string;
    const whole = data.subarray(0, total);
    for (let n = 0; n < 3; n++) {
      const part = whole.subarray(n * partSize, Math.min(total, (n + 1) * partSize));
      const r = await req(`${nginxUrl}/files/${b}/mp.bin?uploadId=${u}&partNumber=${n}`, { method: 'PUT', body: new Uint8Array(part), headers: auth });
      assert.equal(r.status, 200, r.text);
    }
    const done = await req(`${nginxUrl}/files/${b}/mp.bin?uploadId=${u}`, { method: 'POST', headers: auth });
    assert.equal(done.status, 200, done.text);
    assert.equal((await downloadMd5(`${nginxUrl}/files/${b}/mp.bin`, auth)).md5, md5(whole));

    // Both API nodes served requests (nginx spreads them), and each log line carries nginx's id.
    for (const n of api) assert.match(n.output(), /"reqId":"[0-9a-f]{32}"/, 'requests reached every node');
    // Operator paths: the document and liveness through nginx, everything else refused.
    assert.equal((await req(`${nginxUrl}/openapi.json`)).status, 200);
    assert.equal((await req(`${nginxUrl}/healthz`)).status, 200);
    assert.equal((await req(`${nginxUrl}/`)).status, 404);
    for (const p of ports) {
      assert.equal((await req(`http://127.0.0.1:${p}/readyz`)).status, 200);
      assert.match((await req(`http://127.0.0.1:${p}/metrics`)).text, /^files_rest_http_requests_total\{/m);
    }
  });

  it('rolling restart: SIGTERM to one node, traffic through nginx goes on, the node comes back', async (t) => {
    if (skipNginx) {
      t.skip(skipNginx);
      return;
    }
    const auth = { authorization: `Bearer ${token}` };
    const b = (await req(`${nginxUrl}/files`, { method: 'POST', headers: auth })).json.id as string;
    const body = Buffer.from('served by whichever node is up\n'.repeat(1000));
    assert.equal((await req(`${nginxUrl}/files/${b}/k.txt`, { method: 'PUT', body: new Uint8Array(body), headers: auth })).status, 200);
    const first = api[0]!;
    assert.equal(await first.stop('SIGTERM'), 0, 'a clean exit');
    for (let i = 0; i < 10; i++) {
      const r = await downloadMd5(`${nginxUrl}/files/${b}/k.txt`, auth);
      assert.equal(r.status, 200);
      assert.equal(r.md5, md5(body));
      const w = await req(`${nginxUrl}/files/${b}/n${i}.txt`, { method: 'PUT', body: `n${i}`, headers: auth });
      assert.equal(w.status, 200, w.text);
    }
    // systemd would restart it (Restart=on-failure covers crashes; `systemctl restart` this).
    const apiUnit = parseUnit(await readFile(join(ROOT, 'deploy', 'files-rest-api@.service'), 'utf8'), String(ports[0]));
    const again = await startUnit(apiUnit.args, { ...env, ...apiUnit.env }, /listening on http/);
    nodes.push(again);
    api[0] = again;
    await waitFor(async () => (await req(`http://127.0.0.1:${ports[0]}/readyz`)).status === 200, 10_000);
    const listed = await req(`${nginxUrl}/files/${b}`, { headers: auth });
    assert.equal(listed.json.contents.length, 11);
  });
});
