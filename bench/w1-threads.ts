/**
 * Where a 1 GiB PUT's CPU goes, per thread, through the REST door and through the S3 door (signed
 * payload, UNSIGNED-PAYLOAD), in alternating pairs on one files-rest process: the tool behind the
 * README's "What bounds W1 with a signed payload". `npm run bench` gives the ratio; this says which
 * thread paid for it.
 *
 * Usage (after `npm run build`): node dist/bench/w1-threads.js [--pairs N] [--mib M] [--kinds rest,s3,s3u]
 *   [--node-flags='--flag …'] (Node.js flags for the server, e.g. --single-threaded-gc; none by default)
 *   rest: PUT /files/<bucket>/<key>; s3: the S3 door with the body's SHA-256 as x-amz-content-sha256
 *   (computed before timing); s3u: the S3 door with UNSIGNED-PAYLOAD.
 * Prints, per upload, MiB/s, the server's CPU per GiB split into the HTTP (main) thread, the threads
 * that read or wrote files (libuv's pool: /proc/PID/task/TID/io), the digest thread (named
 * files-rest-hash) and the rest (V8's GC and compiler threads), and the share of the machine left
 * idle; then the median ratio of each kind to the first. Everything runs on 127.0.0.1 in a temporary directory that
 * is removed at the end. W1_THREADS_ENV='{"NAME":"value"}' adds settings to the server's environment;
 * W1_THREADS_DEBUG=1 prints every thread's figures and, at the end, the server's log.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { HttpClient, median, patternDigest } from './lib/client.js';
import { machineBusySeconds, ROOT, startOnFreePorts, ticksPerSecond } from './lib/proc.js';
import { signHeaders, UNSIGNED } from './lib/sigv4.js';
import { DIGEST_THREAD_NAME } from '../src/util/digest-thread.js';

const { values } = parseArgs({ options: { pairs: { type: 'string', default: '6' }, mib: { type: 'string', default: '1024' }, kinds: { type: 'string', default: 'rest,s3' }, 'node-flags': { type: 'string' } } });
const SERVER_FLAGS = (values['node-flags'] ?? '').split(' ').filter(Boolean);
const PAIRS = Number(values.pairs);
const SIZE = Number(values.mib) * 1024 * 1024;
const KINDS = values.kinds.split(',') as Array<'rest' | 's3' | 's3u'>;
const GIB = SIZE / 2 ** 30;

interface ThreadSample {
  cpu: number;
  io: number;
  name: string;
}

/** Every thread of `pid`: CPU seconds, bytes read and written (rchar + wchar), name. */
function threads(pid: number): Map<string, ThreadSample> {
  const out = new Map<string, ThreadSample>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const io = readFileSync(`/proc/${pid}/task/${tid}/io`, 'utf8');
      const bytes = (name: string) => Number(new RegExp(`^${name}: (\\d+)`, 'm').exec(io)?.[1] ?? 0);
      out.set(tid, { cpu: (Number(f[11]) + Number(f[12])) / ticksPerSecond(), io: bytes('rchar') + bytes('wchar'), name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) });
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out;
}

const dir = mkdtempSync(join(tmpdir(), 'files-rest-w1-threads-'));
const env = (port: number, s3Port: number): Record<string, string> => ({
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: dir,
  HOST: '127.0.0.1',
  PORT: String(port),
  FILES_REST_S3_PORT: String(s3Port),
  FILES_REST_SERVER_KEY: SERVER_KEY,
  DATABASE_URL: `sqlite:${join(dir, 'db.sqlite')}`,
  FILES_REST_DATA_DIR: join(dir, 'data'),
  FILES_REST_PERMISSION_FACTORY: 'allow-all',
  LOG_LEVEL: 'warn',
  ...(process.env.W1_THREADS_ENV ? (JSON.parse(process.env.W1_THREADS_ENV) as Record<string, string>) : {}),
});
const SERVER_KEY = randomBytes(32).toString('base64');
const bin = join(ROOT, 'bin', 'files-rest.js');
const { proc, port, secondPort } = await startOnFreePorts('files-rest', (p, s) => ({ args: [...SERVER_FLAGS, bin, 'serve'], env: env(p, s) }), { cwd: ROOT, logFile: join(dir, 'server.log'), path: '/readyz' });
try {
  const key = JSON.parse(execFileSync(process.execPath, [bin, 'key', 'create', '--json'], { env: env(0, 0), encoding: 'utf8' })) as { access_key_id: string; secret_access_key: string };
  const creds = { accessKeyId: key.access_key_id, secretAccessKey: key.secret_access_key, region: 'us-east-1' };
  const rest = new HttpClient(`http://127.0.0.1:${port}`, 2);
  const s3 = new HttpClient(`http://127.0.0.1:${secondPort}`, 2);
  const bucket = (await rest.ok('POST', '/files')).json as { id: string };
  const pattern = randomBytes(1024 * 1024);
  const md5 = patternDigest(pattern, SIZE, 'md5');
  const sha256 = patternDigest(pattern, SIZE, 'sha256');
  const speeds = new Map<string, number[]>(KINDS.map((k) => [k, []]));
  const ratios = new Map<string, number[]>(KINDS.map((k) => [k, []]));

  const upload = async (kind: string, n: number): Promise<number> => {
    const pid = proc.pid;
    const t0 = threads(pid);
    const busy0 = machineBusySeconds() ?? 0;
    const wall0 = performance.now();
    const key = `${kind}-${n}`;
    let got: string;
    let seconds: number;
    let versionId: string;
    if (kind === 'rest') {
      const r = await rest.putPattern(`/files/${bucket.id}/${key}`, pattern, 0, SIZE);
      const answer = r.json as { checksum?: string; version_id?: string } | undefined;
      got = String(answer?.checksum ?? '').replace(/^md5:/, '');
      versionId = String(answer?.version_id);
      seconds = r.seconds;
    } else {
      const path = `/${bucket.id}/${key}`;
      const payload = kind === 's3' ? sha256 : UNSIGNED;
      const r = await s3.putPattern(path, pattern, 0, SIZE, 'PUT', () => signHeaders(creds, `127.0.0.1:${secondPort}`, 'PUT', path, payload));
      got = String(r.headers.etag ?? '').replace(/"/g, '');
      versionId = String(r.headers['x-amz-version-id']);
      seconds = r.seconds;
    }
    const t1 = threads(pid);
    const idle = 1 - ((machineBusySeconds() ?? 0) - busy0) / (((performance.now() - wall0) / 1000) * availableParallelism());
    if (got !== md5) throw new Error(`${kind}: the answer's MD5 is ${got}, expected ${md5}`);
    // Measured; now a hard delete of the version and its file, so that the disk does not fill up.
    await rest.ok('DELETE', `/files/${bucket.id}/${key}?versionId=${versionId}`);
    const split = { main: 0, files: 0, digest: 0, other: 0 };
    for (const [tid, s] of t1) {
      const before = t0.get(tid);
      const cpu = s.cpu - (before?.cpu ?? 0);
      const io = s.io - (before?.io ?? 0);
      if (process.env.W1_THREADS_DEBUG && cpu > 0.01) console.log(`   thread ${tid}: ${cpu.toFixed(2)} s CPU, ${(io / 2 ** 20).toFixed(0)} MiB read or written, ${s.name}`);
      if (tid === String(pid)) split.main += cpu;
      else if (s.name === DIGEST_THREAD_NAME) split.digest += cpu;
      else if (io > 1024 * 1024) split.files += cpu;
      else split.other += cpu;
    }
    const mibs = SIZE / 2 ** 20 / seconds;
    const total = split.main + split.files + split.digest + split.other;
    const f = (x: number) => (x / GIB).toFixed(2);
    console.log(
      `${String(n).padStart(2)} ${kind.padEnd(4)} ${mibs.toFixed(0).padStart(4)} MiB/s  CPU ${f(total)} s/GiB: main ${f(split.main)}, files ${f(split.files)}, digest ${f(split.digest)}, other ${f(split.other)}; machine idle ${(idle * 100).toFixed(0)} %`,
    );
    return mibs;
  };

  for (let n = 0; n < PAIRS; n++) {
    const order = n % 2 ? [...KINDS].reverse() : KINDS;
    const got = new Map<string, number>();
    for (const kind of order) got.set(kind, await upload(kind, n));
    for (const kind of KINDS) {
      speeds.get(kind)!.push(got.get(kind)!);
      ratios.get(kind)!.push(got.get(kind)! / got.get(KINDS[0]!)!);
    }
  }
  for (const kind of KINDS.slice(1)) {
    const r = ratios.get(kind)!;
    console.log(`${kind} ÷ ${KINDS[0]}: median ${median(r).toFixed(3)} (pairs ${r.map((x) => x.toFixed(2)).join(' ')}); median ${median(speeds.get(kind)!).toFixed(0)} against ${median(speeds.get(KINDS[0]!)!).toFixed(0)} MiB/s`);
  }
  await rest.close();
  await s3.close();
} finally {
  await proc.stop();
  if (process.env.W1_THREADS_DEBUG) console.log(`server log:\n${readFileSync(join(dir, 'server.log'), 'utf8')}`);
  rmSync(dir, { recursive: true, force: true });
}
