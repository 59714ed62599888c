// Replicas (issue 18): a bucket's replication policy, copies made by the worker from jobs written
// with the upload, replication lag (status, below-policy, metric), reads that survive a lost or
// damaged copy, and copies repaired by the integrity check.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, rename, rm, truncate, unlink, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { startTestServer, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { createBucket, md5, put, req, waitFor } from './support/http.js';
import { createLocation } from '../src/domain/locations.js';
import { copiesOf, fileStatus, filesBelowPolicy, fixityHistory, removeLocation, replicationLag, resolveFileRef, setBucketCopies, summariseFixity } from '../src/domain/replicas.js';
import { migrationStatus, queueMigration } from '../src/domain/migration.js';
import { setBucketProperties } from '../src/domain/buckets.js';
import { reconcileStorage } from '../src/domain/reconcile.js';
import { loadConfig } from '../src/config.js';
import { openCore, type Core } from '../src/service.js';
import { runCli, spawnFilesRest, type ServerProcess } from './support/process.js';
import { processEnv } from './support/fixtures.js';
import { verifyFile } from '../src/domain/integrity.js';

// These tests read, damage or count the files of uploads by path: small uploads too are files here.
storeSmallObjectsAsFiles();

function pathOf(uri: string): string {
  return uri.startsWith('file://') ? fileURLToPath(uri) : uri;
}

/** Idle: no replication or repair job queued or running. */
async function idle(s: TestServer): Promise<boolean> {
  const r = await s.server.core.ctx.db
    .selectFrom('tasks')
    .select('id')
    .where('name', 'in', ['replicate-file', 'repair-copy', 'verify-checksum'])
    .where('state', 'in', ['queued', 'running'])
    .execute();
  return r.length === 0;
}

describe('Replication policy', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_REPLICA_LOCATIONS: 'default,second', FILES_REST_MIGRATION_GRACE: '0' });
    await createLocation(s.server.core.ctx, { name: 'second', uri: join(s.dir, 'second') });
  });
  after(() => s.close());
  const ctx = () => s.server.core.ctx;

  it('a bucket requiring 2 copies: the upload is acknowledged with one, the worker makes the second, verified; status and lag show it', async () => {
    const b = await createBucket(s.files);
    await setBucketCopies(ctx(), b, 2);
    const bodies = Array.from({ length: 10 }, (_, i) => `replicated ${i} `.repeat(100 + i));
    for (let i = 0; i < bodies.length; i++) assert.equal((await put(`${s.files}/${b}/k${i}`, bodies[i]!)).status, 200);
    await waitFor(() => idle(s), 20_000);
    for (let i = 0; i < bodies.length; i++) {
      const st = await fileStatus(ctx(), await resolveFileRef(ctx(), `${b}/k${i}`));
      assert.equal(st.required_copies, 2);
      assert.equal(st.good_copies, 2);
      assert.deepEqual(st.copies.map((c) => c.location).sort(), ['default', 'second']);
      for (const c of st.copies) assert.equal(md5(await readFile(pathOf(c.uri))), md5(bodies[i]!));
      const h = await fixityHistory(ctx(), st.file_id);
      assert.ok(h.events.some((e) => e.location === 'second' && e.kind === 'replicate' && e.ok), JSON.stringify(h.events));
    }
    assert.deepEqual(await filesBelowPolicy(ctx()), []);
    assert.deepEqual(await replicationLag(ctx()), { files: 0, bytes: 0, noGoodCopy: 0 });
    const metrics = (await req(`${s.url}/metrics`)).text;
    assert.match(metrics, /files_rest_replication_lag\{unit="files"\} 0/);
  });

  it('a location that cannot be written leaves uploads acknowledged with one copy and the lag reported; the lag drains when it is back', async () => {
    const b = await createBucket(s.files);
    await setBucketCopies(ctx(), b, 2);
    // The location's directory is gone (replaced by a file: nothing can be written under it).
    const second = join(s.dir, 'second');
    await rename(second, `${second}.away`);
    await writeFile(second, 'not a directory');
    try {
      for (let i = 0; i < 5; i++) assert.equal((await put(`${s.files}/${b}/down${i}`, `while second is down ${i}`)).status, 200);
      // The jobs fail and are retried later; meanwhile the files are below their policy.
      await waitFor(async () => (await filesBelowPolicy(ctx())).length === 5, 10_000);
      const lag = await replicationLag(ctx());
      assert.equal(lag.files, 5);
      assert.equal(lag.noGoodCopy, 0);
      for (let i = 0; i < 5; i++) assert.equal((await req(`${s.files}/${b}/down${i}`)).text, `while second is down ${i}`);
    } finally {
      await rm(second, { force: true });
      await rename(`${second}.away`, second);
    }
    // Retried jobs (or the periodic replicate-below-policy run) make the copies.
    await ctx().db.updateTable('tasks').set({ run_at: 0 }).where('name', '=', 'replicate-file').where('state', '=', 'queued').execute();
    s.server.core.queue.wake();
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0, 20_000);
  });

  it('FILES_REST_UPLOAD_WAIT_COPIES=2: the second copy exists when the upload is acknowledged', async () => {
    const w = await startTestServer({ FILES_REST_DEFAULT_COPIES: '2', FILES_REST_UPLOAD_WAIT_COPIES: '2', FILES_REST_WORKER: '0' });
    try {
      await createLocation(w.server.core.ctx, { name: 'other', uri: join(w.dir, 'other') });
      const b = await createBucket(w.files);
      assert.equal((await put(`${w.files}/${b}/now`, 'two copies before the answer')).status, 200);
      const st = await copiesOf(w.server.core.ctx.db, await resolveFileRef(w.server.core.ctx, `${b}/now`));
      assert.equal(st!.copies.length, 2);
      // No place for a third: an upload waiting for it would be refused; two are required here, so it is not.
      await rm(join(w.dir, 'other'), { recursive: true, force: true });
      await writeFile(join(w.dir, 'other'), 'not a directory');
      const r = await put(`${w.files}/${b}/later`, 'the second copy cannot be made');
      assert.equal(r.status, 503);
      assert.match(r.json.message, /only 1 of the 2 copies/);
      // The version is stored, with its first copy.
      assert.equal((await req(`${w.files}/${b}/later`)).text, 'the second copy cannot be made');
    } finally {
      await w.close();
    }
  });
});

/** Damages a stored file: `delete`, `truncate` (to half) or `flip` (its first bytes inverted). */
async function damage(path: string, how: 'delete' | 'truncate' | 'flip'): Promise<void> {
  if (how === 'delete') return unlink(path);
  if (how === 'truncate') return truncate(path, Math.floor((await readFile(path)).length / 2));
  const b = await readFile(path);
  for (let i = 0; i < Math.min(16, b.length); i++) b[i] = b[i]! ^ 0xff;
  await writeFile(path, b);
}

describe('Reads survive a lost or damaged copy; the check repairs every copy', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_DEFAULT_COPIES: '2', FILES_REST_MIGRATION_GRACE: '0', FILES_REST_CHECK_DOWNLOADS: 'all', FILES_REST_CHECKSUM_VERIFY_INTERVAL: '86400' });
    await createLocation(s.server.core.ctx, { name: 'second', uri: join(s.dir, 'second') });
  });
  after(() => s.close());
  const ctx = () => s.server.core.ctx;

  it('acceptance: one copy of each of 100 files destroyed or corrupted while a client downloads them: no failed or wrong download; the next check repairs every copy; the history shows it', async () => {
    const b = await createBucket(s.files);
    const bodies: string[] = [];
    for (let i = 0; i < 100; i++) {
      bodies.push(`file ${i} of the acceptance test `.repeat(20 + (i % 7) * 50));
      assert.equal((await put(`${s.files}/${b}/a${i}`, bodies[i]!)).status, 200);
    }
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0 && (await idle(s)), 30_000);
    const ids: string[] = [];
    for (let i = 0; i < 100; i++) ids.push(await resolveFileRef(ctx(), `${b}/a${i}`));

    let stop = false;
    let downloads = 0;
    const failures: string[] = [];
    const client = (async () => {
      while (!stop) {
        const i = downloads % 100;
        const r = await req(`${s.files}/${b}/a${i}`);
        if (r.status !== 200 || r.text !== bodies[i]) failures.push(`a${i}: ${r.status} ${r.text.length} bytes`);
        downloads++;
      }
    })();
    try {
      // One copy of each, all in the location of the first copies (the one reads try first).
      const kinds = ['delete', 'truncate', 'flip'] as const;
      for (let i = 0; i < 100; i++) {
        const first = (await copiesOf(ctx().db, ids[i]!))!.copies.find((c) => c.primary)!;
        assert.equal(first.location, 'default');
        await damage(pathOf(first.uri), kinds[i % 3]!);
      }
      while (downloads < 300) await new Promise((r) => setTimeout(r, 20));
    } finally {
      stop = true;
      await client;
    }
    assert.deepEqual(failures, []);
    // The next check of every file: each copy is checked; those the reads did not already find are repaired.
    for (const id of ids) await verifyFile(ctx(), id);
    await waitFor(() => idle(s), 30_000);
    for (let i = 0; i < 100; i++) {
      const r = await verifyFile(ctx(), ids[i]!);
      assert.equal(r.ok, true, `a${i}: ${r.reason}`);
      const st = await copiesOf(ctx().db, ids[i]!);
      assert.deepEqual(st!.copies.map((c) => c.location).sort(), ['default', 'second']);
      for (const c of st!.copies) assert.equal(await readFile(pathOf(c.uri), 'utf8'), bodies[i]);
      const h = await fixityHistory(ctx(), ids[i]!);
      const atDefault = h.events.filter((e) => e.location === 'default');
      assert.ok(atDefault.some((e) => e.kind === 'failure' && !e.ok), `a${i}: no failure recorded`);
      assert.ok(atDefault.some((e) => e.kind === 'repair' && e.ok), `a${i}: no repair recorded`);
    }
    assert.deepEqual(await replicationLag(ctx()), { files: 0, bytes: 0, noGoodCopy: 0 });
    // No repair left behind a failed task.
    const failed = await ctx().db.selectFrom('tasks').select(['name', 'last_error']).where('state', '=', 'failed').execute();
    assert.deepEqual(failed, []);
  });

  it('a large file whose first copy is corrupt: the download is broken off short, never complete-looking; the next one is served from the good copy', async () => {
    const b = await createBucket(s.files);
    const body = Buffer.alloc(300 * 1024, 'large file content ');
    assert.equal((await put(`${s.files}/${b}/large`, body)).status, 200);
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0 && (await idle(s)), 20_000);
    const id = await resolveFileRef(ctx(), `${b}/large`);
    const first = (await copiesOf(ctx().db, id))!.copies.find((c) => c.primary)!;
    await damage(pathOf(first.uri), 'flip');
    const broken = await fetch(`${s.files}/${b}/large`).then(
      async (r) => ({ ok: true, bytes: (await r.arrayBuffer()).byteLength }),
      (e: Error) => ({ ok: false, error: e.message }),
    ).catch((e: Error) => ({ ok: false, error: e.message }));
    assert.equal(broken.ok, false, 'the corrupt copy must not produce a complete-looking body');
    const next = await req(`${s.files}/${b}/large`);
    assert.equal(next.status, 200);
    assert.equal(md5(Buffer.from(next.text)), md5(body));
    await waitFor(async () => (await copiesOf(ctx().db, id))!.copies.every((c) => c.lastCheck !== false) && (await idle(s)), 20_000);
  });

  it('a file with no good copy left is reported (lag metric, below-policy, failed repair task) and, with FILES_REST_SERVE_CORRUPTED_FILES=0, not served', async () => {
    const b = await createBucket(s.files);
    assert.equal((await put(`${s.files}/${b}/doomed`, 'every copy of this will be damaged')).status, 200);
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0 && (await idle(s)), 20_000);
    const id = await resolveFileRef(ctx(), `${b}/doomed`);
    for (const c of (await copiesOf(ctx().db, id))!.copies) await damage(pathOf(c.uri), 'flip');
    const r = await verifyFile(ctx(), id);
    assert.equal(r.ok, false);
    await waitFor(async () => (await ctx().db.selectFrom('tasks').select('id').where('name', '=', 'repair-copy').where('state', '=', 'failed').execute()).length > 0, 20_000);
    const below = await filesBelowPolicy(ctx());
    assert.deepEqual(below.map((x) => [x.file_id, x.good]), [[id, 0]]);
    assert.equal((await replicationLag(ctx())).noGoodCopy, 1);
    assert.match((await req(`${s.url}/metrics`)).text, /files_rest_files_without_good_copy 1/);
    const strict = { ...ctx(), config: { ...ctx().config, serveCorruptedFiles: false } };
    const { openContent, servableFile } = await import('../src/domain/reads.js');
    const { findHead } = await import('../src/domain/objects.js');
    const head = (await findHead(ctx().db, b, 'doomed'))!;
    assert.throws(() => servableFile(strict, head), /integrity check/);
    // Served as stored under the default FILES_REST_SERVE_CORRUPTED_FILES=1.
    const c = await openContent(ctx(), servableFile(ctx(), head), null);
    assert.equal(c.kind, 'buffer');
  });
});

describe('Migration, location removal and the REST fixity view', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_MIGRATION_GRACE: '0' });
    await createLocation(s.server.core.ctx, { name: 'second', uri: join(s.dir, 'second') });
  });
  after(() => s.close());
  const ctx = () => s.server.core.ctx;

  it('migrating keeps every copy; removing a location is refused while it holds the only good copy of a file, and otherwise hands its copies on', async () => {
    const b = await createBucket(s.files);
    await setBucketCopies(ctx(), b, 2);
    for (let i = 0; i < 5; i++) assert.equal((await put(`${s.files}/${b}/m${i}`, `migrated ${i}`)).status, 200);
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0 && (await idle(s)), 20_000);
    await createLocation(ctx(), { name: 'third', uri: join(s.dir, 'third') });
    // Move every first copy to third: the copies in second stay, nothing drops below 2.
    assert.equal(await queueMigration(ctx(), 'third', { bucketId: b }), 5);
    await waitFor(async () => (await migrationStatus(ctx())).queued + (await migrationStatus(ctx())).running === 0, 20_000);
    for (let i = 0; i < 5; i++) {
      const st = await fileStatus(ctx(), await resolveFileRef(ctx(), `${b}/m${i}`));
      assert.equal(st.good_copies, 2, JSON.stringify(st));
      assert.deepEqual(st.copies.map((c) => c.location).sort(), ['second', 'third']);
      assert.equal((await req(`${s.files}/${b}/m${i}`)).text, `migrated ${i}`);
    }
    // A file whose only copy is in second: removal refused.
    const lone = await createBucket(s.files);
    await setBucketProperties(ctx(), lone, { locationName: 'second' });
    assert.equal((await put(`${s.files}/${lone}/only`, 'only copy in second')).status, 200);
    await assert.rejects(removeLocation(ctx(), 'second'), (e: Error) => /default location/.test(e.message));
    await setBucketProperties(ctx(), lone, { locationName: 'third' });
    await assert.rejects(removeLocation(ctx(), 'second'), (e: Error) => /only good copy of 1 file/.test(e.message));
    await hardDelete(s, lone, 'only');
    // Now every copy in second has a good copy elsewhere: removed; the policy is made good again in default.
    assert.equal(await removeLocation(ctx(), 'second'), 5);
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0 && (await idle(s)), 20_000);
    for (let i = 0; i < 5; i++) {
      const st = await fileStatus(ctx(), await resolveFileRef(ctx(), `${b}/m${i}`));
      assert.deepEqual(st.copies.map((c) => c.location).sort(), ['default', 'third']);
    }
  });

  it('a hard delete removes every copy of the file', async () => {
    const b = await createBucket(s.files);
    await setBucketCopies(ctx(), b, 2);
    const v = (await put(`${s.files}/${b}/gone`, 'deleted with its copies')).json;
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0 && (await idle(s)), 20_000);
    const paths = (await copiesOf(ctx().db, await resolveFileRef(ctx(), `${b}/gone`)))!.copies.map((c) => pathOf(c.uri));
    assert.equal(paths.length, 2);
    assert.equal((await req(`${s.files}/${b}/gone?versionId=${v.version_id}`, { method: 'DELETE' })).status, 204);
    await waitFor(async () => {
      const left = await Promise.all(paths.map((p) => readFile(p).then(() => true, () => false)));
      return left.every((x) => !x);
    }, 20_000);
    assert.equal((await ctx().db.selectFrom('file_copies').select('file_id').where('uri', 'in', paths.map((p) => `file://${p}`).concat(paths)).execute()).length, 0);
  });

  it('GET ?fixity: the copies and the fixity history of a version', async () => {
    const b = await createBucket(s.files);
    await setBucketCopies(ctx(), b, 2);
    const v1 = (await put(`${s.files}/${b}/f`, 'first version')).json;
    assert.equal((await put(`${s.files}/${b}/f`, 'second version')).status, 200);
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0 && (await idle(s)), 20_000);
    await verifyFile(ctx(), await resolveFileRef(ctx(), `${b}/f`));
    const head = await req(`${s.files}/${b}/f?fixity`);
    assert.equal(head.status, 200);
    assert.equal(head.json.required_copies, 2);
    assert.equal(head.json.good_copies, 2);
    assert.equal(head.json.copies.length, 2);
    assert.equal(head.json.copies[0].uri, undefined);
    assert.deepEqual(head.json.events.map((e: { kind: string }) => e.kind).sort(), ['check', 'check', 'replicate']);
    const old = await req(`${s.files}/${b}/f?fixity&versionId=${v1.version_id}`);
    assert.equal(old.status, 200);
    assert.equal(old.json.version_id, v1.version_id);
    assert.deepEqual(old.json.events.map((e: { kind: string }) => e.kind), ['replicate']);
    // Old history is summarised, not dropped.
    assert.ok((await summariseFixity(ctx(), { olderThanDays: 0 })) >= 4);
    const after = await req(`${s.files}/${b}/f?fixity`);
    assert.deepEqual(after.json.events, []);
    assert.deepEqual(after.json.summary.map((x: { kind: string; count: number }) => [x.kind, x.count]).sort(), [['check', 1], ['check', 1], ['replicate', 1]]);
  });
});

async function hardDelete(s: TestServer, bucket: string, key: string): Promise<void> {
  const versions = await s.server.core.ctx.db.selectFrom('object_versions').select('version_id').where('bucket_id', '=', bucket).where('key', '=', key).execute();
  for (const v of versions) assert.equal((await req(`${s.files}/${bucket}/${key}?versionId=${v.version_id}`, { method: 'DELETE' })).status, 204);
}

describe('kill -9 of the worker during replication and repair', () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void>;
  let core: Core | null = null;
  const procs: ServerProcess[] = [];
  before(async () => {
    // Copies throttled so that the kill lands mid-copy; short leases so a killed claim is taken over quickly.
    const e = await processEnv({ FILES_REST_DEFAULT_COPIES: '2', FILES_REST_WORKER: '0', FILES_REST_TASK_LEASE: '2', FILES_REST_MIGRATION_BYTES_PER_SECOND: '1048576', FILES_REST_MIGRATION_GRACE: '0' });
    env = e.env;
    dir = e.dir;
    drop = e.drop;
  });
  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    await core?.close();
    await drop();
    await rm(dir, { recursive: true, force: true });
  });
  async function start(command: 'serve' | 'worker') {
    const p = await spawnFilesRest(command, env);
    procs.push(p);
    return p;
  }
  async function settled(c: Core): Promise<boolean> {
    const open = await c.ctx.db.selectFrom('tasks').select('id').where('name', 'in', ['replicate-file', 'repair-copy']).where('state', 'in', ['queued', 'running']).execute();
    return open.length === 0;
  }

  it('after a restart every file reaches its policy, no task is stuck or failed, and each location holds one copy of each file', async () => {
    const server = await start('serve');
    const cli = await runCli(['location', 'create', 'second', join(dir, 'second')], env);
    assert.equal(cli.code, 0, cli.stderr);
    const b = await createBucket(server.files);
    const bodies: Buffer[] = [];
    for (let i = 0; i < 12; i++) {
      bodies.push(Buffer.alloc(256 * 1024, `crash ${i} `));
      assert.equal((await put(`${server.files}/${b}/c${i}`, bodies[i]!)).status, 200);
    }
    core = await openCore(loadConfig({ ...env, LOG_LEVEL: 'silent' }));
    const c = core;
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await resolveFileRef(c.ctx, `${b}/c${i}`));

    // Replication, killed mid-copy, then a new worker.
    let worker = await start('worker');
    await waitFor(async () => (await c.ctx.db.selectFrom('file_copies').select('file_id').execute()).length >= 1, 20_000, 20);
    await worker.kill('SIGKILL');
    assert.ok((await filesBelowPolicy(c.ctx)).length > 0, 'the kill came after the replication finished');
    worker = await start('worker');
    await waitFor(async () => (await filesBelowPolicy(c.ctx)).length === 0 && (await settled(c)), 60_000, 100);

    // Repair, killed mid-copy: every first copy damaged, the checks queue repairs.
    for (const id of ids) {
      const first = (await copiesOf(c.ctx.db, id))!.copies.find((x) => x.primary)!;
      await damage(pathOf(first.uri), 'flip');
    }
    await worker.kill('SIGKILL');
    for (const id of ids) assert.equal((await verifyFile(c.ctx, id)).ok, false);
    worker = await start('worker');
    await waitFor(async () => (await c.ctx.db.selectFrom('fixity_events').select('id').where('kind', '=', 'repair').execute()).length >= 1, 20_000, 20);
    await worker.kill('SIGKILL');
    worker = await start('worker');
    await waitFor(async () => (await settled(c)) && (await filesBelowPolicy(c.ctx)).length === 0, 60_000, 100);

    for (let i = 0; i < 12; i++) {
      const r = await verifyFile(c.ctx, ids[i]!);
      assert.equal(r.ok, true, `c${i}: ${r.reason}`);
      const st = (await copiesOf(c.ctx.db, ids[i]!))!;
      assert.deepEqual(st.copies.map((x) => x.location).sort(), ['default', 'second']);
      for (const x of st.copies) assert.equal(md5(await readFile(pathOf(x.uri))), md5(bodies[i]!));
      assert.equal((await req(`${server.files}/${b}/c${i}`)).text, bodies[i]!.toString());
    }
    const failed = await c.ctx.db.selectFrom('tasks').select(['name', 'last_error']).where('state', '=', 'failed').execute();
    assert.deepEqual(failed, []);
    // What a killed copy left behind is named by no row (no reader sees it): only the sweep's business.
    const report = await reconcileStorage(c.ctx, { dryRun: true, graceSeconds: 0 });
    const rows = new Set([
      ...(await c.ctx.db.selectFrom('files').select('uri').execute()).map((r) => r.uri),
      ...(await c.ctx.db.selectFrom('file_copies').select('uri').execute()).map((r) => r.uri),
    ]);
    for (const o of report.orphans) assert.ok(!rows.has(o.uri));
    assert.deepEqual(report.missing, []);

    // The admin commands show the same.
    const status = await runCli(['file', 'status', `${b}/c0`, '--json'], env);
    assert.equal(status.code, 0, status.stderr);
    assert.equal(JSON.parse(status.stdout).good_copies, 2);
    const fixity = await runCli(['file', 'fixity', ids[0]!, '--json'], env);
    assert.equal(fixity.code, 0, fixity.stderr);
    const kinds = (JSON.parse(fixity.stdout).events as { kind: string }[]).map((e) => e.kind);
    for (const k of ['replicate', 'failure', 'repair', 'check']) assert.ok(kinds.includes(k), `${k} missing from ${kinds.join(',')}`);
    const below = await runCli(['file', 'below-policy', '--json'], env);
    assert.equal(below.code, 0, below.stderr);
    assert.deepEqual(JSON.parse(below.stdout).files, []);
    const raise = await runCli(['bucket', 'set-copies', b, '3', '--json'], env);
    assert.equal(raise.code, 0, raise.stderr);
    assert.equal(JSON.parse(raise.stdout).queued, 12);
    const lag = await runCli(['file', 'below-policy'], env);
    assert.match(lag.stdout, /2\/3 good/);
  });
});
