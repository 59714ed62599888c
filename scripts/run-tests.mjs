#!/usr/bin/env node
// Builds, then runs every test file under dist/test with Node's test runner — on SQLite, and again
// on PostgreSQL when one is reachable (TEST_PG_URL, default postgres://postgres@127.0.0.1:5432/postgres).
// Fails when no test ran. Extra arguments are test file name filters: `npm test -- objects`.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import net from 'node:net';

const root = new URL('..', import.meta.url).pathname;
const build = spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' });
if (build.status !== 0) process.exit(build.status ?? 1);

function find(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...find(p));
    else if (name.endsWith('.test.js')) out.push(p);
  }
  return out.sort();
}
const filters = process.argv.slice(2);
const files = find(join(root, 'dist', 'test')).filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files found');
  process.exit(1);
}

function reachable(url) {
  const u = new URL(url);
  return new Promise((resolve) => {
    const s = net.connect({ host: u.hostname, port: Number(u.port || 5432) });
    s.setTimeout(1500);
    s.on('connect', () => { s.destroy(); resolve(true); });
    s.on('error', () => resolve(false));
    s.on('timeout', () => { s.destroy(); resolve(false); });
  });
}

function run(label, env, list = files) {
  console.log(`\n=== test suite on ${label} (${list.length} files) ===`);
  const r = spawnSync(process.execPath, ['--test', '--test-concurrency=2', '--test-timeout=600000', '--test-force-exit', '--test-reporter=spec', ...list], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
    maxBuffer: 256 * 1024 * 1024,
  });
  const out = r.stdout.toString();
  process.stdout.write(out);
  const pass = Number(/ℹ pass (\d+)/.exec(out)?.[1] ?? 0);
  const fail = Number(/ℹ fail (\d+)/.exec(out)?.[1] ?? 0);
  const skipped = Number(/ℹ skipped (\d+)/.exec(out)?.[1] ?? 0);
  // The spec reporter ends with a "failing tests" section; keep it to repeat after the summary,
  // where a log viewer that shows only the tail still sees which test failed and why.
  const at = out.lastIndexOf('✖ failing tests:');
  const failures = at >= 0 ? out.slice(at).split('\n').slice(0, 80).join('\n') : '';
  return { status: r.status ?? 1, pass, fail, skipped, failures };
}

const results = [];
const dbFilter = process.env.TEST_ONLY_DATABASE;
if (!dbFilter || dbFilter === 'sqlite') results.push(['sqlite', run('SQLite', { TEST_DATABASE: 'sqlite' })]);
const pgUrl = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
if (!dbFilter || dbFilter === 'postgres') {
  if (await reachable(pgUrl)) results.push(['postgres', run('PostgreSQL', { TEST_DATABASE: 'postgres', TEST_PG_URL: pgUrl })]);
  else console.log(`\n=== PostgreSQL not reachable at ${pgUrl}: skipping the PostgreSQL run ===`);
}
// The HTTP suites once more with S3 (fauxqs on 127.0.0.1) as the default location, on SQLite.
const S3_SUITES = ['buckets', 'objects', 'multipart', 'permissions', 'signals', 'fuzz'];
const s3Files = files.filter((f) => S3_SUITES.some((n) => f.endsWith(`/${n}.test.js`)));
if ((!dbFilter || dbFilter === 'sqlite') && s3Files.length > 0 && process.env.TEST_SKIP_S3 !== '1') {
  results.push(['sqlite+s3', run('SQLite with S3 storage', { TEST_DATABASE: 'sqlite', TEST_STORAGE: 's3' }, s3Files)]);
}
let pass = 0, fail = 0, skipped = 0, bad = false;
for (const [label, r] of results) {
  console.log(`${label}: ${r.pass} passed, ${r.fail} failed, ${r.skipped} skipped (exit ${r.status})`);
  pass += r.pass; fail += r.fail; skipped += r.skipped;
  if (r.status !== 0) bad = true;
}
for (const [label, r] of results) if (r.failures) console.log(`\n--- failures on ${label} ---\n${r.failures}`);
console.log(`${pass} passed, ${fail} failed, ${skipped} skipped`);
if (pass === 0) {
  console.error('no test ran');
  process.exit(1);
}
process.exit(bad || fail > 0 ? 1 : 0);
