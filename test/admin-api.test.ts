// The REST admin endpoints ({base}/admin: locations, migrations, tasks and their retry) under the
// token permission factory, and the integrity state (last_check_at, last_check) of version JSON.
// A failed task is made deterministically: a migration towards a location that does not exist yet
// fails; once the location is created, the retried task succeeds.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createToken } from '../src/auth/tokens.js';
import { createLocation } from '../src/domain/locations.js';
import { verifyFile } from '../src/domain/integrity.js';
import { getTask } from '../src/domain/tasks.js';
import { startTestServer, testStorage, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { put, req, waitFor } from './support/http.js';

// These tests read, damage or count the files of uploads by path: small uploads too are files here.
storeSmallObjectsAsFiles();

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

describe('REST admin endpoints', () => {
  let s: TestServer;
  let admin: string;
  let admin$: string;
  let bucket: string;

  const fileIdOf = async (versionId: string): Promise<string> => {
    const r = await s.server.core.ctx.db.selectFrom('object_versions').select('file_id').where('version_id', '=', versionId).executeTakeFirstOrThrow();
    return r.file_id!;
  };
  /** A migrate-file task towards `location`, tried once: fails while the location does not exist. */
  const failingMigration = async (fileId: string, location: string): Promise<number> => {
    const { ctx } = s.server.core;
    const id = await ctx.db.transaction().execute((tx) => ctx.queue.enqueue(tx, 'migrate-file', { fileId, location }, { maxAttempts: 1 }));
    ctx.queue.wake();
    await waitFor(async () => (await getTask(ctx.db, id)).state === 'failed', 20_000);
    return id;
  };

  before(async () => {
    s = await startTestServer({ FILES_REST_PERMISSION_FACTORY: 'token' });
    admin = (await createToken(s.server.core.ctx.db, {})).token;
    admin$ = `${s.url}/admin`;
    const r = await req(s.files, { method: 'POST', headers: auth(admin) });
    assert.equal(r.status, 200, r.text);
    bucket = r.json.id as string;
  });
  after(() => s.close());

  it('refuses a credential that may not administer: none 401, a bucket-scoped or location-update-less token 403, in JSON', async () => {
    const { db } = s.server.core.ctx;
    const scoped = (await createToken(db, { bucket })).token;
    const reader = (await createToken(db, { actions: ['bucket-read', 'object-read', 'bucket-update'] })).token;
    const paths: [string, string][] = [
      ['GET', ''], ['GET', '/locations'], ['GET', '/migrations'], ['GET', '/tasks'], ['GET', '/tasks/1'],
      ['POST', '/tasks/1/retry'], ['POST', '/tasks/failed/retry'],
    ];
    for (const [method, path] of paths) {
      const none = await req(`${admin$}${path}`, { method });
      assert.equal(none.status, 401, `${method} ${path}`);
      assert.equal(none.json.status, 401);
      for (const token of [scoped, reader]) {
        const r = await req(`${admin$}${path}`, { method, headers: auth(token) });
        assert.equal(r.status, 403, `${method} ${path}: ${r.text}`);
        assert.equal(r.json.status, 403);
        assert.match(r.json.message, /location-update/);
      }
    }
    const ok = await req(admin$, { headers: auth(admin) });
    assert.equal(ok.status, 200);
    assert.equal(ok.json.links.locations, `${admin$}/locations`);
    assert.equal(ok.json.links.failed_tasks, `${admin$}/tasks?state=failed`);
  });

  it('lists the locations with their kind, default flag, files and bytes', async () => {
    assert.equal((await put(`${s.files}/${bucket}/loc/a.txt`, 'hello', auth(admin))).status, 200);
    assert.equal((await put(`${s.files}/${bucket}/loc/b.txt`, 'world!!', auth(admin))).status, 200);
    const r = await req(`${admin$}/locations`, { headers: auth(admin) });
    assert.equal(r.status, 200, r.text);
    const [loc] = r.json.contents;
    assert.equal(r.json.contents.length, 1);
    assert.equal(loc.name, 'default');
    assert.equal(loc.default, true);
    assert.equal(loc.kind, testStorage());
    assert.ok(loc.files >= 2 && loc.bytes >= 12, JSON.stringify(loc));
    assert.equal(loc.migration, null);
    assert.deepEqual(Object.keys(loc).sort(), ['bytes', 'created', 'default', 'files', 'kind', 'migration', 'name', 'updated', 'uri']);
  });

  it('lists a failed task with its job, summary and error; retrying it (once its cause is gone) runs it again', async () => {
    const v = await put(`${s.files}/${bucket}/move-me.txt`, 'moving', auth(admin));
    assert.equal(v.status, 200);
    const fileId = await fileIdOf(v.json.version_id as string);
    const id = await failingMigration(fileId, 'archive');

    const failed = await req(`${admin$}/tasks?state=failed`, { headers: auth(admin) });
    assert.equal(failed.status, 200, failed.text);
    const t = failed.json.contents.find((x: { id: number }) => x.id === id);
    assert.ok(t, JSON.stringify(failed.json));
    assert.equal(t.name, 'migrate-file');
    assert.equal(t.state, 'failed');
    assert.equal(t.summary, `file ${fileId} → location archive`);
    assert.equal(t.attempts, 1);
    assert.equal(t.max_attempts, 1);
    assert.match(t.last_error, /archive/);
    assert.equal(t.links.retry, `${admin$}/tasks/${id}/retry`);
    assert.deepEqual((await req(`${admin$}/tasks/${id}`, { headers: auth(admin) })).json, t);

    // The migrations: one failed towards archive, none left.
    const m = await req(`${admin$}/migrations`, { headers: auth(admin) });
    assert.equal(m.status, 200);
    assert.equal(m.json.failed, 1);
    assert.deepEqual(m.json.targets, [{ location: 'archive', queued: 0, running: 0, done: 0, failed: 1, left: 0 }]);

    // Its cause goes (the location now exists); the retry queues it again and the worker runs it.
    await createLocation(s.server.core.ctx, { name: 'archive', uri: join(s.dir, 'archive') });
    const retried = await req(`${admin$}/tasks/${id}/retry`, { method: 'POST', headers: auth(admin) });
    assert.equal(retried.status, 200, retried.text);
    assert.equal(retried.json.id, id);
    assert.ok(['queued', 'running', 'done'].includes(retried.json.state), retried.json.state);
    assert.equal(retried.json.last_error, null);
    await waitFor(async () => (await getTask(s.server.core.ctx.db, id)).state === 'done', 20_000);
    assert.notEqual(await fileIdOf(v.json.version_id as string), fileId, 'the version now uses a copy in archive');
    assert.equal((await req(`${s.files}/${bucket}/move-me.txt`, { headers: auth(admin) })).text, 'moving');

    const locs = await req(`${admin$}/locations`, { headers: auth(admin) });
    const archive = locs.json.contents.find((l: { name: string }) => l.name === 'archive');
    assert.equal(archive.files, 1);
    assert.equal(archive.bytes, 6);
    assert.equal(archive.kind, 'fs');
    assert.deepEqual(archive.migration, { left: 0, queued: 0, running: 0, done: 1, failed: 0 });
    // A done task cannot be retried: 409.
    const again = await req(`${admin$}/tasks/${id}/retry`, { method: 'POST', headers: auth(admin) });
    assert.equal(again.status, 409);
    assert.equal(again.json.status, 409);
  });

  it('retries every failed task at once', async () => {
    const a = await put(`${s.files}/${bucket}/all-1.txt`, 'one', auth(admin));
    const b = await put(`${s.files}/${bucket}/all-2.txt`, 'two', auth(admin));
    const ids = [await failingMigration(await fileIdOf(a.json.version_id), 'cold'), await failingMigration(await fileIdOf(b.json.version_id), 'cold')];
    await createLocation(s.server.core.ctx, { name: 'cold', uri: join(s.dir, 'cold') });
    const r = await req(`${admin$}/tasks/failed/retry`, { method: 'POST', headers: auth(admin) });
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.queued >= 2, r.text);
    for (const id of ids) await waitFor(async () => (await getTask(s.server.core.ctx.db, id)).state === 'done', 20_000);
    const failed = await req(`${admin$}/tasks?state=failed`, { headers: auth(admin) });
    assert.ok(!failed.json.contents.some((t: { id: number }) => ids.includes(t.id)));
  });

  it('pages the task list newest first with links.next, filters by state, refuses a bad state or limit (422)', async () => {
    const all: number[] = [];
    let url: string | undefined = `${admin$}/tasks?limit=2`;
    let pages = 0;
    while (url) {
      const r = await req(url, { headers: auth(admin) });
      assert.equal(r.status, 200, r.text);
      assert.ok(r.json.contents.length <= 2);
      all.push(...r.json.contents.map((t: { id: number }) => t.id));
      url = r.json.links.next;
      pages++;
    }
    assert.ok(pages >= 2, 'several pages');
    assert.deepEqual(all, [...all].sort((x, y) => y - x), 'newest first');
    assert.equal(new Set(all).size, all.length, 'no task twice');
    const done = await req(`${admin$}/tasks?state=done`, { headers: auth(admin) });
    assert.ok(done.json.contents.length > 0);
    assert.ok(done.json.contents.every((t: { state: string; links: { retry?: string } }) => t.state === 'done' && t.links.retry === undefined));
    for (const q of ['state=broken', 'limit=0', 'limit=x', 'before=-1']) {
      const r = await req(`${admin$}/tasks?${q}`, { headers: auth(admin) });
      assert.equal(r.status, 422, q);
      assert.equal(r.json.status, 422);
    }
  });

  it('answers 404 in JSON for an unknown or malformed task id, and 405 for a method an endpoint has not', async () => {
    for (const path of ['/tasks/999999999', '/tasks/abc', '/tasks/0', '/tasks/1e3']) {
      const r = await req(`${admin$}${path}`, { headers: auth(admin) });
      assert.equal(r.status, 404, path);
      assert.equal(r.json.status, 404);
      const p = await req(`${admin$}${path}/retry`, { method: 'POST', headers: auth(admin) });
      assert.equal(p.status, 404, `${path}/retry`);
    }
    const d = await req(`${admin$}/tasks`, { method: 'DELETE', headers: auth(admin) });
    assert.equal(d.status, 405);
    assert.equal(d.headers.get('allow'), 'GET');
    assert.equal(d.json.status, 405);
    const g = await req(`${admin$}/tasks/1/retry`, { headers: auth(admin) });
    assert.equal(g.status, 405);
    assert.equal(g.headers.get('allow'), 'POST');
  });
});

describe('Integrity state in version JSON', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('shows last_check_at and last_check: null until checked, then "ok", then "failed" for a corrupted file', async () => {
    const b = (await req(s.files, { method: 'POST' })).json.id as string;
    const v = await put(`${s.files}/${b}/doc.txt`, 'integrity');
    assert.equal(v.status, 200);
    assert.equal(v.json.last_check, null);
    assert.equal(v.json.last_check_at, null);
    await req(`${s.files}/${b}/doc.txt`, { method: 'DELETE' });
    const listed = async () => (await req(`${s.files}/${b}?versions`)).json.contents as Record<string, unknown>[];
    let [marker, version] = await listed();
    assert.equal(marker!.delete_marker, true);
    assert.ok(!('last_check' in marker!) && !('last_check_at' in marker!), 'a delete marker has no integrity state');
    assert.equal(version!.last_check, null);
    assert.equal(version!.last_check_at, null);

    const { ctx } = s.server.core;
    const file = await ctx.db.selectFrom('object_versions').innerJoin('files', 'files.id', 'object_versions.file_id')
      .select(['files.id', 'files.uri']).where('version_id', '=', v.json.version_id).executeTakeFirstOrThrow();
    const before = Date.now();
    assert.equal((await verifyFile(ctx, file.id)).ok, true);
    [, version] = await listed();
    assert.equal(version!.last_check, 'ok');
    const at = Date.parse(version!.last_check_at as string);
    assert.ok(at >= before - 1000 && at <= Date.now() + 1000, String(version!.last_check_at));

    // The latest listing (a version with a file as head) carries it too.
    await put(`${s.files}/${b}/other.txt`, 'x');
    const latest = (await req(`${s.files}/${b}`)).json.contents as Record<string, unknown>[];
    assert.equal(latest.find((x) => x.key === 'other.txt')!.last_check, null);

    if (testStorage() === 'fs') {
      await writeFile(file.uri!, 'integrity but corrupted');
      assert.equal((await verifyFile(ctx, file.id)).ok, false);
      [, version] = await listed();
      assert.equal(version!.last_check, 'failed');
    }
  });
});
