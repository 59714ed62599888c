import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { truncate } from 'node:fs/promises';
import http from 'node:http';
import { startTestServer, storedFiles, testStorage, type TestServer } from './support/server.js';
import { createBucket, downloadMd5, md5, put, putAndDisconnect, req, waitFor } from './support/http.js';
import { setBucketProperties } from '../src/domain/buckets.js';
import { snapshotBucket } from '../src/domain/snapshots.js';
import { SECURITY_HEADERS } from '../src/http/download.js';

describe('Objects', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer();
  });
  after(() => s.close());

  async function bucketWith(limits: { quotaSize?: number | null; maxFileSize?: number | null } = {}) {
    const id = await createBucket(s.files);
    if (limits.quotaSize !== undefined || limits.maxFileSize !== undefined) {
      // The server's own database handle: a second SQLite handle in one process could deadlock with it.
      const core = s.server.core;
      await setBucketProperties(core.ctx, id, limits);
    }
    return id;
  }
  const bucketSize = async (id: string) => (await req(`${s.files}/${id}`)).json.size as number;
  const versions = async (id: string) => (await req(`${s.files}/${id}?versions`)).json.contents as Array<Record<string, unknown>>;

  describe('PUT: a new head version with file', () => {
    it('stores the file and returns the version JSON with an MD5 checksum and ETag', async () => {
      const id = await bucketWith();
      const r = await put(`${s.files}/${id}/my_file.txt`, 'hello, world!\n');
      assert.equal(r.status, 200);
      // The reference's eleven keys, and the file's integrity state (never checked yet).
      assert.deepEqual(Object.keys(r.json).sort(), ['checksum', 'created', 'delete_marker', 'is_head', 'key', 'last_check', 'last_check_at', 'links', 'mimetype', 'size', 'tags', 'updated', 'version_id'].sort());
      assert.equal(r.json.last_check, null);
      assert.equal(r.json.last_check_at, null);
      assert.equal(r.json.key, 'my_file.txt');
      assert.equal(r.json.size, 14);
      assert.equal(r.json.mimetype, 'text/plain');
      assert.equal(r.json.checksum, `md5:${md5('hello, world!\n')}`);
      assert.equal(r.json.is_head, true);
      assert.equal(r.json.delete_marker, false);
      assert.deepEqual(r.json.tags, {});
      assert.equal(r.headers.get('etag'), `"md5:${md5('hello, world!\n')}"`);
      assert.equal(r.json.links.self, `${s.files}/${id}/my_file.txt`);
      assert.equal(r.json.links.version, `${s.files}/${id}/my_file.txt?versionId=${r.json.version_id}`);
      assert.equal(r.json.links.uploads, `${s.files}/${id}/my_file.txt?uploads`);
    });

    it('a second upload to the key becomes head; the previous head stops being head', async () => {
      const id = await bucketWith();
      const v1 = (await put(`${s.files}/${id}/k`, 'v1')).json;
      const v2 = (await put(`${s.files}/${id}/k`, 'v22')).json;
      assert.notEqual(v1.version_id, v2.version_id);
      assert.equal((await req(`${s.files}/${id}/k`)).text, 'v22');
      assert.equal((await req(`${s.files}/${id}/k?versionId=${v1.version_id}`)).text, 'v1');
      const vs = await versions(id);
      assert.deepEqual(vs.map((v) => [v.version_id, v.is_head]), [[v2.version_id, true], [v1.version_id, false]]);
      assert.equal(await bucketSize(id), 5);
    });

    it('stores empty files', async () => {
      const id = await bucketWith();
      const r = await put(`${s.files}/${id}/empty`, '');
      assert.equal(r.status, 200);
      assert.equal(r.json.size, 0);
      const g = await req(`${s.files}/${id}/empty`);
      assert.equal(g.status, 200);
      assert.equal(g.text, '');
    });

    it('keeps non-ASCII and slash-containing keys as given', async () => {
      const id = await bucketWith();
      const key = 'données/été 2026/żółć.dat';
      const url = `${s.files}/${id}/${key.split('/').map(encodeURIComponent).join('/')}`;
      const r = await put(url, 'x');
      assert.equal(r.status, 200);
      assert.equal(r.json.key, key);
      assert.equal(r.json.links.self, url);
      const g = await req(`${url}?download`);
      assert.equal(g.text, 'x');
      assert.equal(g.headers.get('content-disposition'), "attachment; filename=zoc.dat; filename*=UTF-8''%C5%BC%C3%B3%C5%82%C4%87.dat");
      const l = await req(`${s.files}/${id}`);
      assert.equal(l.json.contents[0].key, key);
    });

    it('stores tags from the X-Invenio-File-Tags header; refuses bad ones', async () => {
      const id = await bucketWith();
      const r = await put(`${s.files}/${id}/t`, 'x', { 'X-Invenio-File-Tags': 'a=1&b=two' });
      assert.deepEqual(r.json.tags, { a: '1', b: 'two' });
      assert.equal((await put(`${s.files}/${id}/t`, 'x', { 'X-Invenio-File-Tags': 'a=1&a=2' })).status, 400);
      assert.equal((await put(`${s.files}/${id}/t`, 'x', { 'X-Invenio-File-Tags': `a=${'v'.repeat(300)}` })).status, 400);
    });

    it('verifies Content-MD5 (base64 or hex) and Content-Digest; a mismatch stores nothing', async () => {
      const id = await bucketWith();
      const body = 'checked content';
      const b64 = createHash('md5').update(body).digest('base64');
      assert.equal((await put(`${s.files}/${id}/a`, body, { 'Content-MD5': b64 })).status, 200);
      assert.equal((await put(`${s.files}/${id}/b`, body, { 'Content-MD5': md5(body) })).status, 200);
      const sha = createHash('sha256').update(body).digest('base64');
      assert.equal((await put(`${s.files}/${id}/c`, body, { 'Content-Digest': `sha-256=:${sha}:` })).status, 200);
      const before = await bucketSize(id);
      const bad = await put(`${s.files}/${id}/d`, body, { 'Content-MD5': createHash('md5').update('other').digest('base64') });
      assert.equal(bad.status, 400);
      assert.match(bad.json.message, /Content-MD5/);
      const bad2 = await put(`${s.files}/${id}/d`, body, { 'Content-Digest': `sha-256=:${createHash('sha256').update('x').digest('base64')}:` });
      assert.equal(bad2.status, 400);
      assert.equal((await put(`${s.files}/${id}/d`, body, { 'Content-MD5': 'not-a-digest' })).status, 400);
      assert.equal((await req(`${s.files}/${id}/d`)).status, 404);
      assert.equal(await bucketSize(id), before);
    });

    it('50 concurrent PUTs to one key give 50 versions and exactly one head', async () => {
      const id = await bucketWith();
      const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => put(`${s.files}/${id}/same`, `body-${i}`)));
      assert.ok(rs.every((r) => r.status === 200), rs.map((r) => r.status).join(','));
      const vs = await versions(id);
      assert.equal(vs.length, 50);
      assert.equal(vs.filter((v) => v.is_head).length, 1);
      const sum = rs.reduce((n, r) => n + (r.json.size as number), 0);
      assert.equal(await bucketSize(id), sum);
      const head = vs.find((v) => v.is_head)!;
      const g = await req(`${s.files}/${id}/same`);
      assert.equal(`md5:${md5(g.text)}`, head.checksum);
    });
  });

  describe('GET: download', () => {
    it('serves the latest version inline with checksum, caching and security headers', async () => {
      const id = await bucketWith();
      const v = (await put(`${s.files}/${id}/notes.txt`, 'some notes')).json;
      const r = await req(`${s.files}/${id}/notes.txt`);
      assert.equal(r.status, 200);
      assert.equal(r.text, 'some notes');
      const h = r.headers;
      assert.equal(h.get('content-type'), 'text/plain; charset=utf-8');
      assert.equal(h.get('content-disposition'), 'inline');
      assert.equal(h.get('content-length'), '10');
      assert.equal(h.get('etag'), `"${v.checksum}"`);
      assert.equal(h.get('content-md5'), createHash('md5').update('some notes').digest('base64'));
      assert.equal(h.get('repr-digest'), `md5=:${createHash('md5').update('some notes').digest('base64')}:`);
      assert.ok(h.get('last-modified'));
      assert.equal(h.get('cache-control'), 'no-cache');
      assert.equal(h.get('accept-ranges'), 'bytes');
      assert.equal(h.get('content-security-policy'), "default-src 'none';");
      assert.equal(h.get('x-content-type-options'), 'nosniff');
      assert.equal(h.get('x-download-options'), 'noopen');
      assert.equal(h.get('x-permitted-cross-domain-policies'), 'none');
      assert.equal(h.get('x-frame-options'), 'deny');
      assert.equal(h.get('x-xss-protection'), '1; mode=block');
      // download.ts writes these out in its literal (faster than spreading the constant): every one is sent.
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) assert.equal(h.get(name), value, name);
    });

    it('?download answers with Content-Disposition: attachment; ?download=0 does not', async () => {
      const id = await bucketWith();
      await put(`${s.files}/${id}/dir/my file.txt`, 'x');
      const r = await req(`${s.files}/${id}/dir/my%20file.txt?download`);
      assert.equal(r.headers.get('content-disposition'), 'attachment; filename="my file.txt"');
      const r0 = await req(`${s.files}/${id}/dir/my%20file.txt?download=0`);
      assert.equal(r0.headers.get('content-disposition'), 'inline');
    });

    it('sanitizes active content: uploaded HTML, SVG and JS are served as text/plain, unknown types as attachments', async () => {
      const id = await bucketWith();
      const cases: Array<[string, string, string, string?]> = [
        ['page.html', 'text/plain; charset=utf-8', 'inline'],
        ['image.svg', 'text/plain; charset=utf-8', 'inline'],
        ['app.js', 'text/plain; charset=utf-8', 'inline'],
        ['data.xml', 'text/plain; charset=utf-8', 'inline'],
        ['photo.png', 'image/png', 'inline'],
        ['paper.pdf', 'application/octet-stream', 'attachment; filename=paper.pdf'],
        ['README', 'text/plain; charset=utf-8', 'inline'],
        ['blob.unknownext', 'application/octet-stream', 'attachment; filename=blob.unknownext', 'application/octet-stream'],
        // an unknown extension takes the client's type: text/html is still never served as HTML
        ['blob.other', 'text/plain; charset=utf-8', 'inline'],
      ];
      for (const [key, type, disp, sent] of cases) {
        const up = await put(`${s.files}/${id}/${key}`, '<script>alert(1)</script>', { 'Content-Type': sent ?? 'text/html' });
        assert.equal(up.status, 200);
        const r = await req(`${s.files}/${id}/${key}`);
        assert.equal(r.headers.get('content-type'), type, key);
        assert.equal(r.headers.get('content-disposition'), disp, key);
        assert.equal(r.headers.get('content-security-policy'), "default-src 'none';");
        assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
      }
      const html = (await req(`${s.files}/${id}?prefix=page.html`)).json.contents[0];
      assert.equal(html.mimetype, 'text/html');
    });

    it('?versionId serves that version; an unknown one is 404, a malformed one 422', async () => {
      const id = await bucketWith();
      const v1 = (await put(`${s.files}/${id}/k`, 'one')).json;
      await put(`${s.files}/${id}/k`, 'two');
      assert.equal((await req(`${s.files}/${id}/k?versionId=${v1.version_id}`)).text, 'one');
      const unknown = await req(`${s.files}/${id}/k?versionId=00000000-0000-4000-8000-000000000000`);
      assert.equal(unknown.status, 404);
      assert.equal(unknown.json.status, 404);
      const bad = await req(`${s.files}/${id}/k?versionId=nope`);
      assert.equal(bad.status, 422);
      assert.equal(bad.json.errors[0].field, 'versionId');
    });

    it('an unknown key is 404 JSON', async () => {
      const id = await bucketWith();
      const r = await req(`${s.files}/${id}/missing`);
      assert.equal(r.status, 404);
      assert.equal(r.json.message, 'Object does not exist.');
    });

    it('HEAD has the headers of GET and no body', async () => {
      const id = await bucketWith();
      await put(`${s.files}/${id}/h.txt`, 'twelve bytes');
      const r = await req(`${s.files}/${id}/h.txt`, { method: 'HEAD' });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('content-length'), '12');
      assert.ok(r.headers.get('etag'));
      assert.equal(r.text, '');
    });

    it('Range requests: 206 with Content-Range, suffix and open ranges, 416 when unsatisfiable, other units ignored', async () => {
      const id = await bucketWith();
      await put(`${s.files}/${id}/r.bin`, '0123456789');
      const url = `${s.files}/${id}/r.bin`;
      let r = await req(url, { headers: { Range: 'bytes=2-5' } });
      assert.equal(r.status, 206);
      assert.equal(r.text, '2345');
      assert.equal(r.headers.get('content-range'), 'bytes 2-5/10');
      r = await req(url, { headers: { Range: 'bytes=7-' } });
      assert.equal(r.text, '789');
      r = await req(url, { headers: { Range: 'bytes=-3' } });
      assert.equal(r.text, '789');
      r = await req(url, { headers: { Range: 'bytes=8-100' } });
      assert.equal(r.text, '89');
      r = await req(url, { headers: { Range: 'bytes=10-' } });
      assert.equal(r.status, 416);
      assert.equal(r.headers.get('content-range'), 'bytes */10');
      assert.equal((await req(url, { headers: { Range: 'bytes=5-2' } })).status, 416);
      // A unit other than bytes is ignored (RFC 9110 §14.2): the whole file, 200.
      for (const unit of ['lines=1-2', 'items=0-1']) {
        r = await req(url, { headers: { Range: unit } });
        assert.equal(r.status, 200, unit);
        assert.equal(r.text, '0123456789');
        assert.equal(r.headers.get('content-range'), null);
      }
      assert.equal((await req(url, { headers: { Range: 'bytes=abc' } })).status, 416);
      const etag = (await req(url)).headers.get('etag')!;
      r = await req(url, { headers: { Range: 'bytes=0-0', 'If-Range': etag } });
      assert.equal(r.status, 206);
      r = await req(url, { headers: { Range: 'bytes=0-0', 'If-Range': '"md5:other"' } });
      assert.equal(r.status, 200);
      assert.equal(r.text, '0123456789');
    });

    it('large downloads and ranges come back byte for byte, across read-buffer boundaries', async () => {
      const id = await bucketWith();
      const data = randomBytes(2 * 1024 * 1024 + 12_345);
      await put(`${s.files}/${id}/big.bin`, data);
      const url = `${s.files}/${id}/big.bin`;
      const whole = await downloadMd5(url);
      assert.deepEqual(whole, { status: 200, bytes: data.length, md5: md5(data) });
      for (const [start, end] of [[100_000, 2_200_000], [0, 1024 * 1024], [1024 * 1024 - 1, data.length - 1], [70_000, 140_000]] as const) {
        const r = await downloadMd5(url, { Range: `bytes=${start}-${end}` });
        const last = Math.min(end, data.length - 1);
        assert.deepEqual(r, { status: 206, bytes: last - start + 1, md5: md5(data.subarray(start, last + 1)) }, `bytes=${start}-${end}`);
      }
    });

    const onDisk = testStorage() === 's3' ? 'truncates a stored file on disk' : false;
    it('a stored file shorter than its record breaks the download off: the body never looks complete', { skip: onDisk }, async () => {
      const id = await bucketWith();
      const earlier = new Set(await storedFiles(s));
      await put(`${s.files}/${id}/short.bin`, randomBytes(300_000));
      const added = (await storedFiles(s)).filter((u) => !earlier.has(u));
      assert.equal(added.length, 1);
      await truncate(added[0]!.replace(/^file:\/\//, ''), 100_000);
      const outcome = await new Promise<string>((resolve) => {
        const u = new URL(`${s.files}/${id}/short.bin`);
        http.get({ host: u.hostname, port: u.port, path: u.pathname }, (res) => {
          let bytes = 0;
          res.on('data', (d: Buffer) => (bytes += d.length));
          res.on('end', () => resolve(`ended after ${bytes} bytes`));
          res.on('error', () => resolve('broken off'));
        }).on('error', () => resolve('broken off'));
      });
      assert.equal(outcome, 'broken off');
      assert.equal((await req(`${s.files}/${id}`)).status, 200);
    });

    it('a download says which is missing: the bucket, or the object (never written, or deleted)', async () => {
      const id = await bucketWith();
      await put(`${s.files}/${id}/gone.txt`, 'x');
      assert.equal((await req(`${s.files}/${id}/gone.txt`, { method: 'DELETE' })).status, 204);
      const cases: Array<[string, string]> = [
        [`${s.files}/00000000-0000-4000-8000-000000000000/a.txt`, 'Bucket does not exist.'],
        [`${s.files}/${id}/never.txt`, 'Object does not exist.'],
        [`${s.files}/${id}/gone.txt`, 'Object does not exist.'],
      ];
      for (const [url, message] of cases) {
        const r = await req(url);
        assert.deepEqual([r.status, r.json.status, r.json.message], [404, 404, message], url);
        assert.equal((await req(url, { method: 'HEAD' })).status, 404, `HEAD ${url}`);
      }
    });

    it('Range can be turned off with FILES_REST_ALLOW_RANGE_REQUESTS=0', async () => {
      const t = await startTestServer({ FILES_REST_ALLOW_RANGE_REQUESTS: '0' });
      try {
        const id = await createBucket(t.files);
        await put(`${t.files}/${id}/r`, '0123456789');
        const r = await req(`${t.files}/${id}/r`, { headers: { Range: 'bytes=2-5' } });
        assert.equal(r.status, 200);
        assert.equal(r.text, '0123456789');
        assert.equal(r.headers.get('accept-ranges'), null);
      } finally {
        await t.close();
      }
    });

    it('conditional requests: If-None-Match and If-Modified-Since give 304, If-Match a 412', async () => {
      const id = await bucketWith();
      await put(`${s.files}/${id}/c`, 'cached');
      const url = `${s.files}/${id}/c`;
      const first = await req(url);
      const etag = first.headers.get('etag')!;
      const lm = first.headers.get('last-modified')!;
      assert.equal((await req(url, { headers: { 'If-None-Match': etag } })).status, 304);
      assert.equal((await req(url, { headers: { 'If-None-Match': `W/${etag}` } })).status, 304);
      assert.equal((await req(url, { headers: { 'If-None-Match': '"md5:x"' } })).status, 200);
      assert.equal((await req(url, { headers: { 'If-Modified-Since': lm } })).status, 304);
      assert.equal((await req(url, { headers: { 'If-Modified-Since': 'Thu, 01 Jan 1970 00:00:00 GMT' } })).status, 200);
      assert.equal((await req(url, { headers: { 'If-Match': '"md5:x"' } })).status, 412);
      assert.equal((await req(url, { headers: { 'If-Match': etag } })).status, 200);
    });
  });

  describe('DELETE: soft delete, restore and hard delete', () => {
    it('soft delete adds a delete marker as head; files stay; the size does not change', async () => {
      const id = await bucketWith();
      const v1 = (await put(`${s.files}/${id}/k`, 'abc')).json;
      const d = await req(`${s.files}/${id}/k`, { method: 'DELETE' });
      assert.equal(d.status, 204);
      const markerId = d.headers.get('x-version-id');
      assert.ok(markerId);
      assert.equal((await req(`${s.files}/${id}/k`)).status, 404);
      assert.equal((await req(`${s.files}/${id}`)).json.contents.length, 0);
      assert.equal((await req(`${s.files}/${id}/k?versionId=${v1.version_id}`)).text, 'abc');
      assert.equal(await bucketSize(id), 3);
      const vs = await versions(id);
      assert.equal(vs[0]!.version_id, markerId);
      assert.equal(vs[0]!.delete_marker, true);
      // reading the marker itself: a 404 JSON, never a 500
      const m = await req(`${s.files}/${id}/k?versionId=${markerId}`);
      assert.equal(m.status, 404);
      assert.equal(m.json.status, 404);
      // deleting an already deleted key: 404
      assert.equal((await req(`${s.files}/${id}/k`, { method: 'DELETE' })).status, 404);
    });

    it('hard-deleting the delete marker restores the previous version', async () => {
      const id = await bucketWith();
      await put(`${s.files}/${id}/k`, 'abc');
      const markerId = (await req(`${s.files}/${id}/k`, { method: 'DELETE' })).headers.get('x-version-id');
      const r = await req(`${s.files}/${id}/k?versionId=${markerId}`, { method: 'DELETE' });
      assert.equal(r.status, 204);
      assert.equal((await req(`${s.files}/${id}/k`)).text, 'abc');
      assert.equal(await bucketSize(id), 3);
    });

    it('hard delete removes the version and its file; the previous version becomes head', async () => {
      const id = await bucketWith();
      await put(`${s.files}/${id}/k`, 'first');
      const v2 = (await put(`${s.files}/${id}/k`, 'second!')).json;
      const before = await storedFiles(s);
      const r = await req(`${s.files}/${id}/k?versionId=${v2.version_id}`, { method: 'DELETE' });
      assert.equal(r.status, 204);
      assert.equal((await req(`${s.files}/${id}/k`)).text, 'first');
      assert.equal(await bucketSize(id), 5);
      assert.equal((await req(`${s.files}/${id}/k?versionId=${v2.version_id}`)).status, 404);
      await waitFor(async () => (await storedFiles(s)).length === before.length - 1);
    });

    it('hard delete then soft delete never makes the size negative or drift', async () => {
      const id = await bucketWith();
      const v = (await put(`${s.files}/${id}/k`, '12345')).json;
      await req(`${s.files}/${id}/k`, { method: 'DELETE' });
      await req(`${s.files}/${id}/k?versionId=${v.version_id}`, { method: 'DELETE' });
      assert.equal(await bucketSize(id), 0);
    });

    it('hard delete of a file instance shared by several versions (snapshot) is refused with 409 and changes nothing', async () => {
      const id = await bucketWith();
      const v = (await put(`${s.files}/${id}/k`, 'shared')).json;
      const snap = (await snapshotBucket(s.server.core.ctx, id)).id;
      const r = await req(`${s.files}/${id}/k?versionId=${v.version_id}`, { method: 'DELETE' });
      assert.equal(r.status, 409);
      assert.equal(r.json.status, 409);
      assert.equal((await req(`${s.files}/${id}/k`)).text, 'shared');
      assert.equal((await req(`${s.files}/${snap}/k`)).text, 'shared');
      assert.equal(await bucketSize(id), 6);
    });

    it('a file removal queued by a hard delete survives a restart', async () => {
      const t = await startTestServer({ FILES_REST_WORKER: '0' });
      const id = await createBucket(t.files);
      const v = (await put(`${t.files}/${id}/k`, 'gone soon')).json;
      assert.equal((await req(`${t.files}/${id}/k?versionId=${v.version_id}`, { method: 'DELETE' })).status, 204);
      assert.equal((await storedFiles(t)).length, 1, 'no worker: the bytes are still there');
      await t.server.stop();
      // the same database and data directory, now with a worker
      const t2 = await startTestServer({ ...t.env, FILES_REST_WORKER: '1' });
      try {
        await waitFor(async () => (await storedFiles(t2)).length === 0);
      } finally {
        await t2.close();
        await t.close();
      }
    });
  });

  describe('Limits and refusals: nothing stored, size unchanged', () => {
    it('a file above max_file_size is refused before the body is read; exactly max_file_size is accepted', async () => {
      const id = await bucketWith({ maxFileSize: 10 });
      const r = await put(`${s.files}/${id}/big`, '12345678901');
      assert.equal(r.status, 400);
      assert.equal(r.json.message, 'Maximum file size exceeded.');
      assert.equal((await put(`${s.files}/${id}/ok`, '1234567890')).status, 200);
      assert.equal(await bucketSize(id), 10);
      assert.equal((await req(`${s.files}/${id}/big`)).status, 404);
    });

    it('the quota counts every stored version and is inclusive; quota 0 means zero bytes', async () => {
      const id = await bucketWith({ quotaSize: 100 });
      assert.equal((await put(`${s.files}/${id}/a`, 'x'.repeat(75))).status, 200);
      const r = await put(`${s.files}/${id}/a`, 'x'.repeat(75));
      assert.equal(r.status, 400);
      assert.equal(r.json.message, 'Bucket quota exceeded.');
      assert.equal((await put(`${s.files}/${id}/b`, 'x'.repeat(25))).status, 200);
      assert.equal(await bucketSize(id), 100);
      const zero = await bucketWith({ quotaSize: 0 });
      assert.equal((await put(`${s.files}/${zero}/a`, 'x')).status, 400);
      assert.equal((await put(`${s.files}/${zero}/e`, '')).status, 200);
    });

    it('concurrent uploads racing a quota never store more than the quota', async () => {
      const id = await bucketWith({ quotaSize: 1000 });
      const rs = await Promise.all(Array.from({ length: 10 }, (_, i) => put(`${s.files}/${id}/f${i}`, 'y'.repeat(300))));
      const ok = rs.filter((r) => r.status === 200).length;
      assert.equal(ok, 3);
      assert.ok(rs.every((r) => r.status === 200 || (r.status === 400 && r.json.message === 'Bucket quota exceeded.')));
      assert.equal(await bucketSize(id), 900);
      const stored = (await req(`${s.files}/${id}`)).json.contents.length;
      assert.equal(stored, 3);
      await waitFor(async () => (await storedFiles(s)).every((f) => !f.endsWith('.tmp')));
    });

    it('a key longer than FILES_REST_OBJECT_KEY_MAX_LEN is refused (400)', async () => {
      const id = await bucketWith();
      const r = await put(`${s.files}/${id}/${'k'.repeat(256)}`, 'x');
      assert.equal(r.status, 400);
      assert.equal(r.json.message, 'Filename is too long.');
      assert.equal((await put(`${s.files}/${id}/${'k'.repeat(255)}`, 'x')).status, 200);
    });

    it('bad keys are refused with 400: control characters, malformed escapes, empty', async () => {
      const id = await bucketWith();
      for (const k of ['a%00b', 'a%0Ab', 'bad%E0%A4%A', '%ZZ']) {
        const r = await put(`${s.files}/${id}/${k}`, 'x');
        assert.equal(r.status, 400, k);
        assert.equal(r.json.status, 400);
      }
      assert.equal((await put(`${s.files}/${id}/`, 'x')).status, 400);
    });

    it('a PUT without Content-Length is refused (400) and nothing is read', async () => {
      const id = await bucketWith();
      const body = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode('chunked')); c.close(); } });
      const r = await req(`${s.files}/${id}/chunked`, { method: 'PUT', body, duplex: 'half' } as RequestInit);
      assert.equal(r.status, 400);
      assert.equal((await req(`${s.files}/${id}/chunked`)).status, 404);
    });

    it('POST on an object without ?uploads or ?uploadId is a 400', async () => {
      const id = await bucketWith();
      const r = await req(`${s.files}/${id}/k`, { method: 'POST' });
      assert.equal(r.status, 400);
    });

    it('a client that disconnects mid-upload leaves no version, no file and an unchanged size', async () => {
      const id = await bucketWith();
      await put(`${s.files}/${id}/keep`, 'kept');
      const before = await storedFiles(s);
      await putAndDisconnect(`${s.files}/${id}/partial`, 10 * 1024 * 1024, Buffer.alloc(256 * 1024, 1));
      await waitFor(async () => (await storedFiles(s)).length === before.length);
      assert.equal((await req(`${s.files}/${id}/partial`)).status, 404);
      assert.equal((await versions(id)).length, 1);
      assert.equal(await bucketSize(id), 4);
    });
  });

  describe('MAX_CONTENT_LENGTH', () => {
    it('a request body above MAX_CONTENT_LENGTH gets 413 before it is read', async () => {
      const t = await startTestServer({ MAX_CONTENT_LENGTH: '100' });
      try {
        const id = await createBucket(t.files);
        const r = await put(`${t.files}/${id}/big`, 'z'.repeat(101));
        assert.equal(r.status, 413);
        assert.equal(r.json.status, 413);
        assert.equal((await put(`${t.files}/${id}/ok`, 'z'.repeat(100))).status, 200);
        assert.equal((await req(`${t.files}/${id}`)).json.size, 100);
      } finally {
        await t.close();
      }
    });
  });
});
