// The OpenAPI 3 document at /openapi.json against the routes that exist: every path and method it
// lists is answered by a route (not the 404 of an unknown URL, not 405), and every method the
// routes accept on /files, /files/{bucket_id} and /files/{bucket_id}/{key} is in it.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './support/server.js';
import { createBucket, put, req, type Res } from './support/http.js';
import { ERRORS } from '../src/errors.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;
const PREFIX = '/api/v1';

/** A route answered: neither the unknown-URL 404 nor a 405. (HEAD has no body: any 404 counts as "no route" only with GET's body.) */
function routed(r: Res): boolean {
  if (r.status === 405) return false;
  if (r.status === 404 && r.json?.message === ERRORS.NOT_FOUND.message) return false;
  return true;
}

describe('OpenAPI document', () => {
  let s: TestServer;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let doc: any;
  let bucket: string;
  const key = 'dir/doc.txt';

  before(async () => {
    s = await startTestServer({ FILES_REST_URL_PREFIX: PREFIX });
    const r = await req(`${s.url}/openapi.json`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /application\/json/);
    doc = r.json;
    bucket = await createBucket(s.files);
    await put(`${s.files}/${bucket}/${key}`, 'hello');
  });
  after(() => s.close());

  function concrete(path: string): string {
    return `${s.url}${path.replace('{bucket_id}', bucket).replace('{key}', key)}`;
  }

  it('is an OpenAPI 3 document with the REST paths under the URL prefix and the operator paths at the root', () => {
    assert.match(doc.openapi, /^3\.\d+\.\d+$/);
    assert.equal(doc.info.title, 'files-rest');
    assert.deepEqual(Object.keys(doc.paths).sort(), [
      `${PREFIX}/files`, `${PREFIX}/files/{bucket_id}`, `${PREFIX}/files/{bucket_id}/{key}`,
      '/healthz', '/metrics', '/openapi.json', '/readyz',
    ].sort());
    for (const schema of ['Bucket', 'ObjectVersion', 'MultipartUpload', 'Part', 'Error']) assert.ok(doc.components.schemas[schema], schema);
    // Every $ref points at a schema that exists.
    const refs = JSON.stringify(doc).match(/#\/components\/schemas\/\w+/g) ?? [];
    for (const r of refs) assert.ok(doc.components.schemas[r.split('/').pop()!], r);
    // Path parameters are declared for every templated segment.
    for (const [path, ops] of Object.entries<Record<string, { parameters: { name: string; in: string }[] }>>(doc.paths)) {
      const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      for (const op of Object.values(ops)) {
        assert.deepEqual(op.parameters.filter((p) => p.in === 'path').map((p) => p.name), names, path);
      }
    }
    const objectOps = doc.paths[`${PREFIX}/files/{bucket_id}/{key}`];
    assert.match(objectOps.post.description, /`\?uploads`/);
    assert.match(objectOps.post.description, /`\?uploadId`/);
    assert.ok(objectOps.put.requestBody.content['application/octet-stream']);
    assert.ok(objectOps.get.responses['206']);
  });

  it('every path and method in the document is answered by a route of the running server', async () => {
    let checked = 0;
    for (const [path, ops] of Object.entries<Record<string, unknown>>(doc.paths)) {
      for (const method of Object.keys(ops)) {
        const m = method.toUpperCase();
        // A body where the operation takes one (an empty upload, which is a valid one).
        const init: RequestInit = { method: m, ...(m === 'PUT' ? { body: '' } : {}) };
        const r = await req(concrete(path), init);
        if (m === 'HEAD') assert.notEqual(r.status, 405, `${m} ${path}`);
        else assert.ok(routed(r), `${m} ${path}: ${r.status} ${r.text}`);
        checked++;
      }
    }
    assert.equal(checked, 12, "1 on the collection, 2 on a bucket, 5 on an object, 4 at the root");
  });

  it('every method the routes accept on the REST resources is in the document', async () => {
    for (const path of [`${PREFIX}/files`, `${PREFIX}/files/{bucket_id}`, `${PREFIX}/files/{bucket_id}/{key}`]) {
      const documented = new Set(Object.keys(doc.paths[path]).map((m) => m.toUpperCase()));
      const accepted: string[] = [];
      for (const m of METHODS) {
        const r = await req(concrete(path), { method: m, ...(m === 'PUT' ? { body: '' } : {}) });
        // HEAD on a collection that only takes POST is a 405 too; with no body, look at the status.
        if (r.status !== 405 && routed(r)) accepted.push(m);
      }
      assert.ok(accepted.length > 0, path);
      for (const m of accepted) assert.ok(documented.has(m), `${m} ${path} is accepted but not documented`);
      for (const m of documented) assert.ok(accepted.includes(m), `${m} ${path} is documented but refused`);
    }
  });

  it('an unknown path is not routed (the probe can tell)', async () => {
    const r = await req(`${s.url}${PREFIX}/nothing-here`);
    assert.equal(routed(r), false);
    const wrong = await req(`${s.url}${PREFIX}/files`, { method: 'GET' });
    assert.equal(wrong.status, 405);
  });
});
