// One way to receive bytes (src/domain/receive.ts): a PUT and a multipart part handle every sign of
// a client that left alike: the same refusal, nothing left behind in the storage (no file, no
// temporary file), the bucket's size unchanged and the part's reservation released.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { startTestServer, storedFiles, type TestServer } from './support/server.js';
import { createBucket, waitFor } from './support/http.js';
import { putObject } from '../src/domain/objects.js';
import { initiateUpload, listParts, findUpload, uploadPart } from '../src/domain/multipart.js';
import { findBucket } from '../src/domain/buckets.js';
import { ERRORS, isAppError } from '../src/errors.js';

const MiB = 1024 * 1024;
const PART = 5 * MiB; // S3's smallest part: the same test runs on TEST_STORAGE=s3

type Sign = (s: Readable, abort: AbortController) => void;

const errorWith = (code: string) => Object.assign(new Error(`client gone (${code})`), { code });

/** Every way the end of a client shows in the domain. */
const SIGNS: [string, Sign][] = [
  ['its stream closes before the end', (s) => s.destroy()],
  ['its stream fails with ECONNRESET', (s) => s.destroy(errorWith('ECONNRESET'))],
  // A stream that relays the failure of the request under it (a form's file part) without being destroyed.
  ['ECONNRESET relayed by a wrapping stream', (s) => s.emit('error', errorWith('ECONNRESET'))],
  ['ABORT_ERR relayed by a wrapping stream', (s) => s.emit('error', errorWith('ABORT_ERR'))],
  ['the upload signal aborts (the socket closed)', (_s, a) => a.abort()],
];

/** 64 KiB, then the sign once the receiver asks for more (it is reading by then). */
function leavingClient(sign: Sign): { source: Readable; signal: AbortSignal } {
  const abort = new AbortController();
  let reads = 0;
  const source = new Readable({
    read() {
      reads++;
      if (reads === 1) this.push(Buffer.alloc(64 * 1024, 7));
      else if (reads === 2) setImmediate(() => sign(this, abort));
    },
  });
  return { source, signal: abort.signal };
}

describe('Receiving bytes: a PUT and a part treat a client that left alike', () => {
  let s: TestServer;
  const ctx = () => s.server.core.ctx;
  before(async () => {
    s = await startTestServer({ FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(PART) });
  });
  after(async () => {
    await s?.close();
  });

  const doors: [string, (bucketId: string, client: { source: Readable; signal: AbortSignal }) => Promise<unknown>][] = [
    ['PUT', (bucketId, c) => putObject(ctx(), { bucketId, key: 'a.bin', source: c.source, declaredSize: PART, signal: c.signal })],
    [
      'part',
      async (bucketId, c) => {
        const u = await initiateUpload(ctx(), { bucketId, key: 'a.bin', size: PART + MiB, partSize: PART });
        try {
          return await uploadPart(ctx(), u, { partNumber: 0, source: c.source, declaredSize: PART, signal: c.signal });
        } finally {
          // Nothing of it is left: the failed part aborted the upload (FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE).
          assert.equal(await findUpload(ctx().db, u.id), null);
          assert.deepEqual(await listParts(ctx().db, u), []);
        }
      },
    ],
  ];

  for (const [sign, act] of SIGNS) {
    for (const [door, send] of doors) {
      it(`${door}: ${sign}`, { timeout: 30_000 }, async () => {
        const bucketId = await createBucket(s.files);
        const before = await findBucket(ctx().db, bucketId);
        const files = await storedFiles(s);
        const e = await send(bucketId, leavingClient(act)).then(
          () => assert.fail('the upload succeeded'),
          (x: unknown) => x,
        );
        assert.ok(isAppError(e), `a refusal, not ${String(e)}`);
        assert.equal(e.code, 'CLIENT_DISCONNECTED');
        assert.equal(e.status, ERRORS.CLIENT_DISCONNECTED.status);
        const now = await findBucket(ctx().db, bucketId);
        assert.equal(now!.size, before!.size);
        assert.equal(now!.size, 0);
        assert.equal(now!.reservedSize, 0);
        // No file and no temporary file (the aborted upload's file goes with the task it queued).
        await waitFor(async () => JSON.stringify(await storedFiles(s)) === JSON.stringify(files));
      });
    }
  }
});
