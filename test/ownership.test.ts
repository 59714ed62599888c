import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, rm, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import pino from 'pino';
import { loadConfig } from '../src/config.js';
import { openCore, type Core } from '../src/service.js';
import { createLocation } from '../src/domain/locations.js';
import { reconcileStorage } from '../src/domain/reconcile.js';
import { databaseId, OWNER_MARKER } from '../src/domain/location-owner.js';
import { isAppError } from '../src/errors.js';
import { newId } from '../src/util/ids.js';
import { nowMicros } from '../src/util/time.js';
import { startTestServer, storedFiles, testEnvironment, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { createBucket, put, req } from './support/http.js';

// These tests read, damage or count the files of uploads by path: small uploads too are files here.
storeSmallObjectsAsFiles();

/** A second, empty database of the run's kind (SQLite file or PostgreSQL database), opened as `serve` would. */
async function secondCore(extra: Record<string, string> = {}): Promise<{ core: Core; env: Record<string, string>; close(): Promise<void> }> {
  const e = await testEnvironment('files-rest-owner-');
  const env = { ...e.env, LOG_LEVEL: 'silent', FILES_REST_AUTO_LOCATION: '0', ...extra };
  const core = await openCore(loadConfig(env), pino({ level: 'silent' }));
  return {
    core,
    env,
    async close() {
      await core.close();
      await e.drop();
      await rm(e.dir, { recursive: true, force: true });
    },
  };
}

describe('Location ownership: two databases sharing a data directory', () => {
  let t: TestServer;
  let fileUrl: string;
  before(async () => {
    t = await startTestServer({ FILES_REST_STORAGE_FACTORY: 'fs', FILES_REST_AUTO_LOCATION: '1' });
    const b = await createBucket(t.files);
    fileUrl = `${t.files}/${b}/kept.txt`;
    assert.equal((await put(fileUrl, 'the first database owns this')).status, 200);
  });
  after(async () => {
    await t?.close();
  });

  it('the default location gets a marker naming its database', async () => {
    const marker = JSON.parse(await readFile(join(t.config.dataDir, OWNER_MARKER), 'utf8'));
    assert.equal(marker.database_id, await databaseId(t.server.core.ctx.db));
    assert.equal((await storedFiles(t)).length, 1, 'the marker is not a stored file');
  });

  it("a second database does not start with its default location in the first one's directory", async () => {
    const other = await testEnvironment('files-rest-owner-');
    try {
      await assert.rejects(
        startTestServer({ DATABASE_URL: other.env.DATABASE_URL!, FILES_REST_DATA_DIR: t.config.dataDir, FILES_REST_STORAGE_FACTORY: 'fs', FILES_REST_AUTO_LOCATION: '1' }),
        (e: Error) => isAppError(e, 'LOCATION_OWNED_ELSEWHERE') && /FILES_REST_DATA_DIR/.test(e.message) && /DATABASE_URL/.test(e.message),
      );
    } finally {
      await other.drop();
      await rm(other.dir, { recursive: true, force: true });
    }
    assert.equal((await req(fileUrl)).status, 200);
  });

  it("location create in another database's directory is refused", async () => {
    const two = await secondCore();
    try {
      await assert.rejects(createLocation(two.core.ctx, { name: 'shared', uri: t.config.dataDir }), (e) => isAppError(e, 'LOCATION_OWNED_ELSEWHERE'));
      assert.deepEqual(await two.core.ctx.db.selectFrom('locations').select('name').execute(), []);
      // A directory of its own is fine.
      await createLocation(two.core.ctx, { name: 'own', uri: join(t.dir, 'second-db-data') });
    } finally {
      await two.close();
    }
  });

  it("reconcile and the sweep never delete files of storage that is not provably theirs", async () => {
    const two = await secondCore();
    try {
      // An installation from before markers: the second database already has a location row there.
      const now = nowMicros();
      await two.core.ctx.db.insertInto('locations').values({ id: newId(), name: 'shared', uri: t.config.dataDir, is_default: 1, created: now, updated: now }).execute();
      let r = await reconcileStorage(two.core.ctx, { dryRun: true, graceSeconds: 0 });
      assert.deepEqual(r.orphans, []);
      assert.equal(r.skipped.length, 1);
      assert.match(r.skipped[0]!.reason, /another database/);
      r = await reconcileStorage(two.core.ctx, { graceSeconds: 0 });
      assert.equal(r.deleted, 0);
      assert.equal((await storedFiles(t)).length, 1);
      assert.equal((await req(fileUrl)).status, 200);
    } finally {
      await two.close();
    }
  });

  it('a location without a marker is not swept, and is adopted by the first server of its database to start', async () => {
    const markerPath = join(t.config.dataDir, OWNER_MARKER);
    await unlink(markerPath);
    let r = await reconcileStorage(t.server.core.ctx, { graceSeconds: 0 });
    assert.deepEqual(r.orphans, []);
    assert.match(r.skipped[0]?.reason ?? '', /no owner marker/);
    // Another node of the same database starts: it adopts the location.
    const node = await startTestServer({ DATABASE_URL: t.databaseUrl, FILES_REST_DATA_DIR: t.config.dataDir, FILES_REST_STORAGE_FACTORY: 'fs' });
    await node.close();
    const marker = JSON.parse(await readFile(markerPath, 'utf8'));
    assert.equal(marker.database_id, await databaseId(t.server.core.ctx.db));
    r = await reconcileStorage(t.server.core.ctx, { dryRun: true, graceSeconds: 0 });
    assert.deepEqual(r.skipped, []);
    assert.deepEqual(r.orphans, [], 'the marker itself is no orphan');
    assert.equal((await req(fileUrl)).status, 200);
  });
});

describe('Location ownership on S3: a marker object under the prefix', { skip: process.env.TEST_SKIP_S3 === '1' }, () => {
  it("a second database cannot create a location at the first one's prefix", async () => {
    const { startTestS3 } = await import('./support/s3.js');
    const s3 = await startTestS3();
    const one = await secondCore({ ...s3.env, FILES_REST_STORAGE_FACTORY: 's3' });
    const two = await secondCore({ ...s3.env, FILES_REST_STORAGE_FACTORY: 's3' });
    try {
      await s3.createBucket('owners');
      await createLocation(one.core.ctx, { name: 'store', uri: 's3://owners/data' });
      const b = one.core.ctx.storage.forUri('s3://owners/data');
      const listed: string[] = [];
      for await (const f of b.list!('s3://owners/data')) listed.push(f.uri);
      assert.deepEqual(listed, [`s3://owners/data/${OWNER_MARKER}`]);
      await assert.rejects(createLocation(two.core.ctx, { name: 'store', uri: 's3://owners/data' }), (e) => isAppError(e, 'LOCATION_OWNED_ELSEWHERE'));
      await createLocation(two.core.ctx, { name: 'store', uri: 's3://owners/other' });
      const r = await reconcileStorage(one.core.ctx, { dryRun: true, graceSeconds: 0 });
      assert.deepEqual([r.orphans, r.skipped], [[], []]);
    } finally {
      await one.close();
      await two.close();
      await s3.close();
    }
  });
});
