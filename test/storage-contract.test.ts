// The storage contract: one set of behaviour tests, run against every backend object directly (no
// HTTP, no database). A backend that passes them can hold the files of a location.
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { isStorageError, StorageError, type StorageBackend, type StoredPart } from '../src/storage/backend.js';
import { FsBackend } from '../src/storage/fs/fs-backend.js';
import { S3Backend } from '../src/storage/s3/s3-backend.js';
import { isNoSuchUpload, s3ErrorCode } from '../src/storage/s3/errors.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { isAppError } from '../src/errors.js';
import { newId } from '../src/util/ids.js';
import { recordUploads, startTestS3, type TestS3 } from './support/s3.js';
import { closeOwnRgw, startTestRgw } from './support/rgw.js';

const MiB = 1024 * 1024;
/** S3's smallest part (all but the last); the test server enforces it like S3 does. */
const PART = 5 * MiB;

function md5(b: Buffer): string {
  return createHash('md5').update(b).digest('hex');
}

async function readAll(s: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(Buffer.from(c as Uint8Array));
  return Buffer.concat(chunks);
}

/** A byte stream of unknown length, in 64 KiB chunks. */
function streamOf(data: Buffer): Readable {
  let off = 0;
  return new Readable({
    read() {
      if (off >= data.length) return void this.push(null);
      const n = Math.min(64 * 1024, data.length - off);
      this.push(data.subarray(off, off + n));
      off += n;
    },
  });
}

/** A stream that sends `before` bytes, then fails with `error` (a client that goes away). */
function failingStream(before: number, error: Error): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent >= before) return void this.destroy(error);
      const n = Math.min(64 * 1024, before - sent);
      sent += n;
      setImmediate(() => this.push(randomBytes(n)));
    },
  });
}

async function listAll(b: StorageBackend, location: string) {
  const out = [];
  for await (const o of b.list!(location)) out.push(o);
  return out;
}

async function rejectsMissing(p: Promise<unknown>): Promise<void> {
  await assert.rejects(p, (e: unknown) => isStorageError(e, 'missing'));
}

/** Writes `data` as a multipart file, parts sent in `order`, and makes it whole. */
async function writeInParts(b: StorageBackend, uri: string, data: Buffer, partSize: number, order: number[]): Promise<StoredPart[]> {
  const ref = await b.initialize(uri, data.length, { partSize });
  const parts: StoredPart[] = [];
  for (const n of order) {
    const start = n * partSize;
    const chunk = data.subarray(start, Math.min(start + partSize, data.length));
    const r = await b.update(uri, streamOf(chunk), { partNumber: n, offset: start, size: chunk.length, ref });
    assert.equal(r.size, chunk.length);
    parts.push({ partNumber: n, etag: r.etag });
  }
  await b.finalize?.(uri, ref, parts);
  return parts;
}

// ---------------------------------------------------------------------------------------------
// The backends under test

const fsRoot = await mkdtemp(join(tmpdir(), 'files-rest-contract-'));
const s3 = await startTestS3();
// Ceph's RADOS Gateway: the cluster the test run shares (scripts/run-tests.mjs), else one of this
// process's own; its S3 subjects skip with the reason when it cannot be had.
const rgw = await startTestRgw();
const CONTRACT_BUCKET = 'contract';
await s3.createBucket(CONTRACT_BUCKET);
/** Its own bucket on RGW: the cluster may be shared with other test processes. */
const RGW_BUCKET = `contract-${randomBytes(4).toString('hex')}`;
if (!('skip' in rgw)) await rgw.createBucket(RGW_BUCKET);

after(async () => {
  await s3.close();
  if (!('skip' in rgw)) await rgw.close();
  await closeOwnRgw();
  await rm(fsRoot, { recursive: true, force: true });
});

interface Subject {
  name: string;
  backend: StorageBackend;
  /** A new, empty location. */
  location(): string;
  /** Checks that no hidden leftovers remain (S3: no multipart upload still open). */
  nothingPending(): Promise<void>;
}

/** An S3 backend on `server`, in `bucket`, with small list pages (so `list` pages through continuation tokens). */
function s3Subject(name: string, server: TestS3, bucket: string): Subject & { server: TestS3; bucket: string } {
  /** Every multipart upload the S3 backend starts, to check none is left open after a failure. */
  const uploads = recordUploads(server.client);
  return {
    name,
    server,
    bucket,
    backend: new S3Backend({ client: server.client, splitLength: 2, dimensions: 2, listPageSize: 2 }),
    location: () => `s3://${bucket}/loc-${randomBytes(4).toString('hex')}`,
    nothingPending: async () => {
      // Aborting an upload that is already gone answers NoSuchUpload.
      for (const u of uploads.splice(0)) {
        await assert.rejects(
          server.client.send(new AbortMultipartUploadCommand(u)),
          (e: unknown) => isNoSuchUpload(e),
          `multipart upload ${u.UploadId} of ${u.Key} was left open`,
        );
      }
    },
  };
}

const s3Subjects = [s3Subject('s3', s3, CONTRACT_BUCKET)];
if ('skip' in rgw) {
  describe('storage contract: s3 on Ceph RADOS Gateway', { skip: rgw.skip }, () => {});
  describe('S3 backend on Ceph RADOS Gateway', { skip: rgw.skip }, () => {});
} else s3Subjects.push(s3Subject('s3 on Ceph RADOS Gateway', rgw, RGW_BUCKET));

const subjects: Subject[] = [
  {
    name: 'fs',
    backend: new FsBackend({ splitLength: 2, dimensions: 2 }),
    location: () => join(fsRoot, `loc-${randomBytes(4).toString('hex')}`),
    nothingPending: async () => {},
  },
  ...s3Subjects,
];

for (const subject of subjects) {
  const b = subject.backend;
  const newUri = (location = subject.location()) => b.makeUri(b.normalizeLocationUri(location), newId());

  describe(`storage contract: ${subject.name}`, () => {
    it('save then open gives back the same bytes (MD5), and stat their size', async () => {
      for (const size of [0, 1, 300 * 1024, 3 * MiB + 17]) {
        const data = randomBytes(size);
        const uri = newUri();
        const r = await b.save(uri, streamOf(data));
        assert.equal(r.size, size);
        assert.equal(md5(await readAll(await b.open(uri))), md5(data), `size ${size}`);
        assert.deepEqual(await b.stat!(uri), { size });
      }
    });

    it('save streams a body of unknown length larger than any upload chunk', async () => {
      const data = randomBytes(19 * MiB + 5);
      const uri = newUri();
      assert.equal((await b.save(uri, streamOf(data))).size, data.length);
      assert.equal(md5(await readAll(await b.open(uri))), md5(data));
      await subject.nothingPending();
    });

    it('save replaces an existing file at the same URI', async () => {
      const uri = newUri();
      await b.save(uri, streamOf(Buffer.from('first version, longer')));
      await b.save(uri, streamOf(Buffer.from('second')));
      assert.equal((await readAll(await b.open(uri))).toString(), 'second');
    });

    it('open with a range gives exactly those bytes', async () => {
      const data = randomBytes(MiB + 3);
      const uri = newUri();
      await b.save(uri, streamOf(data));
      for (const [start, end] of [[0, 0], [0, 99], [1000, 200_000], [data.length - 1, data.length - 1], [12345, data.length - 1]] as const) {
        const got = await readAll(await b.open(uri, { start, end }));
        assert.equal(got.length, end - start + 1, `range ${start}-${end}`);
        assert.ok(got.equals(data.subarray(start, end + 1)), `range ${start}-${end}`);
      }
    });

    it('open of a missing file rejects with StorageError missing', async () => {
      const uri = newUri();
      await rejectsMissing(b.open(uri));
      await rejectsMissing(b.open(uri, { start: 0, end: 10 }));
      assert.equal(await b.stat!(uri), null);
    });

    it('a save whose source fails mid-stream rejects with that error and leaves nothing', async () => {
      // Below and above the size at which the S3 backend switches to a multipart upload.
      for (const before of [100 * 1024, 12 * MiB]) {
        const location = b.normalizeLocationUri(subject.location());
        const uri = b.makeUri(location, newId());
        const err = new Error(`source failed after ${before} bytes`);
        await assert.rejects(b.save(uri, failingStream(before, err)), (e: unknown) => e === err);
        assert.equal(await b.stat!(uri), null);
        await rejectsMissing(b.open(uri));
        assert.deepEqual(await listAll(b, location), []);
        await subject.nothingPending();
      }
    });

    it('a save cancelled through its signal rejects and leaves nothing', async () => {
      const location = b.normalizeLocationUri(subject.location());
      const uri = b.makeUri(location, newId());
      const ac = new AbortController();
      // Never ends by itself: the abort is what stops it.
      const endless = new Readable({
        read() {
          setImmediate(() => this.push(randomBytes(64 * 1024)));
        },
      });
      setTimeout(() => ac.abort(), 100);
      await assert.rejects(b.save(uri, endless, { signal: ac.signal }), (e: Error) => e.name === 'AbortError');
      assert.equal(await b.stat!(uri), null);
      assert.deepEqual(await listAll(b, location), []);
      await subject.nothingPending();
    });

    it('delete removes the file and is idempotent', async () => {
      const location = b.normalizeLocationUri(subject.location());
      const uri = b.makeUri(location, newId());
      await b.save(uri, streamOf(Buffer.from('to be deleted')));
      await b.delete(uri);
      assert.equal(await b.stat!(uri), null);
      await rejectsMissing(b.open(uri));
      await b.delete(uri);
      await b.delete(b.makeUri(location, newId()));
      assert.deepEqual(await listAll(b, location), []);
    });

    it('initialize + update with parts out of order + finalize gives the right bytes', async () => {
      const data = randomBytes(2 * PART + 1234);
      const uri = newUri();
      await writeInParts(b, uri, data, PART, [2, 0, 1]);
      const got = await readAll(await b.open(uri));
      assert.equal(got.length, data.length);
      assert.equal(md5(got), md5(data));
      assert.ok((await readAll(await b.open(uri, { start: PART - 2, end: PART + 1 }))).equals(data.subarray(PART - 2, PART + 2)));
    });

    it('a file of one part (smaller than the part size) works too', async () => {
      const data = randomBytes(1000);
      const uri = newUri();
      await writeInParts(b, uri, data, PART, [0]);
      assert.equal(md5(await readAll(await b.open(uri))), md5(data));
    });

    it('re-writing a part replaces it', async () => {
      const data = randomBytes(PART + 10);
      const uri = newUri();
      const ref = await b.initialize(uri, data.length, { partSize: PART });
      const write = (n: number, bytes: Buffer) => b.update(uri, streamOf(bytes), { partNumber: n, offset: n * PART, size: bytes.length, ref });
      const first = await write(0, randomBytes(PART));
      const last = await write(1, data.subarray(PART));
      const again = await write(0, data.subarray(0, PART));
      if (first.etag !== null) assert.notEqual(again.etag, first.etag);
      await b.finalize?.(uri, ref, [{ partNumber: 0, etag: again.etag }, { partNumber: 1, etag: last.etag }]);
      assert.equal(md5(await readAll(await b.open(uri))), md5(data));
    });

    it('finalize is idempotent', async () => {
      const data = randomBytes(PART + 99);
      const uri = newUri();
      const ref = await b.initialize(uri, data.length, { partSize: PART });
      const parts: StoredPart[] = [];
      for (const n of [0, 1]) {
        const chunk = data.subarray(n * PART, Math.min((n + 1) * PART, data.length));
        const r = await b.update(uri, streamOf(chunk), { partNumber: n, offset: n * PART, size: chunk.length, ref });
        parts.push({ partNumber: n, etag: r.etag });
      }
      await b.finalize?.(uri, ref, parts);
      // A worker that crashed after completing runs the task again.
      await b.finalize?.(uri, ref, parts);
      assert.equal(md5(await readAll(await b.open(uri))), md5(data));
    });

    it('an initialized file that is dropped (abortInitialized, then delete) leaves nothing', async () => {
      const location = b.normalizeLocationUri(subject.location());
      const uri = b.makeUri(location, newId());
      const ref = await b.initialize(uri, PART + 5, { partSize: PART });
      const part = await b.update(uri, streamOf(randomBytes(PART)), { partNumber: 0, offset: 0, size: PART, ref });
      // As the remove-file-data task does it.
      await b.abortInitialized?.(uri, ref);
      await b.delete(uri);
      assert.equal(await b.stat!(uri), null);
      await rejectsMissing(b.open(uri));
      assert.deepEqual(await listAll(b, location), []);
      await subject.nothingPending();
      // Dropping again (a retried task) is fine.
      await b.abortInitialized?.(uri, ref);
      await b.delete(uri);
      if (b.finalize) await rejectsMissing(b.finalize(uri, ref, [{ partNumber: 0, etag: part.etag }]));
    });

    it('list yields every stored file with its size', async () => {
      const location = b.normalizeLocationUri(subject.location());
      const sizes = [0, 10, 2000, 5, 70_000];
      const stored = new Map<string, number>();
      for (const size of sizes) {
        const uri = b.makeUri(location, newId());
        await b.save(uri, streamOf(randomBytes(size)));
        stored.set(uri, size);
      }
      // A neighbour whose name starts like this location is not part of it.
      await b.save(b.makeUri(`${location}x`, newId()), streamOf(Buffer.from('elsewhere')));
      const t0 = Date.now();
      const listed = await listAll(b, location);
      assert.deepEqual(new Map(listed.map((o) => [o.uri, o.size])), stored);
      for (const o of listed) assert.ok(Math.abs(o.modified - t0) < 10 * 60_000, `modified ${o.modified}`);
    });

    it('ping succeeds on a reachable location', async () => {
      await b.ping!(b.normalizeLocationUri(subject.location()));
    });

    it('makeUri puts a file at <location>/<split>/<split>/<rest>/data', () => {
      const location = b.normalizeLocationUri(subject.location());
      const id = '0123abcd-ef01-4567-89ab-cdef01234567';
      assert.equal(b.makeUri(location, id), `${location}/01/23/abcd-ef01-4567-89ab-cdef01234567/data`);
      assert.equal(b.makeUri(`${location}/`, id), b.makeUri(location, id));
      assert.ok(b.handles(b.makeUri(location, id)));
      const layout = subject.name === 'fs'
        ? new FsBackend({ splitLength: 3, dimensions: 1 })
        : new S3Backend({ client: (b as S3Backend).client, splitLength: 3, dimensions: 1 });
      assert.equal(layout.makeUri(location, id), `${location}/012/3abcd-ef01-4567-89ab-cdef01234567/data`);
    });

    it('two file ids never share a URI', () => {
      const location = b.normalizeLocationUri(subject.location());
      const ids = Array.from({ length: 5000 }, () => newId());
      // Ids that differ only where the layout cuts them.
      ids.push('00000000-0000-4000-8000-000000000000', '00000000-0000-4000-8000-000000000001', '0000000-00000-4000-8000-000000000000');
      ids.push('10000000-0000-4000-8000-000000000000', '01000000-0000-4000-8000-000000000000', '00100000-0000-4000-8000-000000000000');
      const uris = new Set(ids.map((id) => b.makeUri(location, id)));
      assert.equal(uris.size, new Set(ids).size);
      for (const u of uris) assert.ok(u.startsWith(`${location}/`));
    });

    if (b.readRange) {
      const readRange = b.readRange.bind(b);
      it('readRange gives exactly the bytes of a range, and rejects for a missing file or a range past the end', async () => {
        const data = randomBytes(70_000);
        const uri = newUri();
        await b.save(uri, streamOf(data));
        for (const [start, end] of [[0, 0], [0, 4095], [1000, 65_535], [data.length - 1, data.length - 1]] as const) {
          assert.ok((await readRange(uri, { start, end })).equals(data.subarray(start, end + 1)), `range ${start}-${end}`);
        }
        await rejectsMissing(readRange(newUri(), { start: 0, end: 10 }));
        await assert.rejects(readRange(uri, { start: data.length - 10, end: data.length + 10 }), (e: unknown) => isStorageError(e, 'unavailable'));
      });
    }

    if (b.openReader) {
      const openReader = b.openReader.bind(b);
      it('openReader reads any part of a file into the caller\'s buffer, 0 at the end, and rejects for a missing file', async () => {
        const data = randomBytes(200_000);
        const uri = newUri();
        await b.save(uri, streamOf(data));
        const reader = await openReader(uri);
        try {
          const buf = Buffer.alloc(70_000, 0xee);
          for (const [offset, length, position] of [[0, 70_000, 0], [10, 1000, 123_456], [0, 4096, data.length - 4096]] as const) {
            let got = 0;
            while (got < length) got += await reader.read(buf, offset + got, length - got, position + got);
            assert.ok(buf.subarray(offset, offset + length).equals(data.subarray(position, position + length)), `${length} bytes at ${position}`);
          }
          assert.equal(await reader.read(buf, 0, 100, data.length), 0);
        } finally {
          await reader.close();
        }
        await rejectsMissing(openReader(newUri()));
      });
    }

    if (b.runningDigests) {
      const digests = b.runningDigests;
      it('runningDigests: ranges extended in order as parts land give the MD5 of the whole file; drop and a missing file', async () => {
        const partSize = 64 * 1024;
        const data = randomBytes(3 * partSize + 123);
        const uri = newUri();
        const id = newId();
        const ref = await b.initialize(uri, data.length, { partSize });
        // Parts in place: each range is readable as soon as its update resolves.
        for (let n = 0; n * partSize < data.length; n++) {
          const start = n * partSize;
          const end = Math.min(start + partSize, data.length);
          await b.update(uri, streamOf(data.subarray(start, end)), { partNumber: n, offset: start, size: end - start, ref });
          await digests.extend(id, uri, start, end);
        }
        assert.equal(await digests.digest(id), md5(data));
        // Finishing forgets: a second digest of the same id has nothing.
        assert.equal(await digests.digest(id), null);
        // Two digests at once are independent; a dropped one is gone.
        const other = newId();
        await digests.extend(other, uri, 0, 10);
        await digests.extend(id, uri, 0, partSize);
        digests.drop(other);
        assert.equal(await digests.digest(other), null);
        assert.equal(await digests.digest(id), md5(data.subarray(0, partSize)));
        // Bytes that cannot be read reject (a missing file, a range past the end).
        await assert.rejects(digests.extend(newId(), newUri(), 0, 10));
        await assert.rejects(digests.extend(newId(), uri, data.length - 5, data.length + 5));
        await b.delete(uri);
      });
    }

    if (b.copy) {
      const copy = b.copy.bind(b);
      it('copy makes an independent copy at a new URI', async () => {
        const data = randomBytes(MiB + 1);
        const src = newUri();
        const dst = newUri();
        await b.save(src, streamOf(data));
        await copy(src, dst);
        await b.delete(src);
        assert.equal(md5(await readAll(await b.open(dst))), md5(data));
        await rejectsMissing(copy(src, newUri()));
      });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// What only the S3 backend has to say

for (const subject of s3Subjects) describe(subject.name === 's3' ? 'S3 backend' : `S3 backend: ${subject.name}`, () => {
  const b = subject.backend as S3Backend;
  const location = `s3://${subject.bucket}/specific`;

  it('handles s3:// URIs only and normalises location URIs', () => {
    assert.ok(b.handles('s3://bucket/x'));
    assert.ok(!b.handles('/var/data') && !b.handles('file:///var/data'));
    assert.equal(b.normalizeLocationUri('s3://my-bucket//files/2024/'), 's3://my-bucket/files/2024');
    assert.equal(b.normalizeLocationUri('s3://my-bucket/'), 's3://my-bucket');
    assert.equal(b.makeUri('s3://my-bucket', '0123abcd-ef01-4567-89ab-cdef01234567'), 's3://my-bucket/01/23/abcd-ef01-4567-89ab-cdef01234567/data');
    assert.throws(() => b.normalizeLocationUri('s3://No_Such..Bucket/x'), /bucket name/);
  });

  it('initialize refuses parts under 5 MiB for a file of several parts (S3 would refuse them only at completion)', async () => {
    const uri = b.makeUri(location, newId());
    await assert.rejects(b.initialize(uri, 3000, { partSize: 1000 }), (e: unknown) => isAppError(e) && e.code === 'INVALID_PART_SIZE');
    await assert.rejects(b.initialize(uri, 20_001 * PART, { partSize: PART }), (e: unknown) => isAppError(e) && e.code === 'INVALID_FILE_SIZE');
    // One part may be as small as it likes.
    const ref = await b.initialize(uri, 10, { partSize: 1000 });
    assert.equal(typeof ref, 'string');
    await b.abortInitialized(uri, ref);
  });

  it('update rejects a part whose body is not exactly its declared size, and the part can be sent again', async () => {
    const data = randomBytes(2000);
    const uri = b.makeUri(location, newId());
    const ref = await b.initialize(uri, data.length, { partSize: PART });
    await assert.rejects(b.update(uri, streamOf(data.subarray(0, 1999)), { partNumber: 0, offset: 0, size: 2000, ref }), /shorter/);
    await assert.rejects(b.update(uri, streamOf(Buffer.concat([data, data])), { partNumber: 0, offset: 0, size: 2000, ref }), /longer/);
    const ok = await b.update(uri, streamOf(data), { partNumber: 0, offset: 0, size: 2000, ref });
    await b.finalize(uri, ref, [{ partNumber: 0, etag: ok.etag }]);
    assert.ok((await readAll(await b.open(uri))).equals(data));
  });

  it('update passes on the error of a source that fails', async () => {
    const uri = b.makeUri(location, newId());
    const ref = await b.initialize(uri, PART + 1, { partSize: PART });
    const err = new Error('client went away');
    await assert.rejects(b.update(uri, failingStream(MiB, err), { partNumber: 0, offset: 0, size: PART, ref }), (e: unknown) => e === err);
    await b.abortInitialized(uri, ref);
  });

  it('update of an upload that was aborted rejects with StorageError missing', async () => {
    const uri = b.makeUri(location, newId());
    const ref = await b.initialize(uri, 10, { partSize: PART });
    await b.abortInitialized(uri, ref);
    await rejectsMissing(b.update(uri, streamOf(randomBytes(10)), { partNumber: 0, offset: 0, size: 10, ref }));
  });

  it('sendFile gives a presigned GET URL that serves the file', async () => {
    const data = randomBytes(4096);
    const uri = b.makeUri(location, newId());
    await b.save(uri, streamOf(data));
    const target = await b.sendFile(uri);
    assert.equal(target.kind, 'url');
    if (target.kind !== 'url') return;
    const u = new URL(target.url);
    assert.equal(u.origin, subject.server.endpoint);
    assert.equal(u.searchParams.get('X-Amz-Expires'), '300');
    assert.ok(u.searchParams.get('X-Amz-Signature'));
    const r = await fetch(target.url);
    assert.equal(r.status, 200);
    assert.ok(Buffer.from(await r.arrayBuffer()).equals(data));
  });

  it('the store itself refuses a part under 5 MiB but the last at completion (EntityTooSmall)', async () => {
    // What initialize's own refusal saves the client from (RGW: rgw_multipart_min_part_size, 5 MiB).
    const c = subject.server.client;
    const at = { Bucket: subject.bucket, Key: `specific/small-${randomBytes(4).toString('hex')}` };
    const { UploadId } = await c.send(new CreateMultipartUploadCommand(at));
    const p1 = await c.send(new UploadPartCommand({ ...at, UploadId, PartNumber: 1, Body: randomBytes(1000) }));
    const p2 = await c.send(new UploadPartCommand({ ...at, UploadId, PartNumber: 2, Body: randomBytes(10) }));
    const parts = [{ PartNumber: 1, ETag: p1.ETag }, { PartNumber: 2, ETag: p2.ETag }];
    await assert.rejects(
      c.send(new CompleteMultipartUploadCommand({ ...at, UploadId, MultipartUpload: { Parts: parts } })),
      (e: unknown) => s3ErrorCode(e) === 'EntityTooSmall',
    );
    await c.send(new AbortMultipartUploadCommand({ ...at, UploadId }));
  });

  it('copy above the copy threshold goes part by part (UploadPartCopy) and leaves no upload open', {
    skip: subject.name === 's3' ? 'fauxqs has no UploadPartCopy' : false,
  }, async () => {
    // Parts are at least 5 MiB: 11 MiB + 3 bytes is three parts, the last short.
    const big = new S3Backend({ client: subject.server.client, splitLength: 2, dimensions: 2, copyThreshold: MiB, copyPartSize: PART });
    const data = randomBytes(11 * MiB + 3);
    const src = b.makeUri(location, newId());
    const dst = b.makeUri(location, newId());
    await b.save(src, streamOf(data));
    await subject.nothingPending(); // save's own multipart upload is done with
    await big.copy(src, dst);
    assert.equal(md5(await readAll(await b.open(dst))), md5(data));
    assert.equal((await b.stat(dst))?.size, data.length);
    await subject.nothingPending();
    await rejectsMissing(big.copy(b.makeUri(location, newId()), dst));
  });

  it('a server that cannot be reached gives StorageError unavailable', async () => {
    // A port that was free a moment ago: connections are refused.
    const port = await new Promise<number>((resolve) => {
      const srv = createServer().listen(0, '127.0.0.1', () => {
        const a = srv.address();
        srv.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
      });
    });
    const client = new S3Client({
      endpoint: `http://127.0.0.1:${port}`,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      maxAttempts: 1,
    });
    const down = new S3Backend({ client, splitLength: 2, dimensions: 2 });
    const uri = down.makeUri(location, newId());
    const unavailable = (e: unknown) => e instanceof StorageError && e.kind === 'unavailable';
    try {
      await assert.rejects(down.open(uri), unavailable);
      await assert.rejects(down.stat(uri), unavailable);
      await assert.rejects(down.ping(location), unavailable);
      await assert.rejects(down.save(uri, streamOf(randomBytes(10))), unavailable);
      await assert.rejects(down.delete(uri), unavailable);
    } finally {
      client.destroy();
    }
  });

  it('ping of a bucket that does not exist fails', async () => {
    await assert.rejects(b.ping('s3://no-such-bucket/x'), (e: unknown) => isStorageError(e, 'unavailable'));
  });
});

describe('S3 settings', () => {
  it('defaults: region us-east-1, no endpoint, virtual-hosted style, SDK credential chain, 300 s URLs', () => {
    const c = loadConfig({});
    assert.equal(c.s3Endpoint, null);
    assert.equal(c.s3Region, 'us-east-1');
    assert.equal(c.s3AccessKeyId, null);
    assert.equal(c.s3SecretAccessKey, null);
    assert.equal(c.s3ForcePathStyle, false);
    assert.equal(c.s3PresignExpires, 300);
  });

  it('an endpoint turns path-style URLs on unless told otherwise', () => {
    const env = { FILES_REST_S3_ENDPOINT: 'http://127.0.0.1:9000', FILES_REST_S3_REGION: 'eu-west-3' };
    const c = loadConfig(env);
    assert.equal(c.s3Endpoint, 'http://127.0.0.1:9000');
    assert.equal(c.s3Region, 'eu-west-3');
    assert.equal(c.s3ForcePathStyle, true);
    assert.equal(loadConfig({ ...env, FILES_REST_S3_FORCE_PATH_STYLE: '0' }).s3ForcePathStyle, false);
    const k = loadConfig({ FILES_REST_S3_ACCESS_KEY_ID: 'id', FILES_REST_S3_SECRET_ACCESS_KEY: 'secret', FILES_REST_S3_PRESIGN_EXPIRES: '60' });
    assert.deepEqual([k.s3AccessKeyId, k.s3SecretAccessKey, k.s3PresignExpires], ['id', 'secret', 60]);
  });

  it('bad values are refused with the name of the setting', () => {
    const refused = (env: Record<string, string>, setting: string) =>
      assert.throws(() => loadConfig(env), (e: unknown) => e instanceof ConfigError && e.setting === setting);
    refused({ FILES_REST_S3_ENDPOINT: 'minio:9000' }, 'FILES_REST_S3_ENDPOINT');
    refused({ FILES_REST_S3_ENDPOINT: 'ftp://127.0.0.1' }, 'FILES_REST_S3_ENDPOINT');
    refused({ FILES_REST_S3_REGION: 'EU West' }, 'FILES_REST_S3_REGION');
    refused({ FILES_REST_S3_ACCESS_KEY_ID: 'id' }, 'FILES_REST_S3_SECRET_ACCESS_KEY');
    refused({ FILES_REST_S3_SECRET_ACCESS_KEY: 'secret' }, 'FILES_REST_S3_ACCESS_KEY_ID');
    refused({ FILES_REST_S3_FORCE_PATH_STYLE: 'maybe' }, 'FILES_REST_S3_FORCE_PATH_STYLE');
    refused({ FILES_REST_S3_PRESIGN_EXPIRES: '0' }, 'FILES_REST_S3_PRESIGN_EXPIRES');
    refused({ FILES_REST_S3_PRESIGN_EXPIRES: '604801' }, 'FILES_REST_S3_PRESIGN_EXPIRES');
  });
});
