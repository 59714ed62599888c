// Fuzz at the HTTP level over raw sockets (node:net): broken framing, bad chunked encoding, bad
// Content-Length, bad encodings, NUL, control characters and invalid UTF-8 in every part of the
// method, path, query and headers, and multipart forms cut at every offset on the PUT and the part
// route, with and without _totalSize. From a seeded generator, so every run sends the same bytes.
// Whatever comes in: no 5xx, the catalogue's JSON on every refusal that has an answer, the process
// alive and serving afterwards, and nothing stored by a refused request.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { startTestServer, storedFiles, type TestServer } from './support/server.js';
import { put, req, waitFor } from './support/http.js';
import { prng } from './support/bytes.js';
import { rawExchange, type RawSocketResult } from './support/raw-http.js';
import { FORM, FORMS, field, filePart } from './support/forms.js';

interface Planned {
  what: string;
  bytes: Buffer;
  /** HEAD: the answer has no body. */
  head: boolean;
  /** Incomplete on purpose: the client half-closes after sending (the server would wait for more). */
  open: boolean;
  /** The exact status a well-framed request of this kind must get (truncated forms: 400). */
  expect?: number;
}

function pick<T>(rnd: () => number, items: readonly T[]): T {
  return items[Math.floor(rnd() * items.length)]!;
}

function insertAt(rnd: () => number, s: string, bad: string): string {
  const i = Math.floor(rnd() * (s.length + 1));
  return s.slice(0, i) + bad + s.slice(i);
}

// Raw bytes (as Latin-1 characters): NUL, controls, bytes that are not UTF-8, an encoded surrogate, CR/LF.
const BAD_BYTES = ['\u0000', '\u0001', '\u001f', '\u007f', '\u00ff', '\u0080', '\u00c0\u00af', '\u00ed\u00a0\u0080', '\u00c3', '\r', '\n', ' ', '\t', '\u00f0\u009f\u0092'];
// The same, percent-encoded (for the path and the query, where raw bytes are refused by the parser).
const BAD_ESCAPES = ['%00', '%01', '%1F', '%7F', '%FF', '%80', '%C0%AF', '%ED%A0%80', '%C3', '%0D%0A', '%', '%Z', '%E2%82', '%F4%90%80%80', '%EF%BF%BE'];

describe('Fuzz over raw sockets: malformed HTTP', () => {
  let s: TestServer;
  let port: number;
  let bucket: string;
  let uploadId: string;

  before(async () => {
    s = await startTestServer({
      FILES_REST_MULTIPART_CHUNKSIZE_MIN: '2',
      // Keep the upload open through refused parts, so that every part request reaches the parser.
      FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE: '0',
      MAX_CONTENT_LENGTH: String(64 * 1024),
    });
    port = Number(new URL(s.url).port);
    bucket = (await req(s.files, { method: 'POST' })).json.id as string;
    assert.equal((await put(`${s.files}/${bucket}/known.txt`, 'known')).status, 200);
    const init = await req(`${s.files}/${bucket}/mp.bin?uploads&size=10&partSize=5`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    uploadId = init.json.id as string;
  });
  after(() => s.close());

  async function state() {
    const db = s.server.core.ctx.db;
    const count = async (table: 'object_versions' | 'files' | 'parts') =>
      Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    const size = Number((await db.selectFrom('buckets').select('size').where('id', '=', bucket).executeTakeFirstOrThrow()).size);
    return { versions: await count('object_versions'), files: await count('files'), parts: await count('parts'), size };
  }

  /** Multipart forms cut at every offset before their closing delimiter, framed by Content-Length or chunked. */
  function truncatedForms(rnd: () => number): Planned[] {
    const out: Planned[] = [];
    for (const [name, make] of Object.entries(FORMS)) {
      const { path, body } = make(bucket, uploadId);
      for (let n = 0; n <= body.length; n++) {
        const cut = Buffer.from(body.slice(0, n), 'latin1');
        const chunked = rnd() < 0.25;
        const headers = `Host: h\r\nContent-Type: ${FORM}\r\n${chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${cut.length}`}\r\nConnection: close\r\n\r\n`;
        const framed = chunked ? Buffer.concat([Buffer.from(`${cut.length.toString(16)}\r\n`), cut, Buffer.from(cut.length ? '\r\n0\r\n\r\n' : '\r\n')]) : cut;
        out.push({ what: `${name} cut at ${n}${chunked ? ' (chunked)' : ''}`, bytes: Buffer.concat([Buffer.from(`PUT ${path} HTTP/1.1\r\n${headers}`), framed]), head: false, open: false, expect: 400 });
      }
    }
    return out;
  }

  /** One malformed request: a plausible request with one or two things broken. */
  function malformed(rnd: () => number, i: number): Planned {
    const keys = ['known.txt', `fz/put-${i % 7}`, 'mp.bin', `fz/absent-${i}`, 'dir/sub/k.bin'];
    const method = pick(rnd, ['GET', 'GET', 'HEAD', 'PUT', 'PUT', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'PATCH']);
    // Writes go to keys of their own: only PUT may succeed (counted), a DELETE finds nothing to delete.
    const key = method === 'PUT' ? pick(rnd, [`fz/put-${i % 7}`, 'mp.bin']) : method === 'DELETE' ? `fz/absent-${i}` : pick(rnd, keys);
    let path = pick(rnd, [`/files/${bucket}/${key}`, `/files/${bucket}/${key}`, `/files/${bucket}`, '/files', `/files/${bucket}/${key}`]);
    let query = '';
    if (method === 'PUT' && key === 'mp.bin') query = `?uploadId=${uploadId}&partNumber=${pick(rnd, ['0', '1', '7', 'x'])}`;
    else if (method === 'POST') query = pick(rnd, ['?uploads&size=10&partSize=5', '?uploads', '']);
    else if (path === `/files/${bucket}`) query = pick(rnd, ['', '?versions', '?prefix=fz', '?uploads', '?limit=1&after=WyJrIl0']);
    else query = pick(rnd, ['', '', '?versionId=0b7a3c2e-1f4d-4e5a-9c8b-7d6e5f4a3b2c', '?download']);
    let version = 'HTTP/1.1';
    let m = method;
    let body = method === 'PUT' ? Buffer.from('x'.repeat(Math.floor(rnd() * 40))) : Buffer.alloc(0);
    const headers: Array<[string, string]> = [['Host', 'h'], ['Connection', 'close']];
    if (method === 'PUT' || body.length) headers.push(['Content-Length', String(body.length)]);
    if (rnd() < 0.3) headers.push(pick(rnd, [['Content-Type', 'application/octet-stream'], ['X-Invenio-File-Tags', 'a=b'], ['Accept', 'application/json'], ['Range', 'bytes=0-1'], ['Content-MD5', '1B2M2Y8AsgTpgAmY7PhCfg==']] as Array<[string, string]>));
    let open = false;
    let eol = '\r\n';
    let endOfHead = '\r\n';
    let tail = Buffer.alloc(0);
    const setHeader = (name: string, value: string | null) => {
      const at = headers.findIndex(([k]) => k.toLowerCase() === name.toLowerCase());
      if (at >= 0) headers.splice(at, 1);
      if (value !== null) headers.push([name, value]);
    };

    const kinds = 1 + Math.floor(rnd() * 2);
    const done: string[] = [];
    for (let k = 0; k < kinds; k++) {
      const kind = pick(rnd, ['byte-method', 'byte-path', 'byte-query', 'byte-header-name', 'byte-header-value', 'escape-path', 'escape-query', 'framing', 'chunked', 'content-length', 'encoding', 'expect-host', 'form']);
      done.push(kind);
      switch (kind) {
        case 'byte-method':
          m = insertAt(rnd, m, pick(rnd, BAD_BYTES));
          break;
        case 'byte-path':
          path = insertAt(rnd, path, pick(rnd, BAD_BYTES));
          break;
        case 'byte-query':
          query = insertAt(rnd, query || '?', pick(rnd, BAD_BYTES));
          break;
        case 'byte-header-name': {
          const h = pick(rnd, headers);
          h[0] = insertAt(rnd, h[0], pick(rnd, BAD_BYTES));
          break;
        }
        case 'byte-header-value': {
          const h = rnd() < 0.5 ? pick(rnd, headers) : (headers.push([pick(rnd, ['X-Invenio-File-Tags', 'Content-Type', 'Authorization', 'X-Request-Id', 'Accept', 'If-None-Match', 'Range', 'Content-Digest']), 'a=b']), headers[headers.length - 1]!);
          h[1] = insertAt(rnd, h[1], pick(rnd, [...BAD_BYTES, ...BAD_ESCAPES]));
          break;
        }
        case 'escape-path':
          path = insertAt(rnd, path, pick(rnd, BAD_ESCAPES));
          break;
        case 'escape-query':
          query = `${query || '?'}${pick(rnd, ['&', ''])}${pick(rnd, ['prefix', 'after', 'versionId', 'uploadId', 'partNumber', 'limit', 'x', ''])}=${insertAt(rnd, pick(rnd, ['a', 'WyJrIl0', '1', '']), pick(rnd, BAD_ESCAPES))}`;
          break;
        case 'framing': {
          const f = pick(rnd, ['bare-lf', 'no-end-of-head', 'no-colon', 'obs-fold', 'space-before-colon', 'version', 'target', 'empty-line-first', 'long-line', 'pipelined-garbage']);
          done.push(f);
          if (f === 'bare-lf') eol = '\n';
          else if (f === 'no-end-of-head') {
            endOfHead = '';
            body = Buffer.alloc(0);
            open = true;
          } else if (f === 'no-colon') headers.push(['X-Broken-Header-Without-Colon', '']);
          else if (f === 'obs-fold') headers.push(['X-Folded', `one\r\n  two`]);
          else if (f === 'space-before-colon') headers.push(['Content-Type ', 'text/plain']);
          else if (f === 'version') version = pick(rnd, ['HTTP/1.2', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1.1 extra', 'http/1.1', 'HTTP/1', 'HTTX/1.1', '']);
          else if (f === 'target') path = pick(rnd, ['*', '', 'http://h/files', 'files', '//', `/files/${bucket}/../../etc/passwd`, `/files/${bucket}/${'k'.repeat(9000)}`]);
          else if (f === 'empty-line-first') tail = Buffer.concat([Buffer.from('\r\n'), tail]);
          else if (f === 'long-line') headers.push(['X-Long', 'l'.repeat(pick(rnd, [8000, 17000, 70000]))]);
          else tail = Buffer.from(pick(rnd, ['GARBAGE\r\n\r\n', 'GET / HTTP/1.1\r\n\r\n', '\u0000\u0000\u0000', 'PUT /files HTTP/1.1\r\nContent-Length: -1\r\n\r\n']), 'latin1');
          break;
        }
        case 'chunked': {
          setHeader('Content-Length', null);
          setHeader('Transfer-Encoding', pick(rnd, ['chunked', 'chunked', 'Chunked', 'chunked, chunked', 'gzip, chunked', 'chunked\u0000', 'xchunked', 'identity']));
          if (rnd() < 0.2) headers.push(['Content-Length', '3']);
          const c = pick(rnd, ['bad-hex', 'no-crlf', 'overflow', 'short-data', 'no-terminator', 'extension', 'negative', 'trailer', 'ok']);
          done.push(c);
          const data = 'abc';
          const chunks: Record<string, string> = {
            'bad-hex': `zz\r\n${data}\r\n0\r\n\r\n`,
            'no-crlf': `3\r\n${data}0\r\n\r\n`,
            overflow: `FFFFFFFFFFFFFFFFFFFF\r\n${data}\r\n0\r\n\r\n`,
            'short-data': `10\r\n${data}`,
            'no-terminator': `3\r\n${data}\r\n`,
            extension: `3;\u0000ext=\u00ff\r\n${data}\r\n0\r\n\r\n`,
            negative: `-3\r\n${data}\r\n0\r\n\r\n`,
            trailer: `3\r\n${data}\r\n0\r\nX-Trailer: \u0000\r\n\r\n`,
            ok: `3\r\n${data}\r\n0\r\n\r\n`,
          };
          body = Buffer.from(chunks[c]!, 'latin1');
          open = c === 'short-data' || c === 'no-terminator';
          break;
        }
        case 'content-length': {
          const c = pick(rnd, ['letters', 'negative', 'exp', 'padded', 'list', 'twice', 'huge', 'bigger', 'smaller', 'with-te', 'plus']);
          done.push(c);
          const n = body.length;
          setHeader('Content-Length', null);
          if (c === 'letters') headers.push(['Content-Length', 'abc']);
          else if (c === 'negative') headers.push(['Content-Length', '-1']);
          else if (c === 'exp') headers.push(['Content-Length', '1e3']);
          else if (c === 'padded') headers.push(['Content-Length', ` ${n} `]);
          else if (c === 'list') headers.push(['Content-Length', `${n}, ${n + 1}`]);
          else if (c === 'twice') headers.push(['Content-Length', String(n)], ['Content-Length', String(n + 2)]);
          else if (c === 'huge') headers.push(['Content-Length', '99999999999999999999999']);
          else if (c === 'plus') headers.push(['Content-Length', `+${n}`]);
          else if (c === 'with-te') headers.push(['Content-Length', String(n)], ['Transfer-Encoding', 'chunked']);
          else if (c === 'bigger') {
            headers.push(['Content-Length', String(n + 1 + Math.floor(rnd() * 100))]);
            open = true;
          } else {
            headers.push(['Content-Length', String(Math.max(0, n - 1))]);
            tail = Buffer.from('GET / HTTP/1.1\r\n\r\n');
          }
          break;
        }
        case 'encoding':
          headers.push(
            pick(rnd, [
              ['Content-Encoding', 'gzip'], ['Content-Encoding', 'br, \u00ff'], ['Content-Type', 'text/plain; charset=utf-7'],
              ['Content-Type', 'text/plain; charset=\u0000'], ['Content-Type', 'application/json; charset=ebcdic'],
              ['Accept-Charset', 'utf-32'], ['Accept-Encoding', 'gzip;q=\u00ff'], ['Content-Type', `${FORM}\u0000`],
            ] as Array<[string, string]>),
          );
          if (rnd() < 0.5) body = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0xff, 0xfe, 0x00, 0xc0, 0xaf]);
          setHeader('Content-Length', method === 'PUT' || body.length ? String(body.length) : null);
          break;
        case 'expect-host': {
          const c = pick(rnd, ['expect', 'no-host', 'two-hosts', 'empty-host', 'bad-host']);
          done.push(c);
          if (c === 'expect') headers.push(['Expect', pick(rnd, ['garbage', '100-continue', '100-Continue, x', '', '\u00ff'])]);
          else if (c === 'no-host') setHeader('Host', null);
          else if (c === 'two-hosts') headers.push(['Host', 'other']);
          else if (c === 'empty-host') setHeader('Host', '');
          else setHeader('Host', pick(rnd, ['h\u0000', 'h:99999', '[::1', 'a b', '\u00ff']));
          break;
        }
        case 'form': {
          // A form with a broken boundary or bad headers, cut at a random offset.
          const boundary = pick(rnd, ['XyZ', 'XyZ', '', 'X\u0000Z', '"XyZ"', 'x'.repeat(100)]);
          setHeader('Content-Type', boundary === '' ? 'multipart/form-data' : `multipart/form-data; boundary=${boundary}`);
          const whole = pick(rnd, [
            field('_totalSize', '5') + filePart('hello'),
            filePart('hello'),
            field('_totalSize', '\u0000') + filePart('hello'),
            field('_chunkNumber', '0') + field('_currentChunkSize', '5') + filePart('hello'),
            `--XyZ\r\nContent-Disposition: form-data; name="file"; filename="\u00ff\u0000"\r\nContent-Type: \u0000\r\n\r\nhello\r\n`,
            `--XyZ\r\nContent-Disposition: form-data; name="file"\r\n\r\nhello\r\n--XyZ\r\n`,
          ]);
          body = Buffer.from(whole.slice(0, Math.floor(rnd() * whole.length)), 'latin1');
          setHeader('Content-Length', String(body.length));
          if (method !== 'PUT') m = 'PUT';
          break;
        }
      }
    }
    const head = Buffer.from(`${m} ${path}${query} ${version}${eol}${headers.map(([k, v]) => `${k}: ${v}${eol}`).join('')}${endOfHead === '' ? '' : eol}`, 'latin1');
    return { what: `#${i} ${done.join('+')}`, bytes: Buffer.concat([head, body, tail]), head: m === 'HEAD', open };
  }

  it('2,000+ seeded malformed requests: no 5xx, JSON refusals, the process serving afterwards, nothing stored by a refusal', async () => {
    const rnd = prng(20261124);
    const plan = [...truncatedForms(rnd)];
    const forms = plan.length;
    for (let i = 0; plan.length < forms + 1500; i++) plan.push(malformed(rnd, i));
    assert.ok(plan.length >= 2000, `only ${plan.length} requests`);
    const before = await state();

    const statuses = new Map<number, number>();
    let stored = { versions: 0, bytes: 0 };
    let unanswered = 0;
    let next = 0;
    const check = (p: Planned, r: RawSocketResult) => {
      const what = `${p.what}: ${JSON.stringify(p.bytes.subarray(0, 240).toString('latin1'))} → ${r.status} ${r.body.slice(0, 200)}`;
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status === 0) {
        unanswered++;
        assert.ok(p.open || r.gaveUp, `no answer to a complete request: ${what}`);
        return;
      }
      assert.ok(r.status < 500, what);
      if (p.expect !== undefined) assert.equal(r.status, p.expect, what);
      if (r.status >= 400) {
        assert.match(r.headers['content-type'] ?? '', /^application\/json/, what);
        if (!p.head) {
          const body = JSON.parse(r.body) as { status: unknown; message: unknown };
          assert.equal(body.status, r.status, what);
          assert.equal(typeof body.message, 'string', what);
        }
      } else if (r.status === 200 && /^application\/json/.test(r.headers['content-type'] ?? '')) {
        // An upload the fuzzing left valid (its answer is the new version): counted, to check the totals below.
        const v = JSON.parse(r.body) as { version_id?: string; size?: number; delete_marker?: boolean };
        if (v.version_id && v.delete_marker === false) stored = { versions: stored.versions + 1, bytes: stored.bytes + (v.size ?? 0) };
      }
    };
    // Four connections at a time; each request gets its own.
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < plan.length) {
          const p = plan[next++]!;
          check(p, await rawExchange(port, p.bytes, { head: p.head, endAfterSend: p.open, waitMs: 3000 }));
        }
      }),
    );
    console.log(`# raw fuzz: ${plan.length} requests (${forms} truncated forms), statuses ${JSON.stringify([...statuses].sort((a, b) => a[0] - b[0]))}, stored ${JSON.stringify(stored)}`);
    // The generator reached the parser's refusals and the application's, not one kind only.
    for (const st of [400, 404, 405]) assert.ok((statuses.get(st) ?? 0) > 0, `no ${st} among ${JSON.stringify([...statuses])}`);
    assert.ok(unanswered < plan.length / 10, `${unanswered} requests got no answer`);

    // Alive and serving: health, a real upload and its download.
    assert.equal((await req(`${s.url}/healthz`)).status, 200);
    const up = await put(`${s.files}/${bucket}/after-fuzz.txt`, 'still here');
    assert.equal(up.status, 200, up.text);
    assert.equal((await req(`${s.files}/${bucket}/after-fuzz.txt`)).text, 'still here');

    // Nothing stored by a refusal: the rows and the bucket size grew by what was answered 200 only.
    const after = await state();
    assert.equal(after.versions, before.versions + stored.versions + 1);
    assert.equal(after.size, before.size + stored.bytes + 'still here'.length);
    // No orphan: every stored file is a known file instance, and every file instance belongs to a
    // version or to a multipart upload (the fuzzing may have started some: POST ?uploads is valid).
    const db = s.server.core.ctx.db;
    const norm = (uri: string) => (uri.startsWith('/') ? resolve(uri) : uri);
    const files = await db.selectFrom('files').select(['id', 'uri']).execute();
    const known = new Set(files.map((f) => norm(f.uri!)));
    // A refused upload's temporary file may be removed just after its answer: give that a moment.
    await waitFor(async () => (await storedFiles(s)).every((f) => !f.endsWith('.tmp')), 10_000).catch(() => undefined);
    for (const f of await storedFiles(s)) assert.ok(known.has(norm(f)), `orphan stored file: ${f}`);
    const owned = new Set([
      ...(await db.selectFrom('object_versions').select('file_id').execute()).map((v) => v.file_id),
      ...(await db.selectFrom('multipart_uploads').select('file_id').execute()).map((u) => u.file_id),
    ]);
    for (const f of files) assert.ok(owned.has(f.id), `file row ${f.id} (${f.uri}) belongs to nothing`);
    assert.ok(after.files >= before.files + stored.versions + 1);
  });
});
