import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { open } from 'node:fs/promises';
import { startTestServer, storedFiles, testStorage, type TestServer } from './support/server.js';
import { createBucket, md5, put, putAndDisconnect, req, waitFor } from './support/http.js';
import { setBucketDeleted, setBucketLocked, setBucketProperties } from '../src/domain/buckets.js';

const SMALL = { FILES_REST_MULTIPART_CHUNKSIZE_MIN: '2', FILES_REST_MULTIPART_CHUNKSIZE_MAX: '20', FILES_REST_MULTIPART_MAX_PARTS: '100' };

// S3 refuses parts under 5 MiB (but the last), and these tests use parts of a few bytes; multipart
// uploads on S3 are covered by s3-http.test.ts and the storage contract suite, with 5 MiB parts.
const skipOnS3 = testStorage() === 's3' ? 'S3 refuses parts under 5 MiB; see s3-http.test.ts' : false;
if (skipOnS3) console.log(`# multipart.test: skipped on S3 storage: ${skipOnS3}`);

describe('Multipart uploads', { skip: skipOnS3 }, () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(SMALL);
  });
  after(() => s.close());

  const url = (b: string, k: string, q = '') => `${s.files}/${b}/${k}${q}`;
  async function init(b: string, k: string, size: number, partSize: number) {
    const r = await req(url(b, k, `?uploads&size=${size}&partSize=${partSize}`), { method: 'POST' });
    assert.equal(r.status, 200, r.text);
    return r.json;
  }
  const part = (b: string, k: string, u: string, n: number, body: string, param = 'partNumber') =>
    put(url(b, k, `?uploadId=${u}&${param}=${n}`), body);
  async function withCore<T>(fn: (core: TestServer['server']['core']) => Promise<T>): Promise<T> {
    // The server's own database handle: a second SQLite handle in one process could deadlock with it.
    const core = s.server.core;
    return await fn(core);
  }

  it('initiation returns the multipart object; last_part_size is right for exact multiples', async () => {
    const b = await createBucket(s.files);
    const u = await init(b, 'f.bin', 110, 20);
    assert.deepEqual(Object.keys(u).sort(), ['bucket', 'completed', 'created', 'id', 'key', 'last_part_number', 'last_part_size', 'links', 'part_size', 'size', 'updated']);
    assert.equal(u.bucket, b);
    assert.equal(u.key, 'f.bin');
    assert.equal(u.last_part_number, 5);
    assert.equal(u.last_part_size, 10);
    assert.equal(u.completed, false);
    assert.equal(u.links.self, `${url(b, 'f.bin')}?uploadId=${u.id}`);
    assert.equal(u.links.object, url(b, 'f.bin'));
    assert.equal(u.links.bucket, `${s.files}/${b}`);
    const exact = await init(b, 'g.bin', 100, 20);
    assert.equal(exact.last_part_number, 4);
    assert.equal(exact.last_part_size, 20);
    const listed = await req(`${s.files}/${b}?uploads`);
    assert.deepEqual(listed.json.map((x: { id: string }) => x.id).sort(), [u.id, exact.id].sort());
  });

  it('size and partSize may come in a JSON body', async () => {
    const b = await createBucket(s.files);
    const r = await req(url(b, 'j', '?uploads'), { method: 'POST', body: JSON.stringify({ size: 10, partSize: 4 }), headers: { 'content-type': 'application/json' } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.last_part_number, 2);
    assert.equal(r.json.last_part_size, 2);
  });

  it('initiation refusals: missing or invalid sizes, too many parts, long key, quota, lock', async () => {
    const b = await createBucket(s.files);
    assert.equal((await req(url(b, 'k', '?uploads&size=10'), { method: 'POST' })).status, 400);
    assert.equal((await req(url(b, 'k', '?uploads&partSize=10'), { method: 'POST' })).status, 400);
    assert.equal((await req(url(b, 'k', '?uploads&size=abc&partSize=10'), { method: 'POST' })).status, 422);
    assert.equal((await req(url(b, 'k', '?uploads&size=10&partSize=abc'), { method: 'POST' })).status, 422);
    assert.equal((await req(url(b, 'k', '?uploads&size=1.5&partSize=10'), { method: 'POST' })).status, 422);
    // Negative sizes are integers out of range: 400 with the valid range, as the reference (not 422).
    const badPartSize = 'Invalid part size: partSize must be from 2 to 20 bytes.';
    const negative = await req(url(b, 'k', '?uploads&size=-5&partSize=16'), { method: 'POST' });
    assert.equal(negative.status, 400);
    assert.equal(negative.json.message, 'Invalid file size: size must be from 1 to 1600 bytes.');
    const negativePart = await req(url(b, 'k', '?uploads&size=10&partSize=-16'), { method: 'POST' });
    assert.equal(negativePart.status, 400);
    assert.equal(negativePart.json.message, badPartSize);
    const inBody = await req(url(b, 'k', '?uploads'), { method: 'POST', body: JSON.stringify({ size: -5, partSize: 16 }), headers: { 'content-type': 'application/json' } });
    assert.equal(inBody.status, 400);
    assert.match(inBody.json.message, /^Invalid file size/);
    const small = await req(url(b, 'k', '?uploads&size=10&partSize=1'), { method: 'POST' });
    assert.equal(small.status, 400);
    assert.equal(small.json.message, badPartSize);
    assert.equal((await req(url(b, 'k', '?uploads&size=10&partSize=21'), { method: 'POST' })).json.message, badPartSize);
    assert.equal((await req(url(b, 'k', '?uploads&size=0&partSize=10'), { method: 'POST' })).json.message, 'Invalid file size: size must be from 1 to 1000 bytes.');
    assert.equal((await req(url(b, 'k', '?uploads&size=2001&partSize=20'), { method: 'POST' })).json.message, 'Invalid file size: size must be from 1 to 2000 bytes.');
    assert.equal((await req(url(b, 'k'.repeat(300), '?uploads&size=10&partSize=5'), { method: 'POST' })).json.message, 'Filename is too long.');
    await withCore((c) => setBucketProperties(c.ctx, b, { quotaSize: 50 }));
    assert.equal((await req(url(b, 'k', '?uploads&size=51&partSize=20'), { method: 'POST' })).json.message, 'Bucket quota exceeded.');
    await withCore((c) => setBucketLocked(c.ctx, b, true));
    assert.equal((await req(url(b, 'k', '?uploads&size=10&partSize=5'), { method: 'POST' })).status, 403);
    assert.equal((await req(url(b, 'k', '?uploads'))).status, 405);
    assert.equal((await req(`${s.files}/${b}?uploads`)).json.length, 0);
  });

  it('parts in parallel and out of order, re-sent parts replace, completion merges without copying', async () => {
    const b = await createBucket(s.files);
    const data = 'abcdefghij'.repeat(5) + 'xyz'; // 53 bytes: 5 parts of 10, last of 3
    const u = await init(b, 'merged.txt', data.length, 10);
    const chunks = Array.from({ length: 6 }, (_, i) => data.slice(i * 10, i * 10 + 10));
    const rs = await Promise.all([5, 3, 1, 0, 4].map((n) => part(b, 'merged.txt', u.id, n, chunks[n]!)));
    assert.ok(rs.every((r) => r.status === 200));
    const p3 = rs[1]!.json;
    assert.deepEqual(Object.keys(p3).sort(), ['checksum', 'created', 'end_byte', 'part_number', 'start_byte', 'updated']);
    assert.equal(p3.part_number, 3);
    assert.equal(p3.start_byte, 30);
    assert.equal(p3.end_byte, 40);
    assert.equal(p3.checksum, `md5:${md5(chunks[3]!)}`);
    assert.equal(rs[1]!.headers.get('etag'), `"md5:${md5(chunks[3]!)}"`);
    // SPEC's other spelling of the parameter, and a re-sent part that replaces a wrong one
    assert.equal((await part(b, 'merged.txt', u.id, 2, 'WRONGWRONG', 'part')).status, 200);
    assert.equal((await part(b, 'merged.txt', u.id, 2, chunks[2]!)).status, 200);
    const listed = await req(url(b, 'merged.txt', `?uploadId=${u.id}`));
    assert.equal(listed.status, 200);
    assert.deepEqual(listed.json.parts.map((p: { part_number: number }) => p.part_number), [0, 1, 2, 3, 4, 5]);
    assert.equal(listed.json.parts[2].checksum, `md5:${md5(chunks[2]!)}`);
    const filesBefore = (await storedFiles(s)).length;
    const done = await req(url(b, 'merged.txt', `?uploadId=${u.id}`), { method: 'POST' });
    assert.equal(done.status, 200, done.text);
    assert.equal(done.json.completed, true);
    assert.ok(done.json.links.object_version);
    const g = await req(url(b, 'merged.txt'));
    assert.equal(g.text, data);
    const listing = await req(`${s.files}/${b}`);
    assert.equal(listing.json.contents[0].checksum, `md5:${md5(data)}`);
    assert.equal(listing.json.size, data.length);
    assert.equal((await storedFiles(s)).length, filesBefore, 'no second copy of the data');
    assert.equal((await req(url(b, 'merged.txt', `?uploadId=${u.id}`))).status, 404);
    assert.equal((await req(`${s.files}/${b}?uploads`)).json.length, 0);
    assert.equal((await req(done.json.links.object_version)).text, data);
  });

  it('completion uses the digest computed while the parts arrived (no re-read); a part re-sent after hashing forces one read, still correct', async () => {
    const hasher = s.server.core.ctx.hasher!;
    const b = await createBucket(s.files);
    const before = { ...hasher.stats };
    const u = await init(b, 'inorder.bin', 30, 10);
    for (const [n, c] of [[0, 'aaaaaaaaaa'], [2, 'cccccccccc'], [1, 'bbbbbbbbbb']] as const) assert.equal((await part(b, 'inorder.bin', u.id, n, c)).status, 200);
    assert.equal((await req(url(b, 'inorder.bin', `?uploadId=${u.id}`), { method: 'POST' })).status, 200);
    assert.equal(hasher.stats.digestUsed, before.digestUsed + 1);
    assert.equal((await req(`${s.files}/${b}`)).json.contents[0].checksum, `md5:${md5('aaaaaaaaaabbbbbbbbbbcccccccccc')}`);
    const u2 = await init(b, 'resent.bin', 20, 10);
    await part(b, 'resent.bin', u2.id, 0, 'xxxxxxxxxx');
    await part(b, 'resent.bin', u2.id, 1, 'yyyyyyyyyy');
    await new Promise((r) => setTimeout(r, 100));
    await part(b, 'resent.bin', u2.id, 0, 'zzzzzzzzzz');
    assert.equal((await req(url(b, 'resent.bin', `?uploadId=${u2.id}`), { method: 'POST' })).status, 200);
    assert.equal(hasher.stats.fileReread, before.fileReread + 1);
    assert.equal((await req(url(b, 'resent.bin'))).text, 'zzzzzzzzzzyyyyyyyyyy');
    assert.equal((await req(`${s.files}/${b}?prefix=resent`)).json.contents[0].checksum, `md5:${md5('zzzzzzzzzzyyyyyyyyyy')}`);
  });

  it('a part re-sent through another node after it was hashed (its row changes) forces one read; the checksum is of the final bytes', async () => {
    const hasher = s.server.core.ctx.hasher!;
    const db = s.server.core.ctx.db;
    const b = await createBucket(s.files);
    const u = await init(b, 'other-node.bin', 20, 10);
    await part(b, 'other-node.bin', u.id, 0, 'xxxxxxxxxx');
    await part(b, 'other-node.bin', u.id, 1, 'yyyyyyyyyy');
    await new Promise((r) => setTimeout(r, 200));
    // What another API node does for a re-sent part 0: bytes in place, then its row.
    const file = await db
      .selectFrom('multipart_uploads')
      .innerJoin('files', 'files.id', 'multipart_uploads.file_id')
      .select('files.uri')
      .where('multipart_uploads.id', '=', u.id)
      .executeTakeFirstOrThrow();
    const fh = await open(file.uri!, 'r+');
    await fh.write(Buffer.from('wwwwwwwwww'), 0, 10, 0);
    await fh.close();
    await db
      .updateTable('parts')
      .set({ checksum: `md5:${md5('wwwwwwwwww')}`, updated: Date.now() * 1000 + 1 })
      .where('upload_id', '=', u.id)
      .where('part_number', '=', 0)
      .execute();
    const before = { ...hasher.stats };
    assert.equal((await req(url(b, 'other-node.bin', `?uploadId=${u.id}`), { method: 'POST' })).status, 200);
    assert.equal(hasher.stats.fileReread, before.fileReread + 1);
    assert.equal((await req(url(b, 'other-node.bin'))).text, 'wwwwwwwwwwyyyyyyyyyy');
    assert.equal((await req(`${s.files}/${b}?prefix=other-node`)).json.contents[0].checksum, `md5:${md5('wwwwwwwwwwyyyyyyyyyy')}`);
  });

  it('an upload forgotten while its parts are still being hashed (its merge runs in another process) never yields the digest of part of the file', async () => {
    // The race CI hit: a merge's finish() waits for the hashing under way, the completion request
    // forgets the upload (no worker here), and the hashing went on with a digest started afresh
    // from the second part: the merge stored an MD5 the file did not have.
    const ctx = s.server.core.ctx;
    const hasher = ctx.hasher!;
    const b = await createBucket(s.files);
    const u = await init(b, 'forgotten.bin', 30, 10);
    const file = await ctx.db
      .selectFrom('multipart_uploads')
      .innerJoin('files', 'files.id', 'multipart_uploads.file_id')
      .select('files.uri')
      .where('multipart_uploads.id', '=', u.id)
      .executeTakeFirstOrThrow();
    // This suite runs on the fs backend (skipped on S3), which keeps running digests.
    const digests = ctx.storage.forUri(file.uri!).runningDigests;
    assert.ok(digests, 'the fs backend keeps running digests');
    const extend = digests.extend;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let held = 0;
    digests.extend = async (id, uri, start, end) => {
      if (id === u.id && start > 0) {
        held++;
        await gate;
      }
      return extend.call(digests, id, uri, start, end);
    };
    try {
      for (const [n, c] of [[0, 'aaaaaaaaaa'], [1, 'bbbbbbbbbb'], [2, 'cccccccccc']] as const) assert.equal((await part(b, 'forgotten.bin', u.id, n, c)).status, 200);
      await waitFor(async () => held === 1);
      const rows = await ctx.db.selectFrom('parts').select(['part_number', 'checksum', 'updated']).where('upload_id', '=', u.id).orderBy('part_number').execute();
      const finishing = hasher.finish(u.id, rows.map((r) => ({ partNumber: Number(r.part_number), checksum: r.checksum!, updated: Number(r.updated) })));
      hasher.forget(u.id);
      release();
      assert.equal(await finishing, null, 'the merge must read the file, not use a digest of parts 1-2');
      // The thread itself refuses a range that does not continue a digest from 0.
      await assert.rejects(extend.call(digests, u.id, file.uri!, 10, 20), /continues at 10/);
      await assert.rejects(extend.call(digests, 'skips', file.uri!, 0, 10).then(() => extend.call(digests, 'skips', file.uri!, 20, 30)), /at 10, not at 20/);
      digests.drop('skips');
    } finally {
      digests.extend = extend;
      release();
    }
  });

  it('part refusals do not abort: bad number, wrong size, missing number; completing with parts missing is refused', async () => {
    const b = await createBucket(s.files);
    const u = await init(b, 'p', 25, 10);
    // Each refusal says what is valid: the part numbers, the part's exact size, the missing parts.
    assert.equal((await part(b, 'p', u.id, 3, 'aaaaa')).json.message, 'Invalid part number: parts are numbered from 0 to 2.');
    assert.equal((await part(b, 'p', u.id, -1, 'aaaaa')).json.message, 'Invalid part number: parts are numbered from 0 to 2.');
    assert.equal((await part(b, 'p', u.id, 'x' as unknown as number, 'aaaaa')).status, 400);
    assert.equal((await part(b, 'p', u.id, 0, 'short')).json.message, 'Invalid part size: part 0 must be exactly 10 bytes.');
    assert.equal((await part(b, 'p', u.id, 2, '0123456789')).json.message, 'Invalid part size: part 2 must be exactly 5 bytes.');
    assert.equal((await put(url(b, 'p', `?uploadId=${u.id}`), '0123456789')).json.message, 'No upload part detected in request.');
    assert.equal((await part(b, 'p', u.id, 0, '0123456789')).status, 200);
    const early = await req(url(b, 'p', `?uploadId=${u.id}`), { method: 'POST' });
    assert.equal(early.status, 400);
    assert.equal(early.json.message, 'Not all parts have been uploaded: part(s) 1-2 missing (parts are numbered from 0 to 2).');
    assert.equal((await part(b, 'p', u.id, 2, '01234')).status, 200);
    const still = await req(url(b, 'p', `?uploadId=${u.id}`), { method: 'POST' });
    assert.equal(still.json.message, 'Not all parts have been uploaded: part(s) 1 missing (parts are numbered from 0 to 2).');
    assert.equal((await req(url(b, 'p', `?uploadId=${u.id}`))).json.parts.length, 2);
    assert.equal((await req(url(b, 'p', '?uploadId=00000000-0000-4000-8000-000000000000'))).status, 404);
    assert.equal((await req(url(b, 'p', '?uploadId=garbage'))).status, 422);
  });

  it('a logically deleted bucket answers 404 on every multipart route', async () => {
    const b = await createBucket(s.files);
    const u = await init(b, 'd', 25, 10);
    assert.equal((await part(b, 'd', u.id, 0, '0123456789')).status, 200);
    await withCore((c) => setBucketDeleted(c.ctx, b, true));
    const calls: Array<[string, string, string?]> = [
      ['GET', `?uploadId=${u.id}`],
      ['PUT', `?uploadId=${u.id}&partNumber=1`, '0123456789'],
      ['POST', `?uploadId=${u.id}`],
      ['DELETE', `?uploadId=${u.id}`],
      ['POST', '?uploads&size=25&partSize=10'],
    ];
    for (const [method, q, body] of calls) {
      const r = await req(url(b, 'd', q), { method, ...(body ? { body } : {}) });
      assert.equal(r.status, 404, `${method} ${q}: ${r.text}`);
      assert.equal(r.json.message, 'Bucket does not exist.', `${method} ${q}`);
    }
    assert.equal((await req(`${s.files}/${b}?uploads`)).status, 404);
    // Nothing changed: undeleted, the upload is still there with its one part.
    await withCore((c) => setBucketDeleted(c.ctx, b, false));
    assert.equal((await req(url(b, 'd', `?uploadId=${u.id}`))).json.parts.length, 1);
  });

  it('abort: 204, parts and file removed, reservation released', async () => {
    const b = await createBucket(s.files);
    await withCore((c) => setBucketProperties(c.ctx, b, { quotaSize: 30 }));
    const before = (await storedFiles(s)).length;
    const u = await init(b, 'a', 25, 10);
    assert.equal((await storedFiles(s)).length, before + 1);
    // the reservation counts against the quota
    assert.equal((await put(url(b, 'other'), '0123456789')).json.message, 'Bucket quota exceeded.');
    await part(b, 'a', u.id, 0, '0123456789');
    const r = await req(url(b, 'a', `?uploadId=${u.id}`), { method: 'DELETE' });
    assert.equal(r.status, 204);
    assert.equal((await req(url(b, 'a', `?uploadId=${u.id}`))).status, 404);
    await waitFor(async () => (await storedFiles(s)).length === before);
    assert.equal((await put(url(b, 'other'), '0123456789')).status, 200);
    assert.equal((await req(`${s.files}/${b}`)).json.size, 10);
  });

  it('a part whose transfer fails aborts the whole upload (the default)', async () => {
    const b = await createBucket(s.files);
    const before = (await storedFiles(s)).length;
    const u = await init(b, 'f', 25, 10);
    await part(b, 'f', u.id, 0, '0123456789');
    await putAndDisconnect(url(b, 'f', `?uploadId=${u.id}&partNumber=1`), 10, Buffer.from('01234'));
    await waitFor(async () => (await req(url(b, 'f', `?uploadId=${u.id}`))).status === 404);
    await waitFor(async () => (await storedFiles(s)).length === before);
  });

  it('many parts cut off at random points in parallel never crash the server', async () => {
    const b = await createBucket(s.files);
    for (let round = 0; round < 6; round++) {
      const u = await init(b, `cut${round}`, 80, 20);
      await Promise.all([0, 1, 2, 3].map((n) => putAndDisconnect(url(b, `cut${round}`, `?uploadId=${u.id}&partNumber=${n}`), 20, Buffer.from('x'.repeat((round * 3 + n) % 19)))));
    }
    assert.equal((await req(`${s.url}/healthz`)).status, 200);
    await waitFor(async () => (await req(`${s.files}/${b}?uploads`)).json.length === 0);
  });

  it('with FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE=0 only the failed part is dropped and can be re-sent', async () => {
    const t = await startTestServer({ ...SMALL, FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE: '0' });
    try {
      const b = await createBucket(t.files);
      const u = (await req(`${t.files}/${b}/f?uploads&size=20&partSize=10`, { method: 'POST' })).json;
      await put(`${t.files}/${b}/f?uploadId=${u.id}&partNumber=0`, '0123456789');
      await putAndDisconnect(`${t.files}/${b}/f?uploadId=${u.id}&partNumber=1`, 10, Buffer.from('01234'));
      await new Promise((r) => setTimeout(r, 200));
      const listed = await req(`${t.files}/${b}/f?uploadId=${u.id}`);
      assert.equal(listed.status, 200);
      assert.deepEqual(listed.json.parts.map((p: { part_number: number }) => p.part_number), [0]);
      assert.equal((await put(`${t.files}/${b}/f?uploadId=${u.id}&partNumber=1`, 'abcdefghij')).status, 200);
      assert.equal((await req(`${t.files}/${b}/f?uploadId=${u.id}`, { method: 'POST' })).status, 200);
      assert.equal((await req(`${t.files}/${b}/f`)).text, '0123456789abcdefghij');
    } finally {
      await t.close();
    }
  });

  it('a locked bucket refuses parts, completion and abort', async () => {
    const b = await createBucket(s.files);
    const u = await init(b, 'l', 20, 10);
    await part(b, 'l', u.id, 0, '0123456789');
    await withCore((c) => setBucketLocked(c.ctx, b, true));
    assert.equal((await part(b, 'l', u.id, 1, '0123456789')).status, 403);
    assert.equal((await req(url(b, 'l', `?uploadId=${u.id}`), { method: 'POST' })).status, 403);
    assert.equal((await req(url(b, 'l', `?uploadId=${u.id}`), { method: 'DELETE' })).status, 403);
    await withCore((c) => setBucketLocked(c.ctx, b, false));
    assert.equal((await part(b, 'l', u.id, 1, '0123456789')).status, 200);
  });

  it('a completed upload refuses further parts; Prefer: respond-async answers 202 and the object appears', async () => {
    const b = await createBucket(s.files);
    const u = await init(b, 'async', 20, 10);
    await part(b, 'async', u.id, 0, '0123456789');
    await part(b, 'async', u.id, 1, 'abcdefghij');
    const r = await req(url(b, 'async', `?uploadId=${u.id}`), { method: 'POST', headers: { Prefer: 'respond-async' } });
    assert.equal(r.status, 202);
    assert.equal(r.json.completed, true);
    const after = await part(b, 'async', u.id, 1, 'abcdefghij');
    assert.ok(after.status === 403 || after.status === 404, String(after.status));
    await waitFor(async () => (await req(url(b, 'async'))).status === 200);
    assert.equal((await req(url(b, 'async'))).text, '0123456789abcdefghij');
  });

  it('expiry: an old upload refuses parts (410) and the periodic task removes it and its file', async () => {
    const t = await startTestServer({ ...SMALL, FILES_REST_MULTIPART_EXPIRES: '0.00002' }); // about 1.7 s
    try {
      const b = await createBucket(t.files);
      const before = (await storedFiles(t)).length;
      const u = (await req(`${t.files}/${b}/e?uploads&size=20&partSize=10`, { method: 'POST' })).json;
      await new Promise((r) => setTimeout(r, 1800));
      const late = await put(`${t.files}/${b}/e?uploadId=${u.id}&partNumber=0`, '0123456789');
      assert.ok(late.status === 410 || late.status === 404, String(late.status));
      await waitFor(async () => (await req(`${t.files}/${b}/e?uploadId=${u.id}`)).status === 404, 15_000);
      await waitFor(async () => (await storedFiles(t)).length === before, 15_000);
    } finally {
      await t.close();
    }
  });

  it('ng-file-upload: a plain form upload and a chunked upload built the way the library sends them', async () => {
    const b = await createBucket(s.files);
    const form = new FormData();
    form.append('_chunkNumber', '0');
    form.append('_currentChunkSize', '11');
    form.append('_chunkSize', '10000000');
    form.append('_totalSize', '11');
    form.append('file', new Blob(['hello angul']), 'a.txt');
    const r = await req(url(b, 'ng.txt'), { method: 'PUT', body: form });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.size, 11);
    assert.equal((await req(url(b, 'ng.txt'))).text, 'hello angul');

    const u = await init(b, 'ngc.txt', 15, 10);
    for (const [n, chunk] of [[0, '0123456789'], [1, 'abcde']] as const) {
      const f = new FormData();
      f.append('_chunkSize', '10');
      f.append('_currentChunkSize', String(chunk.length));
      f.append('_chunkNumber', String(n));
      f.append('_totalSize', '15');
      f.append('file', new Blob([chunk]), 'ngc.txt');
      const pr = await req(url(b, 'ngc.txt', `?uploadId=${u.id}`), { method: 'PUT', body: f });
      assert.equal(pr.status, 200, pr.text);
    }
    assert.equal((await req(url(b, 'ngc.txt', `?uploadId=${u.id}`), { method: 'POST' })).status, 200);
    assert.equal((await req(url(b, 'ngc.txt'))).text, '0123456789abcde');
  });
});
