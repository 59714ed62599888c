import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './support/server.js';
import { createBucket, put, req } from './support/http.js';
import { setBucketDeleted, setBucketLocked } from '../src/domain/buckets.js';

describe('Buckets', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  it('POST /files creates a bucket with exactly the reference fields', async () => {
    const r = await req(s.files, { method: 'POST' });
    assert.equal(r.status, 200);
    // The reference's keys, and public_read (issue 16: off by default).
    assert.deepEqual(Object.keys(r.json).sort(), ['created', 'id', 'links', 'locked', 'max_file_size', 'public_read', 'quota_size', 'size', 'updated']);
    assert.equal(r.json.public_read, false);
    assert.equal(r.json.size, 0);
    assert.equal(r.json.quota_size, null);
    assert.equal(r.json.max_file_size, null);
    assert.equal(r.json.locked, false);
    assert.match(r.json.created, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);
    assert.equal(r.json.links.self, `${s.files}/${r.json.id}`);
    assert.equal(r.json.links.versions, `${s.files}/${r.json.id}?versions`);
    assert.equal(r.json.links.uploads, `${s.files}/${r.json.id}?uploads`);
  });

  it('POST /files/ with a trailing slash creates a bucket too', async () => {
    const r = await req(`${s.files}/`, { method: 'POST' });
    assert.equal(r.status, 200);
    assert.ok(r.json.id);
  });

  it('DELETE /files is not allowed (405, JSON; GET lists the buckets since issue 16)', async () => {
    const r = await req(s.files, { method: 'DELETE' });
    assert.equal(r.status, 405);
    assert.match(r.headers.get('allow') ?? '', /GET, POST/);
    assert.equal(r.json.status, 405);
    assert.equal(typeof r.json.message, 'string');
  });

  it('HEAD on an existing bucket answers 200, on a missing one 404', async () => {
    const id = await createBucket(s.files);
    assert.equal((await req(`${s.files}/${id}`, { method: 'HEAD' })).status, 200);
    assert.equal((await req(`${s.files}/00000000-0000-4000-8000-000000000000`, { method: 'HEAD' })).status, 404);
    assert.equal((await req(`${s.files}/not-a-uuid`, { method: 'HEAD' })).status, 404);
  });

  it('GET on a malformed bucket id answers 404 JSON', async () => {
    const r = await req(`${s.files}/not-a-uuid`);
    assert.equal(r.status, 404);
    assert.equal(r.json.status, 404);
  });

  it('GET lists the latest version of every object, by key, with contents', async () => {
    const id = await createBucket(s.files);
    await put(`${s.files}/${id}/b.txt`, 'b1');
    await put(`${s.files}/${id}/a.txt`, 'a1');
    await put(`${s.files}/${id}/b.txt`, 'b2');
    const r = await req(`${s.files}/${id}`);
    assert.equal(r.status, 200);
    assert.equal(r.json.id, id);
    assert.equal(r.json.size, 6);
    assert.deepEqual(r.json.contents.map((c: { key: string }) => c.key), ['a.txt', 'b.txt']);
    assert.equal(r.json.contents[1].size, 2);
    assert.ok(r.json.contents.every((c: { is_head: boolean }) => c.is_head));
  });

  it('GET ?versions lists every version, newest first per key, with delete markers', async () => {
    const id = await createBucket(s.files);
    await put(`${s.files}/${id}/k`, 'one');
    await put(`${s.files}/${id}/k`, 'two');
    await req(`${s.files}/${id}/k`, { method: 'DELETE' });
    const r = await req(`${s.files}/${id}?versions`);
    assert.equal(r.status, 200);
    const c = r.json.contents;
    assert.equal(c.length, 3);
    assert.equal(c[0].delete_marker, true);
    assert.equal(c[0].is_head, true);
    assert.equal(c[1].size, 3);
    assert.equal(c[1].is_head, false);
    assert.equal(c[2].is_head, false);
    assert.ok(!('size' in c[0]) && !('checksum' in c[0]));
  });

  it('GET ?uploads lists multipart uploads (an empty array for a new bucket)', async () => {
    const id = await createBucket(s.files);
    const r = await req(`${s.files}/${id}?uploads`);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, []);
  });

  it('listings page with limit and a links.next cursor, and filter by prefix', async () => {
    const id = await createBucket(s.files);
    for (const k of ['a/1', 'a/2', 'a/3', 'b/1', 'c']) await put(`${s.files}/${id}/${k}`, k);
    const p1 = await req(`${s.files}/${id}?limit=2`);
    assert.deepEqual(p1.json.contents.map((c: { key: string }) => c.key), ['a/1', 'a/2']);
    assert.ok(p1.json.links.next);
    const p2 = await req(p1.json.links.next);
    assert.deepEqual(p2.json.contents.map((c: { key: string }) => c.key), ['a/3', 'b/1']);
    const p3 = await req(p2.json.links.next);
    assert.deepEqual(p3.json.contents.map((c: { key: string }) => c.key), ['c']);
    assert.equal(p3.json.links.next, undefined);
    const pre = await req(`${s.files}/${id}?prefix=a/`);
    assert.deepEqual(pre.json.contents.map((c: { key: string }) => c.key), ['a/1', 'a/2', 'a/3']);
    const v1 = await req(`${s.files}/${id}?versions&limit=4`);
    const v2 = await req(v1.json.links.next);
    assert.equal(v1.json.contents.length + v2.json.contents.length, 5);
    assert.equal((await req(`${s.files}/${id}?after=garbage`)).status, 422);
    assert.equal((await req(`${s.files}/${id}?limit=0`)).status, 422);
    assert.equal((await req(`${s.files}/${id}?limit=abc`)).status, 422);
  });

  it('every page size and prefix gives the same listing as one page: versions of one key split across pages included', async () => {
    const id = await createBucket(s.files);
    for (const k of ['a/1', 'a/2', 'a/2', 'a/2', 'a/3', 'ab', 'b/1', 'b/1']) await put(`${s.files}/${id}/${k}`, k);
    await req(`${s.files}/${id}/a/3`, { method: 'DELETE' });
    type Item = { key: string; version_id: string; is_head: boolean };
    const all = async (query: string, limit: number) => {
      const items: Item[] = [];
      let url: string | undefined = `${s.files}/${id}?${query}${query ? '&' : ''}limit=${limit}`;
      while (url) {
        const r = await req(url);
        assert.equal(r.status, 200, r.text);
        assert.ok(r.json.contents.length <= limit);
        items.push(...(r.json.contents as Item[]));
        url = r.json.links.next as string | undefined;
      }
      return items.map((i) => `${i.key}@${i.version_id}:${i.is_head}`);
    };
    for (const query of ['', 'versions', 'prefix=a/', 'versions&prefix=a/', 'prefix=a', 'versions&prefix=b/1']) {
      const whole = await all(query, 1000);
      assert.ok(whole.length > 0, query);
      for (const limit of [1, 2, 3]) assert.deepEqual(await all(query, limit), whole, `${query} limit=${limit}`);
    }
    assert.equal((await all('versions', 1000)).length, 9, 'eight versions and one delete marker');
    assert.deepEqual((await all('', 1000)).map((x) => x.split('@')[0]), ['a/1', 'a/2', 'ab', 'b/1']);
    assert.deepEqual((await all('prefix=a/', 1000)).map((x) => x.split('@')[0]), ['a/1', 'a/2']);
  });

  it('links honour FILES_REST_BASE_URL and FILES_REST_URL_PREFIX', async () => {
    const t = await startTestServer({ FILES_REST_URL_PREFIX: '/api', FILES_REST_BASE_URL: 'https://files.example.org/' });
    try {
      assert.equal((await req(`${t.url}/files`, { method: 'POST' })).status, 404);
      const r = await req(`${t.url}/api/files`, { method: 'POST' });
      assert.equal(r.status, 200);
      assert.equal(r.json.links.self, `https://files.example.org/api/files/${r.json.id}`);
      assert.equal((await req(`${t.url}/healthz`)).status, 200);
    } finally {
      await t.close();
    }
  });

  it('a locked bucket can be read but refuses new objects and deletes (403)', async () => {
    const id = await createBucket(s.files);
    await put(`${s.files}/${id}/k`, 'data');
    // The server's own database handle: a second SQLite handle in one process could deadlock with it.
    const core = s.server.core;
    await setBucketLocked(core.ctx, id, true);
    assert.equal((await req(`${s.files}/${id}`, { method: 'HEAD' })).status, 200);
    assert.equal((await req(`${s.files}/${id}/k`)).text, 'data');
    const r = await put(`${s.files}/${id}/new`, 'x');
    assert.equal(r.status, 403);
    assert.equal(r.json.message, 'Bucket is locked for modifications.');
    assert.equal((await req(`${s.files}/${id}/k`, { method: 'DELETE' })).status, 403);
    const listed = await req(`${s.files}/${id}`);
    assert.equal(listed.json.size, 4);
    assert.equal(listed.json.locked, true);
  });

  it('a logically deleted bucket hides everything (404)', async () => {
    const id = await createBucket(s.files);
    await put(`${s.files}/${id}/k`, 'data');
    // The server's own database handle: a second SQLite handle in one process could deadlock with it.
    const core = s.server.core;
    await setBucketDeleted(core.ctx, id, true);
    assert.equal((await req(`${s.files}/${id}`, { method: 'HEAD' })).status, 404);
    assert.equal((await req(`${s.files}/${id}`)).status, 404);
    const hidden = await req(`${s.files}/${id}/k`);
    assert.deepEqual([hidden.status, hidden.json.message], [404, 'Bucket does not exist.']);
    assert.equal((await req(`${s.files}/${id}/k`, { method: 'HEAD' })).status, 404);
    assert.equal((await put(`${s.files}/${id}/k2`, 'x')).status, 404);
    await setBucketDeleted(core.ctx, id, false);
    assert.equal((await req(`${s.files}/${id}/k`)).text, 'data');
  });

  it('POST /files without a default location is a clear 503 JSON error, not a crash', async () => {
    const t = await startTestServer({ FILES_REST_AUTO_LOCATION: '0' });
    try {
      const r = await req(t.files, { method: 'POST' });
      assert.equal(r.status, 503);
      assert.match(r.json.message, /default location/);
    } finally {
      await t.close();
    }
  });

  it('?prettyprint indents JSON; an Accept without JSON gets 406', async () => {
    const r = await req(`${s.files}?prettyprint=1`, { method: 'POST' });
    assert.match(r.text, /^\{\n  "id"/);
    const n = await req(s.files, { method: 'POST', headers: { accept: 'text/html' } });
    assert.equal(n.status, 406);
  });
});
