import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestServer, type TestServer } from './support/server.js';
import { spawnFilesRest } from './support/process.js';
import { processEnv } from './support/fixtures.js';
import { closedPort, findStoredFile, flipByte, writeTestFile } from './support/client-files.js';
import {
  ChecksumMismatchError, FilesClient, FilesError, NodeFilesClient, UploadRestartError, UploadStoppedError, choosePartSize, encodeKey,
  type UploadEvent, type UploadProgress,
} from '../src/client/node.js';

const KiB = 1024;
const MiB = 1024 * KiB;
// A short shutdown grace: a fetch whose body fails leaves a connection that never sends a request, and
// the server's stop waits the whole grace period for it.
const SMALL = { FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(16 * KiB), FILES_REST_SHUTDOWN_GRACE: '2' };
const md5 = (b: Uint8Array | string) => createHash('md5').update(b).digest('hex');

function bytes(n: number, seed = 3): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(n);
  let x = seed * 2654435761;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

/**
 * A fetch that breaks chosen part uploads mid-transfer: the body stops halfway with an error, so
 * the server sees a client that went away after sending part of the declared Content-Length.
 */
function breakingFetch(breakParts: Map<number, number>, log: { puts: number[]; maxConcurrentParts: number }) {
  let concurrent = 0;
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(String(input));
    const isPart = init?.method === 'PUT' && url.searchParams.has('uploadId');
    if (!isPart) return fetch(input, init);
    const n = Number(url.searchParams.get('partNumber'));
    log.puts.push(n);
    const left = breakParts.get(n) ?? 0;
    concurrent++;
    log.maxConcurrentParts = Math.max(log.maxConcurrentParts, concurrent);
    try {
      if (left > 0) {
        breakParts.set(n, left - 1);
        const body = init!.body as Blob | ReadableStream<Uint8Array>;
        const blob = body instanceof Blob ? body : new Blob([new Uint8Array(await new Response(body).arrayBuffer())]);
        const half = new Uint8Array(await blob.slice(0, Math.floor(blob.size / 2)).arrayBuffer());
        const broken = new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(half);
          },
          pull(c) {
            return new Promise((_, reject) => setTimeout(() => {
              c.error(new Error('simulated network failure'));
              reject(new Error('simulated network failure'));
            }, 50));
          },
        });
        const headers = { ...(init!.headers as Record<string, string>), 'content-length': String(blob.size) };
        return await fetch(input, { ...init, headers, body: broken, duplex: 'half' } as RequestInit);
      }
      return await fetch(input, init);
    } finally {
      concurrent--;
    }
  }) as typeof fetch;
}

describe('Client SDK', () => {
  let s: TestServer;
  let dir: string;
  let client: NodeFilesClient;
  before(async () => {
    s = await startTestServer(SMALL);
    dir = await mkdtemp(join(tmpdir(), 'files-rest-client-'));
    client = new NodeFilesClient({ url: s.url });
  });
  after(async () => {
    await s.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('part size: max(8 MiB, size/9000) rounded up to a MiB; keys are encoded per segment', () => {
    assert.equal(choosePartSize(1), 8 * MiB);
    assert.equal(choosePartSize(1024 * MiB), 8 * MiB);
    const huge = 200 * 1024 * MiB;
    assert.equal(choosePartSize(huge), Math.ceil(huge / 9000 / MiB) * MiB);
    assert.ok(huge / choosePartSize(huge) <= 9000);
    assert.equal(encodeKey('a b/c?d#e'), 'a%20b/c%3Fd%23e');
    assert.equal(encodeKey('x/../y'), 'x%2F..%2Fy');
  });

  it('buckets, objects, versions, deletes and paged listings; typed errors with the server status and message', async () => {
    const b = await client.createBucket();
    assert.match(b.id, /^[0-9a-f-]{36}$/);
    assert.equal(await client.bucketExists(b.id), true);
    assert.equal(await client.bucketExists('00000000-0000-4000-8000-000000000000'), false);
    assert.equal((await client.getBucket(b.id)).id, b.id);

    const v1 = await client.putObject(b.id, 'dir/a b.txt', 'one');
    const v2 = await client.putObject(b.id, 'dir/a b.txt', new TextEncoder().encode('two!'), { contentType: 'text/plain' });
    assert.equal(v2.checksum, `md5:${md5('two!')}`);
    for (let i = 0; i < 5; i++) await client.putObject(b.id, `k${i}`, `v${i}`);
    assert.equal(await (await client.getObject(b.id, 'dir/a b.txt')).text(), 'two!');
    assert.equal(await (await client.getObject(b.id, 'dir/a b.txt', { versionId: v1.version_id })).text(), 'one');
    const head = await client.headObject(b.id, 'dir/a b.txt');
    assert.equal(head.size, 4);
    assert.equal(head.md5, md5('two!'));

    const page = await client.listObjects(b.id, { limit: 2 });
    assert.equal(page.contents.length, 2);
    assert.ok(page.next);
    const all = [];
    for await (const o of client.objects(b.id, { limit: 2 })) all.push(o.key);
    assert.deepEqual(all, ['dir/a b.txt', 'k0', 'k1', 'k2', 'k3', 'k4']);
    const prefixed = [];
    for await (const o of client.objects(b.id, { prefix: 'k', limit: 3 })) prefixed.push(o.key);
    assert.deepEqual(prefixed, ['k0', 'k1', 'k2', 'k3', 'k4']);

    const del = await client.deleteObject(b.id, 'k0');
    assert.ok(del.versionId);
    const versions = [];
    for await (const o of client.objects(b.id, { versions: true, prefix: 'k0', limit: 1 })) versions.push(o);
    assert.equal(versions.length, 2);
    assert.equal(versions.filter((v) => v.delete_marker).length, 1);
    await assert.rejects(client.getObject(b.id, 'k0'), (e: unknown) => e instanceof FilesError && e.status === 404);
    await client.deleteVersion(b.id, 'dir/a b.txt', v1.version_id);
    await assert.rejects(
      client.getObject(b.id, 'dir/a b.txt', { versionId: v1.version_id }),
      (e: unknown) => e instanceof FilesError && e.status === 404 && e.message === 'Object does not exist.',
    );
    await assert.rejects(
      client.initiateMultipart(b.id, 'x', 10, 1),
      (e: unknown) => e instanceof FilesError && e.status === 400 && e.message.startsWith('Invalid part size'),
    );
    // Every call takes an AbortSignal.
    const ac = new AbortController();
    ac.abort();
    await assert.rejects(client.listObjects(b.id, { signal: ac.signal }), (e: Error) => e.name === 'AbortError');
    await assert.rejects(client.upload(b.id, 'z', new Uint8Array(10), { signal: ac.signal }), (e: Error) => e.name === 'AbortError');
  });

  it('a server that cannot be reached: the error names the URL it tried and why', async () => {
    const port = await closedPort();
    const down = new NodeFilesClient({ url: `http://127.0.0.1:${port}` });
    const bucket = '00000000-0000-4000-8000-000000000000';
    const names = (url: string) => (e: unknown) => {
      const err = e as Error & { url?: string; method?: string };
      assert.equal(err.name, 'ConnectionError');
      assert.equal(err.url, url);
      assert.match(err.message, new RegExp(`could not reach ${url.replace(/[.?]/g, '\\$&')}: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}$`));
      return true;
    };
    await assert.rejects(down.listObjects(bucket), names(`http://127.0.0.1:${port}/files/${bucket}`));
    await assert.rejects(down.putObject(bucket, 'a b.txt', 'x'), names(`http://127.0.0.1:${port}/files/${bucket}/a%20b.txt`));
    // upload() retries, then says which part of which key failed, and where it tried to send it.
    await assert.rejects(down.upload(bucket, 'k.txt', new TextEncoder().encode('x'), { retries: 1, retryDelay: 1 }), (e: unknown) => {
      assert.match((e as Error).message, new RegExp(`^k\\.txt failed after 2 attempts: could not reach http://127\\.0\\.0\\.1:${port}/files/${bucket}/k\\.txt: connect ECONNREFUSED`));
      return true;
    });
  });

  it('sends the token as a Bearer credential', async () => {
    const seen: (string | null)[] = [];
    const c = new FilesClient({
      url: `${s.url}/files`,
      token: 'tok-123',
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        seen.push(new Headers(init?.headers).get('authorization'));
        return fetch(input, init);
      }) as typeof fetch,
    });
    await c.createBucket();
    assert.deepEqual(seen, ['Bearer tok-123']);
  });

  it('multipart primitives: initiate, parts, list, complete, abort', async () => {
    const b = (await client.createBucket()).id;
    const data = bytes(40 * KiB);
    const u = await client.initiateMultipart(b, 'mp.bin', data.length, 16 * KiB);
    assert.equal(u.last_part_number, 2);
    const p1 = await client.uploadPart(b, 'mp.bin', u.id, 1, data.slice(16 * KiB, 32 * KiB));
    assert.equal(p1.checksum, `md5:${md5(data.slice(16 * KiB, 32 * KiB))}`);
    await client.uploadPart(b, 'mp.bin', u.id, 0, new Blob([data.slice(0, 16 * KiB)]));
    await client.uploadPart(b, 'mp.bin', u.id, 2, data.slice(32 * KiB));
    assert.deepEqual((await client.listParts(b, 'mp.bin', u.id)).parts.map((p) => p.part_number), [0, 1, 2]);
    assert.equal((await client.listUploads(b)).length, 1);
    const done = await client.completeMultipart(b, 'mp.bin', u.id);
    assert.equal(done.completed, true);
    const got = new Uint8Array(await (await client.getObject(b, 'mp.bin')).arrayBuffer());
    assert.equal(md5(got), md5(data));

    const u2 = await client.initiateMultipart(b, 'gone.bin', data.length, 16 * KiB);
    await client.abortMultipart(b, 'gone.bin', u2.id);
    await assert.rejects(client.listParts(b, 'gone.bin', u2.id), (e: unknown) => e instanceof FilesError && e.status === 404);
  });

  it('upload: small content in one PUT, large in parallel parts, with progress and the MD5 checked', async () => {
    const b = (await client.createBucket()).id;
    const small = await client.upload(b, 'small.bin', bytes(1000), { partSize: 16 * KiB });
    assert.equal(small.multipart, false);
    assert.equal(small.object.checksum, `md5:${md5(bytes(1000))}`);

    const data = bytes(300 * KiB + 123, 9);
    const progress: UploadProgress[] = [];
    const events: UploadEvent[] = [];
    const log = { puts: [] as number[], maxConcurrentParts: 0 };
    const c = new FilesClient({ url: s.url, fetch: breakingFetch(new Map(), log) }); // the browser-safe core, WebAssembly MD5
    const r = await c.upload(b, 'big.bin', new Blob([data]), {
      partSize: 32 * KiB,
      parallel: 3,
      onProgress: (p) => progress.push(p),
      onEvent: (e) => events.push(e),
    });
    assert.equal(r.multipart, true);
    assert.equal(r.partsTotal, 10);
    assert.equal(r.partsSent, 10);
    assert.equal(r.md5, md5(data));
    assert.equal(r.object.checksum, `md5:${md5(data)}`);
    assert.equal(r.object.size, data.length);
    assert.equal(log.maxConcurrentParts, 3);
    const last = progress.at(-1)!;
    assert.equal(last.loaded, data.length);
    assert.equal(last.partsDone, 10);
    assert.ok(progress.every((p) => p.loaded <= p.total));
    assert.equal(events[0]?.type, 'start');

    // A ReadableStream of known size goes in parts too.
    const stream = new Blob([data]).stream();
    const rs = await client.upload(b, 'stream.bin', stream, { size: data.length, partSize: 32 * KiB, parallel: 2 });
    assert.equal(rs.multipart, true);
    assert.equal(rs.object.checksum, `md5:${md5(data)}`);
    const tooLong = new Blob([data]).stream();
    await assert.rejects(client.upload(b, 'bad.bin', tooLong, { size: data.length - 1, partSize: 32 * KiB }), /longer than/);
  });

  it('upload resumes an upload the server holds: only missing (or wrong) parts are sent', async () => {
    const b = (await client.createBucket()).id;
    const data = bytes(160 * KiB, 5);
    const path = join(dir, 'resume.bin');
    await writeFile(path, data);
    const ps = 16 * KiB;
    const u = await client.initiateMultipart(b, 'resume.bin', data.length, ps);
    for (const n of [0, 1, 4, 7]) await client.uploadPart(b, 'resume.bin', u.id, n, data.slice(n * ps, (n + 1) * ps));
    await client.uploadPart(b, 'resume.bin', u.id, 5, new Uint8Array(ps)); // wrong content: must be re-sent
    const log = { puts: [] as number[], maxConcurrentParts: 0 };
    const c = new NodeFilesClient({ url: s.url, fetch: breakingFetch(new Map(), log) });
    const events: UploadEvent[] = [];
    const r = await c.upload(b, 'resume.bin', path, { partSize: ps, onEvent: (e) => events.push(e) });
    assert.equal(r.resumed, true);
    assert.equal(r.uploadId, u.id);
    assert.equal(r.partsSkipped, 4);
    assert.equal(r.partsSent, 6);
    assert.deepEqual(log.puts.sort((x, y) => x - y), [2, 3, 5, 6, 8, 9]);
    assert.ok(events.some((e) => e.type === 'resume' && /server has 5 of 10 parts/.test(e.message)));
    assert.equal(r.object.checksum, `md5:${md5(data)}`);
    // resume: false starts a new upload
    const fresh = await client.upload(b, 'resume.bin', path, { partSize: ps, resume: false });
    assert.equal(fresh.resumed, false);
    assert.equal(fresh.partsSent, 10);
  });

  it('stopSignal: parts in flight finish, no new one starts, UploadStoppedError says what the server holds; the next upload resumes', async () => {
    // The server aborts an upload whose part is cut off (the default): a gentle stop cuts none.
    const b = (await client.createBucket()).id;
    const ps = 16 * KiB;
    const data = bytes(10 * ps + 5, 11);
    const stop = new AbortController();
    const started: number[] = [];
    const c = new NodeFilesClient({
      url: s.url,
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        const n = new URL(String(input)).searchParams.get('partNumber');
        if (init?.method === 'PUT' && n !== null) {
          started.push(Number(n));
          if (started.length === 3) stop.abort();
        }
        return fetch(input, init);
      }) as typeof fetch,
    });
    let stopped: UploadStoppedError | undefined;
    await assert.rejects(c.upload(b, 'stopped.bin', data, { partSize: ps, parallel: 2, stopSignal: stop.signal }), (e: unknown) => {
      stopped = e as UploadStoppedError;
      return e instanceof UploadStoppedError;
    });
    assert.equal(started.length, 3);
    assert.equal(stopped!.partsOnServer, 3);
    assert.equal(stopped!.partsTotal, 11);
    assert.match(stopped!.message, /^upload of stopped\.bin stopped: the server holds 3 of 11 parts of upload [0-9a-f-]{36}; upload it again to resume$/);
    assert.equal((await client.listParts(b, 'stopped.bin', stopped!.uploadId!)).parts.length, 3);
    const r = await client.upload(b, 'stopped.bin', data, { partSize: ps });
    assert.equal(r.uploadId, stopped!.uploadId);
    assert.equal(r.partsSkipped, 3);
    assert.equal(r.partsSent, 8);
    assert.equal(r.object.checksum, `md5:${md5(data)}`);
  });

  it('a part that fails mid-transfer is retried with backoff when the server keeps the upload (ABORT_ON_PART_FAILURE=0)', async () => {
    const t = await startTestServer({ ...SMALL, FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE: '0' });
    try {
      const log = { puts: [] as number[], maxConcurrentParts: 0 };
      const c = new NodeFilesClient({ url: t.url, fetch: breakingFetch(new Map([[2, 2]]), log) });
      const b = (await c.createBucket()).id;
      const data = bytes(100 * KiB, 11);
      const events: UploadEvent[] = [];
      const r = await c.upload(b, 'retry.bin', data, { partSize: 16 * KiB, retryDelay: 20, onEvent: (e) => events.push(e) });
      assert.equal(r.retries, 2);
      assert.equal(r.restarts, 0);
      assert.equal(r.partsSent, 7);
      assert.equal(log.puts.filter((n) => n === 2).length, 3);
      assert.equal(events.filter((e) => e.type === 'retry').length, 2);
      assert.equal(r.object.checksum, `md5:${md5(data)}`);
    } finally {
      await t.close();
    }
  });

  it('when the server aborts the upload on a failed part (the default), the upload restarts from scratch and says why', async () => {
    const log = { puts: [] as number[], maxConcurrentParts: 0 };
    const c = new NodeFilesClient({ url: s.url, fetch: breakingFetch(new Map([[3, 1]]), log) });
    const b = (await c.createBucket()).id;
    const data = bytes(100 * KiB, 12);
    const events: UploadEvent[] = [];
    const r = await c.upload(b, 'restart.bin', data, { partSize: 16 * KiB, parallel: 1, retryDelay: 20, onEvent: (e) => events.push(e) });
    assert.equal(r.restarts, 1);
    const restart = events.find((e) => e.type === 'restart');
    assert.ok(restart, 'a restart event');
    assert.match(restart.message, /FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE=0/);
    assert.match(restart.message, /from scratch/);
    assert.equal(r.object.checksum, `md5:${md5(data)}`);
    assert.equal((await c.listUploads(b)).length, 0);

    // A stream cannot be read again: the failure is reported instead.
    const log2 = { puts: [] as number[], maxConcurrentParts: 0 };
    const c2 = new NodeFilesClient({ url: s.url, fetch: breakingFetch(new Map([[1, 1]]), log2) });
    await assert.rejects(
      c2.upload(b, 'stream-restart.bin', new Blob([data]).stream(), { size: data.length, partSize: 16 * KiB, parallel: 1, retryDelay: 20 }),
      (e: unknown) => e instanceof UploadRestartError && /cannot restart/.test(e.message),
    );
  });

  it('download: to a file with MD5 check, resumed from a partial file with Range, corruption detected', async () => {
    const b = (await client.createBucket()).id;
    const data = bytes(200 * KiB, 21);
    const up = await client.upload(b, 'dl.bin', data, { partSize: 64 * KiB });
    const dest = join(dir, 'dl.bin');
    const r = await client.download(b, 'dl.bin', dest);
    assert.equal(r.md5, md5(data));
    assert.equal(r.resumedFrom, 0);
    assert.equal(md5(await readFile(dest)), md5(data));

    // A partial file from an interrupted run: only the rest is fetched, with Range + If-Range.
    const dest2 = join(dir, 'dl2.bin');
    await writeFile(`${dest2}.part`, data.slice(0, 50 * KiB));
    await writeFile(`${dest2}.part.json`, JSON.stringify({ target: `${b}/dl.bin`, etag: `"${up.object.checksum}"` }));
    const ranges: (string | null)[] = [];
    const c = new NodeFilesClient({
      url: s.url,
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        ranges.push(new Headers(init?.headers).get('range'));
        return fetch(input, init);
      }) as typeof fetch,
    });
    const r2 = await c.download(b, 'dl.bin', dest2);
    assert.equal(r2.resumedFrom, 50 * KiB);
    assert.equal(r2.transferred, data.length - 50 * KiB);
    assert.deepEqual(ranges, [`bytes=${50 * KiB}-`]);
    assert.equal(md5(await readFile(dest2)), md5(data));
    assert.equal(existsSync(`${dest2}.part`), false);
    assert.equal(existsSync(`${dest2}.part.json`), false);

    // A transfer cut in the middle of one call is resumed by that call.
    let cut = true;
    const c3 = new NodeFilesClient({
      url: s.url,
      fetch: (async (input: RequestInfo | URL, init?: RequestInit) => {
        const res = await fetch(input, init);
        if (!cut || init?.method === 'HEAD') return res;
        cut = false;
        const reader = res.body!.getReader();
        let sent = 0;
        const body = new ReadableStream<Uint8Array>({
          async pull(ctl) {
            if (sent >= 70 * KiB) return ctl.error(new TypeError('terminated'));
            const { done, value } = await reader.read();
            if (done) return ctl.close();
            sent += value.length;
            ctl.enqueue(value);
          },
        });
        return new Response(body, { status: res.status, headers: res.headers });
      }) as typeof fetch,
    });
    const dest3 = join(dir, 'dl3.bin');
    const r3 = await c3.download(b, 'dl.bin', dest3, { retryDelay: 10 });
    assert.ok(r3.transferred < 2 * data.length);
    assert.equal(md5(await readFile(dest3)), md5(data));

    // Corruption on the server's disk: the download fails and leaves nothing behind.
    const stored = await findStoredFile(s.config.dataDir, md5(data), data.length);
    assert.ok(stored, 'stored file found');
    await flipByte(stored, 1234);
    const bad = join(dir, 'bad.bin');
    await assert.rejects(client.download(b, 'dl.bin', bad), (e: unknown) => e instanceof ChecksumMismatchError && e.expected === `md5:${md5(data)}`);
    assert.equal(existsSync(bad), false);
    assert.equal(existsSync(`${bad}.part`), false);
    // The browser-safe core detects it as well.
    await assert.rejects(new FilesClient({ url: s.url }).downloadBlob(b, 'dl.bin'), ChecksumMismatchError);
  });

  it('a 1 GiB file goes up in 4 parallel parts and its MD5 is verified', { timeout: 600_000 }, async () => {
    const path = join(dir, 'one-gib.bin');
    const size = 1024 * MiB;
    const expected = await writeTestFile(path, size);
    // The server runs in its own process, as it would, so that client and server do not share a thread.
    const pe = await processEnv({ FILES_REST_SHUTDOWN_GRACE: '2' });
    const server = await spawnFilesRest('serve', pe.env);
    try {
      const log = { puts: [] as number[], maxConcurrentParts: 0 };
      const c = new NodeFilesClient({ url: server.url, fetch: breakingFetch(new Map(), log) });
      const b = (await c.createBucket()).id;
      let last: UploadProgress | null = null;
      const started = Date.now();
      const r = await c.upload(b, 'one-gib.bin', path, { parallel: 4, onProgress: (p) => (last = p) });
      const secs = (Date.now() - started) / 1000;
      console.log(`# 1 GiB upload: ${secs.toFixed(1)} s, ${(1024 / secs).toFixed(0)} MiB/s, ${r.partsTotal} parts of ${r.partSize / MiB} MiB`);
      assert.equal(r.multipart, true);
      assert.equal(r.partSize, 8 * MiB);
      assert.equal(r.partsTotal, 128);
      assert.equal(r.partsSent, 128);
      assert.equal(log.maxConcurrentParts, 4);
      assert.equal(r.md5, expected);
      assert.equal(r.object.checksum, `md5:${expected}`);
      assert.equal(r.object.size, size);
      assert.equal(last!.loaded, size);
    } finally {
      await server.kill();
      await pe.drop();
      await rm(path, { force: true });
      await rm(pe.dir, { recursive: true, force: true });
    }
  });
});
