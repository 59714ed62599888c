// Concurrent re-sends of one multipart part: serialised through the database (part-claims.ts) once
// their bytes arrive, the last complete one wins, completion answers 200 (never 500 for a client's race), and the object's
// bytes are one complete version of each part. On PostgreSQL the re-sends go to two API servers
// sharing the database and the storage, as two nodes would.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { createHash } from 'node:crypto';
import { startTestServer, testDatabase, type TestServer } from './support/server.js';
import { createBucket, req, streamRequest } from './support/http.js';
import { patternStream } from './support/fixtures.js';
import { ERRORS } from '../src/errors.js';

const MiB = 1024 * 1024;
const PART = 5 * MiB; // S3's smallest part: the same test runs on TEST_STORAGE=s3
const SIZE = PART + MiB;

async function md5Of(size: number, seed: number): Promise<string> {
  const h = createHash('md5');
  for await (const c of patternStream(size, 64 * 1024, seed)) h.update(c as Buffer);
  return h.digest('hex');
}

/** The MD5 of each part of a downloaded object. */
function partMd5s(url: string, sizes: number[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    http
      .get({ host: u.hostname, port: u.port, path: u.pathname + u.search }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`download answered ${res.statusCode}`));
        const out: string[] = [];
        let i = 0;
        let left = sizes[0]!;
        let h = createHash('md5');
        res.on('data', (d: Buffer) => {
          let off = 0;
          while (off < d.length) {
            const take = Math.min(left, d.length - off);
            h.update(d.subarray(off, off + take));
            off += take;
            left -= take;
            if (left === 0) {
              out.push(h.digest('hex'));
              h = createHash('md5');
              left = sizes[++i] ?? Infinity;
            }
          }
        });
        res.on('end', () => resolve(out));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

/** A PUT of `size` bytes whose body the test writes itself, and its answer once it comes. */
function openPut(url: string, size: number): { request: http.ClientRequest; answered: Promise<{ status: number; text: string }> } {
  const u = new URL(url);
  const request = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: 'PUT', agent: false, headers: { 'content-length': String(size) } });
  const answered = new Promise<{ status: number; text: string }>((resolve, reject) => {
    request.on('response', (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    request.on('error', reject);
  });
  return { request, answered };
}

describe('Concurrent re-sends of one multipart part', () => {
  let s: TestServer;
  let s2: TestServer | null = null;
  before(async () => {
    const env = { FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(PART), FILES_REST_BODY_IDLE_TIMEOUT: '60' };
    s = await startTestServer(env);
    // Two API nodes on one PostgreSQL database and one storage (one SQLite file is not shared by two
    // servers of one process: its single writer would block the thread).
    if (testDatabase() === 'postgres') s2 = await startTestServer({ ...env, ...s.env, PORT: '0' });
  });
  after(async () => {
    await s2?.close();
    await s.close();
  });
  const node = (i: number) => (s2 && i % 2 === 1 ? s2 : s);

  it('many re-sends at once, different and equal bytes: every one 200, completion 200, each part one whole version', async () => {
    const b = await createBucket(s.files);
    const want0 = new Map<string, number>();
    const seeds0 = [1, 2, 3, 4, 5, 6, 6, 6];
    for (const seed of new Set(seeds0)) want0.set(await md5Of(PART, seed), seed);
    const seeds1 = [11, 12, 13, 11];
    const want1 = new Map<string, number>();
    for (const seed of new Set(seeds1)) want1.set(await md5Of(MiB, seed), seed);
    for (let round = 0; round < 3; round++) {
      const key = `r${round}.bin`;
      const init = await req(`${s.files}/${b}/${key}?uploads&size=${SIZE}&partSize=${PART}`, { method: 'POST' });
      assert.equal(init.status, 200, init.text);
      const id = init.json.id as string;
      const partUrl = (i: number, n: number) => `${node(i).files}/${b}/${key}?uploadId=${id}&partNumber=${n}`;
      const sends = [
        ...seeds0.map((seed, i) => streamRequest(partUrl(i, 0), 'PUT', patternStream(PART, 64 * 1024, seed), PART)),
        ...seeds1.map((seed, i) => streamRequest(partUrl(i, 1), 'PUT', patternStream(MiB, 64 * 1024, seed), MiB)),
      ];
      const answers = await Promise.all(sends);
      for (const a of answers) assert.equal(a.status, 200, a.text);
      const done = await req(`${node(round).files}/${b}/${key}?uploadId=${id}`, { method: 'POST' });
      assert.equal(done.status, 200, `round ${round}: ${done.text}`);
      assert.equal(done.json.completed, true);
      const got = await partMd5s(`${s.files}/${b}/${key}`, [PART, MiB]);
      assert.ok(want0.has(got[0]!), `round ${round}: part 0 is not one complete version`);
      assert.ok(want1.has(got[1]!), `round ${round}: part 1 is not one complete version`);
      // The recorded checksum of the object is that of its bytes.
      const head = await req(`${s.files}/${b}?versions`);
      const v = head.json.contents.find((c: { key: string }) => c.key === key);
      const whole = createHash('md5');
      for await (const c of patternStream(PART, 64 * 1024, want0.get(got[0]!)!)) whole.update(c as Buffer);
      for await (const c of patternStream(MiB, 64 * 1024, want1.get(got[1]!)!)) whole.update(c as Buffer);
      assert.equal(v.checksum, `md5:${whole.digest('hex')}`);
    }
  });

  it('a re-send that starts while an earlier write of the part has sent no byte yet goes first; the earlier one, finishing last, is the part', async () => {
    const b = await createBucket(s.files);
    const key = 'first-bytes.bin';
    const init = await req(`${s.files}/${b}/${key}?uploads&size=${SIZE}&partSize=${PART}`, { method: 'POST' });
    const id = init.json.id as string;
    const tail = await streamRequest(`${s.files}/${b}/${key}?uploadId=${id}&partNumber=1`, 'PUT', patternStream(MiB, 64 * 1024, 51), MiB);
    assert.equal(tail.status, 200, tail.text);
    // Write A of part 0: its headers, not a byte of its body (a client that sends the re-send first).
    const { request: a, answered: answeredA } = openPut(`${node(1).files}/${b}/${key}?uploadId=${id}&partNumber=0`, PART);
    a.flushHeaders();
    try {
      // A has reached the server (and, before the claim waited for bytes, claimed the part).
      for (let i = 0; i < 400; i++) {
        const m = await req(`${node(1).url}/metrics`);
        if (/^files_rest_uploads_in_flight [1-9]/m.test(m.text)) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      await new Promise((r) => setTimeout(r, 200));
      // Write B of part 0, whole: it does not wait for A (which would hold it until A's idle timeout).
      const bWrite = await streamRequest(`${s.files}/${b}/${key}?uploadId=${id}&partNumber=0`, 'PUT', patternStream(PART, 64 * 1024, 52), PART);
      assert.equal(bWrite.status, 200, bWrite.text);
      for await (const c of patternStream(PART, 64 * 1024, 53)) if (!a.write(c)) await new Promise((r) => a.once('drain', r));
      a.end();
    } finally {
      if (!a.writableEnded) a.destroy();
    }
    const ra = await answeredA;
    assert.equal(ra.status, 200, ra.text);
    const done = await req(`${s.files}/${b}/${key}?uploadId=${id}`, { method: 'POST' });
    assert.equal(done.status, 200, done.text);
    // A finished last: part 0 is A's bytes.
    assert.deepEqual(await partMd5s(`${s.files}/${b}/${key}`, [PART, MiB]), [await md5Of(PART, 53), await md5Of(MiB, 51)]);
  });

  it('completion while a re-send of a part is still being written: 409, not a failed upload; afterwards 200', async () => {
    const b = await createBucket(s.files);
    const key = 'busy.bin';
    const init = await req(`${s.files}/${b}/${key}?uploads&size=${SIZE}&partSize=${PART}`, { method: 'POST' });
    const id = init.json.id as string;
    for (const [n, size] of [[0, PART], [1, MiB]] as const) {
      const r = await streamRequest(`${s.files}/${b}/${key}?uploadId=${id}&partNumber=${n}`, 'PUT', patternStream(size, 64 * 1024, 40 + n), size);
      assert.equal(r.status, 200, r.text);
    }
    // A re-send of part 0 that sends half of its bytes, then waits.
    const { request: resend, answered } = openPut(`${node(1).files}/${b}/${key}?uploadId=${id}&partNumber=0`, PART);
    const second = Buffer.alloc(PART / 2, 0x5a);
    resend.write(Buffer.alloc(PART / 2, 0xa5));
    try {
      // The claim is taken before the bytes are read: wait until it is there.
      const core = s.server.core;
      for (let i = 0; i < 400; i++) {
        const row = await core.ctx.db.selectFrom('part_writes').select('part_number').where('upload_id', '=', id).executeTakeFirst();
        if (row) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      const early = await req(`${s.files}/${b}/${key}?uploadId=${id}`, { method: 'POST' });
      assert.equal(early.status, 409, early.text);
      assert.equal(early.json.message, ERRORS.MULTIPART_PART_IN_PROGRESS.message.replace('{part}', '0'));
      resend.end(second);
    } finally {
      if (!resend.writableEnded) resend.destroy();
    }
    const r = await answered;
    assert.equal(r.status, 200, r.text);
    const done = await req(`${s.files}/${b}/${key}?uploadId=${id}`, { method: 'POST' });
    assert.equal(done.status, 200, done.text);
    const got = await partMd5s(`${s.files}/${b}/${key}`, [PART, MiB]);
    assert.equal(got[0], createHash('md5').update(Buffer.alloc(PART / 2, 0xa5)).update(second).digest('hex'));
    assert.equal(got[1], await md5Of(MiB, 41));
  });
});
