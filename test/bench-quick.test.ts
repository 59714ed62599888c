import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { testDatabase } from './support/server.js';

/**
 * The benchmark's quick mode (`npm run bench -- --quick`) still runs and produces every figure.
 * Timings are not checked here: this machine's speed is not a test result. SQLite only, so the
 * suite stays short; the PostgreSQL suite run skips it.
 */

const RUN = fileURLToPath(new URL('../bench/run.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Every figure the result must hold, as a finite number. */
const FIGURES = [
  'ceiling.hashWrite.mibps',
  'ceiling.hashWrite.peakRssMB',
  'ceiling.stream.mibps',
  'ceiling.stream.peakRssMB',
  'ceiling.memPut.opsPerSec',
  'ceiling.memPut.p50Ms',
  'ceiling.memPut.p99Ms',
  'ceiling.memGet.opsPerSec',
  'ceiling.memGet.p50Ms',
  'ceiling.memGet.p99Ms',
  'W1.mibps',
  'W1.peakRssMB',
  'W2.mibps',
  'W2.peakRssMB',
  'W3.opsPerSec',
  'W3.p50Ms',
  'W3.p99Ms',
  'W4.opsPerSec',
  'W4.p50Ms',
  'W4.p99Ms',
  'W5.mibps',
  'W5.lastPartToUsableS',
  'W6.small.p50Ms',
  'W6.small.p99Ms',
  'W6.large.p50Ms',
  'W6.large.p99Ms',
  'W7.empty.p50Ms',
  'W7.empty.p99Ms',
  'W7.full.p50Ms',
  'W7.full.p99Ms',
  'W7.freshDb.p50Ms',
  // The S3 door's W1–W4 (SigV4), next to the REST door's.
  'S3.W1.unsigned.mibps',
  'S3.W1.unsigned.pairedRatio',
  'S3.W1.signed.mibps',
  'S3.W1.signed.pairedRatio',
  'S3.W2.mibps',
  'S3.W2.pairedRatio',
  'S3.W3.unsigned.opsPerSec',
  'S3.W3.signed.opsPerSec',
  'S3.W4.opsPerSec',
  // The peer (s3rver) on W1–W4, and files-rest ÷ peer per repetition of W1 and W2.
  'peer.W1.mibps',
  'peer.W1.peakRssMB',
  'W1.peerPairedRatio',
  'peer.W2.mibps',
  'peer.W2.peakRssMB',
  'W2.peerPairedRatio',
  'peer.W3.opsPerSec',
  'peer.W3.p50Ms',
  'peer.W3.p99Ms',
  'peer.W4.opsPerSec',
  'peer.W4.p50Ms',
  'peer.W4.p99Ms',
  // W8, the mix: files-rest (REST door) and the peer, overall and per kind.
  ...['W8', 'peer.W8'].flatMap((side) =>
    ['all', 'get', 'put', 'list'].flatMap((kind) => [
      `${side}.${kind}.opsPerSec`,
      `${side}.${kind}.p50Ms`,
      `${side}.${kind}.p99Ms`,
      ...(kind === 'list' ? [] : [`${side}.${kind}.mibps`]),
    ]),
  ),
];

function run(args: string[], timeoutMs: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [RUN, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    }, timeoutMs);
    child.once('error', reject);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

describe('Benchmark (quick mode)', () => {
  it(
    'runs every workload and ceiling and writes every figure to the JSON result',
    { timeout: 300_000, skip: testDatabase() === 'postgres' ? 'runs once, in the SQLite suite' : false },
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'files-rest-bench-test-'));
      try {
        const r = await run(['--quick', '--db', 'sqlite', '--results-dir', dir], 280_000);
        assert.equal(r.code, 0, `benchmark exited with ${r.code}:\n${r.out.slice(-4000)}`);

        const files = (await readdir(dir)).filter((f) => f.endsWith('.json')).sort();
        assert.equal(files.length, 2, `expected a timestamped result and latest-sqlite.json, got ${files.join(', ')}`);
        assert.ok(files.includes('latest-sqlite.json'));
        assert.match(await readFile(join(dir, 'latest-sqlite.md'), 'utf8'), /\| W7 /);
        const result = JSON.parse(await readFile(join(dir, 'latest-sqlite.json'), 'utf8'));
        assert.equal(result.mode, 'quick');
        assert.equal(result.db, 'sqlite');
        assert.equal(result.complete, true);

        for (const id of FIGURES) {
          const v = result.figures[id];
          assert.ok(typeof v === 'number' && Number.isFinite(v), `figure ${id} is ${v}`);
          assert.ok(v > 0, `figure ${id} is ${v}, expected a positive measurement`);
        }
        // Every row of the table has its figure, and its ratio when it has a ceiling.
        assert.ok(result.rows.length >= 15);
        for (const row of result.rows) {
          assert.ok(Number.isFinite(row.value), `row ${row.workload} ${row.figure}: value ${row.value}`);
          if (row.ceilingId !== null) assert.ok(Number.isFinite(row.ratio), `row ${row.workload} ${row.figure}: ratio ${row.ratio}`);
          if (row.target !== null) assert.equal(typeof row.met, 'boolean');
        }
        for (const w of ['W1', 'W2', 'W3', 'W4', 'W5', 'W6', 'W7', 'W8']) {
          assert.ok(result.rows.some((row: { workload: string }) => row.workload === w), `no row for ${w}`);
        }
        // The printed table names every workload too.
        for (const w of ['W1', 'W2', 'W3', 'W4', 'W5', 'W6', 'W7', 'W8']) assert.match(r.out, new RegExp(`\\| ${w} `));
        // The peer ran, and every W1–W4 and W8 figure has a row comparing it with the peer's.
        assert.equal(result.details.peer?.running, true, `the peer did not run: ${JSON.stringify(result.details.peer)}`);
        const peerRows = result.rows.filter((row: { ceilingId: string | null }) => row.ceilingId?.startsWith('peer.'));
        for (const w of ['W1', 'W2', 'W3', 'W4', 'W8']) {
          assert.ok(peerRows.some((row: { workload: string }) => row.workload === w), `no row comparing ${w} with the peer`);
        }
        assert.equal(peerRows.filter((row: { workload: string }) => row.workload === 'W8').length, 11);
        assert.match(r.out, /\(s3rver\)/);
        // The work directory it announced is gone, and the peer with it.
        const work = /work directory (\S+)/.exec(r.out)?.[1];
        assert.ok(work, 'the benchmark names its work directory');
        await assert.rejects(stat(work), { code: 'ENOENT' });
        const peerPid: number = result.details.peer.pid;
        assert.ok(Number.isInteger(peerPid), `the peer's pid is ${peerPid}`);
        assert.throws(() => process.kill(peerPid, 0), { code: 'ESRCH' }, 'the peer is still running after the run');
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});
