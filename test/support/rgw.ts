// Ceph's RADOS Gateway as a real S3 store for the tests: a throw-away one-node cluster on 127.0.0.1
// (one monitor, one OSD with BlueStore on a sparse file, pool size 1, authentication off, RGW's beast
// front end), from Debian's radosgw, ceph-mon and ceph-osd packages. Everything lives in one temp
// directory (configuration, monitor store, OSD, run dir, admin sockets, logs); close() kills the
// daemons and removes it. It starts in about 16 s here (most of it RGW creating its pools on first use),
// so a test run starts one (scripts/run-tests.mjs) and shares it through TEST_RGW_* variables, each
// user making its own bucket; a process without one starts its own on first use.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { accessSync, constants, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, mkdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { randomBytes, randomUUID } from 'node:crypto';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { loadConfig } from '../../src/config.js';
import { createS3Client } from '../../src/storage/s3/s3-backend.js';
import type { TestS3 } from './s3.js';
import { freePort } from './system.js';

/** How long the cluster may take to answer S3 requests before the tests that need it skip. */
const START_BOUND_MS = Number(process.env.TEST_RGW_START_TIMEOUT_MS ?? 90_000);
const BINARIES = ['monmaptool', 'ceph-mon', 'ceph-osd', 'ceph', 'radosgw', 'radosgw-admin'] as const;

/** Where a binary is: PATH, then the sbin/bin directories Debian installs the daemons in. */
function findBinary(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin'];
  for (const d of dirs) {
    if (!d) continue;
    const p = join(d, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return null;
}

function run(bin: string, args: string[], timeoutMs: number): Promise<string> {
  const shown = args.map((a, i) => (args[i - 1] === '--secret' ? '…' : a)).join(' ');
  return new Promise((resolve, reject) => {
    execFile(bin, args, { timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err && err.killed) reject(new Error(`${bin} ${shown} did not finish within the ${START_BOUND_MS / 1000} s start bound`));
      else if (err) reject(new Error(`${bin} ${shown} failed (${err.code ?? err.signal}):\n${stderr}`));
      else resolve(stdout);
    });
  });
}

function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Its settings: everything under `dir`, msgr2 on 127.0.0.1 only, no authentication, one copy of everything. */
function cephConf(dir: string, fsid: string, monPort: number, rgwPort: number): string {
  return `[global]
fsid = ${fsid}
mon host = v2:127.0.0.1:${monPort}
mon initial members = a
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
# With authentication off, connections cannot be "secure" (radosgw asks for it towards the monitor).
ms bind msgr1 = false
ms mon client mode = crc
ms client mode = crc
ms mon service mode = crc
ms mon cluster mode = crc
ms service mode = crc
ms cluster mode = crc
run dir = ${dir}/run
admin socket = ${dir}/run/$name.asok
log file = ${dir}/log/$name.log
pid file = ${dir}/run/$name.pid
crash dir = ${dir}/crash
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
mon data avail crit = 0
[mon]
mon data = ${dir}/mon.a
[osd]
osd data = ${dir}/osd.0
osd objectstore = bluestore
# A sparse file outside the OSD's directory (inside it, BlueStore would link it to itself).
bluestore block path = ${dir}/osd.0.block
bluestore block create = true
bluestore block size = ${20 * 1024 ** 3}
bluestore fsck on mkfs = false
bluestore cache autotune = false
bluestore cache size = ${128 * 1024 ** 2}
osd memory target = ${896 * 1024 ** 2}
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:${rgwPort}
rgw data = ${dir}/rgw
`;
}

export interface RgwCluster {
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  dir: string;
  /** Seconds from the first command until RGW answered. */
  startSeconds: number;
  /**
   * Stops only the gateway (radosgw; the monitor and the OSD keep running): sends `signal` (SIGKILL,
   * a crash, by default) and resolves once the process has exited. A no-op when it is not running.
   */
  stopGateway(signal?: NodeJS.Signals): Promise<void>;
  /**
   * Starts the gateway again, with the same configuration (same port, same data): resolves once the
   * endpoint answers 200 again, rejects (with the tail of its log) if it exits or does not answer within
   * `timeoutMs` (default: the start bound, TEST_RGW_START_TIMEOUT_MS). A no-op when it is running.
   */
  startGateway(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** Every cluster this process started and has not closed: killed at exit whatever happens. */
const running = new Set<{ procs: ChildProcess[]; dir: string }>();
process.once('exit', () => {
  for (const r of running) {
    for (const p of r.procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    rmSync(r.dir, { recursive: true, force: true });
  }
});

/**
 * Starts the cluster. Resolves `{ skip }` with the reason when a binary is missing or the cluster
 * does not answer within the bound (the tail of the relevant log goes to stderr), having removed
 * whatever it started.
 */
export async function startRgwCluster(): Promise<RgwCluster | { skip: string }> {
  const bins: Record<string, string> = {};
  const missing: string[] = [];
  for (const b of BINARIES) {
    const p = findBinary(b);
    if (p) bins[b] = p;
    else missing.push(b);
  }
  if (missing.length) return { skip: `Ceph RADOS Gateway not installed (no ${missing.join(', ')}: apt-get install radosgw ceph-mon ceph-osd)` };

  const t0 = Date.now();
  const dir = await mkdtemp(join(tmpdir(), 'files-rest-rgw-'));
  const state = { procs: [] as ChildProcess[], dir };
  running.add(state);
  const conf = join(dir, 'ceph.conf');
  const deadline = t0 + START_BOUND_MS;
  const left = () => Math.max(1000, deadline - Date.now());
  let stage = 'monitor';
  const logOf: Record<string, string> = {
    monitor: join(dir, 'log', 'mon.a.log'),
    osd: join(dir, 'log', 'osd.0.log'),
    rgw: join(dir, 'log', 'client.rgw.log'),
    user: join(dir, 'log', 'client.admin.log'),
  };
  // The cluster is thrown away: SIGKILL (on SIGTERM the OSD and RGW take seconds to shut down cleanly).
  const close = async () => {
    await Promise.all(
      state.procs.map(async (p) => {
        if (p.exitCode !== null || p.signalCode !== null) return;
        const gone = new Promise((r) => p.once('exit', r));
        p.kill('SIGKILL');
        await gone;
      }),
    );
    rmSync(dir, { recursive: true, force: true });
    running.delete(state);
  };
  const daemon = (bin: string, args: string[]) => {
    const p = spawn(bin, ['-c', conf, ...args, '-f'], { stdio: 'ignore' });
    p.on('error', () => {}); // a daemon that cannot start shows as not answering; its log says why
    state.procs.push(p);
    return p;
  };
  let gateway: ChildProcess | null = null;
  const exited = (p: ChildProcess) => p.exitCode !== null || p.signalCode !== null;
  /** Polls the endpoint until it answers 200; fails when a daemon exited or at `until`. */
  const answering = async (endpoint: string, until: number, bound: number) => {
    for (;;) {
      const dead = state.procs.find(exited);
      if (dead) throw new Error(`${dead.spawnfile} exited (${dead.exitCode ?? dead.signalCode})`);
      const ok = await fetch(endpoint, { signal: AbortSignal.timeout(2000) }).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return;
      if (Date.now() > until) throw new Error(`RGW did not answer on ${endpoint} within ${bound / 1000} s`);
      await sleep(200);
    }
  };
  try {
    const [monPort, rgwPort] = [await freePort(), await freePort()];
    const fsid = randomUUID();
    for (const d of ['run', 'log', 'crash', 'mon.a', 'osd.0', 'rgw']) await mkdir(join(dir, d));
    await writeFile(conf, cephConf(dir, fsid, monPort, rgwPort));

    // The monitor.
    await run(bins.monmaptool!, ['--create', '--fsid', fsid, '--addv', 'a', `[v2:127.0.0.1:${monPort}]`, join(dir, 'monmap')], left());
    await run(bins['ceph-mon']!, ['-c', conf, '--mkfs', '-i', 'a', '--monmap', join(dir, 'monmap')], left());
    daemon(bins['ceph-mon']!, ['-i', 'a']);

    // One OSD: registered with the monitor (which is up once `ceph` gets an answer), formatted, started.
    stage = 'osd';
    const osdUuid = randomUUID();
    const id = (await run(bins.ceph!, ['-c', conf, '--connect-timeout', String(Math.ceil(left() / 1000)), 'osd', 'new', osdUuid], left())).trim();
    await run(bins['ceph-osd']!, ['-c', conf, '-i', id, '--mkfs', '--osd-uuid', osdUuid], left());
    daemon(bins['ceph-osd']!, ['-i', id]);

    // The gateway, and its S3 user (radosgw-admin waits for the OSD to take the pools' writes).
    stage = 'rgw';
    gateway = daemon(bins.radosgw!, ['-n', 'client.rgw']);
    stage = 'user';
    const accessKeyId = 'files-rest-test';
    const secretAccessKey = randomBytes(20).toString('hex');
    await run(
      bins['radosgw-admin']!,
      ['-c', conf, 'user', 'create', '--uid', 'test', '--display-name', 'files-rest tests', '--access-key', accessKeyId, '--secret', secretAccessKey],
      left(),
    );
    stage = 'rgw';
    const endpoint = `http://127.0.0.1:${rgwPort}`;
    await answering(endpoint, deadline, START_BOUND_MS);
    // The gateway alone, stopped and started again: the monitor and the OSD (and RGW's pools) stay.
    const stopGateway = async (signal: NodeJS.Signals = 'SIGKILL') => {
      const p = gateway;
      if (!p || exited(p)) return;
      const gone = new Promise((r) => p.once('exit', r));
      p.kill(signal);
      await gone;
      state.procs = state.procs.filter((x) => x !== p);
    };
    const startGateway = async (timeoutMs = START_BOUND_MS) => {
      if (gateway && !exited(gateway)) return;
      gateway = daemon(bins.radosgw!, ['-n', 'client.rgw']);
      try {
        await answering(endpoint, Date.now() + timeoutMs, timeoutMs);
      } catch (e) {
        throw new Error(`${(e as Error).message}\n--- ${logOf.rgw} (tail) ---\n${tail(logOf.rgw!, 30)}`);
      }
    };
    return { endpoint, accessKeyId, secretAccessKey, dir, startSeconds: (Date.now() - t0) / 1000, stopGateway, startGateway, close };
  } catch (e) {
    const log = logOf[stage]!;
    process.stderr.write(`\nCeph RADOS Gateway did not start (${stage}): ${(e as Error).message}\n--- ${log} (tail) ---\n${tail(log, 30)}\n---\n`);
    await close();
    return { skip: `Ceph RADOS Gateway did not start (${stage}): ${(e as Error).message.split('\n')[0]}` };
  }
}

/** The environment variables by which scripts/run-tests.mjs hands a started cluster to the test processes. */
export function rgwClusterEnv(c: RgwCluster | { skip: string }): Record<string, string> {
  if ('skip' in c) return { TEST_RGW_SKIP: c.skip };
  return { TEST_RGW_ENDPOINT: c.endpoint, TEST_RGW_ACCESS_KEY_ID: c.accessKeyId, TEST_RGW_SECRET_ACCESS_KEY: c.secretAccessKey };
}

function fromEnv(): Pick<RgwCluster, 'endpoint' | 'accessKeyId' | 'secretAccessKey'> | { skip: string } | null {
  if (process.env.TEST_RGW_SKIP) return { skip: process.env.TEST_RGW_SKIP };
  const endpoint = process.env.TEST_RGW_ENDPOINT;
  const accessKeyId = process.env.TEST_RGW_ACCESS_KEY_ID;
  const secretAccessKey = process.env.TEST_RGW_SECRET_ACCESS_KEY;
  if (endpoint && accessKeyId && secretAccessKey) return { endpoint, accessKeyId, secretAccessKey };
  return null;
}

let ownCluster: Promise<RgwCluster | { skip: string }> | null = null;

/**
 * An S3 server on RGW, with the same interface as startTestS3: the cluster the test run shares
 * (TEST_RGW_*), else one this process starts on first use and keeps until it exits. `close` only
 * lets go of the client; the buckets a caller makes are its own (give them unique names).
 */
export async function startTestRgw(): Promise<TestS3 | { skip: string }> {
  let c = fromEnv();
  if (!c) {
    ownCluster ??= startRgwCluster();
    c = await ownCluster;
  }
  if ('skip' in c) return { skip: c.skip };
  const env = {
    FILES_REST_S3_ENDPOINT: c.endpoint,
    FILES_REST_S3_REGION: 'us-east-1',
    FILES_REST_S3_ACCESS_KEY_ID: c.accessKeyId,
    FILES_REST_S3_SECRET_ACCESS_KEY: c.secretAccessKey,
  };
  const client = createS3Client(loadConfig(env));
  return {
    endpoint: c.endpoint,
    env,
    client,
    async createBucket(name: string) {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    },
    async close() {
      client.destroy();
    },
  };
}

/** For a process that started its own cluster: stops it now rather than at exit (a no-op for a shared one). */
export async function closeOwnRgw(): Promise<void> {
  const c = await ownCluster;
  ownCluster = null;
  if (c && !('skip' in c)) await c.close();
}
