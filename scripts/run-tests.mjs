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
// The web console's static files (dist/console/), which the server serves at /console/.
const bundle = spawnSync(process.execPath, [join(root, 'scripts', 'build-console.mjs')], { cwd: root, stdio: 'inherit' });
if (bundle.status !== 0) process.exit(bundle.status ?? 1);

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
  // --no-concurrent-recompilation: on Node 24 a test process sometimes never exits. With
  // --test-force-exit it calls process.exit while V8 compiles a function with Maglev on a helper
  // thread; that thread waits for a garbage collection on the main thread, which is already joining
  // it (nodejs/node#54918, seen 1 run in 12 to 25 of digest-thread.test.js; 0 in 120 with the flag).
  // Optimising on the main thread has no such helper thread. The test runner passes the flag on to
  // each test file's process; servers the tests start are not affected.
  const r = spawnSync(process.execPath, ['--no-concurrent-recompilation', '--test', '--test-concurrency=2', '--test-timeout=600000', '--test-force-exit', '--test-reporter=spec', ...list], {
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
  // `ℹ skipped` counts tests only. A suite skipped whole (`describe(…, { skip })`) is one '﹣' line
  // like a skipped test, and its tests are not counted at all: the '﹣' lines beyond the skipped
  // tests are skipped suites.
  const skipLines = out.split('\n').filter((l) => /^\s*﹣ /.test(l) && !/# TODO\b/.test(l)).length;
  const skippedSuites = Math.max(0, skipLines - skipped);
  // The spec reporter ends with a "failing tests" section; keep it to repeat after the summary,
  // where a log viewer that shows only the tail still sees which test failed and why.
  const at = out.lastIndexOf('✖ failing tests:');
  const failures = at >= 0 ? out.slice(at).split('\n').slice(0, 80).join('\n') : '';
  return { status: r.status ?? 1, pass, fail, skipped, skippedSuites, failures };
}

const results = [];
const dbFilter = process.env.TEST_ONLY_DATABASE;
const withS3 = process.env.TEST_SKIP_S3 !== '1';
// The HTTP suites run once more with the default location on S3, on SQLite: on fauxqs, then on Ceph's
// RADOS Gateway.
const S3_SUITES = ['buckets', 'objects', 'multipart', 'permissions', 'signals', 'fuzz'];
const s3Files = files.filter((f) => S3_SUITES.some((n) => f.endsWith(`/${n}.test.js`)));
const s3Pass = (!dbFilter || dbFilter === 'sqlite') && s3Files.length > 0 && withS3;

// One throw-away Ceph cluster with RADOS Gateway (test/support/rgw.ts, about 16 s to start) for the
// whole run, when a test file that uses it runs: the storage contract suite (every database pass) and
// the RGW pass. Its address goes to the test processes as TEST_RGW_*; when it cannot be had, they get
// TEST_RGW_SKIP with the reason, and the RGW pass is left out.
let rgw = null;
let rgwEnv = {};
// (replicas-rgw.test.js is not one: it stops and restarts the gateway of a cluster of its own.)
const rgwUsers = files.filter((f) => /\/(storage-contract|rgw[^/]*)\.test\.js$/.test(f));
if (withS3 && process.env.TEST_SKIP_RGW !== '1' && (rgwUsers.length > 0 || s3Pass)) {
  const { startRgwCluster, rgwClusterEnv } = await import(join(root, 'dist', 'test', 'support', 'rgw.js'));
  console.log('\n=== starting a one-node Ceph cluster with RADOS Gateway ===');
  rgw = await startRgwCluster();
  rgwEnv = rgwClusterEnv(rgw);
  if ('skip' in rgw) console.log(`=== ${rgw.skip}: the tests on RGW skip ===`);
  else console.log(`=== RADOS Gateway at ${rgw.endpoint}, up in ${rgw.startSeconds.toFixed(1)} s ===`);
  for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => void rgw.close?.().finally(() => process.exit(1)));
}

if (!dbFilter || dbFilter === 'sqlite') results.push(['sqlite', run('SQLite', { TEST_DATABASE: 'sqlite', ...rgwEnv })]);
const pgUrl = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
if (!dbFilter || dbFilter === 'postgres') {
  if (await reachable(pgUrl)) results.push(['postgres', run('PostgreSQL', { TEST_DATABASE: 'postgres', TEST_PG_URL: pgUrl, ...rgwEnv })]);
  else console.log(`\n=== PostgreSQL not reachable at ${pgUrl}: skipping the PostgreSQL run ===`);
}
if (s3Pass) results.push(['sqlite+s3', run('SQLite with S3 storage', { TEST_DATABASE: 'sqlite', TEST_STORAGE: 's3' }, s3Files)]);
if (s3Pass && rgw && !('skip' in rgw)) {
  results.push(['sqlite+rgw', run('SQLite with S3 storage on Ceph RGW', { TEST_DATABASE: 'sqlite', TEST_STORAGE: 'rgw', ...rgwEnv }, s3Files)]);
} else if (s3Pass && rgw) console.log(`\n=== ${rgw.skip}: skipping the RGW pass ===`);
if (rgw && !('skip' in rgw)) await rgw.close();
let pass = 0, fail = 0, skipped = 0, skippedSuites = 0, bad = false;
for (const [label, r] of results) {
  console.log(`${label}: ${r.pass} passed, ${r.fail} failed, ${r.skipped} skipped, ${r.skippedSuites} suites skipped (exit ${r.status})`);
  pass += r.pass; fail += r.fail; skipped += r.skipped; skippedSuites += r.skippedSuites;
  if (r.status !== 0) bad = true;
}
for (const [label, r] of results) if (r.failures) console.log(`\n--- failures on ${label} ---\n${r.failures}`);
console.log(`${pass} passed, ${fail} failed, ${skipped} skipped, ${skippedSuites} suites skipped`);
if (pass === 0) {
  console.error('no test ran');
  process.exit(1);
}
process.exit(bad || fail > 0 ? 1 : 0);
