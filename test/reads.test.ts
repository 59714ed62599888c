// The domain half of a download (src/domain/reads.ts), called as a second door would call it: which
// version a read gets and which checks run, whether its bytes may be served, and the bytes of the
// whole file or a range through the backend's read capabilities.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { startTestServer, type TestServer } from './support/server.js';
import { createBucket, put, req } from './support/http.js';
import { openContent, resolveRead, servableFile, SMALL_READ, type FileContent } from '../src/domain/reads.js';
import { isAppError } from '../src/errors.js';
import { readExactly } from '../src/storage/backend.js';
import type { DomainContext } from '../src/domain/context.js';

async function bytesOf(c: FileContent): Promise<Buffer> {
  switch (c.kind) {
    case 'empty':
      return Buffer.alloc(0);
    case 'buffer':
      return c.data;
    case 'reader': {
      const n = c.range.end - c.range.start + 1;
      const buf = Buffer.alloc(n);
      try {
        await readExactly(c.reader, buf, n, c.range.start);
      } finally {
        await c.reader.close();
      }
      return buf;
    }
    case 'stream': {
      const chunks: Buffer[] = [];
      for await (const x of c.stream as Readable) chunks.push(Buffer.from(x as Uint8Array));
      return Buffer.concat(chunks);
    }
  }
}

describe('Domain reads (a door-neutral download)', () => {
  let s: TestServer;
  let ctx: DomainContext;
  let bucket: string;
  const small = randomBytes(1000);
  const large = randomBytes(SMALL_READ * 3 + 7);
  const none = { object: async () => {}, version: async () => {} };

  before(async () => {
    s = await startTestServer();
    ctx = s.server.core.ctx;
    bucket = await createBucket(s.files);
    assert.equal((await put(`${s.files}/${bucket}/small`, small)).status, 200);
    assert.equal((await put(`${s.files}/${bucket}/large`, large)).status, 200);
    assert.equal((await put(`${s.files}/${bucket}/empty`, '')).status, 200);
  });
  after(() => s.close());

  it('resolveRead: the head after the object check; an older version after the version check too; a missing key is OBJECT_NOT_FOUND', async () => {
    const calls: string[] = [];
    const checks = { object: async () => void calls.push('object'), version: async (id: string) => void calls.push(`version ${id}`) };
    const first = (await put(`${s.files}/${bucket}/twice`, 'one')).json.version_id as string;
    await put(`${s.files}/${bucket}/twice`, 'two');
    const head = await resolveRead(ctx, { bucketId: bucket, key: 'twice', versionId: null }, checks);
    assert.equal(head.isHead, true);
    assert.deepEqual(calls, ['object']);
    calls.length = 0;
    const old = await resolveRead(ctx, { bucketId: bucket, key: 'twice', versionId: first }, checks);
    assert.equal(old.versionId, first);
    assert.deepEqual(calls, ['object', `version ${first}`]);
    await assert.rejects(resolveRead(ctx, { bucketId: bucket, key: 'nothing', versionId: null }, none), (e: unknown) => isAppError(e, 'OBJECT_NOT_FOUND'));
    // A check that refuses stops the read before the object's absence is told.
    const refuse = { object: async () => { throw new Error('refused'); }, version: async () => {} };
    await assert.rejects(resolveRead(ctx, { bucketId: bucket, key: 'nothing', versionId: null }, refuse), /refused/);
  });

  it('servableFile: a delete marker, an unreadable file and a corrupted one are refused', async () => {
    const marker = (await req(`${s.files}/${bucket}/gone`, { method: 'PUT', body: 'x' }), await req(`${s.files}/${bucket}/gone`, { method: 'DELETE' })).headers.get('x-version-id')!;
    const m = await resolveRead(ctx, { bucketId: bucket, key: 'gone', versionId: marker }, none);
    assert.throws(() => servableFile(ctx, m), (e: unknown) => isAppError(e, 'VERSION_IS_DELETE_MARKER'));
    const v = await resolveRead(ctx, { bucketId: bucket, key: 'small', versionId: null }, none);
    assert.equal(servableFile(ctx, v).size, small.length);
    assert.throws(() => servableFile(ctx, { ...v, file: { ...v.file!, readable: false } }), (e: unknown) => isAppError(e, 'STORAGE_UNAVAILABLE'));
    // A failed integrity check: served under FILES_REST_SERVE_CORRUPTED_FILES=1 (the default), refused under 0.
    const corrupted = { ...v, file: { ...v.file!, lastCheck: false } };
    assert.equal(ctx.config.serveCorruptedFiles, true);
    assert.equal(servableFile(ctx, corrupted).id, v.file!.id);
    const strict = { ...ctx, config: { ...ctx.config, serveCorruptedFiles: false } };
    assert.throws(() => servableFile(strict, corrupted), (e: unknown) => isAppError(e, 'FILE_CORRUPTED'));
  });

  it('openContent: the whole file or a range, small and large, through what the backend offers; a missing file is FILE_MISSING', async () => {
    for (const [key, data] of [['small', small], ['large', large], ['empty', Buffer.alloc(0)]] as const) {
      const file = servableFile(ctx, await resolveRead(ctx, { bucketId: bucket, key, versionId: null }, none));
      const whole = await openContent(ctx, file, null);
      assert.ok((await bytesOf(whole)).equals(data), `${key}: whole`);
      const backend = ctx.storage.forUri(file.uri);
      if (data.length === 0) assert.equal(whole.kind, 'empty');
      else if (data.length > SMALL_READ && backend.openReader) assert.equal(whole.kind, 'reader', key);
      else if (data.length <= SMALL_READ && backend.readRange) assert.equal(whole.kind, 'buffer', key);
      if (data.length > 10) {
        for (const range of [{ start: 0, end: 9 }, { start: 5, end: data.length - 1 }]) {
          const part = await openContent(ctx, file, range);
          assert.ok((await bytesOf(part)).equals(data.subarray(range.start, range.end + 1)), `${key}: ${range.start}-${range.end}`);
        }
      }
    }
    const file = servableFile(ctx, await resolveRead(ctx, { bucketId: bucket, key: 'small', versionId: null }, none));
    const missing = { ...file, uri: `${file.uri}-missing` };
    await assert.rejects(openContent(ctx, missing, null), (e: unknown) => isAppError(e, 'FILE_MISSING'));
  });
});
