// Fuzz-style robustness: malformed ids, keys (.., %00, overlong UTF-8, 10 KB keys), query strings,
// headers and bodies thrown at every endpoint, from a seeded generator so every run sends the same
// requests. Whatever comes in: no 5xx, errors in the {"status","message"} JSON shape, nothing
// stored by a refused request, no file outside the data directory, sizes and listings consistent.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { sql } from 'kysely';
import { startTestServer, storedFiles, testStorage, type TestServer } from './support/server.js';
import { put, req, waitFor } from './support/http.js';
import { filesUnder } from './support/fixtures.js';
import { patternBuffer, prng } from './support/bytes.js';
import { createToken } from '../src/auth/tokens.js';

const MARKER = 'fuzzmarker';
// S3 (TEST_STORAGE=s3) refuses multipart parts under 5 MiB but the last.
const PART = testStorage() === 's3' ? 5 * 1024 * 1024 : 4;

interface RawRes {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One request exactly as given: the path is not normalised (`..` stays), the body length is exact. */
function raw(base: string, method: string, path: string, headers: Record<string, string>, body: Buffer | null): Promise<RawRes> {
  const u = new URL(base);
  return new Promise((resolvePromise, reject) => {
    const r = http.request(
      {
        host: u.hostname,
        port: u.port,
        method,
        path,
        agent: false,
        headers: { connection: 'close', ...headers, ...(body ? { 'content-length': String(body.length) } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    r.setTimeout(15_000, () => r.destroy(new Error(`no answer to ${method} ${path.slice(0, 200)}`)));
    r.on('error', reject);
    r.end(body ?? undefined);
  });
}

function pick<T>(rnd: () => number, items: readonly T[]): T {
  return items[Math.floor(rnd() * items.length)]!;
}

describe('Fuzz: malformed input at every endpoint', () => {
  let s: TestServer;
  let bucket: string;
  let v1: string;
  let uploadId: string;

  before(async () => {
    s = await startTestServer({
      FILES_REST_MULTIPART_CHUNKSIZE_MIN: '2',
      FILES_REST_MULTIPART_CHUNKSIZE_MAX: String(8 * 1024 * 1024),
      FILES_REST_MULTIPART_MAX_PARTS: '50',
      MAX_CONTENT_LENGTH: String(64 * 1024),
      FILES_REST_OBJECT_KEY_MAX_LEN: '255',
    });
    bucket = (await req(s.files, { method: 'POST' })).json.id as string;
    v1 = (await put(`${s.files}/${bucket}/known.txt`, 'first')).json.version_id as string;
    await put(`${s.files}/${bucket}/known.txt`, 'second version');
    const init = await req(`${s.files}/${bucket}/big.bin?uploads&size=${2 * PART}&partSize=${PART}`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    uploadId = init.json.id as string;
  });
  after(() => s.close());

  /** Rows and stored files: what a refused request must leave unchanged. */
  async function state() {
    const db = s.server.core.ctx.db;
    const count = async (table: 'object_versions' | 'files' | 'multipart_uploads' | 'parts' | 'buckets') =>
      Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    const sizes = await db.selectFrom('buckets').select(['id', 'size', 'reserved_size']).orderBy('id').execute();
    return {
      versions: await count('object_versions'),
      files: await count('files'),
      uploads: await count('multipart_uploads'),
      parts: await count('parts'),
      buckets: await count('buckets'),
      sizes: sizes.map((b) => `${b.id}:${b.size}:${b.reserved_size}`),
      stored: testStorage() === 's3' ? await storedFiles(s) : (await readdir(s.config.dataDir, { recursive: true }).catch(() => [] as string[])).sort(),
    };
  }

  async function tasksIdle(): Promise<void> {
    await waitFor(async () => {
      const d = await s.server.core.queue.depth();
      return (d.queued ?? 0) + (d.running ?? 0) === 0;
    }, 20_000);
  }

  function generators(rnd: () => number) {
    const unknownUuid = '0b7a3c2e-1f4d-4e5a-9c8b-7d6e5f4a3b2c';
    const bucketIds = [
      bucket, bucket, bucket, unknownUuid, 'not-a-uuid', '', '..', '%2e%2e', '%00', bucket.toUpperCase(),
      `${bucket}x`, bucket.replaceAll('-', ''), '0'.repeat(5000), '%F0%9F%92%A9', `${bucket}%00`, '-1', '00000000-0000-0000-0000-00000000000g',
    ];
    const keys = [
      'known.txt', 'big.bin', '..', '.', '../..', `../../${MARKER}-1`, `..%2F..%2F${MARKER}-2`, `%2e%2e/%2e%2e/${MARKER}-3`,
      `a/../../${MARKER}-4`, '%00', `a%00b`, `${MARKER}%00.txt`, '%C0%AE%C0%AE/%C0%AF', '%E0%80%AF', '%ED%A0%80', '%FF%FE', '%',
      '%zz', 'a%2', '%01', '%7F', 'a//b', 'dir/', '/', '%2F', `${MARKER}-${'k'.repeat(10 * 1024)}`,
      '%E2%82%AC'.repeat(300), 'x'.repeat(255), 'x'.repeat(256), '%EF%BF%BF', 'caf%C3%A9', 'cafe%CC%81', '..%5C..%5Cwin',
      `C:%5C${MARKER}`, '%252e%252e', '~', '%20', 'a?b', '%3F%23', 'con', 'nul.txt',
    ];
    const queries = [
      '', '', '?versions', '?uploads', '?download', '?download=0', '?versionId=xyz', `?versionId=${unknownUuid}`, `?versionId=${v1}`,
      `?versionId=${v1}&versionId=${v1}`, '?uploadId=bad', `?uploadId=${unknownUuid}`, `?uploadId=${uploadId}`,
      `?uploadId=${uploadId}&partNumber=-1`, `?uploadId=${uploadId}&partNumber=1e3`, `?uploadId=${uploadId}&partNumber=99`,
      `?uploadId=${uploadId}&partNumber=0`, `?uploadId=${uploadId}&partNumber=`, '?uploads&size=-5&partSize=abc',
      '?uploads&size=99999999999999999999999&partSize=2', '?uploads&size=8&partSize=1', '?uploads&size=0&partSize=4',
      '?uploads&size=8&partSize=4&size=9', '?limit=0', '?limit=abc', '?limit=99999999', '?prefix=%FF', '?after=%00',
      '?%00=1', '?a[b]=1&a[c]=2', '?versions&uploads', `?x=${'q'.repeat(8000)}`, '?&&&=&=', '?versionId', '?uploadId',
      '?versionId=%00', '?uploadId=%C0%AE', '?prettyprint=1&versions',
    ];
    const headerSets: Array<Record<string, string>> = [
      {}, {}, {},
      { range: 'bytes=abc' }, { range: 'bytes=5-1' }, { range: 'bytes=0-0,1-1' }, { range: 'items=1-2' }, { range: 'bytes=-0' },
      { range: `bytes=${'9'.repeat(40)}-` }, { 'if-none-match': 'garbage' }, { 'if-modified-since': 'yesterday' },
      { 'if-match': '*' }, { 'if-range': 'W/"x"', range: 'bytes=0-1' }, { 'if-unmodified-since': 'Thu, 01 Jan 1970 00:00:00 GMT' },
      { 'content-type': 'multipart/form-data; boundary=' }, { 'content-type': 'multipart/form-data; boundary=zz' },
      { 'content-type': 'application/json' }, { 'content-type': '\u00ff\u00fe/\u00e9' }, { 'content-type': 'text/html; charset=utf-7' },
      { 'x-invenio-file-tags': 'a=b;;=c' }, { 'x-invenio-file-tags': `${'t'.repeat(300)}=v` }, { 'x-invenio-file-tags': 'a=1&a=2' },
      { 'x-invenio-file-tags': '%00=%00' }, { 'content-md5': 'not-base64!' }, { 'content-md5': 'AAAA' },
      // Well-formed digests of the empty body: wrong for any other body, refused after the bytes were written.
      { 'content-md5': '1B2M2Y8AsgTpgAmY7PhCfg==' }, { 'repr-digest': 'md5=:1B2M2Y8AsgTpgAmY7PhCfg==:' }, { digest: 'md5=zz' },
      { 'repr-digest': 'md5=:AAAA:' }, { 'content-digest': 'sha-256=:xx:' }, { authorization: 'Bearer \u00ff\u00ff' },
      { authorization: 'x'.repeat(6000) }, { accept: 'text/html' }, { accept: 'application/xml;q=1, */*;q=0' },
      { prefer: 'respond-async' }, { 'x-request-id': '../../etc' }, { 'transfer-encoding': 'chunked' }, { expect: '100-continue' },
      { 'x-forwarded-for': '::1, garbage' }, { host: '' }, { origin: 'null' }, { 'x-big': 'h'.repeat(20_000) },
    ];
    const bodies: Array<() => Buffer | null> = [
      () => null,
      () => Buffer.alloc(0),
      () => patternBuffer(Math.floor(rnd() * 2048), Math.floor(rnd() * 1000)),
      () => Buffer.from('{"size": -1, "partSize": "x"}'),
      () => Buffer.from('{"size": 8, "partSize": 4'),
      () => Buffer.from('[1,2,3]'),
      () => Buffer.from('--zz\r\nContent-Disposition: form-data; name="file"; filename="../../x"\r\n\r\nabc\r\n--zz--\r\n'),
      () => Buffer.from('--zz\r\nContent-Disposition: form-data; name="_chunkNumber"\r\n\r\n-3\r\n--zz--\r\n'),
      () => Buffer.from([0xc0, 0xae, 0xc0, 0xae, 0x00, 0xff]),
    ];
    const methods = ['GET', 'GET', 'HEAD', 'PUT', 'PUT', 'POST', 'POST', 'DELETE', 'DELETE', 'PATCH', 'OPTIONS'];
    return {
      /** Each header set on an upload, and each key on an upload and a multipart initiation. */
      sweep(): Array<{ method: string; path: string; headers: Record<string, string>; body: Buffer | null }> {
        const out = [];
        for (const headers of headerSets) {
          out.push({ method: 'PUT', path: `/files/${bucket}/swept.bin`, headers, body: headers['transfer-encoding'] ? null : patternBuffer(100) });
        }
        for (const key of keys) {
          out.push({ method: 'PUT', path: `/files/${bucket}/${key}?versionId=${v1}`, headers: {}, body: Buffer.from('x') });
          out.push({ method: 'POST', path: `/files/${bucket}/${key}?uploads&size=9999999&partSize=1`, headers: {}, body: null });
        }
        return out;
      },
      request() {
        const kind = rnd();
        // Most requests keep a valid bucket and key and break something else, to get past the
        // first checks; the others break the address itself.
        const b = kind < 0.55 ? bucket : pick(rnd, bucketIds);
        const key = kind < 0.55 ? pick(rnd, ['known.txt', 'big.bin', 'new.txt', 'dir/new.bin']) : pick(rnd, keys);
        const path =
          kind > 0.9
            ? `/files${pick(rnd, ['', '/', '//', '/%00', '/..', `?${'q'.repeat(100)}`])}`
            : kind > 0.75
              ? `/files/${b}`
              : `/files/${b}/${key}`;
        const query = path.includes('?') ? '' : pick(rnd, queries);
        const method = pick(rnd, methods);
        const headers = { ...pick(rnd, headerSets), ...(rnd() < 0.2 ? pick(rnd, headerSets) : {}) };
        let body = method === 'PUT' || method === 'POST' || rnd() < 0.1 ? pick(rnd, bodies)() : null;
        if (headers['transfer-encoding']) body = null;
        return { method, path: path + query, headers, body };
      },
    };
  }

  it('a few hundred malformed requests: no 5xx, JSON errors, nothing stored by a refusal, no file outside the data dir', async () => {
    const rnd = prng(20261122);
    const gen = generators(rnd);
    const statuses = new Map<number, number>();
    let current = await state();
    const plan = [...gen.sweep(), ...Array.from({ length: 300 }, () => gen.request())];
    for (let i = 0; i < plan.length; i++) {
      const r0 = plan[i]!;
      let res: RawRes;
      try {
        res = await raw(s.url, r0.method, r0.path, r0.headers, r0.body);
      } catch (e) {
        // The client library itself refuses some requests (an invalid header value); nothing was sent.
        if ((e as NodeJS.ErrnoException).code === 'ERR_INVALID_CHAR' || (e as NodeJS.ErrnoException).code === 'ERR_UNESCAPED_CHARACTERS') continue;
        throw new Error(`request ${i} ${r0.method} ${r0.path.slice(0, 200)}: ${(e as Error).message}`);
      }
      const what = `#${i} ${r0.method} ${r0.path.slice(0, 160)} ${JSON.stringify(r0.headers).slice(0, 160)} → ${res.status} ${res.body.slice(0, 200)}`;
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      assert.ok(res.status >= 200 && res.status < 500, what);
      if (res.status >= 400 && r0.method !== 'HEAD') {
        assert.match(String(res.headers['content-type']), /^application\/json/, what);
        const body = JSON.parse(res.body) as { status: number; message: unknown };
        assert.equal(body.status, res.status, what);
        assert.equal(typeof body.message, 'string', what);
      }
      if (r0.method === 'PUT' || r0.method === 'POST' || r0.method === 'DELETE') {
        if (res.status >= 300) {
          assert.deepEqual(await state(), current, `a refused request changed the stored state: ${what}`);
        } else {
          await tasksIdle();
          current = await state();
        }
      }
    }
    console.log(`# fuzz statuses: ${JSON.stringify([...statuses].sort((a, b) => a[0] - b[0]))}`);
    // The generator reached the main outcomes, not only one kind of refusal.
    for (const st of [200, 400, 404, 405, 422]) assert.ok((statuses.get(st) ?? 0) > 0, `no ${st} among ${JSON.stringify([...statuses])}`);
  });

  it('afterwards: sizes match the stored versions, every stored file is known, nothing was written outside the data dir', async () => {
    await tasksIdle();
    const db = s.server.core.ctx.db;
    // Bucket size = the sizes of the stored versions (delete markers have none).
    const rows = await db
      .selectFrom('buckets')
      .leftJoin('object_versions', 'object_versions.bucket_id', 'buckets.id')
      .leftJoin('files', 'files.id', 'object_versions.file_id')
      .select(['buckets.id as id', 'buckets.size as size', sql<number>`coalesce(sum(files.size), 0)`.as('stored')])
      .groupBy(['buckets.id', 'buckets.size'])
      .execute();
    for (const r of rows) assert.equal(Number(r.size), Number(r.stored), `bucket ${r.id}`);
    // The API's listing agrees with the database.
    const listed = (await req(`${s.files}/${bucket}?versions`)).json.contents as Array<{ key: string; size: number | null; delete_marker: boolean }>;
    const inDb = await db.selectFrom('object_versions').select('key').where('bucket_id', '=', bucket).execute();
    assert.equal(listed.length, inDb.length);
    assert.equal((await req(`${s.files}/${bucket}`)).json.size, listed.reduce((n, v) => n + (v.delete_marker ? 0 : v.size ?? 0), 0));

    // Every stored file is a file instance (or a multipart file being filled); none is a leftover.
    const ctx = s.server.core.ctx;
    const norm = (uri: string) => (uri.startsWith('/') ? resolve(uri) : uri);
    const known = new Set((await db.selectFrom('files').select('uri').execute()).map((f) => norm(f.uri!)));
    for (const f of await storedFiles(s)) {
      assert.ok(known.has(norm(f)), `unknown stored file: ${f}`);
      // A file in the location, named by the backend, or a small file kept in the database.
      assert.match(f, /\/[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f-]+\/data$|^inline:[0-9a-f-]+$/);
    }
    for (const f of await db.selectFrom('files').select(['uri', 'size', 'readable']).execute()) {
      const backend = ctx.storage.forUri(f.uri!);
      if (f.readable && backend.stat) assert.equal((await backend.stat(f.uri!))?.size, Number(f.size), f.uri!);
    }
    // Outside the data dir: only the database (and the server key), in the server's directory; nothing named after a fuzzed key anywhere near.
    const mine = (await filesUnder(s.dir)).filter((f) => !f.startsWith(resolve(s.config.dataDir)));
    // The database and the server key (made beside a SQLite database at start: signed URLs, S3 keys).
    for (const f of mine) assert.match(relative(s.dir, f), /^(db\.sqlite(-wal|-shm|-journal)?|files-rest-server\.key)$/, `unexpected file ${f}`);
    const top = await readdir(tmpdir());
    assert.deepEqual(top.filter((n) => n.includes(MARKER)), []);
    assert.deepEqual((await readdir(join(s.dir, '..'))).filter((n) => n.includes(MARKER)), []);

    // And the service still works.
    const g = await req(`${s.files}/${bucket}/known.txt?versionId=${v1}`);
    assert.equal(g.text, 'first');
  });

  it('malformed credentials with the token factory: always 401 with WWW-Authenticate, never 5xx', async () => {
    const t = await startTestServer({ FILES_REST_PERMISSION_FACTORY: 'token' });
    try {
      const real = (await createToken(t.server.core.ctx.db)).token;
      const b = (await req(t.files, { method: 'POST', headers: { authorization: `Bearer ${real}` } })).json.id as string;
      const rnd = prng(7);
      const alphabet = 'abcdefABCDEF0123456789_-=+/.~frt \u00e9\u00ff';
      const variants = [
        () => `Bearer ${real.slice(0, -1)}${real.endsWith('A') ? 'B' : 'A'}`,
        () => `Bearer ${real.toUpperCase()}`,
        () => `Bearer ${real} ${real}`,
        () => `Bearer  ${real}x`,
        () => `bearer frt_${'0'.repeat(32)}_${'A'.repeat(43)}`,
        () => `Bearer frt_${real.slice(4, 36)}_${'A'.repeat(43)}`,
        () => `Bearer ${'x'.repeat(Math.floor(rnd() * 8000))}`,
        () => `Basic ${Buffer.from('admin:admin').toString('base64')}`,
        () => `Bearer ${Array.from({ length: Math.floor(rnd() * 80) }, () => pick(rnd, [...alphabet])).join('')}`,
        () => '',
        () => 'Bearer',
        () => `Bearer frt_${'f'.repeat(32)}_${'é'.repeat(43)}`,
      ];
      const paths = ['/files', `/files/${b}`, `/files/${b}?versions`, `/files/${b}/k.txt`, `/files/${b}/k.txt?uploads&size=8&partSize=4`, '/files/nope/..'];
      for (let i = 0; i < 80; i++) {
        const authz = pick(rnd, variants)();
        const method = pick(rnd, ['GET', 'PUT', 'POST', 'DELETE', 'HEAD']);
        const path = pick(rnd, paths);
        let res: RawRes;
        try {
          res = await raw(t.url, method, path, { authorization: authz }, method === 'PUT' ? Buffer.from('x') : null);
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === 'ERR_INVALID_CHAR') continue;
          throw e;
        }
        const what = `${method} ${path} with ${JSON.stringify(authz.slice(0, 80))} → ${res.status} ${res.body.slice(0, 120)}`;
        assert.equal(res.status, 401, what);
        assert.match(String(res.headers['www-authenticate']), /^Bearer/, what);
        if (method !== 'HEAD') assert.equal(JSON.parse(res.body).status, 401, what);
      }
      const listed = await req(`${t.files}/${b}?versions`, { headers: { authorization: `Bearer ${real}` } });
      assert.deepEqual(listed.json.contents, []);
    } finally {
      await t.close();
    }
  });
});
