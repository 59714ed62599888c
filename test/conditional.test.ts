// Conditional writes (RFC 9110 §13.1): If-None-Match: * (create-if-absent) and If-Match (optimistic
// concurrency) on PUT, multipart initiation and multipart completion. A refused write answers 412
// and leaves nothing behind; the check is made again in the transaction that moves the head, so
// two racing writers cannot both win. Runs on both databases.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { PassThrough } from 'node:stream';
import { startTestServer, storedFiles, testStorage, type TestServer } from './support/server.js';
import { createBucket, put, req, waitFor } from './support/http.js';
import { putObject } from '../src/domain/objects.js';
import { expireUploads } from '../src/domain/multipart.js';
import { isAppError } from '../src/errors.js';
import { createWorker } from '../src/service.js';

const SMALL = { FILES_REST_MULTIPART_CHUNKSIZE_MIN: '2', FILES_REST_MULTIPART_CHUNKSIZE_MAX: '20', FILES_REST_MULTIPART_MAX_PARTS: '100' };
// S3 refuses parts under 5 MiB but the last; the multipart cases use parts of a few bytes.
const skipOnS3 = testStorage() === 's3' ? 'S3 refuses parts under 5 MiB' : false;

describe('Conditional writes', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer(SMALL);
  });
  after(() => s.close());

  const obj = (b: string, k: string, q = '') => `${s.files}/${b}/${k}${q}`;
  const bucketSize = async (b: string) => (await req(`${s.files}/${b}`)).json.size as number;
  const versionCount = async (b: string) => ((await req(`${s.files}/${b}?versions`)).json.contents as unknown[]).length;

  describe('PUT', () => {
    it('If-None-Match: * creates only when the key has no current version; 412 and nothing stored otherwise', async () => {
      const b = await createBucket(s.files);
      const first = await put(obj(b, 'k'), 'first', { 'if-none-match': '*' });
      assert.equal(first.status, 200, first.text);
      const files = (await storedFiles(s)).length;
      const again = await put(obj(b, 'k'), 'second', { 'if-none-match': '*' });
      assert.equal(again.status, 412);
      assert.deepEqual(again.json, { status: 412, message: 'Precondition failed: the object already exists (If-None-Match: *).' });
      assert.equal((await req(obj(b, 'k'))).text, 'first');
      assert.equal(await versionCount(b), 1);
      assert.equal(await bucketSize(b), 5);
      assert.equal((await storedFiles(s)).length, files);
      // A soft-deleted key has no current version: creating it again is allowed.
      assert.equal((await req(obj(b, 'k'), { method: 'DELETE' })).status, 204);
      const recreated = await put(obj(b, 'k'), 'third', { 'if-none-match': '*' });
      assert.equal(recreated.status, 200, recreated.text);
      assert.equal((await req(obj(b, 'k'))).text, 'third');
    });

    it('If-Match: the current ETag replaces; another ETag, or a missing key, is 412 and nothing stored', async () => {
      const b = await createBucket(s.files);
      const v1 = await put(obj(b, 'doc'), 'v1');
      const etag1 = v1.headers.get('etag')!;
      const v2 = await put(obj(b, 'doc'), 'v2', { 'if-match': etag1 });
      assert.equal(v2.status, 200, v2.text);
      const etag2 = v2.headers.get('etag')!;
      // A writer still holding the first ETag lost the race: refused, told the current ETag.
      const stale = await put(obj(b, 'doc'), 'v3', { 'if-match': etag1 });
      assert.equal(stale.status, 412);
      assert.equal(stale.json.message, `Precondition failed: the object's current ETag is ${etag2} (If-Match).`);
      assert.equal((await put(obj(b, 'doc'), 'v3', { 'if-match': `"md5:0", ${etag2}` })).status, 200);
      assert.equal((await put(obj(b, 'doc'), 'v4', { 'if-match': '*' })).status, 200);
      assert.equal((await put(obj(b, 'missing'), 'x', { 'if-match': '*' })).status, 412);
      assert.equal((await put(obj(b, 'missing'), 'x', { 'if-match': etag1 })).status, 412);
      assert.equal((await req(obj(b, 'missing'))).status, 404);
      assert.equal(await versionCount(b), 4);
      assert.equal(await bucketSize(b), 8);
      // If-None-Match with a list: refused when the current ETag is in it.
      const current = (await req(obj(b, 'doc'))).headers.get('etag')!;
      assert.equal((await put(obj(b, 'doc'), 'v5', { 'if-none-match': `W/${current}` })).status, 412);
      assert.equal((await put(obj(b, 'doc'), 'v5', { 'if-none-match': etag1 })).status, 200);
      // A malformed entity tag is a 400, not a guess.
      const bad = await put(obj(b, 'doc'), 'v6', { 'if-match': 'md5:abc' });
      assert.equal(bad.status, 400);
      assert.match(bad.json.message, /^Invalid If-Match header/);
    });

    it('a precondition that already fails is refused before the body is read', { timeout: 20_000 }, async () => {
      const b = await createBucket(s.files);
      assert.equal((await put(obj(b, 'big'), 'exists')).status, 200);
      const files = (await storedFiles(s)).length;
      const u = new URL(obj(b, 'big'));
      // Announces 1 GiB and sends 1 KiB: only an answer given before the body is read can arrive.
      const status = await new Promise<number>((resolve, reject) => {
        const r = http.request(
          { host: u.hostname, port: u.port, path: u.pathname, method: 'PUT', headers: { 'content-length': String(1024 ** 3), 'if-none-match': '*' } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
            r.destroy();
          },
        );
        r.on('error', (e) => (r.destroyed ? undefined : reject(e)));
        r.write(Buffer.alloc(1024, 1));
      });
      assert.equal(status, 412);
      assert.equal((await req(obj(b, 'big'))).text, 'exists');
      assert.equal(await bucketSize(b), 6);
      await waitFor(async () => (await storedFiles(s)).length === files);
    });

    it('two PUTs racing with If-None-Match: *, both past the early check: exactly one wins, the loser leaves nothing', async () => {
      const ctx = s.server.core.ctx;
      const b = await createBucket(s.files);
      const files = (await storedFiles(s)).length;
      const sources = [new PassThrough(), new PassThrough()];
      const uploads = sources.map((source, i) =>
        putObject(ctx, { bucketId: b, key: 'race', source, declaredSize: 6, precondition: { ifNoneMatch: '*' } }).then(
          (v) => ({ ok: true as const, i, v }),
          (e: unknown) => ({ ok: false as const, i, e }),
        ),
      );
      // Both have passed the early check (the key is absent) once they consume their body.
      sources.forEach((src, i) => src.write(`up${i}`));
      await waitFor(async () => sources.every((src) => src.readableLength === 0));
      sources.forEach((src, i) => src.end(`-${i}!`));
      const results = await Promise.all(uploads);
      const won = results.filter((r) => r.ok);
      const lost = results.filter((r) => !r.ok);
      assert.equal(won.length, 1, 'exactly one upload wins');
      assert.equal(lost.length, 1);
      assert.ok(isAppError(lost[0]!.ok ? null : lost[0]!.e, 'PRECONDITION_FAILED'), String(lost[0]!.ok ? '' : lost[0]!.e));
      assert.equal((await req(obj(b, 'race'))).text, `up${won[0]!.i}-${won[0]!.i}!`);
      assert.equal(await versionCount(b), 1);
      assert.equal(await bucketSize(b), 6);
      await waitFor(async () => (await storedFiles(s)).length === files + 1);
    });

    it('two PUTs over HTTP racing with If-None-Match: *: one 200, one 412', async () => {
      const b = await createBucket(s.files);
      const [r1, r2] = await Promise.all([
        put(obj(b, 'race-http'), 'one', { 'if-none-match': '*' }),
        put(obj(b, 'race-http'), 'two', { 'if-none-match': '*' }),
      ]);
      assert.deepEqual([r1.status, r2.status].sort(), [200, 412]);
      assert.equal(await versionCount(b), 1);
      assert.equal(await bucketSize(b), 3);
    });
  });

  describe('multipart', { skip: skipOnS3 }, () => {
    async function upload(b: string, key: string, headers: Record<string, string> = {}) {
      const init = await req(obj(b, key, '?uploads&size=4&partSize=2'), { method: 'POST', headers });
      if (init.status !== 200) return init;
      for (const [n, body] of ['ab', 'cd'].entries()) assert.equal((await put(obj(b, key, `?uploadId=${init.json.id}&partNumber=${n}`), body)).status, 200);
      return init;
    }

    it('initiation: If-None-Match: * on an existing key is 412 and creates no upload', async () => {
      const b = await createBucket(s.files);
      assert.equal((await put(obj(b, 'm'), 'old')).status, 200);
      const files = (await storedFiles(s)).length;
      const r = await req(obj(b, 'm', '?uploads&size=4&partSize=2'), { method: 'POST', headers: { 'if-none-match': '*' } });
      assert.equal(r.status, 412);
      assert.equal(r.json.message, 'Precondition failed: the object already exists (If-None-Match: *).');
      assert.deepEqual((await req(`${s.files}/${b}?uploads`)).json, []);
      assert.equal((await storedFiles(s)).length, files);
      const etag = (await req(obj(b, 'm'))).headers.get('etag')!;
      assert.equal((await req(obj(b, 'm', '?uploads&size=4&partSize=2'), { method: 'POST', headers: { 'if-match': '"md5:0"' } })).status, 412);
      assert.equal((await req(obj(b, 'm', '?uploads&size=4&partSize=2'), { method: 'POST', headers: { 'if-match': etag } })).status, 200);
    });

    it('completion: a precondition that fails when asked is 412 and the upload stays open', async () => {
      const b = await createBucket(s.files);
      const u = (await upload(b, 'c')).json;
      assert.equal((await put(obj(b, 'c'), 'meanwhile')).status, 200);
      const refused = await req(obj(b, 'c', `?uploadId=${u.id}`), { method: 'POST', headers: { 'if-none-match': '*' } });
      assert.equal(refused.status, 412);
      assert.equal(refused.json.message, 'Precondition failed: the object already exists (If-None-Match: *).');
      assert.equal((await req(obj(b, 'c'))).text, 'meanwhile');
      const open = await req(obj(b, 'c', `?uploadId=${u.id}`));
      assert.equal(open.json.completed, false);
      assert.equal(open.json.parts.length, 2);
      // With the current ETag as If-Match it completes.
      const etag = (await req(obj(b, 'c'))).headers.get('etag')!;
      const done = await req(obj(b, 'c', `?uploadId=${u.id}`), { method: 'POST', headers: { 'if-match': etag } });
      assert.equal(done.status, 200, done.text);
      assert.equal((await req(obj(b, 'c'))).text, 'abcd');
    });
  });
});

describe('Conditional multipart completion racing another write', { skip: skipOnS3 }, () => {
  let s: TestServer;
  before(async () => {
    // No in-process worker: the test decides when the merge runs.
    s = await startTestServer({ ...SMALL, FILES_REST_WORKER: '0' });
  });
  after(() => s.close());

  it('the merge checks the precondition again with the head flip: 412, the other write stays, the upload is removed', async () => {
    const ctx = s.server.core.ctx;
    const b = await createBucket(s.files);
    const key = `${s.files}/${b}/late.bin`;
    const files = (await storedFiles(s)).length;
    const init = await req(`${key}?uploads&size=4&partSize=2`, { method: 'POST', headers: { 'if-none-match': '*' } });
    assert.equal(init.status, 200, init.text);
    const id = init.json.id as string;
    for (const [n, body] of ['ab', 'cd'].entries()) assert.equal((await put(`${key}?uploadId=${id}&partNumber=${n}`, body)).status, 200);
    // Completion asked while the key is absent: accepted, waiting for the merge.
    const completion = req(`${key}?uploadId=${id}`, { method: 'POST', headers: { 'if-none-match': '*' } });
    await waitFor(async () => (await req(`${key}?uploadId=${id}`)).json?.completed === true);
    // Another client creates the key before the merge runs.
    assert.equal((await put(key, 'winner')).status, 200);
    const worker = createWorker(s.server.core);
    worker.start();
    try {
      const r = await completion;
      // Within the first seconds the status line says 412; later the 412 comes in the body.
      const body = JSON.parse(r.text.trim()) as { status: number; message: string };
      assert.deepEqual(body, { status: 412, message: 'Precondition failed: the object already exists (If-None-Match: *).' });
      if (r.status !== 200) assert.equal(r.status, 412);
    } finally {
      await worker.stop();
    }
    assert.equal((await req(key)).text, 'winner');
    assert.equal(((await req(`${s.files}/${b}?versions`)).json.contents as unknown[]).length, 1);
    assert.equal((await req(`${s.files}/${b}`)).json.size, 6);
    // The refused upload is removed by the expiry task, with its file and reservation (the worker may
    // already have run it).
    await expireUploads(ctx);
    assert.equal((await req(`${key}?uploadId=${id}`)).status, 404);
    const bucket = await ctx.db.selectFrom('buckets').select(['size', 'reserved_size']).where('id', '=', b).executeTakeFirstOrThrow();
    assert.deepEqual([Number(bucket.size), Number(bucket.reserved_size)], [6, 0]);
    // The worker removes the file's bytes.
    const cleanup = createWorker(s.server.core);
    cleanup.start();
    try {
      await waitFor(async () => (await storedFiles(s)).length === files + 1);
    } finally {
      await cleanup.stop();
    }
  });
});
