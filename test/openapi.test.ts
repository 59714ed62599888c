// The OpenAPI 3 document at /openapi.json against the routes that exist: every path and method it
// lists is answered by a route (not the 404 of an unknown URL, not 405), and every method the
// routes accept on /files, /files/{bucket_id} and /files/{bucket_id}/{key} is in it.
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './support/server.js';
import { createBucket, put, req, type Res } from './support/http.js';
import SwaggerParser from '@apidevtools/swagger-parser';
import { ERRORS } from '../src/errors.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;
const PREFIX = '/api/v1';

/** A route answered: neither the unknown-URL 404 nor a 405. (HEAD has no body: any 404 counts as "no route" only with GET's body.) */
function routed(r: Res): boolean {
  if (r.status === 405) return false;
  if (r.status === 404 && r.json?.message === ERRORS.NOT_FOUND.message) return false;
  return true;
}

/* eslint-disable @typescript-eslint/no-explicit-any */
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
    return `${s.url}${path.replace('{bucket_id}', bucket).replace('{key}', key).replace('{task_id}', '1')}`;
  }

  it('is an OpenAPI 3 document with the REST paths under the URL prefix and the operator paths at the root', () => {
    assert.match(doc.openapi, /^3\.\d+\.\d+$/);
    assert.equal(doc.info.title, 'files-rest');
    assert.deepEqual(Object.keys(doc.paths).sort(), [
      `${PREFIX}/files`, `${PREFIX}/files/{bucket_id}`, `${PREFIX}/files/{bucket_id}/{key}`,
      `${PREFIX}/tus/{bucket_id}/`, `${PREFIX}/tus/{bucket_id}/{upload_id}`,
      `${PREFIX}/admin`, `${PREFIX}/admin/locations`, `${PREFIX}/admin/migrations`, `${PREFIX}/admin/tasks`,
      `${PREFIX}/admin/tasks/failed/retry`, `${PREFIX}/admin/tasks/{task_id}`, `${PREFIX}/admin/tasks/{task_id}/retry`,
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

  it('is valid OpenAPI 3: no allowEmptyValue inside a schema, every parameter has in/name/schema, every operation responses', () => {
    // Every Schema Object of the document: components, parameter, media type and header schemas, and what they nest.
    const schemaKeys = new Set(['allowEmptyValue', 'in', 'style', 'explode', 'allowReserved']);
    const walkSchema = (schema: unknown, where: string): void => {
      if (!schema || typeof schema !== 'object') return;
      for (const [k, v] of Object.entries(schema)) {
        assert.ok(!schemaKeys.has(k), `${where}: ${k} is a Parameter property, not a Schema keyword`);
        if (k === 'properties' || k === 'patternProperties') for (const [name, sub] of Object.entries(v as object)) walkSchema(sub, `${where}.${name}`);
        else if (k === 'items' || k === 'additionalProperties' || k === 'not') walkSchema(v, `${where}.${k}`);
        else if (k === 'allOf' || k === 'oneOf' || k === 'anyOf') (v as unknown[]).forEach((sub, i) => walkSchema(sub, `${where}.${k}[${i}]`));
      }
    };
    for (const [name, schema] of Object.entries(doc.components.schemas)) walkSchema(schema, `components.schemas.${name}`);
    let operations = 0;
    for (const [path, ops] of Object.entries<Record<string, any>>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        const where = `${method.toUpperCase()} ${path}`;
        operations++;
        assert.ok(op.responses && Object.keys(op.responses).length > 0, `${where}: responses`);
        for (const [status, r] of Object.entries<any>(op.responses)) {
          assert.match(status, /^([1-5]\d\d|default)$/, `${where}: status ${status}`);
          assert.equal(typeof r.description, 'string', `${where} ${status}: description`);
          for (const [type, media] of Object.entries<any>(r.content ?? {})) walkSchema(media.schema, `${where} ${status} ${type}`);
          for (const [h, header] of Object.entries<any>(r.headers ?? {})) walkSchema(header.schema, `${where} ${status} header ${h}`);
        }
        for (const p of op.parameters ?? []) {
          assert.ok(typeof p.name === 'string' && p.name, `${where}: parameter name`);
          assert.ok(['query', 'header', 'path', 'cookie'].includes(p.in), `${where} ${p.name}: in`);
          assert.ok(p.schema && typeof p.schema === 'object', `${where} ${p.name}: schema`);
          if (p.in === 'path') assert.equal(p.required, true, `${where} ${p.name}: a path parameter is required`);
          if (p.allowEmptyValue !== undefined) assert.equal(p.in, 'query', `${where} ${p.name}: allowEmptyValue is for query parameters`);
          walkSchema(p.schema, `${where} parameter ${p.name}`);
        }
        for (const [type, media] of Object.entries<any>(op.requestBody?.content ?? {})) walkSchema(media.schema, `${where} body ${type}`);
      }
    }
    assert.ok(operations >= 12);
    // The flags sent without a value (`?uploads`) say so on the parameter.
    const uploads = doc.paths[`${PREFIX}/files/{bucket_id}`].get.parameters.find((p: { name: string }) => p.name === 'uploads');
    assert.equal(uploads.allowEmptyValue, true);
  });

  it('validates with @apidevtools/swagger-parser (a dev dependency)', async () => {
    // validate() dereferences the object it is given: hand it a copy.
    await SwaggerParser.validate(structuredClone(doc));
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
    assert.equal(checked, 26, '2 on the collection, 2 on a bucket, 5 on an object, 4 at the root, 6 of tus, 7 admin');
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

  it("documents every route and query variant of the README's tables, each query parameter on its operation", () => {
    // The README's route tables (Buckets, Objects, Multipart uploads): `METHOD /files/<bucket>/<key>?a=x&b` in a table row.
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const api = readme.slice(readme.indexOf('## The REST API'), readme.indexOf('## Errors'));
    const rows = [...api.matchAll(/^\|.*?`(GET|HEAD|PUT|POST|DELETE) ([^`\s]+)`/gm)];
    const seen = new Set<string>();
    for (const [, method, url] of rows) {
      const [path, search = ''] = url!.split('?');
      const resource = path!.startsWith('/admin')
        ? path!.replace('<id>', '{task_id}')
        : path!.includes('<key>') ? '/files/{bucket_id}/{key}' : path!.includes('<bucket>') ? '/files/{bucket_id}' : '/files';
      const op = doc.paths[`${PREFIX}${resource}`]?.[method!.toLowerCase()];
      assert.ok(op, `README's ${method} ${url} is not in the document`);
      const names = search.split('&').filter(Boolean).map((p) => p.split('=')[0]!);
      for (const name of names) {
        assert.ok(op.parameters.some((p: { name: string; in: string }) => p.in === 'query' && p.name === name), `README's ${method} ${url}: ?${name} is not a parameter of ${method} ${resource}`);
        seen.add(`${method} ?${name}`);
      }
      // A query variant that selects an operation is named in the operation's description.
      if (names[0] && /`\?\w+`/.test(op.description ?? '')) {
        const selectors = [...(op.description as string).matchAll(/`\?(\w+)`/g)].map((m) => m[1]);
        if (selectors.includes(names[0])) seen.add(`${method} selects ?${names[0]}`);
      }
    }
    // The extraction found the variants the README documents (it cannot pass by finding nothing).
    for (const v of ['GET ?versions', 'GET ?uploads', 'GET ?versionId', 'GET ?download', 'GET ?uploadId', 'DELETE ?versionId', 'DELETE ?uploadId',
      'PUT ?uploadId', 'PUT ?partNumber', 'POST ?uploads', 'POST ?size', 'POST ?partSize', 'POST ?uploadId',
      'POST selects ?uploads', 'POST selects ?uploadId', 'PUT selects ?uploadId', 'GET selects ?uploadId', 'DELETE selects ?uploadId', 'GET selects ?uploads']) {
      assert.ok(seen.has(v), `README variant ${v} not found or not documented`);
    }
  });

  it('list-parts (GET ?uploadId=) has its own JSON response schema: the upload with its parts array', async () => {
    const get = doc.paths[`${PREFIX}/files/{bucket_id}/{key}`].get;
    // The download's content and the list-parts JSON are two media types of the one 200.
    assert.equal(get.responses['200'].content['*/*'].schema.format, 'binary');
    const json = get.responses['200'].content['application/json'];
    assert.ok(json, 'GET on an object documents no JSON 200 (list-parts)');
    assert.equal(json.schema.$ref, '#/components/schemas/MultipartWithParts');
    const schema = doc.components.schemas.MultipartWithParts;
    const own = schema.allOf.find((s: any) => s.properties?.parts);
    assert.deepEqual(own.required, ['parts']);
    assert.equal(own.properties.parts.items.$ref, '#/components/schemas/Part');
    assert.ok(schema.allOf.some((s: any) => s.$ref === '#/components/schemas/MultipartUpload'));
    // And it is what the route answers: the upload's keys and a parts array of Part keys.
    const init = await req(`${concrete(`${PREFIX}/files/{bucket_id}/big.bin`)}?uploads&size=3&partSize=5242880`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    await req(`${concrete(`${PREFIX}/files/{bucket_id}/big.bin`)}?uploadId=${init.json.id}&partNumber=0`, { method: 'PUT', body: 'abc' });
    const listed = await req(`${concrete(`${PREFIX}/files/{bucket_id}/big.bin`)}?uploadId=${init.json.id}`);
    assert.equal(listed.status, 200, listed.text);
    for (const k of doc.components.schemas.MultipartUpload.required) assert.ok(k in listed.json, k);
    assert.equal(listed.json.parts.length, 1);
    for (const k of doc.components.schemas.Part.required) assert.ok(k in listed.json.parts[0], k);
  });

  it('every query variant in the document is dispatched to its own operation (not the plain one)', async () => {
    const obj = `${PREFIX}/files/{bucket_id}/{key}`;
    // ?uploadId of an upload that does not exist: the multipart operations answer UPLOAD_NOT_FOUND, not the object's answers.
    const id = '00000000-0000-4000-8000-000000000000';
    for (const method of ['GET', 'PUT', 'POST', 'DELETE']) {
      assert.match(doc.paths[obj][method.toLowerCase()].description, /`\?uploadId`/, method);
      const r = await req(`${concrete(obj)}?uploadId=${id}&partNumber=0`, { method, ...(method === 'PUT' ? { body: 'x' } : {}) });
      assert.equal(r.status, 404, `${method} ?uploadId: ${r.status} ${r.text}`);
      assert.equal(r.json.message, ERRORS.UPLOAD_NOT_FOUND.message, `${method} ?uploadId`);
    }
    // Documented refusals are what the route does.
    const wrong = await req(`${concrete(obj)}?uploads`, { method: 'GET' });
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.get('allow'), 'POST');
    assert.ok(doc.paths[obj].get.responses['405']);
    const bare = await req(concrete(obj), { method: 'POST' });
    assert.equal(bare.status, 400);
    assert.equal(bare.json.message, ERRORS.MISSING_SUBRESOURCE.message);
  });

  it('an unknown path is not routed (the probe can tell)', async () => {
    const r = await req(`${s.url}${PREFIX}/nothing-here`);
    assert.equal(routed(r), false);
    const wrong = await req(`${s.url}${PREFIX}/files`, { method: 'DELETE' });
    assert.equal(wrong.status, 405);
  });
});
