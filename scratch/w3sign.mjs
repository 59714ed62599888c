import { execFileSync } from 'node:child_process';
import { randomBytes, createHash } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpClient, closedLoop } from '../dist/bench/lib/client.js';
import { ROOT, startOnFreePorts, cpuSeconds } from '../dist/bench/lib/proc.js';
import { signHeaders, UNSIGNED } from '../dist/bench/lib/sigv4.js';
const dir = mkdtempSync(join(tmpdir(), 'w3sign-'));
const SERVER_KEY = randomBytes(32).toString('base64');
const env = (port, s3Port) => ({ PATH: process.env.PATH, HOME: dir, HOST: '127.0.0.1', PORT: String(port), FILES_REST_S3_PORT: String(s3Port), FILES_REST_SERVER_KEY: SERVER_KEY, DATABASE_URL: `sqlite:${join(dir, 'db.sqlite')}`, FILES_REST_DATA_DIR: join(dir, 'data'), FILES_REST_PERMISSION_FACTORY: 'allow-all', LOG_LEVEL: 'warn' });
const bin = join(ROOT, 'bin', 'files-rest.js');
const flags = (process.env.SFLAGS ?? '').split(' ').filter(Boolean);
const { proc, port, secondPort } = await startOnFreePorts('files-rest', (p, s) => ({ args: [...flags, bin, 'serve'], env: env(p, s) }), { cwd: ROOT, logFile: join(dir, 'server.log'), path: '/readyz' });
const key = JSON.parse(execFileSync(process.execPath, [bin, 'key', 'create', '--json'], { env: env(0, 0), encoding: 'utf8' }));
const creds = { accessKeyId: key.access_key_id, secretAccessKey: key.secret_access_key, region: 'us-east-1' };
const rest = new HttpClient(`http://127.0.0.1:${port}`, 32);
const s3 = new HttpClient(`http://127.0.0.1:${secondPort}`, 32);
const bucket = (await rest.ok('POST', '/files')).json.id;
const body = randomBytes(4096);
const sha = createHash('sha256').update(body).digest('hex');
const host = `127.0.0.1:${secondPort}`;
const modes = (process.env.MODES ?? 'unsigned,signed').split(',');
const secs = Number(process.env.SECS ?? 8);
let n = 0;
for (let round = 0; round < Number(process.env.ROUNDS ?? 3); round++) {
  for (const mode of modes) {
    const payload = mode === 'signed' ? sha : UNSIGNED;
    const c0 = cpuSeconds(proc.pid);
    let ops = 0;
    const t0 = performance.now();
    const workers = Array.from({ length: 32 }, async (_, w) => {
      while (performance.now() - t0 < secs * 1000) {
        const path = `/${bucket}/k-${mode}-${n++}`;
        const r = await s3.request('PUT', path, { body, headers: signHeaders(creds, host, 'PUT', path, payload) });
        if (r.status !== 200) throw new Error(`${r.status} ${r.text}`);
        ops++;
      }
    });
    await Promise.all(workers);
    const dt = (performance.now() - t0) / 1000;
    const cpu = cpuSeconds(proc.pid) - c0;
    console.log(`${mode.padEnd(9)} ${(ops / dt).toFixed(0)} ops/s, server ${(cpu / ops * 1000).toFixed(3)} ms CPU/request`);
  }
}
await proc.stop();
process.exit(0);
