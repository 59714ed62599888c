// Small objects kept in the database (FILES_REST_INLINE_MAX_SIZE, storage/inline): written in the
// upload's own transaction, read, versioned, checked, deleted, reconciled and migrated like files.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileRemovalsSettled, startTestServer, storedFiles, type TestServer } from './support/server.js';
import { createBucket, md5, put, putAndDisconnect, req, waitFor } from './support/http.js';
import { setBucketProperties } from '../src/domain/buckets.js';
import { reconcileStorage } from '../src/domain/reconcile.js';
import { verifyFile } from '../src/domain/integrity.js';
import { createLocation } from '../src/domain/locations.js';
import { migrateFile } from '../src/domain/migration.js';
import { DEFAULT_INLINE_MAX_SIZE } from '../src/config.js';
import { bytesReadWith, findHeadInLiveBucket, findLiveBucketWithHead } from '../src/domain/objects.js';

const MAX = 4096;

describe('Small objects in the database (FILES_REST_INLINE_MAX_SIZE)', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_INLINE_MAX_SIZE: String(MAX), FILES_REST_MIGRATION_GRACE: '0' });
  });
  after(() => s.close());

  const db = () => s.server.core.ctx.db;
  const inlineRows = async () => (await db().selectFrom('inline_files').select(['uri', 'data']).execute()).map((r) => ({ uri: r.uri, data: Buffer.from(r.data as Uint8Array) }));
  const fileOf = async (bucket: string, key: string) =>
    db()
      .selectFrom('object_versions')
      .innerJoin('files', 'files.id', 'object_versions.file_id')
      .select(['files.id', 'files.uri', 'files.location_id', 'files.size'])
      .where('object_versions.bucket_id', '=', bucket)
      .where('object_versions.key', '=', key)
      .where('object_versions.is_head', '=', 1)
      .executeTakeFirstOrThrow();
  const bucketSize = async (id: string) => (await req(`${s.files}/${id}`)).json.size as number;

  it('the default keeps uploads of up to 64 KiB in the database', () => {
    assert.equal(DEFAULT_INLINE_MAX_SIZE, 64 * 1024);
  });

  it('an upload of at most the limit is a row in the database, not a file; it reads back whole, ranged and by version', async () => {
    const bucket = await createBucket(s.files);
    const locationFiles = async () => (await storedFiles(s)).filter((u) => !u.startsWith('inline:'));
    const filesBefore = await locationFiles();
    const v1 = randomBytes(MAX);
    const v2 = Buffer.from('second version\n');
    const r1 = await put(`${s.files}/${bucket}/small.bin`, v1);
    assert.equal(r1.status, 200);
    assert.equal(r1.json.checksum, `md5:${md5(v1)}`);
    const r2 = await put(`${s.files}/${bucket}/small.bin`, v2);
    assert.equal(r2.status, 200);
    assert.deepEqual(await locationFiles(), filesBefore, 'no file was written to the location');
    const f = await fileOf(bucket, 'small.bin');
    assert.match(f.uri!, /^inline:/);
    // A row kept in the database has a time-ordered id (UUIDv7), as its version has.
    assert.match(f.uri!, /^inline:[0-9a-f]{8}-[0-9a-f]{4}-7/);
    assert.match(String(r2.json.version_id), /^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    assert.notEqual(f.location_id, null, 'the file instance belongs to the bucket\'s location');
    const rows = await inlineRows();
    assert.ok(rows.some((r) => r.uri === f.uri && r.data.equals(v2)));

    const whole = await fetch(`${s.files}/${bucket}/small.bin`);
    assert.equal(whole.status, 200);
    assert.equal(whole.headers.get('content-length'), String(v2.length));
    assert.deepEqual(Buffer.from(await whole.arrayBuffer()), v2);
    const ranged = await fetch(`${s.files}/${bucket}/small.bin?versionId=${r1.json.version_id}`, { headers: { range: 'bytes=100-199' } });
    assert.equal(ranged.status, 206);
    assert.deepEqual(Buffer.from(await ranged.arrayBuffer()), v1.subarray(100, 200));
    const head = await fetch(`${s.files}/${bucket}/small.bin`, { method: 'HEAD' });
    assert.equal(head.headers.get('content-length'), String(v2.length));
    assert.equal(await bucketSize(bucket), v1.length + v2.length);
  });

  it('a download of a small head reads its bytes with its version (one statement): the inline backend is not asked; a HEAD does not read them', async () => {
    const bucket = await createBucket(s.files);
    const body = randomBytes(1000);
    const v = await put(`${s.files}/${bucket}/with-version.bin`, body);
    const f = await fileOf(bucket, 'with-version.bin');
    const head = (await findHeadInLiveBucket(db(), bucket, 'with-version.bin', true))!;
    assert.ok(bytesReadWith(head.file!)?.data.equals(body), 'the bytes came with the version');
    // Their MD5 came with them, computed by the statement (a read thread, or PostgreSQL), not by the event loop.
    assert.equal(bytesReadWith(head.file!)?.md5, `md5:${md5(body)}`);
    assert.equal(bytesReadWith((await findHeadInLiveBucket(db(), bucket, 'with-version.bin'))!.file!), undefined, 'not without asking');
    const viaName = (await findLiveBucketWithHead(db(), { id: bucket }, 'with-version.bin', true))!;
    assert.ok(bytesReadWith(viaName.head!.version.file!)?.data.equals(body), 'the S3 door\'s lookup too');
    assert.equal(bytesReadWith(viaName.head!.version.file!)?.md5, `md5:${md5(body)}`);
    // The inline backend refuses to read for a while: the head is still served, whole and ranged.
    const backend = s.server.core.ctx.storage.forUri(f.uri!) as unknown as Record<'readRange' | 'open', unknown>;
    const saved = { readRange: backend.readRange, open: backend.open };
    const refuse = async () => {
      throw new Error('the inline backend was asked');
    };
    backend.readRange = refuse;
    backend.open = refuse;
    try {
      const whole = await fetch(`${s.files}/${bucket}/with-version.bin`);
      assert.equal(whole.status, 200);
      assert.deepEqual(Buffer.from(await whole.arrayBuffer()), body);
      const ranged = await fetch(`${s.files}/${bucket}/with-version.bin`, { headers: { range: 'bytes=10-19' } });
      assert.equal(ranged.status, 206);
      assert.deepEqual(Buffer.from(await ranged.arrayBuffer()), body.subarray(10, 20));
      // A version addressed by its id is read through the backend (here: refused, so not served).
      const byId = await req(`${s.files}/${bucket}/with-version.bin?versionId=${v.json.version_id}`);
      assert.notEqual(byId.status, 200);
    } finally {
      Object.assign(backend, saved);
    }
  });

  it('bytes changed in the database since the upload fail the MD5 computed with them: the failed read is recorded', async () => {
    const bucket = await createBucket(s.files);
    const body = randomBytes(2000);
    await put(`${s.files}/${bucket}/flipped.bin`, body);
    const f = await fileOf(bucket, 'flipped.bin');
    const flipped = Buffer.from(body);
    flipped[1000] = flipped[1000]! ^ 0xff;
    await db().updateTable('inline_files').set({ data: flipped }).where('uri', '=', f.uri!).execute();
    const head = (await findHeadInLiveBucket(db(), bucket, 'flipped.bin', true))!;
    assert.equal(bytesReadWith(head.file!)?.md5, `md5:${md5(flipped)}`);
    // The only copy: served as it is (FILES_REST_SERVE_CORRUPTED_FILES defaults to 1), and recorded as failed.
    const r = await fetch(`${s.files}/${bucket}/flipped.bin`);
    assert.equal(r.status, 200);
    assert.deepEqual(Buffer.from(await r.arrayBuffer()), flipped);
    const checked = await db().selectFrom('files').select(['last_check']).where('id', '=', f.id).executeTakeFirstOrThrow();
    assert.equal(checked.last_check, 0, 'the read recorded the copy as failing its check');
  });

  it('an empty upload is kept inline too, and reads back empty', async () => {
    const bucket = await createBucket(s.files);
    assert.equal((await put(`${s.files}/${bucket}/empty`, Buffer.alloc(0))).status, 200);
    assert.match((await fileOf(bucket, 'empty')).uri!, /^inline:/);
    const r = await fetch(`${s.files}/${bucket}/empty`);
    assert.equal(r.status, 200);
    assert.equal((await r.arrayBuffer()).byteLength, 0);
  });

  it('a larger upload is a file in the location', async () => {
    const bucket = await createBucket(s.files);
    const big = randomBytes(MAX + 1);
    assert.equal((await put(`${s.files}/${bucket}/big.bin`, big)).status, 200);
    const file = await fileOf(bucket, 'big.bin');
    assert.doesNotMatch(file.uri!, /^inline:/);
    // A file's path splits its id into directories: a random id (UUIDv4) spreads them.
    assert.match(String(file.id), /^[0-9a-f]{8}-[0-9a-f]{4}-4/);
    assert.deepEqual(Buffer.from(await (await fetch(`${s.files}/${bucket}/big.bin`)).arrayBuffer()), big);
  });

  it('a refused upload leaves no row and no size: wrong Content-MD5, quota exceeded, client gone', async () => {
    const bucket = await createBucket(s.files);
    await setBucketProperties(s.server.core.ctx, bucket, { quotaSize: 1000 });
    const before = (await inlineRows()).length;
    const wrong = await put(`${s.files}/${bucket}/a`, 'abc', { 'content-md5': Buffer.from(md5('abd'), 'hex').toString('base64') });
    assert.equal(wrong.status, 400);
    const over = await put(`${s.files}/${bucket}/b`, randomBytes(1001));
    assert.equal(over.status, 400);
    await putAndDisconnect(`${s.files}/${bucket}/c`, 2000, Buffer.alloc(500));
    // Two uploads that together pass the quota: the second is refused in its commit.
    assert.equal((await put(`${s.files}/${bucket}/d`, randomBytes(600))).status, 200);
    const second = await put(`${s.files}/${bucket}/e`, randomBytes(600));
    assert.ok(second.status >= 400 && second.status < 500, `refused: ${second.status}`);
    assert.equal((await inlineRows()).length, before + 1);
    assert.equal(await bucketSize(bucket), 600);
  });

  it('a hard-deleted version takes its row with it', async () => {
    const bucket = await createBucket(s.files);
    const v = (await put(`${s.files}/${bucket}/gone`, 'bytes to remove')).json;
    const { uri } = await fileOf(bucket, 'gone');
    assert.equal((await req(`${s.files}/${bucket}/gone?versionId=${v.version_id}`, { method: 'DELETE' })).status, 204);
    await fileRemovalsSettled(s);
    assert.ok(!(await inlineRows()).some((r) => r.uri === uri));
    assert.equal(await bucketSize(bucket), 0);
  });

  it('the integrity check verifies an inline file; reconciliation finds it present, and missing once its row is gone', async () => {
    const ctx = s.server.core.ctx;
    const bucket = await createBucket(s.files);
    await put(`${s.files}/${bucket}/checked`, 'verify me');
    const f = await fileOf(bucket, 'checked');
    assert.equal((await verifyFile(ctx, f.id)).ok, true);
    let report = await reconcileStorage(ctx, { dryRun: true });
    assert.ok(!report.missing.some((m) => m.file_id === f.id), 'an inline file is not reported missing');
    assert.ok(!report.orphans.some((o) => o.uri === f.uri));
    await db().deleteFrom('inline_files').where('uri', '=', f.uri!).execute();
    report = await reconcileStorage(ctx, { dryRun: true });
    assert.ok(report.missing.some((m) => m.file_id === f.id), 'a lost row is reported missing');
    assert.equal((await verifyFile(ctx, f.id)).ok, false);
    assert.equal((await fetch(`${s.files}/${bucket}/checked`)).status >= 500, true, 'a download of bytes that are gone fails on the server side, not as a 404');
  });

  it('migrating to another location writes the file there and removes the row', async () => {
    const ctx = s.server.core.ctx;
    const bucket = await createBucket(s.files);
    const body = randomBytes(3000);
    await put(`${s.files}/${bucket}/moving`, body);
    const before = await fileOf(bucket, 'moving');
    const dir = await mkdtemp(join(tmpdir(), 'files-rest-inline-target-'));
    try {
      await createLocation(ctx, { name: `target-${randomBytes(3).toString('hex')}`, uri: dir });
      const locations = await db().selectFrom('locations').select(['id', 'name', 'uri']).where('uri', 'like', `%${dir}%`).execute();
      const result = await migrateFile(ctx, before.id, locations[0]!.name);
      assert.ok(result.newFileId);
      const after = await fileOf(bucket, 'moving');
      assert.doesNotMatch(after.uri!, /^inline:/);
      assert.equal(after.location_id, locations[0]!.id);
      assert.deepEqual(Buffer.from(await (await fetch(`${s.files}/${bucket}/moving`)).arrayBuffer()), body);
      await waitFor(async () => !(await inlineRows()).some((r) => r.uri === before.uri), 15_000);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a location URI of the inline scheme is refused', async () => {
    await assert.rejects(createLocation(s.server.core.ctx, { name: 'not-a-location', uri: 'inline:x' }));
  });
});

describe('Inline files after the limit is lowered', () => {
  it('stay readable when FILES_REST_INLINE_MAX_SIZE is set to 0 (new small uploads then go to files)', async () => {
    const first = await startTestServer({ FILES_REST_INLINE_MAX_SIZE: '1024' });
    let bucket: string;
    try {
      bucket = await createBucket(first.files);
      assert.equal((await put(`${first.files}/${bucket}/kept`, 'kept inline')).status, 200);
    } finally {
      await first.server.stop();
    }
    const second = await startTestServer({ FILES_REST_INLINE_MAX_SIZE: '0', DATABASE_URL: first.databaseUrl, FILES_REST_DATA_DIR: join(first.dir, 'data') });
    try {
      assert.equal(await (await fetch(`${second.files}/${bucket}/kept`)).text(), 'kept inline');
      assert.equal((await put(`${second.files}/${bucket}/new`, 'a file now')).status, 200);
      const row = await second.server.core.ctx.db
        .selectFrom('object_versions')
        .innerJoin('files', 'files.id', 'object_versions.file_id')
        .select('files.uri')
        .where('object_versions.key', '=', 'new')
        .executeTakeFirstOrThrow();
      assert.doesNotMatch(row.uri!, /^inline:/);
    } finally {
      await second.close();
      await first.close();
    }
  });
});
