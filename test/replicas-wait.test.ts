// FILES_REST_UPLOAD_WAIT_COPIES for every way of making a version from uploaded bytes: a multipart
// completion through the REST door and through the S3 door (AWS SDK), and the last append of a tus
// upload (tus-js-client). No worker runs in these servers, so a second copy that exists when the
// client is answered was made by the upload itself; a multipart merge (a worker's task) is run by
// the test, in the server's process, while the client waits.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CompleteMultipartUploadCommand, CreateBucketCommand, CreateMultipartUploadCommand, S3Client, UploadPartCommand } from '@aws-sdk/client-s3';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { createBucket, md5, put, req } from './support/http.js';
import { createLocation } from '../src/domain/locations.js';
import { copiesOf, resolveFileRef } from '../src/domain/replicas.js';
import { completeUpload } from '../src/domain/multipart.js';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';

const SKIP = testStorage() === 's3' ? 'tus needs an fs location; the S3-storage run covers PUT waits in replicas.test.ts' : false;
const PART = 1000;

describe('FILES_REST_UPLOAD_WAIT_COPIES=2: multipart completions (both doors) and tus uploads wait for the second copy', { skip: SKIP }, () => {
  let s: TestServer;
  let s3: S3Client;
  let bucket: string;
  let bucketName: string;
  const ctx = () => s.server.core.ctx;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let tus: any;

  before(async () => {
    s = await startTestServer({
      FILES_REST_DEFAULT_COPIES: '2',
      FILES_REST_UPLOAD_WAIT_COPIES: '2',
      FILES_REST_WORKER: '0',
      FILES_REST_S3_PORT: 'auto',
      FILES_REST_SERVER_KEY: randomBytes(32).toString('base64'),
      FILES_REST_S3_MULTIPART_MIN_PART_SIZE: String(PART),
      FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(PART),
    });
    await createLocation(ctx(), { name: 'other', uri: join(s.dir, 'other') });
    const k = await createAccessKey(ctx().db, requireServerKeys(s.config, null, { create: true }));
    s3 = new S3Client({
      endpoint: s.s3Url,
      region: 'us-east-1',
      forcePathStyle: true,
      maxAttempts: 1,
      credentials: { accessKeyId: k.info.accessKeyId, secretAccessKey: k.secret },
    });
    bucketName = `wait-${randomBytes(4).toString('hex')}`;
    bucket = await createBucket(s.files);
    await s3.send(new CreateBucketCommand({ Bucket: bucketName }));
    tus = await import('tus-js-client');
  });
  after(async () => {
    s3?.destroy();
    await s?.close();
  });

  /** The copies of the head of `key` in the REST bucket `b`: their locations. */
  async function copyLocations(b: string, key: string): Promise<string[]> {
    const st = await copiesOf(ctx().db, await resolveFileRef(ctx(), `${b}/${key}`));
    return st!.copies.map((c) => c.location).sort();
  }

  /** Runs the merge of every upload waiting for it (the worker's task), in the server's process, until `done` settles. */
  async function mergeUntil<T>(done: Promise<T>): Promise<T> {
    let settled = false;
    void done.finally(() => (settled = true)).catch(() => {});
    while (!settled) {
      const waiting = await ctx().db.selectFrom('multipart_uploads').select('id').where('state', '=', 'completing').execute();
      for (const u of waiting) await completeUpload(ctx(), u.id);
      await new Promise((r) => setTimeout(r, 20));
    }
    return done;
  }

  async function restMultipart(key: string, body: Buffer): Promise<{ status: number; json: { message?: string } }> {
    const init = await req(`${s.files}/${bucket}/${key}?uploads&size=${body.length}&partSize=${PART}`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    const id = init.json.id as string;
    for (let n = 0; n * PART < body.length; n++) {
      const r = await put(`${s.files}/${bucket}/${key}?uploadId=${id}&partNumber=${n}`, body.subarray(n * PART, (n + 1) * PART));
      assert.equal(r.status, 200, r.text);
    }
    return mergeUntil(req(`${s.files}/${bucket}/${key}?uploadId=${id}`, { method: 'POST' }));
  }

  async function s3Multipart(key: string, body: Buffer): Promise<string> {
    const up = await s3.send(new CreateMultipartUploadCommand({ Bucket: bucketName, Key: key }));
    const parts = [];
    for (let n = 0; n * PART < body.length; n++) {
      const r = await s3.send(new UploadPartCommand({ Bucket: bucketName, Key: key, UploadId: up.UploadId, PartNumber: n + 1, Body: body.subarray(n * PART, (n + 1) * PART) }));
      parts.push({ PartNumber: n + 1, ETag: r.ETag });
    }
    const done = await mergeUntil(s3.send(new CompleteMultipartUploadCommand({ Bucket: bucketName, Key: key, UploadId: up.UploadId, MultipartUpload: { Parts: parts } })));
    return done.VersionId!;
  }

  function tusUpload(key: string, body: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      const u = new tus.Upload(body, {
        endpoint: `${s.url}/tus/${bucket}/`,
        metadata: { key },
        chunkSize: PART,
        retryDelays: [],
        onError: reject,
        onSuccess: () => resolve(),
      });
      u.start();
    });
  }

  /** The bucket behind the S3 name (its UUID). */
  async function s3BucketId(): Promise<string> {
    const row = await ctx().db.selectFrom('buckets').select('id').where('name', '=', bucketName).executeTakeFirstOrThrow();
    return row.id;
  }

  it('with the second location writable, each client is answered once both copies exist', async () => {
    const body = randomBytes(2 * PART + 17);
    const rest = await restMultipart('rest-mp', body);
    assert.equal(rest.status, 200, JSON.stringify(rest.json));
    assert.deepEqual(await copyLocations(bucket, 'rest-mp'), ['default', 'other']);

    await s3Multipart('s3-mp', body);
    assert.deepEqual(await copyLocations(await s3BucketId(), 's3-mp'), ['default', 'other']);

    await tusUpload('tus-up', body);
    assert.deepEqual(await copyLocations(bucket, 'tus-up'), ['default', 'other']);
    for (const [b, k] of [[bucket, 'rest-mp'], [await s3BucketId(), 's3-mp'], [bucket, 'tus-up']] as const) {
      const r = await fetch(`${s.files}/${b}/${k}`);
      assert.equal(md5(Buffer.from(await r.arrayBuffer())), md5(body), k);
    }
  });

  it('with the second location unwritable, each is refused as 503 (S3: ServiceUnavailable); the version is stored with its one copy', async () => {
    await rm(join(s.dir, 'other'), { recursive: true, force: true });
    await writeFile(join(s.dir, 'other'), 'not a directory');
    const body = randomBytes(PART + 5);

    const rest = await restMultipart('rest-later', body);
    assert.equal(rest.status, 503);
    assert.match(rest.json.message ?? '', /only 1 of the 2 copies/);
    assert.deepEqual(await copyLocations(bucket, 'rest-later'), ['default']);

    const e = await s3Multipart('s3-later', body).then(
      () => null,
      (x: { name?: string; $metadata?: { httpStatusCode?: number }; message?: string }) => x,
    );
    assert.ok(e, 'CompleteMultipartUpload must not succeed');
    assert.equal(e.$metadata?.httpStatusCode, 503);
    assert.equal(e.name, 'ServiceUnavailable');
    assert.match(e.message ?? '', /FILES_REST_UPLOAD_WAIT_COPIES/);
    assert.deepEqual(await copyLocations(await s3BucketId(), 's3-later'), ['default']);

    // tus: the PATCH that completes the upload is answered 503 (tus-js-client reports it).
    const tusErr = await tusUpload('tus-later', body).then(
      () => null,
      (x: Error & { originalResponse?: { getStatus(): number } }) => x,
    );
    assert.ok(tusErr, 'the tus upload must not be reported as a success');
    assert.equal(tusErr.originalResponse?.getStatus(), 503, tusErr.message);
    assert.deepEqual(await copyLocations(bucket, 'tus-later'), ['default']);

    for (const [b, k] of [[bucket, 'rest-later'], [await s3BucketId(), 's3-later'], [bucket, 'tus-later']] as const) {
      const r = await fetch(`${s.files}/${b}/${k}`);
      assert.equal(r.status, 200, k);
      assert.equal(md5(Buffer.from(await r.arrayBuffer())), md5(body), k);
    }
  });
});
