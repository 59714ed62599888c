import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { DIGEST_THREAD_NAME, OffThreadDigest, setDigestThreadIdleExit, stopDigestThread } from '../src/util/digest-thread.js';
import { receive } from '../src/domain/receive.js';
import { ByteMeter, HASH_HERE_MAX } from '../src/domain/byte-meter.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { processThreads, threadsNamed } from './support/threads.js';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAppError } from '../src/errors.js';

const MiB = 1024 * 1024;

/** Feeds `data` in chunks of the given sizes, in turn. */
function feed(d: OffThreadDigest, data: Buffer, sizes: number[]): void {
  for (let at = 0, i = 0; at < data.length; i++) {
    const n = Math.min(sizes[i % sizes.length]!, data.length - at);
    d.update(data.subarray(at, at + n));
    at += n;
  }
}

describe('digests on the digest thread', () => {
  it('equal the digest of the same bytes made here, whatever the size and chunking', async () => {
    for (const size of [0, 1, 4096, MiB - 1, MiB, MiB + 1, 3.5 * MiB]) {
      const data = randomBytes(size);
      for (const algorithm of ['sha256', 'sha1']) {
        const d = new OffThreadDigest(algorithm);
        feed(d, data, [65536, 7, 300_001]);
        assert.deepEqual(await d.digest(), createHash(algorithm).update(data).digest(), `${algorithm} of ${size} bytes`);
      }
    }
  });

  it('reuses batch memory the thread hands back, hashing only the bytes of each batch', async () => {
    // The first digest leaves buffers full of its bytes; the later ones, with batches of other
    // lengths (a last batch of a few bytes), must not see any of them.
    for (const [size, chunk] of [[3 * MiB + 200_000, 200_000], [MiB + 10, 65536], [2 * MiB + 3, MiB + 1], [MiB, 4096]] as const) {
      const data = randomBytes(size);
      const d = new OffThreadDigest('sha256');
      feed(d, data, [chunk]);
      assert.deepEqual(await d.digest(), createHash('sha256').update(data).digest(), `${size} bytes in chunks of ${chunk}`);
    }
  });

  it('holds its feeder back while 8 of its batches wait for the thread, and lets it go on once they are hashed', async () => {
    const data = randomBytes(12 * MiB);
    const d = new OffThreadDigest('sha256');
    // Fed at once: the thread cannot have handed anything back yet.
    feed(d, data.subarray(0, 7 * MiB), [65536]);
    assert.equal(d.behind(), null, '7 batches in flight are allowed');
    feed(d, data.subarray(7 * MiB, 8 * MiB), [65536]);
    const wait = d.behind();
    assert.ok(wait instanceof Promise, 'the 8th batch in flight holds the feeder back');
    await wait;
    assert.equal(d.behind(), null);
    feed(d, data.subarray(8 * MiB), [65536]);
    assert.deepEqual(await d.digest(), createHash('sha256').update(data).digest());
  });

  it('runs on named threads at the priority of the process (Linux: files-rest-hash, the same nice value as the main thread)', { skip: process.platform !== 'linux' && 'thread names are set on Linux only' }, async () => {
    const d = new OffThreadDigest('sha256');
    feed(d, randomBytes(2 * MiB), [MiB]);
    await d.digest();
    const threads = processThreads();
    const named = threads.filter((t) => t.name === DIGEST_THREAD_NAME);
    assert.ok(named.length >= 1, 'a thread named files-rest-hash');
    // Niced, a thread that computes every large body's MD5 starved on a busy machine (12 MiB/s).
    const main = threads.find((t) => t.id === String(process.pid))!;
    for (const t of named) assert.equal(t.nice, main.nice, 'the priority of the process');
  });

  it('computes several digests from one batch, and a meter with MD5 and SHA-256 computes them side by side on two threads', { skip: availableParallelism() < 2 && 'one digest thread on a 1-core machine' }, async () => {
    const data = randomBytes(3 * MiB + 5);
    const both = new OffThreadDigest('md5', 'sha256', 'sha1');
    feed(both, data, [65536, 999]);
    assert.deepEqual(await both.digests(), ['md5', 'sha256', 'sha1'].map((a) => createHash(a).update(data).digest()));
    const meter = new ByteMeter({ limit: null, limitError: () => new Error('limit'), expected: null, extraDigests: ['sha256'] });
    meter.resume();
    const done = once(meter, 'finish');
    for (let at = 0; at < data.length; at += 65536) meter.write(data.subarray(at, at + 65536));
    meter.end();
    await done;
    await meter.settle();
    assert.equal(meter.checksum(), `md5:${createHash('md5').update(data).digest('hex')}`);
    assert.deepEqual(meter.digest('sha256'), createHash('sha256').update(data).digest());
    if (process.platform === 'linux') {
      assert.equal(threadsNamed(DIGEST_THREAD_NAME), 2, 'two digest threads');
    }
  });

  it('a meter asked for MD5 off the thread hashes nothing on it and gives the checksum only after settle', async () => {
    for (const size of [0, 100, MiB + 1, 2 * MiB]) {
      const data = randomBytes(size);
      const meter = new ByteMeter({ limit: null, limitError: () => new Error('limit'), expected: null, md5OffThread: true });
      meter.resume();
      const done = once(meter, 'finish');
      meter.end(data);
      await done;
      assert.throws(() => meter.checksum(), /settle/);
      await meter.settle();
      assert.equal(meter.checksum(), `md5:${createHash('md5').update(data).digest('hex')}`, `${size} bytes`);
    }
  });

  it('a body announced at most HASH_HERE_MAX bytes is hashed on the receiving thread, every digest asked for, with no settle needed; one byte more goes to the digest threads', async () => {
    for (const size of [0, 4096, HASH_HERE_MAX]) {
      const data = randomBytes(size);
      const meter = new ByteMeter({ limit: null, limitError: () => new Error('limit'), expected: size, md5OffThread: true, extraDigests: ['sha256', 'sha1'] });
      meter.resume();
      const done = once(meter, 'finish');
      meter.end(data);
      await done;
      // Ready at once: nothing is waited for on another thread.
      assert.equal(meter.checksum(), `md5:${createHash('md5').update(data).digest('hex')}`, `${size} bytes`);
      assert.deepEqual(meter.digest('sha256'), createHash('sha256').update(data).digest());
      assert.deepEqual(meter.digest('sha1'), createHash('sha1').update(data).digest());
    }
    const over = new ByteMeter({ limit: null, limitError: () => new Error('limit'), expected: HASH_HERE_MAX + 1, md5OffThread: true });
    over.resume();
    const done = once(over, 'finish');
    over.end(randomBytes(HASH_HERE_MAX + 1));
    await done;
    assert.throws(() => over.checksum(), /settle/);
    await over.settle();
  });

  it('a byte meter torn down while it waits for the thread ends cleanly, and the thread serves the next digest', async () => {
    const meter = new ByteMeter({ limit: null, limitError: () => new Error('limit'), expected: null, extraDigests: ['sha256'] });
    meter.resume();
    const chunk = randomBytes(65536);
    for (let i = 0; i < 16 * 16; i++) meter.write(chunk);
    const errors: unknown[] = [];
    meter.on('error', (e) => errors.push(e));
    const closed = new Promise<unknown>((resolve) => meter.on('close', () => resolve(meter.errored)));
    meter.destroy(new Error('client went away'));
    assert.match(String(await closed), /client went away/);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(errors.length, 1, 'only the error it was torn down with');
    const fresh = new OffThreadDigest('sha256');
    feed(fresh, Buffer.concat([chunk, chunk]), [65536]);
    fresh.update(randomBytes(MiB));
    assert.equal((await fresh.digest()).length, 32);
  });

  it('keeps many digests apart, fed in turns', async () => {
    const bodies = Array.from({ length: 6 }, (_, i) => randomBytes(2 * MiB + i * 1000));
    const digests = bodies.map(() => new OffThreadDigest('sha256'));
    for (let at = 0; at < 3 * MiB; at += 65536) {
      bodies.forEach((b, i) => {
        if (at < b.length) digests[i]!.update(b.subarray(at, Math.min(b.length, at + 65536)));
      });
    }
    // One is dropped half-way (a failed receipt): the others are not disturbed.
    digests[2]!.dispose();
    const got = await Promise.all(digests.filter((_, i) => i !== 2).map((d) => d.digest()));
    assert.deepEqual(got, bodies.filter((_, i) => i !== 2).map((b) => createHash('sha256').update(b).digest()));
  });

  it('a thread that stops fails the digests it held when they are asked for, never while bytes are fed; the next ones work', async () => {
    const chunk = randomBytes(MiB);
    const held = new OffThreadDigest('sha256');
    held.update(chunk);
    await stopDigestThread();
    // Fed after the stop: nothing thrown (this runs inside a stream's write).
    held.update(chunk);
    held.update(chunk);
    await assert.rejects(held.digest(), /digest thread stopped/);
    const fresh = new OffThreadDigest('sha256');
    feed(fresh, Buffer.concat([chunk, chunk]), [65536]);
    assert.deepEqual(await fresh.digest(), createHash('sha256').update(chunk).update(chunk).digest());
  });

  it('keeps a process alive while it computes, and lets it exit once idle (used, then dropped, digests too)', async () => {
    const script = [
      `import { OffThreadDigest } from ${JSON.stringify(new URL('../src/util/digest-thread.js', import.meta.url).href)};`,
      "import { createHash } from 'node:crypto';",
      'const data = Buffer.alloc(3 * 1024 * 1024, 7);',
      "const d = new OffThreadDigest('sha256');",
      'd.update(data);',
      "const dropped = new OffThreadDigest('sha256');",
      'dropped.update(data);',
      'dropped.dispose();',
      // No timer or socket holds this process: only the thread's work until the digest is ready.
      "d.digest().then((x) => console.log(x.equals(createHash('sha256').update(data).digest()) ? 'equal' : 'different'));",
    ].join('\n');
    const dir = mkdtempSync(join(tmpdir(), 'digest-exit-'));
    const file = join(dir, 'use-digests.mjs');
    writeFileSync(file, script);
    const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
    clearTimeout(timer);
    rmSync(dir, { recursive: true, force: true });
    assert.equal(signal, null, 'the process exited by itself (it was killed after 20 s)');
    assert.equal(code, 0, err);
    assert.equal(out.trim(), 'equal', 'the digest was delivered before the process exited');
  });

  it('a digest thread stops once unused for a while, never while it holds a digest being fed; the next digest starts one again', { skip: process.platform !== 'linux' && 'thread names are read from /proc' }, async () => {
    const digestThreads = () => threadsNamed(DIGEST_THREAD_NAME);
    const until = async (what: string, ok: () => boolean) => {
      for (let i = 0; i < 100 && !ok(); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(ok(), what);
    };
    setDigestThreadIdleExit(200);
    try {
      const chunk = randomBytes(MiB);
      // A body that pauses longer than the idle time: its thread holds its state and must stay.
      const slow = new OffThreadDigest('sha256');
      slow.update(chunk);
      await new Promise((r) => setTimeout(r, 700));
      assert.ok(digestThreads() >= 1, 'the thread holding a digest being fed is still there');
      slow.update(chunk);
      assert.deepEqual(await slow.digest(), createHash('sha256').update(chunk).update(chunk).digest());
      await until('every digest thread stopped once unused', () => digestThreads() === 0);
      const next = new OffThreadDigest('sha256');
      feed(next, Buffer.concat([chunk, chunk]), [65536]);
      const result = next.digest();
      await until('a thread started again', () => digestThreads() >= 1);
      assert.deepEqual(await result, createHash('sha256').update(chunk).update(chunk).digest());
    } finally {
      setDigestThreadIdleExit(5000);
    }
  });

  it('an unknown algorithm is refused where the digest is made', () => {
    assert.throws(() => new OffThreadDigest('no-such-hash'));
  });

  it('a receipt checks an expected SHA-256 of a multi-MiB body made there, and refuses a wrong one', async () => {
    const body = randomBytes(5 * MiB + 17);
    const sha = createHash('sha256').update(body).digest();
    const store = async (s: Readable) => {
      let n = 0;
      for await (const c of s) n += (c as Buffer).length;
      return n;
    };
    const ok = await receive({ source: Readable.from([body.subarray(0, 3 * MiB), body.subarray(3 * MiB)]), origin: 'storage', expected: body.length, expectedDigests: [{ algorithm: 'sha256', value: sha, header: 'x-amz-content-sha256' }], store });
    assert.equal(ok.stored, body.length);
    const wrong = Buffer.from(sha);
    wrong[0]! ^= 1;
    await assert.rejects(
      receive({ source: Readable.from([body]), origin: 'storage', expected: body.length, expectedDigests: [{ algorithm: 'sha256', value: wrong, header: 'x-amz-content-sha256' }], store }),
      (e: unknown) => isAppError(e) && e.code === 'CHECKSUM_MISMATCH',
    );
  });
});
