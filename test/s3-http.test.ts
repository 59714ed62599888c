// The whole service on S3: a files-rest server with FILES_REST_STORAGE_FACTORY=s3 and its default
// location in a bucket of the test S3 server; checked through HTTP and by looking into the bucket.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { startTestServer, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { createBucket, md5, put, req, waitFor } from './support/http.js';
import { startTestS3, type TestS3 } from './support/s3.js';
import { createLocation } from '../src/domain/locations.js';

// These tests count the objects the S3 storage holds: small uploads too are files (objects) there.
storeSmallObjectsAsFiles();

const BUCKET = 'files-rest-http';
const PREFIX = 'service/data';
const MiB = 1024 * 1024;

describe('files-rest on S3 storage', () => {
  let s3: TestS3;
  let s: TestServer;

  /** Keys of the objects under the location's prefix. */
  async function storedKeys(): Promise<string[]> {
    const r = await s3.client.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: `${PREFIX}/` }));
    return (r.Contents ?? []).map((o) => o.Key!).sort();
  }

  before(async () => {
    s3 = await startTestS3();
    await s3.createBucket(BUCKET);
    s = await startTestServer({
      ...s3.env,
      FILES_REST_STORAGE_FACTORY: 's3',
      FILES_REST_AUTO_LOCATION: '0',
      // Small enough for the tests; the S3 backend itself still asks 5 MiB of every part but the last.
      FILES_REST_MULTIPART_CHUNKSIZE_MIN: '1024',
    });
    // The location is made through the domain, with the server's own core. A second core opened
    // with openCore(s.config) on the same SQLite file can deadlock with the worker starting up
    // (better-sqlite3 waits for a lock synchronously, so the holder's transaction cannot finish).
    const loc = await createLocation(s.server.core.ctx, { name: 's3', uri: `s3://${BUCKET}/${PREFIX}/`, isDefault: true });
    assert.equal(loc.uri, `s3://${BUCKET}/${PREFIX}`);
  });
  after(async () => {
    await s?.close();
    await s3?.close();
  });

  it('the readiness check reaches the bucket', async () => {
    const r = await req(`${s.url}/readyz`);
    assert.equal(r.status, 200, r.text);
  });

  it('PUT stores the object in the bucket; GET and Range GET serve it back', async () => {
    const b = await createBucket(s.files);
    const data = randomBytes(3 * MiB + 123);
    const before = await storedKeys();
    const r = await put(`${s.files}/${b}/photos/cat.bin`, data);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.checksum, `md5:${md5(data)}`);
    assert.equal(r.json.size, data.length);
    const added = (await storedKeys()).filter((k) => !before.includes(k));
    assert.equal(added.length, 1);
    assert.match(added[0]!, new RegExp(`^${PREFIX}/[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f-]+/data$`));

    const g = await fetch(`${s.files}/${b}/photos/cat.bin`);
    assert.equal(g.status, 200);
    const body = Buffer.from(await g.arrayBuffer());
    assert.equal(md5(body), md5(data));
    assert.equal(g.headers.get('content-md5'), Buffer.from(md5(data), 'hex').toString('base64'));

    const rg = await fetch(`${s.files}/${b}/photos/cat.bin`, { headers: { range: 'bytes=1048570-1048589' } });
    assert.equal(rg.status, 206);
    assert.equal(rg.headers.get('content-range'), `bytes 1048570-1048589/${data.length}`);
    assert.ok(Buffer.from(await rg.arrayBuffer()).equals(data.subarray(1048570, 1048590)));
    const tail = await fetch(`${s.files}/${b}/photos/cat.bin`, { headers: { range: 'bytes=-10' } });
    assert.equal(tail.status, 206);
    assert.ok(Buffer.from(await tail.arrayBuffer()).equals(data.subarray(data.length - 10)));
  });

  it('a hard delete removes the object from the bucket (worker task)', async () => {
    const b = await createBucket(s.files);
    const before = await storedKeys();
    const r = await put(`${s.files}/${b}/gone.txt`, 'short-lived');
    assert.equal(r.status, 200, r.text);
    const added = (await storedKeys()).filter((k) => !before.includes(k));
    assert.equal(added.length, 1);
    const d = await req(`${s.files}/${b}/gone.txt?versionId=${r.json.version_id}`, { method: 'DELETE' });
    assert.equal(d.status, 204, d.text);
    await waitFor(async () => !(await storedKeys()).includes(added[0]!));
    assert.equal((await req(`${s.files}/${b}/gone.txt`)).status, 404);
  });

  it('a multipart upload goes to an S3 multipart upload and downloads whole', async () => {
    const b = await createBucket(s.files);
    const partSize = 5 * MiB;
    const data = randomBytes(2 * partSize + 4321);
    const obj = `${s.files}/${b}/big.bin`;
    const init = await req(`${obj}?uploads&size=${data.length}&partSize=${partSize}`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    const id = init.json.id as string;
    assert.equal(init.json.last_part_number, 2);
    for (const n of [2, 0, 1]) {
      const chunk = data.subarray(n * partSize, Math.min((n + 1) * partSize, data.length));
      const p = await put(`${obj}?uploadId=${id}&partNumber=${n}`, chunk);
      assert.equal(p.status, 200, p.text);
      assert.equal(p.json.checksum, `md5:${md5(chunk)}`);
    }
    const done = await req(`${obj}?uploadId=${id}`, { method: 'POST' });
    assert.equal(done.status, 200, done.text);
    const g = await fetch(obj);
    assert.equal(g.status, 200);
    const body = Buffer.from(await g.arrayBuffer());
    assert.equal(body.length, data.length);
    assert.equal(md5(body), md5(data));
    const head = await fetch(obj, { method: 'HEAD' });
    assert.equal(head.headers.get('etag'), `"md5:${md5(data)}"`);
  });

  it('a multipart upload of one small part works; several parts under 5 MiB are refused at initiation', async () => {
    const b = await createBucket(s.files);
    const obj = `${s.files}/${b}/small.bin`;
    const data = randomBytes(1000);
    const init = await req(`${obj}?uploads&size=${data.length}&partSize=1024`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    assert.equal((await put(`${obj}?uploadId=${init.json.id}&partNumber=0`, data)).status, 200);
    assert.equal((await req(`${obj}?uploadId=${init.json.id}`, { method: 'POST' })).status, 200);
    assert.equal(md5(Buffer.from(await (await fetch(obj)).arrayBuffer())), md5(data));

    const refused = await req(`${s.files}/${b}/parts.bin?uploads&size=4096&partSize=1024`, { method: 'POST' });
    assert.equal(refused.status, 400);
    assert.match(refused.json.message, /^Invalid part size: partSize must be from \d+ to \d+ bytes\.$/);
  });

  it('aborting a multipart upload leaves nothing in the bucket', async () => {
    const b = await createBucket(s.files);
    const before = await storedKeys();
    const obj = `${s.files}/${b}/aborted.bin`;
    const init = await req(`${obj}?uploads&size=${5 * MiB + 10}&partSize=${5 * MiB}`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    assert.equal((await put(`${obj}?uploadId=${init.json.id}&partNumber=1`, randomBytes(10))).status, 200);
    assert.equal((await req(`${obj}?uploadId=${init.json.id}`, { method: 'DELETE' })).status, 204);
    // The worker aborts the S3 upload; its object never existed.
    await waitFor(async () => {
      const r = await req(`${s.files}/${b}?uploads`);
      return r.status === 200 && r.json.length === 0;
    });
    assert.deepEqual(await storedKeys(), before);
  });
});
