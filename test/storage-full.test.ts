// A full storage (ENOSPC, EDQUOT, or the object store's equivalent) is 507 STORAGE_FULL, counted by
// files_rest_storage_full_total, never a 500 and never "the client closed the connection"; nothing is
// committed or left behind. On a real full file system: a 2 MiB tmpfs mounted for the test (as root).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { mkdir, mkdtemp, open, rmdir, unlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { startTestServer, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { createBucket, put, req, waitFor } from './support/http.js';
import { filesUnder, patternStream } from './support/fixtures.js';
import { ERRORS } from '../src/errors.js';
import { isStorageFull, StorageError } from '../src/storage/backend.js';
import { toStorageError } from '../src/storage/s3/errors.js';
import { receiveFailure } from '../src/domain/receive.js';
import { ByteMeter } from '../src/domain/byte-meter.js';

// These tests read, damage or count the files of uploads by path: small uploads too are files here.
storeSmallObjectsAsFiles();

const MiB = 1024 * 1024;

/** Mounts a 2 MiB tmpfs, or says why it cannot. */
async function mountTmpfs(): Promise<{ dir: string; unmount: () => Promise<void> } | { skip: string }> {
  if (process.platform !== 'linux') return { skip: 'needs Linux tmpfs' };
  if (process.getuid?.() !== 0) return { skip: 'mounting a tmpfs needs root' };
  const dir = await mkdtemp(join(tmpdir(), 'files-rest-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', dir], { stdio: 'pipe' });
  } catch (e) {
    await rmdir(dir).catch(() => {});
    return { skip: `mount -t tmpfs failed: ${String((e as { stderr?: Buffer }).stderr ?? e).trim()}` };
  }
  return {
    dir,
    unmount: async () => {
      execFileSync('umount', [dir], { stdio: 'pipe' });
      await rmdir(dir);
    },
  };
}

/** Fills the file system at `dir` to the last byte; returns the filler's path. */
async function fill(dir: string): Promise<string> {
  const path = join(dir, 'filler');
  const h = await open(path, 'w');
  const chunk = Buffer.alloc(64 * 1024, 7);
  try {
    for (;;) await h.write(chunk);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
  } finally {
    await h.close();
  }
  return path;
}

/**
 * Streams `size` bytes as a PUT and resolves with the answer, also when the server answers before
 * the body is sent and closes (the rest of the body is then refused by the socket).
 */
function streamPut(url: string, size: number): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const r = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: 'PUT', agent: false, headers: { 'content-length': String(size) } });
    let answered = false;
    r.on('response', (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    r.on('error', (e) => {
      if (!answered) reject(e);
    });
    const body = patternStream(size, 256 * 1024);
    body.on('error', () => {});
    body.pipe(r);
  });
}

const mounted = await mountTmpfs();
const skip = 'skip' in mounted ? mounted.skip : false;
if (skip) console.log(`# storage-full.test: the full file system tests are skipped: ${skip}`);

describe('A full file system', { skip }, () => {
  let s: TestServer;
  let data: string;
  let disk: string;
  before(async () => {
    if ('skip' in mounted) return;
    disk = mounted.dir;
    data = join(disk, 'data');
    await mkdir(data);
    s = await startTestServer({
      FILES_REST_STORAGE_FACTORY: 'fs',
      FILES_REST_DATA_DIR: data,
      FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(MiB),
    });
  });
  after(async () => {
    await s?.close();
    if (!('skip' in mounted)) await mounted.unmount();
  });

  const storageFullCount = async () => Number(/^files_rest_storage_full_total (\d+)/m.exec((await req(`${s.url}/metrics`)).text)?.[1] ?? NaN);
  const leftovers = async () => (await filesUnder(data)).filter((f) => !f.endsWith('filler'));
  const is507 = (r: { status: number; text: string }) => {
    assert.equal(r.status, 507, r.text);
    assert.deepEqual(JSON.parse(r.text), { status: 507, message: ERRORS.STORAGE_FULL.message });
  };

  it('a PUT larger than the space left, and a PUT that fills it, answer 507; nothing is committed or left', async () => {
    const b = await createBucket(s.files);
    const before = await storageFullCount();
    is507(await streamPut(`${s.files}/${b}/big.bin`, 100 * MiB));
    // Fits at first, then runs into the end of the disk.
    is507(await streamPut(`${s.files}/${b}/filling.bin`, 3 * MiB));
    assert.equal(await storageFullCount(), before + 2);
    const listed = await req(`${s.files}/${b}?versions`);
    assert.deepEqual(listed.json.contents, []);
    assert.equal(listed.json.size, 0);
    assert.deepEqual(await leftovers(), []);
  });

  it('a small PUT on a full disk answers 507, not "the client closed the connection"; space freed, it works again', async () => {
    const b = await createBucket(s.files);
    const filler = await fill(disk);
    try {
      const before = await storageFullCount();
      const r = await put(`${s.files}/${b}/small.txt`, 'x'.repeat(10_000));
      is507(r);
      assert.equal(await storageFullCount(), before + 1);
      assert.deepEqual(await leftovers(), []);
    } finally {
      await unlink(filler);
    }
    const ok = await put(`${s.files}/${b}/small.txt`, 'x'.repeat(10_000));
    assert.equal(ok.status, 200, ok.text);
  });

  it('a multipart part on a full disk answers 507; the upload is cleaned up', async () => {
    const b = await createBucket(s.files);
    const stored = await leftovers(); // the files of earlier tests' committed uploads
    const init = await req(`${s.files}/${b}/mp.bin?uploads&size=${4 * MiB}&partSize=${2 * MiB}`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    const filler = await fill(disk);
    try {
      is507(await streamPut(`${s.files}/${b}/mp.bin?uploadId=${init.json.id}&partNumber=0`, 2 * MiB));
      // Aborted with its file (FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE=1): the worker removes the bytes.
      assert.equal((await req(`${s.files}/${b}/mp.bin?uploadId=${init.json.id}`)).status, 404);
      await waitFor(async () => (await leftovers()).length === stored.length);
    } finally {
      await unlink(filler);
    }
    // A multipart upload that does not fit from the start: its file cannot even be created.
    const filler2 = await fill(disk);
    try {
      const r = await req(`${s.files}/${b}/mp2.bin?uploads&size=${4 * MiB}&partSize=${2 * MiB}`, { method: 'POST' });
      assert.ok(r.status === 200 || r.status === 507, r.text);
      if (r.status === 200) is507(await streamPut(`${s.files}/${b}/mp2.bin?uploadId=${r.json.id}&partNumber=1`, 2 * MiB));
      await waitFor(async () => (await leftovers()).length === stored.length);
    } finally {
      await unlink(filler2);
    }
    const listed = await req(`${s.files}/${b}?versions`);
    assert.deepEqual(listed.json.contents, []);
  });
});

describe('Storage full: the mapping', () => {
  it('ENOSPC and EDQUOT, wrapped or not, are a full storage; other errors are not', () => {
    const enospc = Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
    const edquot = Object.assign(new Error('disk quota exceeded'), { code: 'EDQUOT' });
    assert.ok(isStorageFull(enospc));
    assert.ok(isStorageFull(edquot));
    assert.ok(isStorageFull(new StorageError('full', 'x')));
    assert.ok(isStorageFull(new Error('wrapped', { cause: enospc })));
    assert.ok(!isStorageFull(Object.assign(new Error('reset'), { code: 'ECONNRESET' })));
    assert.ok(!isStorageFull(new StorageError('unavailable', 'x')));
  });

  it("the S3 store's equivalents become StorageError('full')", () => {
    const sdk = (Code: string, status: number) => Object.assign(new Error(Code), { name: Code, Code, $metadata: { httpStatusCode: status } });
    for (const code of ['XMinioStorageFull', 'QuotaExceeded', 'EntityTooLarge', 'XMinioAdminBucketQuotaExceeded']) {
      assert.equal(toStorageError(sdk(code, 400), 'put').kind, 'full', code);
    }
    assert.equal(toStorageError(sdk('InternalError', 507), 'put').kind, 'full');
    assert.equal(toStorageError(sdk('InternalError', 500), 'put').kind, 'unavailable');
    assert.equal(toStorageError(sdk('NoSuchKey', 404), 'get').kind, 'missing');
  });

  it('a write that fails for lack of space is STORAGE_FULL even though it tore the request body down', () => {
    const source = new PassThrough();
    source.destroy();
    const meter = new ByteMeter({ limit: null, limitError: () => new Error('limit'), expected: null });
    meter.destroy();
    const e = receiveFailure({ errors: [new StorageError('full', 'no space', { cause: Object.assign(new Error('x'), { code: 'ENOSPC' }) })], source, meter });
    assert.equal((e as { code?: string }).code, 'STORAGE_FULL');
    assert.equal((e as { status?: number }).status, 507);
    const gone = receiveFailure({ errors: [Object.assign(new Error('aborted'), { code: 'ECONNRESET' })], source, meter });
    assert.equal((gone as { code?: string }).code, 'CLIENT_DISCONNECTED');
  });
});
