/**
 * files-rest benchmark: `npm run bench [-- options]`. See bench/README.md for how to read it.
 *
 * For each database (embedded SQLite, and PostgreSQL when reachable) it starts files-rest as a child
 * process on 127.0.0.1 next to a bare Node "ceiling" server and a peer S3 server (s3rver), measures
 * the workloads W1–W8, the ceilings and the peer with the same client, prints a table of every
 * figure with its ratio to its ceiling, the peer and the target, and writes
 * bench/results/<stamp>-<db>.json and bench/results/latest-<db>.json.
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { cp, mkdtemp, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { HttpClient, MiB, closedLoop, median, patternDigest, patternMd5, summarize, type LatencySummary, type LoopResult } from './lib/client.js';
import { startPeer, type Peer } from './lib/peer.js';
import { ClientCpu, ROOT, ResourceMonitor, cpuSeconds, memoryNow, reachable, startOnFreePorts, type ManagedProcess, type ResourceUsage } from './lib/proc.js';
import { UNSIGNED, type S3Credentials } from './lib/sigv4.js';
import { makeRow, table, writeResult, fmt, type Row } from './lib/report.js';
import { createPgDatabase, seedPostgres, seedSqlite, type SeededBucket } from './lib/seed.js';
import { ceilingTarget, getBig, getSmallLoop, putBig, putSmallLoop, restTarget, s3Target, type LoopShape, type StoreTarget, type Target } from './lib/targets.js';
import { seedW8, w8Loop, w8Schedule, type W8Params } from './lib/w8.js';

type DbKind = 'sqlite' | 'postgres';
/** How long the idle server is left alone before its settled memory is read. */
// V8's memory reducer first looks 8 s after start-up; on a new database (the worker's first tasks) it
// found the server still allocating and ran at about 16 s (--trace-gc), so 20 s.
const IDLE_SETTLE_MS = 20_000;
const WORKLOADS = ['W1', 'W2', 'W3', 'W4', 'W5', 'W6', 'W7', 'W8', 'S3'] as const;
/** The workloads also measured on the peer (s3rver); it is started only when one of them runs. */
const PEER_WORKLOADS = ['W1', 'W2', 'W3', 'W4', 'W8'];

interface Options {
  quick: boolean;
  db: 'all' | DbKind;
  resultsDir: string;
  objects: [number, number];
  reps: number | null;
  profile: boolean;
  only: Set<string> | null;
  strict: boolean;
  pgUrl: string;
}

const USAGE = `usage: npm run bench -- [options]
  --quick               small sizes and short loops (CI): proves the benchmark works, no meaningful figures
  --db all|sqlite|postgres   databases to run on (default all: SQLite, and PostgreSQL when reachable)
  --pg-url URL          PostgreSQL admin URL (default $BENCH_PG_URL or postgres://postgres@127.0.0.1:5432/postgres)
  --objects A,B         object counts of the two listing buckets (default 10000,1000000; quick 2000,20000)
  --reps N              repetitions of W1, W2 (at least 9), W5 and their ceilings (medians reported; default 3, quick 1)
  --only W1,W3,...      run only these workloads (result saved as *-partial.json, latest-* untouched);
                        S3 is W1–W4 through the S3 door (SigV4), next to the REST door's W1–W4;
                        W8 is the mixed workload; the peer (s3rver) runs W1–W4 and W8 with them
  --profile             run files-rest under --cpu-prof; profiles go to <results>/profiles/
  --results-dir DIR     where the JSON results go (default bench/results)
  --strict              exit 1 when a target is missed`;

function parseArgs(argv: string[]): Options {
  const o: Options = {
    quick: false,
    db: 'all',
    resultsDir: join(ROOT, 'bench', 'results'),
    objects: [0, 0],
    reps: null,
    profile: false,
    only: null,
    strict: false,
    pgUrl: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres',
  };
  let objects: string | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const val = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--quick') o.quick = true;
    else if (a === '--db') {
      const v = val();
      if (v !== 'all' && v !== 'sqlite' && v !== 'postgres') throw new Error(`--db: expected all, sqlite or postgres, got ${v}`);
      o.db = v;
    } else if (a === '--pg-url') o.pgUrl = val();
    else if (a === '--objects') objects = val();
    else if (a === '--reps') {
      o.reps = Number(val());
      if (!Number.isInteger(o.reps) || o.reps < 1 || o.reps > 20) throw new Error('--reps: a whole number from 1 to 20');
    } else if (a === '--only') {
      o.only = new Set(val().toUpperCase().split(',').map((s) => s.trim()).filter(Boolean));
      for (const w of o.only) if (!(WORKLOADS as readonly string[]).includes(w)) throw new Error(`--only: unknown workload ${w}`);
      // The S3 figures are ratios to the REST door's in the same run.
      if (o.only.has('S3')) for (const w of ['W1', 'W2', 'W3', 'W4']) o.only.add(w);
    } else if (a === '--profile') o.profile = true;
    else if (a === '--results-dir') {
      const v = val();
      o.resultsDir = isAbsolute(v) ? v : resolve(process.cwd(), v);
    } else if (a === '--strict') o.strict = true;
    else if (a === '--help' || a === '-h') {
      console.log(USAGE);
      process.exit(0);
    } else throw new Error(`unknown option ${a}\n${USAGE}`);
  }
  const dflt: [number, number] = o.quick ? [2000, 20000] : [10_000, 1_000_000];
  if (objects !== null) {
    const parts = objects.split(',').map((s) => Number(s.trim()));
    if (parts.length !== 2 || !parts.every((n) => Number.isInteger(n) && n >= 1000 && n <= 10_000_000)) {
      throw new Error('--objects: two whole numbers from 1000 to 10000000, e.g. 10000,1000000');
    }
    o.objects = [parts[0]!, parts[1]!];
  } else o.objects = dflt;
  return o;
}

/** Sizes, durations and bounds of one run. */
function paramsFor(o: Options) {
  const q = o.quick;
  const bigSize = q ? 32 * MiB : 1024 * MiB;
  return {
    mode: q ? 'quick' : 'full',
    bigSize,
    reps: o.reps ?? (q ? 1 : 3),
    smallSize: 4096,
    inFlight: 32,
    loopMs: q ? 2000 : 20_000,
    // Extra side-by-side pairs of quarter-length loops for the S3 door's W3/W4 ratios (see pairShape).
    doorPairs: q ? 2 : 8,
    warmupMs: q ? 300 : 2000,
    loopMaxOps: 2_000_000,
    w4Objects: 256,
    parts: 8,
    partSize: bigSize / 8,
    partsInFlight: 4,
    objects: o.objects,
    pageSize: 1000,
    listWarmupPages: q ? 3 : 10,
    listMaxPages: q ? 100 : 500,
    listMaxMs: q ? 10_000 : 60_000,
    w7MaxOps: q ? 100 : 1000,
    w7Ms: q ? 2000 : 20_000,
    w7WarmupMs: q ? 300 : 2000,
    w8Clients: 64,
    w8Ms: q ? 3000 : 30_000,
    w8WarmupMs: q ? 300 : 2000,
    w8Objects: q ? 128 : 512,
    w8PageKeys: 100,
    w8Seed: 8,
  };
}
type Params = ReturnType<typeof paramsFor>;

function human(n: number): string {
  if (n >= 1_000_000 && n % 1_000_000 === 0) return `${n / 1_000_000}M`;
  if (n >= 1000 && n % 1000 === 0) return `${n / 1000}k`;
  return String(n);
}
function humanBytes(n: number): string {
  if (n >= 1024 * MiB && n % (1024 * MiB) === 0) return `${n / (1024 * MiB)} GiB`;
  if (n % MiB === 0) return `${n / MiB} MiB`;
  return `${n} B`;
}
const MB = 1e6;
const log = (s: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);

/**
 * The build under test. Other work may rebuild dist/ while a run is going on; the benchmark copies
 * the compiled service once at the start and runs that copy, so one run measures one build.
 */
let APP = ROOT;
async function snapshotBuild(): Promise<string> {
  const dir = await mkdtemp(join(os.tmpdir(), 'files-rest-bench-app-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  await cp(join(ROOT, 'dist', 'src'), join(dir, 'dist', 'src'), { recursive: true });
  await cp(join(ROOT, 'dist', 'bench'), join(dir, 'dist', 'bench'), { recursive: true });
  await cp(join(ROOT, 'bin'), join(dir, 'bin'), { recursive: true });
  await cp(join(ROOT, 'package.json'), join(dir, 'package.json'));
  await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  return dir;
}

/** Clean-ups still to run (also on Ctrl-C). */
const cleanups: (() => Promise<void>)[] = [];
let cleaning: Promise<void> | null = null;
/** Runs every pending clean-up, newest first; concurrent callers share one pass. */
function runCleanups(): Promise<void> {
  cleaning ??= (async () => {
    while (cleanups.length) {
      const c = cleanups.pop()!;
      await c().catch((e) => process.stderr.write(`clean-up failed: ${(e as Error).message}\n`));
    }
  })().finally(() => {
    cleaning = null;
  });
  return cleaning;
}

interface Usage {
  /** CPU of the measured server, in % of one core (all its threads). */
  serverCpuPct: number;
  /** CPU of the PostgreSQL backends serving its database, in % of one core (null on SQLite: it is in the server). */
  dbCpuPct: number | null;
  /** CPU of the benchmark client, in % of one core. */
  clientCpuPct: number;
  /** CPU used by everything else on the machine meanwhile (other users' work), in % of one core. */
  otherCpuPct: number;
  peakRssMB: number;
  /** Highest anonymous resident memory sampled (heaps, buffers): RssAnon. */
  peakRssAnonMB: number;
  /** Highest resident memory of mapped files sampled (code, mapped database pages): RssFile + RssShmem. */
  peakRssFileMB: number;
  /** Of those, the SQLite database's mapped pages at the end (null: not on SQLite, or not files-rest). */
  dbMappedMB: number | null;
  seconds: number;
  /** Server CPU per unit of work (ms per request, or CPU seconds per GiB), when set. */
  cost?: string;
}

/** Adds the server's CPU cost per request (`ops` requests) or per GiB (`bytes`) to a usage record. */
function withCost(u: Usage, work: { ops: number } | { bytes: number }): Usage {
  const cpuS = (u.serverCpuPct * u.seconds) / 100 + ((u.dbCpuPct ?? 0) * u.seconds) / 100;
  const db = u.dbCpuPct === null ? '' : ' incl. PostgreSQL';
  const cost =
    'ops' in work
      ? `${fmt((1000 * cpuS) / work.ops)} ms/request${db}`
      : `${fmt(cpuS / (work.bytes / (1024 * MiB)))} s/GiB${db}`;
  return { ...u, cost };
}

/**
 * CPU time of the PostgreSQL backend processes connected to one database (the service's pool), read
 * from /proc. Backends that exit during a measurement lose their share; the service's pool keeps its
 * connections while busy, so that is rare.
 */
class PgBackendCpu {
  private constructor(private readonly admin: import('pg').Client, private readonly dbName: string) {}
  static async open(adminUrl: string, dbName: string): Promise<PgBackendCpu> {
    const pg = (await import('pg')).default;
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    return new PgBackendCpu(c, dbName);
  }
  async sample(): Promise<Map<number, number>> {
    const r = await this.admin.query<{ pid: number }>('select pid from pg_stat_activity where datname = $1', [this.dbName]);
    const out = new Map<number, number>();
    for (const { pid } of r.rows) {
      const s = cpuSeconds(pid);
      if (s !== null) out.set(pid, s);
    }
    return out;
  }
  static delta(a: Map<number, number>, b: Map<number, number>): number {
    let sum = 0;
    for (const [pid, s] of b) sum += s - (a.get(pid) ?? 0);
    return sum;
  }
  close(): Promise<void> {
    return this.admin.end();
  }
}
let dbCpu: PgBackendCpu | null = null;

function usageOf(u: ResourceUsage, clientCpuS: number, dbCpuS: number | null): Usage {
  const pct = (s: number) => (100 * s) / u.wallSeconds;
  return {
    serverCpuPct: pct(u.cpuSeconds),
    dbCpuPct: dbCpuS === null ? null : pct(dbCpuS),
    clientCpuPct: pct(clientCpuS),
    otherCpuPct: Math.max(0, pct(u.machineBusySeconds - u.cpuSeconds - clientCpuS - (dbCpuS ?? 0))),
    peakRssMB: u.peakRssBytes / MB,
    peakRssAnonMB: u.peakRssAnonBytes / MB,
    peakRssFileMB: u.peakRssFileBytes / MB,
    dbMappedMB: u.dbMappedBytes === null ? null : u.dbMappedBytes / MB,
    seconds: u.wallSeconds,
  };
}

/** Runs `fn` while watching `proc`: its peak RSS and CPU, the database's CPU and the client's CPU. */
async function watched<T>(proc: ManagedProcess, fn: () => Promise<T>, opts: { db?: boolean } = {}): Promise<{ result: T; usage: Usage }> {
  const db = opts.db === false ? null : dbCpu;
  const db0 = db ? await db.sample() : null;
  const mon = new ResourceMonitor(proc.pid, 20, dbFiles.get(proc) ?? null);
  const cpu = new ClientCpu();
  try {
    const result = await fn();
    const u = mon.stop();
    const clientS = cpu.stop();
    const dbS = db && db0 ? PgBackendCpu.delta(db0, await db.sample()) : null;
    return { result, usage: usageOf(u, clientS, dbS) };
  } catch (e) {
    mon.stop();
    throw e;
  }
}

/** The server key of the benchmark's services (FILES_REST_SERVER_KEY: S3 access keys are encrypted with it). */
const SERVER_KEY = randomBytes(32).toString('base64');
/** The S3 door's address of each started service. */
const s3Urls = new WeakMap<ManagedProcess, string>();
/** The SQLite database file of each started service on SQLite (its mapped pages are reported apart). */
const dbFiles = new WeakMap<ManagedProcess, string>();

function serviceEnv(dir: string, port: number, databaseUrl: string, s3Port = 0): Record<string, string> {
  return {
    FILES_REST_S3_PORT: s3Port ? String(s3Port) : 'off',
    // S3 parts from 1 MiB: quick mode's W5 parts are 4 MiB (S3's own minimum is 5 MiB).
    FILES_REST_S3_MULTIPART_MIN_PART_SIZE: String(MiB),
    FILES_REST_SERVER_KEY: SERVER_KEY,
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: process.env.HOME ?? dir,
    HOST: '127.0.0.1',
    PORT: String(port),
    DATABASE_URL: databaseUrl,
    FILES_REST_DATA_DIR: join(dir, 'data'),
    FILES_REST_PERMISSION_FACTORY: 'allow-all',
    FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(MiB),
    FILES_REST_SHUTDOWN_GRACE: '5',
    LOG_LEVEL: 'warn',
    // BENCH_SQLITE_DRIVER=node measures files-rest on node:sqlite (the driver evaluation in the README).
    ...(process.env.BENCH_SQLITE_DRIVER ? { FILES_REST_SQLITE_DRIVER: process.env.BENCH_SQLITE_DRIVER } : {}),
    // BENCH_PROCESSES=N runs files-rest with FILES_REST_PROCESSES=N (node:cluster). Its CPU and memory
    // columns then count the primary only, which serves nothing: read the throughput columns.
    ...(process.env.BENCH_PROCESSES ? { FILES_REST_PROCESSES: process.env.BENCH_PROCESSES } : {}),
    // BENCH_SQLITE_READ_THREADS=0 measures files-rest with every SQLite read on the event loop (FILES_REST_SQLITE_READ_THREADS).
    ...(process.env.BENCH_SQLITE_READ_THREADS ? { FILES_REST_SQLITE_READ_THREADS: process.env.BENCH_SQLITE_READ_THREADS } : {}),
    // BENCH_INLINE_MAX_SIZE=0 measures small uploads stored as files (FILES_REST_INLINE_MAX_SIZE).
    ...(process.env.BENCH_INLINE_MAX_SIZE ? { FILES_REST_INLINE_MAX_SIZE: process.env.BENCH_INLINE_MAX_SIZE } : {}),
  };
}

async function startService(dir: string, databaseUrl: string, name: string, profileDir: string | null): Promise<ManagedProcess> {
  // BENCH_NODE_FLAGS: Node.js flags for files-rest's processes (e.g. --single-threaded-gc: README,
  // Performance, session 10); none by default, as `npm start` runs it.
  const nodeFlags = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  const flags = [...nodeFlags, ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`] : [])];
  const { proc: p, secondPort: s3Port } = await startOnFreePorts(
    name,
    (port, s3Port) => ({ args: [...flags, join(APP, 'bin', 'files-rest.js'), 'serve'], env: serviceEnv(dir, port, databaseUrl, s3Port) }),
    { cwd: APP, logFile: join(dir, `${name}.log`), path: '/readyz' },
  );
  cleanups.push(() => p.stop());
  s3Urls.set(p, `http://127.0.0.1:${s3Port}`);
  if (databaseUrl.startsWith('sqlite:')) dbFiles.set(p, databaseUrl.slice('sqlite:'.length));
  return p;
}

/**
 * files-rest's S3 door as a target: the same undici Pool as the REST client, every request signed
 * with SigV4 by a fresh access key (`files-rest key create`).
 */
function s3DoorTarget(dir: string, databaseUrl: string, svc: ManagedProcess, connections: number): StoreTarget {
  const url = s3Urls.get(svc)!;
  const out = execFileSync(process.execPath, [join(APP, 'bin', 'files-rest.js'), 'key', 'create', '--json'], { cwd: APP, env: serviceEnv(dir, 0, databaseUrl), encoding: 'utf8' });
  const k = JSON.parse(out) as { access_key_id: string; secret_access_key: string };
  const creds: S3Credentials = { accessKeyId: k.access_key_id, secretAccessKey: k.secret_access_key, region: 'us-east-1' };
  return s3Target('files-rest S3 door', svc, new HttpClient(url, connections), creds, true);
}

async function startCeiling(dir: string): Promise<ManagedProcess> {
  const data = join(dir, 'ceiling');
  mkdirSync(data, { recursive: true });
  const { proc: p } = await startOnFreePorts(
    'ceiling',
    (port) => ({ args: [join(APP, 'dist', 'bench', 'ceiling-server.js'), String(port), data], env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } }),
    { cwd: APP, logFile: join(dir, 'ceiling.log') },
  );
  cleanups.push(() => p.stop());
  return p;
}

async function createBucket(c: HttpClient): Promise<string> {
  const r = await c.ok('POST', '/files');
  const id = r.json?.id;
  if (typeof id !== 'string') throw new Error(`bucket creation answered no id: ${r.text.slice(0, 200)}`);
  return id;
}

function randomKey(): string {
  return `data/${String(Math.floor(Math.random() * 1000)).padStart(3, '0')}/new-${randomUUID()}.bin`;
}

/** Sequential 4 KiB PUTs of new keys into one bucket (W7). */
function putLatency(c: HttpClient, bucket: string, body: Buffer, p: Params): Promise<LoopResult> {
  return closedLoop({
    concurrency: 1,
    durationMs: p.w7Ms,
    maxOps: p.w7MaxOps,
    warmupMs: p.w7WarmupMs,
    op: async () => {
      await c.ok('PUT', `/files/${bucket}/${randomKey()}`, { body });
    },
  });
}

/**
 * W6: walks a bucket's listing page by page (following links.next, starting over at the end), one
 * request at a time, timing each page until the body has arrived. Checks every walk saw every key.
 */
async function listPages(c: HttpClient, bucket: SeededBucket, p: Params): Promise<LatencySummary & { pages: number; walks: number }> {
  const first = `/files/${bucket.id}?limit=${p.pageSize}`;
  const total = p.listWarmupPages + p.listMaxPages;
  const lat: number[] = [];
  const deadline = performance.now() + p.listMaxMs;
  let path = first;
  let seen = 0;
  let walks = 0;
  for (let i = 0; i < total && performance.now() < deadline; i++) {
    const t0 = performance.now();
    const r = await c.pool.request({ method: 'GET', path });
    const text = await r.body.text();
    const dt = performance.now() - t0;
    if (r.statusCode !== 200) throw new Error(`GET ${path}: HTTP ${r.statusCode} ${text.slice(0, 200)}`);
    const json = JSON.parse(text) as { contents: unknown[]; links: { next?: string } };
    seen += json.contents.length;
    if (i >= p.listWarmupPages) lat.push(dt);
    if (json.links.next) {
      if (json.contents.length !== p.pageSize) throw new Error(`a page before the last held ${json.contents.length} objects`);
      const u = new URL(json.links.next);
      path = u.pathname + u.search;
    } else {
      if (seen !== bucket.objects) throw new Error(`a full walk of the listing saw ${seen} objects, expected ${bucket.objects}`);
      walks++;
      seen = 0;
      path = first;
    }
  }
  return { ...summarize(lat), pages: lat.length, walks };
}

interface SectionResult {
  figures: Record<string, number>;
  rows: Row[];
  details: Record<string, unknown>;
  complete: boolean;
}

async function runSection(db: DbKind, o: Options, p: Params, stamp: string): Promise<SectionResult> {
  const want = (w: string) => !o.only || o.only.has(w);
  const figures: Record<string, number> = {};
  const details: Record<string, unknown> = {};
  const usage: Record<string, Usage> = {};
  const dir = await mkdtemp(join(os.tmpdir(), 'files-rest-bench-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const profileDir = o.profile ? join(o.resultsDir, 'profiles', `${stamp}-${db}`) : null;
  if (profileDir) mkdirSync(profileDir, { recursive: true });
  const sectionCleanupDepth = cleanups.length;
  log(`[${db}] work directory ${dir}`);

  let databaseUrl: string;
  if (db === 'sqlite') databaseUrl = `sqlite:${join(dir, 'db.sqlite')}`;
  else {
    const pgdb = await createPgDatabase(o.pgUrl);
    cleanups.push(pgdb.drop);
    databaseUrl = pgdb.url;
    dbCpu = await PgBackendCpu.open(o.pgUrl, pgdb.name);
    cleanups.push(async () => {
      await dbCpu?.close();
      dbCpu = null;
    });
    details.database = { name: pgdb.name, settings: await pgSettings(pgdb.url) };
  }

  const pattern = randomBytes(MiB);
  const expectedMd5 = patternMd5(pattern, p.bigSize);
  const small = randomBytes(p.smallSize);
  const big = humanBytes(p.bigSize);

  // ---- Phase A: ceilings, the peer and the data-path workloads, on a fresh database. ----
  log(`[${db}] starting the ceiling server and files-rest`);
  const ceil = await startCeiling(dir);
  const cc = new HttpClient(ceil.url, p.inFlight);
  cleanups.push(() => cc.close());
  let svc = await startService(dir, databaseUrl, 'files-rest-a', profileDir);
  {
    // Idle: ready, nothing asked yet (a second to settle after start-up).
    await new Promise((r) => setTimeout(r, 1000));
    const m = memoryNow(svc.pid);
    if (m) {
      figures['idle.rssMB'] = m.rss / MB;
      figures['idle.rssAnonMB'] = m.anon / MB;
      figures['idle.rssFileMB'] = m.file / MB;
    }
    // Settled: still idle once V8's memory reducer has run (it shrinks the heap a server grew while
    // loading its modules once the isolate has gone quiet; on Node 20 the 52 MB heap became 22).
    await new Promise((r) => setTimeout(r, p.mode === 'quick' ? 1000 : IDLE_SETTLE_MS));
    const settled = memoryNow(svc.pid);
    if (settled) {
      figures['idle.settledRssMB'] = settled.rss / MB;
      figures['idle.settledRssAnonMB'] = settled.anon / MB;
    }
  }
  let sc = new HttpClient(svc.url, p.inFlight);
  cleanups.push(() => sc.close());
  const ceilT = ceilingTarget(ceil, cc);
  const restT = restTarget('files-rest', svc, sc);
  const s3T = want('S3') ? s3DoorTarget(dir, databaseUrl, svc, p.inFlight) : null;
  if (s3T) cleanups.push(() => s3T.http.close());
  // The peer, for the workloads it runs (not W5–W7).
  let peer: Peer | null = null;
  if (PEER_WORKLOADS.some(want)) {
    log(`[${db}] starting the peer (s3rver)`);
    peer = await startPeer(dir, (proc) => cleanups.push(() => proc.stop()));
    if (!peer.info.running) log(`[${db}] the peer is not running, its rows say so: s3rver ${peer.info.error ?? ''}`);
    details.peer = peer.info;
  }
  const peerT = peer?.target(p.inFlight) ?? null;
  if (peerT) cleanups.push(() => peerT.http.close());
  const peerLabel = !peer || peer.info.running ? 's3rver' : `s3rver ${(peer.info.error ?? '').split(/[:(]/)[0]!.trim()}`;
  /** Runs `fn` while watching the target's server (and PostgreSQL when it works for it). */
  const measure = <T>(t: Target, fn: () => Promise<T>) => watched(t.proc, fn, { db: t.db });
  const shape: LoopShape = { concurrency: p.inFlight, durationMs: p.loopMs, maxOps: p.loopMaxOps, warmupMs: p.warmupMs };
  // The S3 door's extra W3/W4 pairs: short loops on connections already warm. On this kind of shared
  // machine throughput drifts by ±30 % from one 5-second stretch to the next, as much for one door as
  // for the other, so many short adjacent pairs (median of their ratios) say more than a few long ones.
  const pairShape: LoopShape = { ...shape, durationMs: Math.round(shape.durationMs / 4), warmupMs: Math.min(shape.warmupMs, 500) };
  type Run = { mibps: number; usage: Usage };
  const bigRun = async (t: Target, transfer: () => Promise<number>): Promise<Run> => {
    // No measurement pays for the one before: the servers that do not flush (the ceiling, s3rver)
    // leave a gigabyte of dirty pages that the kernel would otherwise write back during the next
    // transfer, competing for the disk with files-rest's own flushes (W1 repetitions of the same
    // server measured 290 and 500 MiB/s in one run).
    execFileSync('sync');
    const r = await measure(t, transfer);
    return { mibps: p.bigSize / MiB / r.result, usage: r.usage };
  };

  if (want('W7')) {
    log(`[${db}] W7 baseline: sequential 4 KiB PUTs into an empty bucket of a fresh database`);
    const b = await createBucket(sc);
    const r = await putLatency(sc, b, small, p);
    figures['W7.freshDb.p50Ms'] = r.p50Ms;
    figures['W7.freshDb.p99Ms'] = r.p99Ms;
    details.W7freshDb = r;
  }

  if (want('W1') || want('W2') || want('W5')) {
    const bucket = await createBucket(sc);
    const w1Key = (rep: number) => `/files/${bucket}/w1/big-${rep}.bin`;
    // The peer's copies of W1's objects, in a bucket of its own.
    const peerW1 = peerT && (want('W1') || want('W2')) ? { t: peerT, bucket: await peerT.createBucket('bench-w1') } : null;
    const peerKey = (rep: number) => (peerW1 ? peerW1.t.objectPath(peerW1.bucket, `w1/big-${rep}.bin`) : '');
    if (want('W1') || want('W2')) {
      // One unrecorded transfer each way per server first, so no figure pays for JIT warm-up.
      const warm = Math.min(p.bigSize, 64 * MiB);
      const warmMd5 = patternMd5(pattern, warm);
      await putBig(ceilT, '/hash-write/warm-up', pattern, warm, warmMd5);
      await getBig(ceilT, '/stream/warm-up', warm, null);
      const warmUps: [StoreTarget, string][] = [[restT, restT.objectPath(bucket, 'w1/warm-up.bin')]];
      if (s3T) warmUps.push([s3T, s3T.objectPath(bucket, 'w1/s3-warm-up.bin')]);
      if (peerW1) warmUps.push([peerW1.t, peerW1.t.objectPath(peerW1.bucket, 'w1/warm-up.bin')]);
      for (const [t, path] of warmUps) {
        await putBig(t, path, pattern, warm, warmMd5);
        await getBig(t, path, warm, warmMd5);
      }
      const ceilRuns: Run[] = [];
      const svcRuns: Run[] = [];
      const peerRuns: Run[] = [];
      const s3Runs: Record<'unsigned' | 'signed', Run[]> = { unsigned: [], signed: [] };
      const bigSha256 = s3T ? patternDigest(pattern, p.bigSize, 'sha256') : '';
      for (let rep = 0; rep < p.reps; rep++) {
        log(`[${db}] W1 ${big} PUT, repetition ${rep + 1}/${p.reps}: ceiling, then files-rest`);
        ceilRuns.push(await bigRun(ceilT, () => putBig(ceilT, `/hash-write/w1-${rep}`, pattern, p.bigSize, expectedMd5)));
        // Through the S3 door too: REST and the two payload modes back to back, in the reverse order
        // every other repetition, so that no door always comes last (a repetition that slowed down
        // as it went on measured REST 531 then a signed payload 444 MiB/s, and 323 then 219).
        const order = s3T && rep % 2 === 1 ? (['signed', 'unsigned', 'rest'] as const) : (['rest', 'unsigned', 'signed'] as const);
        for (const door of order) {
          if (door === 'rest') {
            svcRuns.push(await bigRun(restT, () => putBig(restT, w1Key(rep), pattern, p.bigSize, expectedMd5)));
            continue;
          }
          if (!s3T) continue;
          log(`[${db}] W1 ${big} PUT through the S3 door, ${door === 'signed' ? 'signed payload' : 'UNSIGNED-PAYLOAD'}`);
          const path = s3T.objectPath(bucket, `w1/s3-${door}-${rep}.bin`);
          s3Runs[door].push(await bigRun(s3T, () => putBig(s3T, path, pattern, p.bigSize, expectedMd5, door === 'signed' ? bigSha256 : UNSIGNED)));
        }
        if (peerW1) {
          log(`[${db}] W1 ${big} PUT to the peer (s3rver)`);
          peerRuns.push(await bigRun(peerW1.t, () => putBig(peerW1.t, peerKey(rep), pattern, p.bigSize, expectedMd5)));
        }
      }
      if (s3T) {
        for (const mode of ['unsigned', 'signed'] as const) {
          const runs = s3Runs[mode];
          figures[`S3.W1.${mode}.mibps`] = median(runs.map((r) => r.mibps));
          figures[`S3.W1.${mode}.pairedRatio`] = median(runs.map((r, i) => r.mibps / svcRuns[i]!.mibps));
          usage[`S3 W1 ${mode}`] = withCost(runs[runs.length - 1]!.usage, { bytes: p.bigSize });
        }
        details.S3W1 = s3Runs;
      }
      if (peerW1) {
        figures['peer.W1.mibps'] = median(peerRuns.map((r) => r.mibps));
        figures['peer.W1.peakRssMB'] = Math.max(...peerRuns.map((r) => r.usage.peakRssMB));
        // files-rest ÷ the peer, repetition by repetition.
        figures['W1.peerPairedRatio'] = median(svcRuns.map((r, i) => r.mibps / peerRuns[i]!.mibps));
        usage['W1 peer'] = withCost(peerRuns[peerRuns.length - 1]!.usage, { bytes: p.bigSize });
        details.peerW1 = peerRuns;
      }
      figures['ceiling.hashWrite.mibps'] = median(ceilRuns.map((r) => r.mibps));
      figures['ceiling.hashWrite.peakRssMB'] = Math.max(...ceilRuns.map((r) => r.usage.peakRssMB));
      figures['W1.mibps'] = median(svcRuns.map((r) => r.mibps));
      figures['W1.pairedRatio'] = median(svcRuns.map((r, i) => r.mibps / ceilRuns[i]!.mibps));
      figures['W1.peakRssMB'] = Math.max(...svcRuns.map((r) => r.usage.peakRssMB));
      usage.W1 = withCost(svcRuns[svcRuns.length - 1]!.usage, { bytes: p.bigSize });
      usage['W1 ceiling'] = withCost(ceilRuns[ceilRuns.length - 1]!.usage, { bytes: p.bigSize });
      details.W1 = { ceiling: ceilRuns, service: svcRuns };
    }
    if (want('W2')) {
      const ceilRuns: Run[] = [];
      const svcRuns: Run[] = [];
      const s3Runs: Run[] = [];
      const peerRuns: Run[] = [];
      // A GET takes under a second and varies most from one repetition to the next (1 200-2 007 MiB/s
      // within one run of session 24): at least 9.
      const reps = Math.max(p.reps, p.mode === 'quick' ? 1 : 9);
      for (let rep = 0; rep < reps; rep++) {
        log(`[${db}] W2 ${big} GET, repetition ${rep + 1}/${reps}: ceiling, then files-rest${peerW1 ? ', then the peer' : ''}`);
        ceilRuns.push(await bigRun(ceilT, () => getBig(ceilT, `/stream/w1-${rep % p.reps}`, p.bigSize, null)));
        // The same object through the S3 door (a bucket's id is its S3 name too), before or after the
        // REST door in turn, as in W1, so that neither door always comes second (session 24's full
        // run: paired ratios 0.67-1.21, median 0.894, while the S3 door's GET cost the server less
        // CPU, 0.19 against 0.25 s/GiB).
        const doors = s3T && rep % 2 === 1 ? (['s3', 'rest'] as const) : (['rest', 's3'] as const);
        for (const door of doors) {
          if (door === 'rest') svcRuns.push(await bigRun(restT, () => getBig(restT, w1Key(rep % p.reps), p.bigSize, expectedMd5)));
          else if (s3T) s3Runs.push(await bigRun(s3T, () => getBig(s3T, s3T.objectPath(bucket, `w1/big-${rep % p.reps}.bin`), p.bigSize, expectedMd5)));
        }
        if (peerW1) peerRuns.push(await bigRun(peerW1.t, () => getBig(peerW1.t, peerKey(rep % p.reps), p.bigSize, expectedMd5)));
      }
      if (s3T) {
        figures['S3.W2.mibps'] = median(s3Runs.map((r) => r.mibps));
        figures['S3.W2.pairedRatio'] = median(s3Runs.map((r, i) => r.mibps / svcRuns[i]!.mibps));
        usage['S3 W2'] = withCost(s3Runs[s3Runs.length - 1]!.usage, { bytes: p.bigSize });
        details.S3W2 = s3Runs;
      }
      if (peerW1) {
        figures['peer.W2.mibps'] = median(peerRuns.map((r) => r.mibps));
        figures['peer.W2.peakRssMB'] = Math.max(...peerRuns.map((r) => r.usage.peakRssMB));
        figures['W2.peerPairedRatio'] = median(svcRuns.map((r, i) => r.mibps / peerRuns[i]!.mibps));
        usage['W2 peer'] = withCost(peerRuns[peerRuns.length - 1]!.usage, { bytes: p.bigSize });
        details.peerW2 = peerRuns;
      }
      figures['ceiling.stream.mibps'] = median(ceilRuns.map((r) => r.mibps));
      figures['ceiling.stream.peakRssMB'] = Math.max(...ceilRuns.map((r) => r.usage.peakRssMB));
      figures['W2.mibps'] = median(svcRuns.map((r) => r.mibps));
      figures['W2.pairedRatio'] = median(svcRuns.map((r, i) => r.mibps / ceilRuns[i]!.mibps));
      figures['W2.peakRssMB'] = Math.max(...svcRuns.map((r) => r.usage.peakRssMB));
      usage.W2 = withCost(svcRuns[svcRuns.length - 1]!.usage, { bytes: p.bigSize });
      usage['W2 ceiling'] = withCost(ceilRuns[ceilRuns.length - 1]!.usage, { bytes: p.bigSize });
      details.W2 = { ceiling: ceilRuns, service: svcRuns };
    }
    await rm(join(dir, 'ceiling'), { recursive: true, force: true });
    mkdirSync(join(dir, 'ceiling'), { recursive: true });
    // The peer's copies of W1's objects are not needed any more (disk space).
    if (peerW1 && (want('W1') || want('W2'))) {
      for (const path of [peerW1.t.objectPath(peerW1.bucket, 'w1/warm-up.bin'), ...Array.from({ length: p.reps }, (_, rep) => peerKey(rep))]) {
        await peerW1.t.http.ok('DELETE', path, { headers: peerW1.t.sign('DELETE', path)() });
      }
    }

    if (want('W5')) {
      const runs: { mibps: number; lastPartToUsableS: number; completeRequestS: number; usage: Usage }[] = [];
      for (let rep = 0; rep < p.reps; rep++) {
        log(`[${db}] W5 ${big} multipart (${p.parts} parts, ${p.partsInFlight} in flight), repetition ${rep + 1}/${p.reps}`);
        const key = `/files/${bucket}/w5/big-${rep}.bin`;
        const r = await watched(svc, async () => {
          const t0 = performance.now();
          const init = await sc.ok('POST', `${key}?uploads&size=${p.bigSize}&partSize=${p.partSize}`);
          const id = init.json?.id as string;
          if (typeof id !== 'string') throw new Error(`multipart init answered no id: ${init.text.slice(0, 200)}`);
          let next = 0;
          await Promise.all(
            Array.from({ length: p.partsInFlight }, async () => {
              for (let guard = 0; guard < p.parts && next < p.parts; guard++) {
                const n = next++;
                const len = Math.min(p.partSize, p.bigSize - n * p.partSize);
                await sc.putPattern(`${key}?uploadId=${id}&partNumber=${n}`, pattern, n * p.partSize, len);
              }
            }),
          );
          const tLast = performance.now();
          const done = await sc.ok('POST', `${key}?uploadId=${id}`);
          const tComplete = performance.now();
          const head = await sc.request('HEAD', key);
          const tUsable = performance.now();
          if (head.status !== 200) throw new Error(`W5: object not downloadable after completion (HTTP ${head.status}): ${done.text.slice(0, 200)}`);
          if (head.headers.etag !== `"md5:${expectedMd5}"`) throw new Error(`W5: unexpected ETag ${String(head.headers.etag)}`);
          return {
            mibps: p.bigSize / MiB / ((tUsable - t0) / 1000),
            lastPartToUsableS: (tUsable - tLast) / 1000,
            completeRequestS: (tComplete - tLast) / 1000,
          };
        });
        runs.push({ ...r.result, usage: r.usage });
      }
      figures['W5.mibps'] = median(runs.map((r) => r.mibps));
      figures['W5.lastPartToUsableS'] = median(runs.map((r) => r.lastPartToUsableS));
      figures['W5.peakRssMB'] = Math.max(...runs.map((r) => r.usage.peakRssMB));
      usage.W5 = withCost(runs[runs.length - 1]!.usage, { bytes: p.bigSize });
      details.W5 = runs;
      await runW5S3(db, svc, p, pattern, expectedMd5, { figures, details, usage });
    }
  }

  if (want('W3')) {
    log(`[${db}] W3 4 KiB PUTs, ${p.inFlight} in flight, ${p.loopMs / 1000} s: ceiling, then files-rest`);
    const c = await measure(ceilT, putSmallLoop(ceilT, shape, small, (w, seq) => `/mem/w3/${w}-${seq}`));
    // What the disk allows: the bare server's durable hash+write (fsync of file and directory) of the
    // same 4 KiB bodies, same shape. Not the target's ceiling (that is the in-memory one); a reference
    // for how much of W3 the fsyncs alone take.
    const d = await measure(ceilT, putSmallLoop(ceilT, shape, small, (w, seq) => `/hash-write/w3-${w}-${seq}`));
    const bucket = await createBucket(sc);
    const s = await measure(restT, putSmallLoop(restT, shape, small, (w, seq) => `/files/${bucket}/w3/${w}-${seq}.bin`));
    figures['ceiling.durablePut.opsPerSec'] = d.result.opsPerSec;
    figures['ceiling.durablePut.p50Ms'] = d.result.p50Ms;
    figures['ceiling.memPut.opsPerSec'] = c.result.opsPerSec;
    figures['ceiling.memPut.p50Ms'] = c.result.p50Ms;
    figures['ceiling.memPut.p99Ms'] = c.result.p99Ms;
    figures['W3.opsPerSec'] = s.result.opsPerSec;
    figures['W3.p50Ms'] = s.result.p50Ms;
    figures['W3.p99Ms'] = s.result.p99Ms;
    usage.W3 = withCost(s.usage, { ops: s.result.ops + s.result.warmupOps });
    usage['W3 ceiling'] = withCost(c.usage, { ops: c.result.ops + c.result.warmupOps });
    usage['W3 durable ref'] = withCost(d.usage, { ops: d.result.ops + d.result.warmupOps });
    details.W3 = { ceiling: c.result, durableReference: d.result, service: s.result };
    if (s3T) {
      const smallSha256 = createHash('sha256').update(small).digest('hex');
      const s3Loop = (mode: 'unsigned' | 'signed', sh: LoopShape, tag: string) =>
        putSmallLoop(s3T, sh, small, (w, seq) => s3T.objectPath(bucket, `w3/s3-${mode}${tag}-${w}-${seq}.bin`), mode === 'signed' ? smallSha256 : UNSIGNED);
      const ratios: Record<'unsigned' | 'signed', number[]> = { unsigned: [], signed: [] };
      for (const mode of ['unsigned', 'signed'] as const) {
        log(`[${db}] W3 through the S3 door, ${mode === 'signed' ? 'signed payload' : 'UNSIGNED-PAYLOAD'}`);
        const r = await measure(s3T, s3Loop(mode, shape, ''));
        figures[`S3.W3.${mode}.opsPerSec`] = r.result.opsPerSec;
        figures[`S3.W3.${mode}.p50Ms`] = r.result.p50Ms;
        usage[`S3 W3 ${mode}`] = withCost(r.usage, { ops: r.result.ops + r.result.warmupOps });
        details[`S3W3${mode}`] = r.result;
        ratios[mode].push(r.result.opsPerSec / s.result.opsPerSec);
      }
      // More side-by-side pairs, in alternating order, so that a slow patch of the disk's fsyncs
      // during one loop does not decide the ratio (as W1/W2's paired ratios).
      for (let i = 1; i <= p.doorPairs; i++) {
        log(`[${db}] W3 pair ${i}/${p.doorPairs}: REST and the S3 door, ${pairShape.durationMs / 1000} s each`);
        const sh = pairShape;
        const runs: Record<string, number> = {};
        const order = i % 2 === 1 ? (['signed', 'unsigned', 'rest'] as const) : (['rest', 'unsigned', 'signed'] as const);
        for (const side of order) {
          const loop = side === 'rest' ? putSmallLoop(restT, sh, small, (w, seq) => `/files/${bucket}/w3/pair${i}-${w}-${seq}.bin`) : s3Loop(side, sh, `-pair${i}`);
          runs[side] = (await measure(side === 'rest' ? restT : s3T, loop)).result.opsPerSec;
        }
        for (const mode of ['unsigned', 'signed'] as const) ratios[mode].push(runs[mode]! / runs.rest!);
      }
      for (const mode of ['unsigned', 'signed'] as const) {
        figures[`S3.W3.${mode}.pairedRatio`] = median(ratios[mode]);
        details[`S3W3${mode}Ratios`] = ratios[mode];
      }
    }
    if (peerT) {
      log(`[${db}] W3 on the peer (s3rver)`);
      const pb = await peerT.createBucket('bench-w3');
      const r = await measure(peerT, putSmallLoop(peerT, shape, small, (w, seq) => peerT.objectPath(pb, `w3/${w}-${seq}.bin`)));
      figures['peer.W3.opsPerSec'] = r.result.opsPerSec;
      figures['peer.W3.p50Ms'] = r.result.p50Ms;
      figures['peer.W3.p99Ms'] = r.result.p99Ms;
      usage['W3 peer'] = withCost(r.usage, { ops: r.result.ops + r.result.warmupOps });
      details.peerW3 = r.result;
    }
  }

  if (want('W4')) {
    const bucket = await createBucket(sc);
    for (let i = 0; i < p.w4Objects; i++) await sc.ok('PUT', `/files/${bucket}/w4/${i}.bin`, { body: small });
    const peerW4 = peerT ? { t: peerT, bucket: await peerT.createBucket('bench-w4') } : null;
    if (peerW4) {
      for (let i = 0; i < p.w4Objects; i++) {
        const path = peerW4.t.objectPath(peerW4.bucket, `w4/${i}.bin`);
        await peerW4.t.http.ok('PUT', path, { body: small, headers: peerW4.t.sign('PUT', path)() });
      }
    }
    log(`[${db}] W4 4 KiB GETs, ${p.inFlight} in flight, ${p.loopMs / 1000} s: ceiling, then files-rest`);
    const pick = () => Math.floor(Math.random() * p.w4Objects);
    const c = await measure(ceilT, getSmallLoop(ceilT, shape, p.smallSize, () => `/mem/w4/${pick()}`));
    const s = await measure(restT, getSmallLoop(restT, shape, p.smallSize, () => `/files/${bucket}/w4/${pick()}.bin`));
    figures['ceiling.memGet.opsPerSec'] = c.result.opsPerSec;
    figures['ceiling.memGet.p50Ms'] = c.result.p50Ms;
    figures['ceiling.memGet.p99Ms'] = c.result.p99Ms;
    figures['W4.opsPerSec'] = s.result.opsPerSec;
    figures['W4.p50Ms'] = s.result.p50Ms;
    figures['W4.p99Ms'] = s.result.p99Ms;
    usage.W4 = withCost(s.usage, { ops: s.result.ops + s.result.warmupOps });
    usage['W4 ceiling'] = withCost(c.usage, { ops: c.result.ops + c.result.warmupOps });
    details.W4 = { ceiling: c.result, service: s.result };
    if (s3T) {
      log(`[${db}] W4 through the S3 door`);
      const r = await measure(s3T, getSmallLoop(s3T, shape, p.smallSize, () => s3T.objectPath(bucket, `w4/${pick()}.bin`)));
      figures['S3.W4.opsPerSec'] = r.result.opsPerSec;
      figures['S3.W4.p50Ms'] = r.result.p50Ms;
      usage['S3 W4'] = withCost(r.usage, { ops: r.result.ops + r.result.warmupOps });
      details.S3W4 = r.result;
      const ratios = [r.result.opsPerSec / s.result.opsPerSec];
      for (let i = 1; i <= p.doorPairs; i++) {
        log(`[${db}] W4 pair ${i}/${p.doorPairs}: REST and the S3 door, ${pairShape.durationMs / 1000} s each`);
        const sh = pairShape;
        const restRun = () => measure(restT, getSmallLoop(restT, sh, p.smallSize, () => `/files/${bucket}/w4/${pick()}.bin`));
        const s3Run = () => measure(s3T, getSmallLoop(s3T, sh, p.smallSize, () => s3T.objectPath(bucket, `w4/${pick()}.bin`)));
        // Alternating order: S3 first in odd pairs.
        let s3Ops: number;
        let restOps: number;
        if (i % 2 === 1) {
          s3Ops = (await s3Run()).result.opsPerSec;
          restOps = (await restRun()).result.opsPerSec;
        } else {
          restOps = (await restRun()).result.opsPerSec;
          s3Ops = (await s3Run()).result.opsPerSec;
        }
        ratios.push(s3Ops / restOps);
      }
      figures['S3.W4.pairedRatio'] = median(ratios);
      details.S3W4Ratios = ratios;
    }
    if (peerW4) {
      log(`[${db}] W4 on the peer (s3rver)`);
      const r = await measure(peerW4.t, getSmallLoop(peerW4.t, shape, p.smallSize, () => peerW4.t.objectPath(peerW4.bucket, `w4/${pick()}.bin`)));
      figures['peer.W4.opsPerSec'] = r.result.opsPerSec;
      figures['peer.W4.p50Ms'] = r.result.p50Ms;
      figures['peer.W4.p99Ms'] = r.result.p99Ms;
      usage['W4 peer'] = withCost(r.usage, { ops: r.result.ops + r.result.warmupOps });
      details.peerW4 = r.result;
    }
  }

  if (want('W8')) {
    const w8: W8Params = {
      clients: p.w8Clients,
      durationMs: p.w8Ms,
      warmupMs: p.w8WarmupMs,
      maxOps: p.loopMaxOps,
      objects: p.w8Objects,
      pageKeys: p.w8PageKeys,
      seed: p.w8Seed,
    };
    const schedule = w8Schedule(w8.objects, w8.seed);
    // files-rest through its REST door, then the peer: the same requests in the same order, each
    // through a pool of one connection per client.
    const sides: { prefix: string; usageKey: string; t: StoreTarget }[] = [
      { prefix: 'W8', usageKey: 'W8', t: restTarget('files-rest', svc, new HttpClient(svc.url, w8.clients)) },
    ];
    const peerW8 = peer?.target(w8.clients) ?? null;
    if (peerW8) sides.push({ prefix: 'peer.W8', usageKey: 'W8 peer', t: peerW8 });
    for (const { prefix, usageKey, t } of sides) {
      cleanups.push(() => t.http.close());
      const bucket = await t.createBucket('bench-w8');
      log(`[${db}] W8 on ${t.name}: seeding ${w8.objects} objects of 4 KiB–1 MiB`);
      await seedW8(t, bucket, w8.objects, pattern);
      log(`[${db}] W8 on ${t.name}: ${w8.clients} clients, ${w8.durationMs / 1000} s, 70 % GET, 20 % PUT, 10 % listing`);
      const r = await measure(t, w8Loop(t, bucket, w8, pattern, schedule));
      for (const [kind, k] of [['all', r.result], ...Object.entries(r.result.byKind)] as const) {
        figures[`${prefix}.${kind}.opsPerSec`] = k.opsPerSec;
        if (kind !== 'list') figures[`${prefix}.${kind}.mibps`] = k.mibps;
        figures[`${prefix}.${kind}.p50Ms`] = k.p50Ms;
        figures[`${prefix}.${kind}.p99Ms`] = k.p99Ms;
      }
      usage[usageKey] = withCost(r.usage, { ops: r.result.ops + r.result.warmupOps });
      details[prefix === 'W8' ? 'W8' : 'peerW8'] = r.result;
      await t.http.close();
    }
  }

  await cc.close();
  await ceil.stop();
  await s3T?.http.close();
  await peerT?.http.close();
  await peer?.proc?.stop();
  await sc.close();
  await svc.stop();

  // ---- Phase B: metadata scale, on buckets seeded directly in the database. ----
  if (want('W6') || want('W7')) {
    const seeded: SeededBucket[] = [];
    for (const n of p.objects) {
      log(`[${db}] seeding a bucket with ${human(n)} objects`);
      const s =
        db === 'sqlite'
          ? await seedSqlite(databaseUrl.slice('sqlite:'.length), join(dir, 'data'), n)
          : await seedPostgres(databaseUrl, join(dir, 'data'), n);
      log(`[${db}]   … ${s.seconds.toFixed(1)} s, database ${(s.databaseBytes / 2 ** 20).toFixed(0)} MiB`);
      seeded.push(s);
    }
    details.seeding = seeded;
    const [smallB, largeB] = [seeded[0]!, seeded[1]!];
    svc = await startService(dir, databaseUrl, 'files-rest-b', profileDir);
    sc = new HttpClient(svc.url, p.inFlight);
    cleanups.push(() => sc.close());
    if (want('W6')) {
      for (const [label, b] of [['small', smallB], ['large', largeB]] as const) {
        log(`[${db}] W6 listing pages of ${p.pageSize} in a bucket of ${human(b.objects)} objects`);
        const r = await watched(svc, () => listPages(sc, b, p));
        figures[`W6.${label}.p50Ms`] = r.result.p50Ms;
        figures[`W6.${label}.p99Ms`] = r.result.p99Ms;
        usage[`W6 ${human(b.objects)}`] = withCost(r.usage, { ops: r.result.pages + p.listWarmupPages });
        details[`W6${label}`] = { objects: b.objects, ...r.result };
      }
    }
    if (want('W7')) {
      log(`[${db}] W7 sequential 4 KiB PUTs: empty bucket, then the bucket of ${human(largeB.objects)} objects`);
      const empty = await createBucket(sc);
      const e = await watched(svc, () => putLatency(sc, empty, small, p));
      const f = await watched(svc, () => putLatency(sc, largeB.id, small, p));
      figures['W7.empty.p50Ms'] = e.result.p50Ms;
      figures['W7.empty.p99Ms'] = e.result.p99Ms;
      figures['W7.full.p50Ms'] = f.result.p50Ms;
      figures['W7.full.p99Ms'] = f.result.p99Ms;
      usage['W7 empty'] = withCost(e.usage, { ops: e.result.ops + e.result.warmupOps });
      usage[`W7 ${human(largeB.objects)}`] = withCost(f.usage, { ops: f.result.ops + f.result.warmupOps });
      details.W7 = { empty: e.result, full: f.result, objects: largeB.objects };
    }
    await sc.close();
    await svc.stop();
  }

  // With --profile, keep the servers' logs next to the profiles.
  if (profileDir) {
    for (const f of ['files-rest-a.log', 'files-rest-b.log', 'ceiling.log']) {
      if (existsSync(join(dir, f))) await cp(join(dir, f), join(profileDir, f));
    }
  }
  // Stop, drop and remove what this section made.
  while (cleanups.length > sectionCleanupDepth - 1) await cleanups.pop()!().catch(() => {});
  details.usage = usage;
  // Anonymous memory over every measurement of files-rest (not the peer's, not the bare servers').
  const own = Object.entries(usage).filter(([k]) => !/peer|ceiling|durable ref/.test(k));
  if (own.length > 0) {
    const [at, top] = own.reduce((a, b) => (b[1].peakRssAnonMB > a[1].peakRssAnonMB ? b : a));
    figures['server.peakRssAnonMB'] = top.peakRssAnonMB;
    details.peakRssAnonIn = at;
  }

  const k = `@${human(p.objects[1])}`;
  const k0 = `@${human(p.objects[0])}`;
  const rowDefs: Parameters<typeof makeRow>[1][] = [
    { id: 'W1.mibps', workload: 'W1', figure: `PUT ${big}`, unit: 'MiB/s', ceilingId: 'ceiling.hashWrite.mibps', ceilingLabel: 'hash+write', ratioId: 'W1.pairedRatio', target: { on: 'ratio', op: '>=', bound: 0.9 } },
    { id: 'W1.peakRssMB', workload: 'W1', figure: 'server peak RSS', unit: 'MB', ceilingId: 'ceiling.hashWrite.peakRssMB', ceilingLabel: 'bare server', target: { on: 'value', op: '<=', bound: 100 } },
    { id: 'W1.mibps', workload: 'W1', figure: `PUT ${big} vs the peer`, unit: 'MiB/s', ceilingId: 'peer.W1.mibps', ceilingLabel: peerLabel, ratioId: 'W1.peerPairedRatio' },
    { id: 'W1.peakRssMB', workload: 'W1', figure: 'server peak RSS vs the peer', unit: 'MB', ceilingId: 'peer.W1.peakRssMB', ceilingLabel: peerLabel },
    { id: 'W2.mibps', workload: 'W2', figure: `GET ${big}`, unit: 'MiB/s', ceilingId: 'ceiling.stream.mibps', ceilingLabel: 'stream', ratioId: 'W2.pairedRatio', target: { on: 'ratio', op: '>=', bound: 0.9 } },
    { id: 'W2.peakRssMB', workload: 'W2', figure: 'server peak RSS', unit: 'MB', ceilingId: 'ceiling.stream.peakRssMB', ceilingLabel: 'bare server', target: { on: 'value', op: '<=', bound: 100 } },
    { id: 'W2.mibps', workload: 'W2', figure: `GET ${big} vs the peer`, unit: 'MiB/s', ceilingId: 'peer.W2.mibps', ceilingLabel: peerLabel, ratioId: 'W2.peerPairedRatio' },
    { id: 'W2.peakRssMB', workload: 'W2', figure: 'server peak RSS vs the peer', unit: 'MB', ceilingId: 'peer.W2.peakRssMB', ceilingLabel: peerLabel },
    { id: 'W3.opsPerSec', workload: 'W3', figure: `4 KiB PUT ×${p.inFlight}`, unit: 'ops/s', ceilingId: 'ceiling.memPut.opsPerSec', ceilingLabel: 'in-memory', target: { on: 'ratio', op: '>=', bound: 0.3 } },
    { id: 'W3.opsPerSec', workload: 'W3', figure: `4 KiB PUT ×${p.inFlight} vs the disk`, unit: 'ops/s', ceilingId: 'ceiling.durablePut.opsPerSec', ceilingLabel: 'durable hash+write', target: { on: 'ratio', op: '>=', bound: 1.5 } },
    { id: 'W3.p50Ms', workload: 'W3', figure: 'p50 latency', unit: 'ms', ceilingId: 'ceiling.memPut.p50Ms', ceilingLabel: 'in-memory' },
    { id: 'W3.p99Ms', workload: 'W3', figure: 'p99 latency', unit: 'ms', ceilingId: 'ceiling.memPut.p99Ms', ceilingLabel: 'in-memory' },
    { id: 'W3.opsPerSec', workload: 'W3', figure: `4 KiB PUT ×${p.inFlight} vs the peer`, unit: 'ops/s', ceilingId: 'peer.W3.opsPerSec', ceilingLabel: peerLabel, target: { on: 'ratio', op: '>=', bound: 2 } },
    { id: 'W3.p50Ms', workload: 'W3', figure: 'p50 latency vs the peer', unit: 'ms', ceilingId: 'peer.W3.p50Ms', ceilingLabel: peerLabel },
    { id: 'W3.p99Ms', workload: 'W3', figure: 'p99 latency vs the peer', unit: 'ms', ceilingId: 'peer.W3.p99Ms', ceilingLabel: peerLabel },
    { id: 'W4.opsPerSec', workload: 'W4', figure: `4 KiB GET ×${p.inFlight}`, unit: 'ops/s', ceilingId: 'ceiling.memGet.opsPerSec', ceilingLabel: 'in-memory', target: { on: 'ratio', op: '>=', bound: 0.5 } },
    { id: 'W4.p50Ms', workload: 'W4', figure: 'p50 latency', unit: 'ms', ceilingId: 'ceiling.memGet.p50Ms', ceilingLabel: 'in-memory' },
    { id: 'W4.p99Ms', workload: 'W4', figure: 'p99 latency', unit: 'ms', ceilingId: 'ceiling.memGet.p99Ms', ceilingLabel: 'in-memory' },
    { id: 'W4.opsPerSec', workload: 'W4', figure: `4 KiB GET ×${p.inFlight} vs the peer`, unit: 'ops/s', ceilingId: 'peer.W4.opsPerSec', ceilingLabel: peerLabel },
    { id: 'W4.p50Ms', workload: 'W4', figure: 'p50 latency vs the peer', unit: 'ms', ceilingId: 'peer.W4.p50Ms', ceilingLabel: peerLabel },
    { id: 'W4.p99Ms', workload: 'W4', figure: 'p99 latency vs the peer', unit: 'ms', ceilingId: 'peer.W4.p99Ms', ceilingLabel: peerLabel },
    { id: 'S3.W1.unsigned.mibps', workload: 'S3', figure: `W1 PUT ${big}, UNSIGNED-PAYLOAD`, unit: 'MiB/s', ceilingId: 'W1.mibps', ceilingLabel: 'REST W1', ratioId: 'S3.W1.unsigned.pairedRatio', target: { on: 'ratio', op: '>=', bound: 0.9 } },
    { id: 'S3.W1.signed.mibps', workload: 'S3', figure: `W1 PUT ${big}, signed payload`, unit: 'MiB/s', ceilingId: 'W1.mibps', ceilingLabel: 'REST W1', ratioId: 'S3.W1.signed.pairedRatio', target: { on: 'ratio', op: '>=', bound: 0.9 } },
    { id: 'S3.W2.mibps', workload: 'S3', figure: `W2 GET ${big}`, unit: 'MiB/s', ceilingId: 'W2.mibps', ceilingLabel: 'REST W2', ratioId: 'S3.W2.pairedRatio', target: { on: 'ratio', op: '>=', bound: 0.9 } },
    { id: 'S3.W3.unsigned.opsPerSec', workload: 'S3', figure: `W3 4 KiB PUT ×${p.inFlight}, UNSIGNED-PAYLOAD`, unit: 'ops/s', ceilingId: 'W3.opsPerSec', ceilingLabel: 'REST W3', ratioId: 'S3.W3.unsigned.pairedRatio', target: { on: 'ratio', op: '>=', bound: 0.9 } },
    { id: 'S3.W3.signed.opsPerSec', workload: 'S3', figure: `W3 4 KiB PUT ×${p.inFlight}, signed payload`, unit: 'ops/s', ceilingId: 'W3.opsPerSec', ceilingLabel: 'REST W3', ratioId: 'S3.W3.signed.pairedRatio', target: { on: 'ratio', op: '>=', bound: 0.9 } },
    { id: 'S3.W4.opsPerSec', workload: 'S3', figure: `W4 4 KiB GET ×${p.inFlight}`, unit: 'ops/s', ceilingId: 'W4.opsPerSec', ceilingLabel: 'REST W4', ratioId: 'S3.W4.pairedRatio', target: { on: 'ratio', op: '>=', bound: 0.9 } },
    { id: 'W5.peakRssMB', workload: 'W5', figure: 'server peak RSS', unit: 'MB', target: { on: 'value', op: '<=', bound: 100 } },
    { id: 'W5.mibps', workload: 'W5', figure: `multipart ${big} (${p.parts}×${humanBytes(p.partSize)}, ${p.partsInFlight} in flight)`, unit: 'MiB/s', ceilingId: 'W1.mibps', ceilingLabel: 'W1', target: { on: 'ratio', op: '>=', bound: 1 } },
    { id: 'W5.lastPartToUsableS', workload: 'W5', figure: 'last part → downloadable', unit: 's', target: { on: 'value', op: '<=', bound: 2 } },
    { id: 'W5S3.mibps', workload: 'W5', figure: `W5 through the S3 door (raw UploadPart, ${p.partsInFlight} in flight)`, unit: 'MiB/s', ceilingId: 'W5.mibps', ceilingLabel: 'W5 REST', target: { on: 'ratio', op: '>=', bound: 0.9 } },
    { id: 'W5S3.lastPartToUsableS', workload: 'W5', figure: 'S3: last part → downloadable', unit: 's', target: { on: 'value', op: '<=', bound: 2 } },
    { id: 'W6.small.p50Ms', workload: 'W6', figure: `page p50 ${k0}`, unit: 'ms' },
    { id: 'W6.small.p99Ms', workload: 'W6', figure: `page p99 ${k0}`, unit: 'ms' },
    { id: 'W6.large.p50Ms', workload: 'W6', figure: `page p50 ${k}`, unit: 'ms', ceilingId: 'W6.small.p50Ms', ceilingLabel: k0 },
    { id: 'W6.large.p99Ms', workload: 'W6', figure: `page p99 ${k}`, unit: 'ms', target: { on: 'value', op: '<=', bound: 20 } },
    { id: 'W6.large.p99Ms', workload: 'W6', figure: `page p99 ${k} vs ${k0}`, unit: 'ms', ceilingId: 'W6.small.p99Ms', ceilingLabel: k0, target: { on: 'ratio', op: '<=', bound: 1.5 } },
    { id: 'W7.full.p50Ms', workload: 'W7', figure: `PUT p50 ${k}`, unit: 'ms', ceilingId: 'W7.empty.p50Ms', ceilingLabel: 'empty bucket', target: { on: 'ratio', op: '<=', bound: 1.5 } },
    { id: 'W7.full.p99Ms', workload: 'W7', figure: `PUT p99 ${k}`, unit: 'ms', ceilingId: 'W7.empty.p99Ms', ceilingLabel: 'empty bucket' },
    { id: 'W7.full.p50Ms', workload: 'W7', figure: `PUT p50 ${k} vs fresh DB`, unit: 'ms', ceilingId: 'W7.freshDb.p50Ms', ceilingLabel: 'empty DB' },
    // W8: files-rest through its REST door, side by side with the peer (through S3).
    ...(['all', 'get', 'put', 'list'] as const).flatMap((kind) => {
      const what = `REST door ×${p.w8Clients}, ${{ all: 'all requests', get: 'GETs', put: 'PUTs', list: 'listings' }[kind]}`;
      const vs = (figure: string, unit: string) => ({ id: `W8.${kind}.${figure}`, workload: 'W8', unit, ceilingId: `peer.W8.${kind}.${figure}`, ceilingLabel: peerLabel });
      return [
        { ...vs('opsPerSec', 'ops/s'), figure: what },
        ...(kind === 'list' ? [] : [{ ...vs('mibps', 'MiB/s'), figure: `${what}, object bytes` }]),
        { ...vs('p99Ms', 'ms'), figure: `${what}, p99 latency` },
      ];
    }),
  ];
  rowDefs.push(
    { id: 'idle.rssMB', workload: 'Memory', figure: 'idle server RSS (started 1 s ago, no request yet)', unit: 'MB', target: { on: 'value', op: '<=', bound: 60 } },
    { id: 'idle.rssAnonMB', workload: 'Memory', figure: 'idle server RssAnon (heaps and buffers)', unit: 'MB' },
    { id: 'idle.rssFileMB', workload: 'Memory', figure: 'idle server RssFile (code and mapped files)', unit: 'MB' },
    { id: 'idle.settledRssMB', workload: 'Memory', figure: `idle server RSS, settled (idle ${IDLE_SETTLE_MS / 1000} s more)`, unit: 'MB', target: { on: 'value', op: '<=', bound: 60 } },
    { id: 'idle.settledRssAnonMB', workload: 'Memory', figure: 'idle server RssAnon, settled', unit: 'MB' },
    { id: 'server.peakRssAnonMB', workload: 'Memory', figure: `server peak RssAnon, highest of every workload (${String(details.peakRssAnonIn ?? '')})`, unit: 'MB', target: { on: 'value', op: '<=', bound: 100 } },
  );
  // The memory rows whenever their figures were taken (they are not a workload of their own).
  const rows = rowDefs.filter((r) => (r.workload === 'Memory' ? figures[r.id] !== undefined : want(r.workload))).map((r) => makeRow(figures, r));
  return { figures, rows, details, complete: !o.only };
}

/**
 * W5 through the S3 door: the same object in the same parts, 4 in flight, as raw S3 calls
 * (CreateMultipartUpload, UploadPart, CompleteMultipartUpload; anonymous under allow-all), on the
 * same files-rest process as the REST door's W5, right after it.
 */
async function runW5S3(
  db: DbKind,
  svc: ManagedProcess,
  p: Params,
  pattern: Buffer,
  expectedMd5: string,
  out: { figures: Record<string, number>; details: Record<string, unknown>; usage: Record<string, Usage> },
): Promise<void> {
  // The same process as the REST door's W5, right after it: the two doors compared on equal terms.
  const s3Url = s3Urls.get(svc);
  if (!s3Url) throw new Error('W5-S3: the service has no S3 door');
  const rest = new HttpClient(svc.url, 4);
  const s3 = new HttpClient(s3Url, p.partsInFlight + 1);
  cleanups.push(() => rest.close());
  cleanups.push(() => s3.close());
  const bucket = await createBucket(rest);
  const runs: { mibps: number; lastPartToUsableS: number; completeRequestS: number; usage: Usage }[] = [];
  for (let rep = 0; rep < p.reps; rep++) {
    log(`[${db}] W5-S3 ${humanBytes(p.bigSize)} multipart through the S3 door (${p.parts} parts, ${p.partsInFlight} in flight), repetition ${rep + 1}/${p.reps}`);
    const key = `/${bucket}/w5s3/big-${rep}.bin`;
    const r = await watched(svc, async () => {
      const t0 = performance.now();
      const init = await s3.ok('POST', `${key}?uploads`);
      const id = /<UploadId>([^<]+)<\/UploadId>/.exec(init.text)?.[1];
      if (!id) throw new Error(`CreateMultipartUpload answered no UploadId: ${init.text.slice(0, 200)}`);
      const etags: string[] = [];
      let next = 0;
      await Promise.all(
        Array.from({ length: p.partsInFlight }, async () => {
          for (let guard = 0; guard < p.parts && next < p.parts; guard++) {
            const n = next++;
            const len = Math.min(p.partSize, p.bigSize - n * p.partSize);
            const put = await s3.putPattern(`${key}?partNumber=${n + 1}&uploadId=${id}`, pattern, n * p.partSize, len);
            etags[n] = String(put.headers.etag);
          }
        }),
      );
      const tLast = performance.now();
      const xml = `<CompleteMultipartUpload>${etags.map((e, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${e}</ETag></Part>`).join('')}</CompleteMultipartUpload>`;
      const done = await s3.ok('POST', `${key}?uploadId=${id}`, { body: Buffer.from(xml), headers: { 'content-type': 'application/xml', 'content-length': String(Buffer.byteLength(xml)) } });
      const tComplete = performance.now();
      const head = await rest.request('HEAD', `/files${key}`);
      const tUsable = performance.now();
      if (head.status !== 200) throw new Error(`W5-S3: object not downloadable after completion (HTTP ${head.status}): ${done.text.slice(0, 200)}`);
      if (head.headers.etag !== `"md5:${expectedMd5}"`) throw new Error(`W5-S3: unexpected ETag ${String(head.headers.etag)}`);
      return { mibps: p.bigSize / MiB / ((tUsable - t0) / 1000), lastPartToUsableS: (tUsable - tLast) / 1000, completeRequestS: (tComplete - tLast) / 1000 };
    });
    runs.push({ ...r.result, usage: r.usage });
  }
  out.figures['W5S3.mibps'] = median(runs.map((r) => r.mibps));
  out.figures['W5S3.lastPartToUsableS'] = median(runs.map((r) => r.lastPartToUsableS));
  out.usage['W5 S3'] = withCost(runs[runs.length - 1]!.usage, { bytes: p.bigSize });
  out.details.W5S3 = runs;
}

async function pgSettings(url: string): Promise<Record<string, string>> {
  const pg = (await import('pg')).default;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const out: Record<string, string> = {};
    for (const name of ['server_version', 'fsync', 'synchronous_commit', 'shared_buffers', 'wal_level']) {
      const r = await c.query<Record<string, string>>(`show ${name}`);
      out[name] = String(Object.values(r.rows[0] ?? {})[0] ?? '');
    }
    return out;
  } finally {
    await c.end();
  }
}

function gitInfo(): { commit: string | null; dirty: boolean | null } {
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const status = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return { commit, dirty: status.trim().length > 0 };
  } catch {
    return { commit: null, dirty: null };
  }
}

function usageTable(usage: Record<string, Usage>): string {
  const head = ['Measurement', 'seconds', 'server CPU', 'PostgreSQL CPU', 'client CPU', 'other load', 'server peak RSS', 'peak RssAnon', 'peak RssFile', 'of which SQLite mapped', 'server CPU per unit'];
  const body = Object.entries(usage).map(([k, u]) => [
    k,
    fmt(u.seconds),
    fmt(u.serverCpuPct, '%'),
    u.dbCpuPct === null ? '' : fmt(u.dbCpuPct, '%'),
    fmt(u.clientCpuPct, '%'),
    fmt(u.otherCpuPct, '%'),
    fmt(u.peakRssMB, 'MB'),
    fmt(u.peakRssAnonMB, 'MB'),
    fmt(u.peakRssFileMB, 'MB'),
    u.dbMappedMB === null ? '' : fmt(u.dbMappedMB, 'MB'),
    u.cost ?? '',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...body.map(line)].join('\n');
}

async function main(): Promise<number> {
  const o = parseArgs(process.argv.slice(2));
  const p = paramsFor(o);
  if (!existsSync(join(ROOT, 'dist', 'src', 'cli', 'main.js')) || !existsSync(join(ROOT, 'dist', 'bench', 'ceiling-server.js'))) {
    throw new Error('not built: run `npm run bench` (it compiles first) or `npx tsc -p .`');
  }
  // The commit, and whether src/ differed from it, when the build was snapshotted: what is measured.
  const git = gitInfo();
  APP = await snapshotBuild();
  const dbs: DbKind[] = [];
  if (o.db === 'all' || o.db === 'sqlite') dbs.push('sqlite');
  if (o.db === 'all' || o.db === 'postgres') {
    if (await reachable(o.pgUrl)) dbs.push('postgres');
    else if (o.db === 'postgres') throw new Error(`PostgreSQL is not reachable at ${o.pgUrl}`);
    else log(`PostgreSQL not reachable at ${o.pgUrl}: running on SQLite only`);
  }
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const machine = {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryBytes: os.totalmem(),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
  };
  log(`files-rest benchmark, ${p.mode} mode, on ${dbs.join(' and ')}; ${machine.cpus} × ${machine.cpuModel}, node ${machine.node}`);
  if (o.quick) log('quick mode: small sizes and short loops; the figures only prove the benchmark runs, targets are not meaningful');
  let missed = 0;
  const written: string[] = [];
  const summaries: string[] = [];
  for (const db of dbs) {
    const started = new Date();
    const t0 = performance.now();
    const r = await runSection(db, o, p, stamp);
    const result = {
      schema: 'files-rest-bench/1',
      mode: p.mode,
      db,
      complete: r.complete,
      started: started.toISOString(),
      durationSeconds: (performance.now() - t0) / 1000,
      machine,
      git,
      params: p,
      figures: r.figures,
      rows: r.rows,
      details: r.details,
    };
    const title = `${db === 'sqlite' ? 'SQLite' : 'PostgreSQL'} (${p.mode} mode, ${result.durationSeconds.toFixed(0)} s)`;
    const body =
      `${table(r.rows)}\n\nCPU in % of one core (the machine has ${machine.cpus}); "other load" is everything else running on the machine meanwhile.\n` +
      `${usageTable(r.details.usage as Record<string, Usage>)}\n`;
    const md =
      `# files-rest benchmark: ${title}\n\n` +
      `Run ${result.started} on ${machine.cpus} × ${machine.cpuModel}, ${(machine.memoryBytes / 2 ** 30).toFixed(0)} GiB, node ${machine.node}, ` +
      `commit ${result.git.commit ?? 'unknown'}${result.git.dirty ? ' (src/ modified)' : ''}. ` +
      `Produced by \`npm run bench\`; see [the benchmark README](../README.md) for how to read it, and latest-${db}.json for every sample.\n\n${body}`;
    written.push(...writeResult(o.resultsDir, stamp, db, result, md, r.complete));
    missed += r.rows.filter((x) => x.met === false).length;
    const s = `\n=== ${title} ===\n${body}`;
    summaries.push(s);
    process.stdout.write(s);
  }
  if (summaries.length > 1) process.stdout.write(`\n=== summary ===${summaries.join('')}`);
  process.stdout.write(`\nresults: ${written.join(', ')}\n`);
  if (missed) process.stdout.write(`${missed} target${missed === 1 ? '' : 's'} missed${o.quick ? ' (quick mode: expected, the sizes are too small to mean anything)' : ''}\n`);
  return o.strict && missed ? 1 : 0;
}

let interrupted = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    process.stderr.write(`\n${sig}: stopping and cleaning up…\n`);
    void runCleanups().finally(() => process.exit(130));
  });
}

main().then(
  async (code) => {
    await runCleanups();
    process.exit(code);
  },
  async (e: unknown) => {
    if (!interrupted) process.stderr.write(`benchmark failed: ${(e as Error)?.stack ?? String(e)}\n`);
    await runCleanups();
    process.exit(interrupted ? 130 : 1);
  },
);
