import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFile, mkdir, readFile, truncate, unlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestServer, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { createBucket, md5, put, req, waitFor } from './support/http.js';
import { filesUnder } from './support/fixtures.js';
import { startTestS3, type TestS3 } from './support/s3.js';
import { createLocation } from '../src/domain/locations.js';
import { queueMigration, migrationStatus } from '../src/domain/migration.js';
import { filesToVerify, scheduleVerification, verifyFile } from '../src/domain/integrity.js';
import { createWorker } from '../src/service.js';
import { reconcileStorage } from '../src/domain/reconcile.js';
import { snapshotBucket, syncBuckets } from '../src/domain/snapshots.js';
import { setBucketLocked } from '../src/domain/buckets.js';

// These tests read, damage or count the files of uploads by path: small uploads too are files here.
storeSmallObjectsAsFiles();

function du(dir: string): number {
  return Number(execFileSync('du', ['-sb', dir]).toString().split('\t')[0]);
}

describe('Locations and live migration', () => {
  let s: TestServer;
  let s3: TestS3;
  before(async () => {
    s3 = await startTestS3();
    await s3.createBucket('migration');
    s = await startTestServer({ ...s3.env, FILES_REST_STORAGE_FACTORY: 's3', FILES_REST_MIGRATION_GRACE: '0' });
  });
  after(async () => {
    await s.close();
    await s3.close();
  });
  const ctx = () => s.server.core.ctx;
  const pending = async () => {
    const st = await migrationStatus(ctx());
    return st.queued + st.running === 0;
  };

  it('migrates every file to another location, repoints versions, removes the old bytes, and new uploads go to the new location', async () => {
    await createLocation(ctx(), { name: 'second', uri: join(s.dir, 'second') });
    const b = await createBucket(s.files);
    const bodies = new Map<string, string>();
    for (let i = 0; i < 20; i++) {
      const k = `f${i}.txt`;
      bodies.set(k, `content ${i} `.repeat(i + 1));
      assert.equal((await put(`${s.files}/${b}/${k}`, bodies.get(k)!)).status, 200);
    }
    const v1 = (await put(`${s.files}/${b}/f0.txt`, 'older version')).json;
    assert.equal((await filesUnder(join(s.dir, 'data'))).length, 21);
    const n = await queueMigration(ctx(), 'second', { bucketId: b });
    assert.equal(n, 21);
    // an upload arriving now goes to the bucket's new default location
    assert.equal((await put(`${s.files}/${b}/during.txt`, 'during')).status, 200);
    await waitFor(pending, 30_000);
    await waitFor(async () => (await filesUnder(join(s.dir, 'data'))).length === 0, 15_000);
    assert.equal((await filesUnder(join(s.dir, 'second'))).length, 22);
    for (const [k, body] of bodies) {
      if (k === 'f0.txt') continue;
      assert.equal((await req(`${s.files}/${b}/${k}`)).text, body);
    }
    assert.equal((await req(`${s.files}/${b}/f0.txt?versionId=${v1.version_id}`)).text, 'older version');
    const st = await migrationStatus(ctx());
    assert.equal(st.failed, 0);
    assert.equal(st.locations.find((l) => l.name === 'second')!.files, 22);
    const listed = await req(`${s.files}/${b}`);
    // the size counts every stored version: all first versions, the second f0 and the upload made during the move
    assert.equal(listed.json.size, [...bodies.values()].reduce((x, v) => x + v.length, 0) + 'older version'.length + 'during'.length);
  });

  it('zero downtime: 200 files move from fs to S3 and back while a client downloads continuously', async () => {
    await createLocation(ctx(), { name: 'cloud', uri: 's3://migration/files' });
    await createLocation(ctx(), { name: 'disk', uri: join(s.dir, 'disk'), isDefault: true });
    const b = await createBucket(s.files);
    const expected: string[] = [];
    for (let i = 0; i < 200; i++) {
      expected.push(md5(`file number ${i} `.repeat(50)));
      assert.equal((await put(`${s.files}/${b}/k${i}`, `file number ${i} `.repeat(50))).status, 200);
    }
    let stop = false;
    let downloads = 0;
    const failures: string[] = [];
    const reader = (async () => {
      const deadline = Date.now() + 120_000;
      while (!stop && Date.now() < deadline) {
        const i = downloads % 200;
        const r = await req(`${s.files}/${b}/k${i}`);
        if (r.status !== 200 || md5(r.text) !== expected[i]) failures.push(`k${i}: ${r.status}`);
        downloads++;
      }
    })();
    try {
      assert.equal(await queueMigration(ctx(), 'cloud', { bucketId: b }), 200);
      await waitFor(pending, 60_000, 100);
      const inCloud = await ctx().db.selectFrom('files').innerJoin('locations', 'locations.id', 'files.location_id').select('files.id').where('locations.name', '=', 'cloud').execute();
      assert.equal(inCloud.length, 200);
      assert.equal(await queueMigration(ctx(), 'disk', { bucketId: b }), 200);
      await waitFor(pending, 60_000, 100);
    } finally {
      stop = true;
      await reader;
    }
    assert.deepEqual(failures, []);
    assert.ok(downloads >= 200, `only ${downloads} downloads ran`);
    assert.equal((await filesUnder(join(s.dir, 'disk'))).length, 200);
    assert.equal((await migrationStatus(ctx())).failed, 0);
  });
});

describe('Integrity checking and reconciliation', () => {
  let s: TestServer;
  before(async () => {
    // No in-process worker: its periodic integrity run would race the checks these tests make.
    s = await startTestServer({ FILES_REST_WORKER: '0' });
  });
  after(() => s.close());
  const ctx = () => s.server.core.ctx;
  const uriOf = async (bucket: string, key: string) =>
    (await ctx().db.selectFrom('object_versions').innerJoin('files', 'files.id', 'object_versions.file_id').select(['files.uri', 'files.id']).where('object_versions.bucket_id', '=', bucket).where('object_versions.key', '=', key).executeTakeFirstOrThrow());

  it('detects a flipped byte, a truncated file and a missing file; a good file passes; downloads still work', async () => {
    const b = await createBucket(s.files);
    for (const k of ['good', 'flipped', 'truncated', 'missing']) await put(`${s.files}/${b}/${k}`, `the content of ${k} `.repeat(20));
    const flipped = await uriOf(b, 'flipped');
    const bytes = await readFile(flipped.uri!);
    bytes[10] = bytes[10]! ^ 0xff;
    await writeFile(flipped.uri!, bytes);
    await truncate((await uriOf(b, 'truncated')).uri!, 5);
    await unlink((await uriOf(b, 'missing')).uri!);
    const due = await filesToVerify(ctx(), {});
    assert.ok(due.length >= 4);
    const results = new Map<string, boolean | null>();
    for (const k of ['good', 'flipped', 'truncated', 'missing']) results.set(k, (await verifyFile(ctx(), (await uriOf(b, k)).id)).ok);
    assert.deepEqual([...results], [['good', true], ['flipped', false], ['truncated', false], ['missing', false]]);
    const row = await ctx().db.selectFrom('files').selectAll().where('id', '=', flipped.id).executeTakeFirstOrThrow();
    assert.equal(row.last_check, 0);
    assert.ok(row.last_check_at);
    // still downloadable by default
    assert.equal((await req(`${s.files}/${b}/flipped`)).status, 200);
    assert.equal((await filesToVerify(ctx(), {})).some((f) => f.id === flipped.id), false, 'checked files are not "never checked"');
    assert.ok((await filesToVerify(ctx(), { olderThanDays: 0 })).some((f) => f.id === flipped.id));
  });

  it('the periodic task spreads checks and records results', async () => {
    const b = await createBucket(s.files);
    await put(`${s.files}/${b}/p`, 'periodic');
    const f = await uriOf(b, 'p');
    const queued = await scheduleVerification(ctx());
    assert.ok(queued >= 1);
    const worker = createWorker(s.server.core);
    worker.start();
    try {
      await waitFor(async () => (await ctx().db.selectFrom('files').select('last_check').where('id', '=', f.id).executeTakeFirstOrThrow()).last_check === 1, 15_000);
    } finally {
      await worker.stop(1000);
    }
  });

  it('FILES_REST_SERVE_CORRUPTED_FILES=0 refuses to serve a file that failed its check', async () => {
    const t = await startTestServer({ FILES_REST_SERVE_CORRUPTED_FILES: '0' });
    try {
      const b = await createBucket(t.files);
      await put(`${t.files}/${b}/x`, 'soon corrupted');
      const f = await t.server.core.ctx.db.selectFrom('files').select(['id', 'uri']).executeTakeFirstOrThrow();
      await appendFile(f.uri!, 'garbage');
      assert.equal((await verifyFile(t.server.core.ctx, f.id)).ok, false);
      const r = await req(`${t.files}/${b}/x`);
      assert.equal(r.status, 409);
      assert.equal(r.json.status, 409);
    } finally {
      await t.close();
    }
  });

  it('reconcile finds orphaned files and rows with missing bytes; --dry-run deletes nothing', async () => {
    const b = await createBucket(s.files);
    await put(`${s.files}/${b}/kept`, 'kept');
    await put(`${s.files}/${b}/lost`, 'lost');
    const lost = await uriOf(b, 'lost');
    await unlink(lost.uri!);
    const dataDir = s.config.dataDir;
    await mkdir(join(dataDir, 'ab', 'cd', 'orphan'), { recursive: true });
    const orphan = join(dataDir, 'ab', 'cd', 'orphan', 'data');
    const leftover = join(dataDir, 'ab', 'cd', 'orphan', 'data.1234.tmp');
    await writeFile(orphan, 'nobody knows me');
    await writeFile(leftover, 'interrupted');
    const old = new Date(Date.now() - 48 * 3600_000);
    await utimes(orphan, old, old);
    await utimes(leftover, old, old);
    const fresh = join(dataDir, 'ab', 'cd', 'orphan', 'data.5678.tmp');
    await writeFile(fresh, 'an upload in flight');
    const dry = await reconcileStorage(ctx(), { dryRun: true });
    assert.deepEqual(dry.orphans.map((o) => o.uri).sort(), [orphan, leftover].sort());
    assert.ok(dry.missing.some((m) => m.file_id === lost.id));
    assert.equal(dry.deleted, 0);
    assert.equal((await filesUnder(join(dataDir, 'ab', 'cd', 'orphan'))).length, 3);
    const real = await reconcileStorage(ctx(), {});
    assert.equal(real.deleted, 2);
    assert.deepEqual(await filesUnder(join(dataDir, 'ab', 'cd', 'orphan')), [fresh]);
    assert.equal((await req(`${s.files}/${b}/kept`)).text, 'kept');
  });
});

describe('Snapshots and sync', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());
  const ctx = () => s.server.core.ctx;

  it('a snapshot of a 1,000-object bucket adds no bytes on disk and shares every file', async () => {
    const b = await createBucket(s.files);
    await Promise.all(
      Array.from({ length: 10 }, async (_, w) => {
        for (let i = w; i < 1000; i += 10) await put(`${s.files}/${b}/obj-${String(i).padStart(4, '0')}`, `object ${i} `.repeat(10));
      }),
    );
    await put(`${s.files}/${b}/obj-0000`, 'a newer version');
    const before = du(s.config.dataDir);
    const snap = await snapshotBucket(ctx(), b);
    assert.equal(du(s.config.dataDir), before);
    const src = await req(`${s.files}/${b}?limit=10000`);
    const dst = await req(`${s.files}/${snap.id}?limit=10000`);
    assert.equal(dst.json.contents.length, 1000);
    assert.equal(dst.json.size, src.json.size - (await req(`${s.files}/${b}?versions&limit=10000`)).json.contents.filter((v: { is_head: boolean }) => !v.is_head).reduce((n: number, v: { size: number }) => n + v.size, 0));
    assert.equal((await req(`${s.files}/${snap.id}/obj-0000`)).text, 'a newer version');
    assert.equal((await req(`${s.files}/${snap.id}?versions`)).json.contents.length, 1000);
  });

  it('sync mirrors heads, deletions and (with deleteExtras) extras, and a second run changes nothing', async () => {
    const src = await createBucket(s.files);
    const dst = await createBucket(s.files);
    await put(`${s.files}/${src}/a`, 'A');
    await put(`${s.files}/${src}/b`, 'B');
    await put(`${s.files}/${src}/gone`, 'G');
    await put(`${s.files}/${dst}/b`, 'old B');
    await put(`${s.files}/${dst}/gone`, 'G in dst');
    await put(`${s.files}/${dst}/extra`, 'E');
    await req(`${s.files}/${src}/gone`, { method: 'DELETE' });
    const changes = await syncBuckets(ctx(), src, dst, { deleteExtras: true });
    assert.deepEqual(changes.map((c) => `${c.action}:${c.key}`).sort(), ['add:a', 'add:b', 'delete:extra', 'delete:gone']);
    assert.equal((await req(`${s.files}/${dst}/a`)).text, 'A');
    assert.equal((await req(`${s.files}/${dst}/b`)).text, 'B');
    assert.equal((await req(`${s.files}/${dst}/gone`)).status, 404);
    assert.equal((await req(`${s.files}/${dst}/extra`)).status, 404);
    assert.deepEqual(await syncBuckets(ctx(), src, dst, { deleteExtras: true }), []);
    await setBucketLocked(ctx(), dst, true);
    await assert.rejects(syncBuckets(ctx(), src, dst), (e: Error & { status?: number }) => e.status === 403);
  });
});
