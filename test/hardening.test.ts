// Hardening: truncated multipart forms, NUL and invalid text on every path, credentials kept out of
// the log, and Node's own refusals (417, a missing Host, CONNECT, parse errors) in the catalogue's JSON.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, storedFiles, type TestServer } from './support/server.js';
import { put, req } from './support/http.js';
import { rawExchange, requestHead, type RawSocketResult } from './support/raw-http.js';
import { processEnv } from './support/fixtures.js';
import { spawnFilesRest } from './support/process.js';
import { redactCredentials } from '../src/util/redact.js';
import { FORM, FORMS } from './support/forms.js';
import { rm } from 'node:fs/promises';

function assertJsonRefusal(r: RawSocketResult, status: number, what: string, head = false): void {
  assert.equal(r.status, status, `${what}: ${r.status} ${r.body}`);
  assert.match(r.headers['content-type'] ?? '', /^application\/json/, what);
  if (head) return;
  const body = JSON.parse(r.body) as { status: number; message: unknown };
  assert.equal(body.status, status, what);
  assert.equal(typeof body.message, 'string', what);
}

describe('Hardening', () => {
  let s: TestServer;
  let port: number;
  let bucket: string;
  let uploadId: string;

  before(async () => {
    s = await startTestServer({ FILES_REST_MULTIPART_CHUNKSIZE_MIN: '2', FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE: '0' });
    port = Number(new URL(s.url).port);
    bucket = (await req(s.files, { method: 'POST' })).json.id as string;
    assert.equal((await put(`${s.files}/${bucket}/known.txt`, 'known')).status, 200);
    const init = await req(`${s.files}/${bucket}/mp.bin?uploads&size=10&partSize=5`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    uploadId = init.json.id as string;
  });
  after(() => s.close());

  async function rowsAndFiles() {
    const db = s.server.core.ctx.db;
    const count = async (table: 'object_versions' | 'files' | 'parts') =>
      Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    return {
      versions: await count('object_versions'),
      files: await count('files'),
      parts: await count('parts'),
      size: (await req(`${s.files}/${bucket}`)).json.size as number,
      stored: await storedFiles(s),
    };
  }

  describe('1. a truncated multipart/form-data body', () => {
    it('is refused with 400 at every truncation point, on the PUT and the part route, and the server keeps serving', async () => {
      const before = await rowsAndFiles();
      for (const [name, make] of Object.entries(FORMS)) {
        const { path, body } = make(bucket, uploadId);
        // Every prefix of the form that lacks its closing delimiter.
        for (let n = 0; n <= body.length; n++) {
          const cut = body.slice(0, n);
          const head = requestHead('PUT', path, [['Host', 'h'], ['Content-Type', FORM], ['Content-Length', String(cut.length)], ['Connection', 'close']]);
          const r = await rawExchange(port, Buffer.concat([head, Buffer.from(cut, 'latin1')]));
          assertJsonRefusal(r, 400, `${name}, cut at ${n}: ${JSON.stringify(cut.slice(-30))}`);
        }
      }
      assert.deepEqual(await rowsAndFiles(), before);
      assert.equal((await req(`${s.url}/healthz`)).status, 200);
      // Complete forms still work on both routes.
      const whole = FORMS['PUT with _totalSize'](bucket);
      const ok = await req(`${s.url}${whole.path}`, { method: 'PUT', headers: { 'content-type': FORM }, body: `${whole.body}--XyZ--\r\n` });
      assert.equal(ok.status, 200, ok.text);
      assert.equal((await req(`${s.files}/${bucket}/form.txt`)).text, 'hello');
      const part = FORMS['part ?uploadId='](bucket, uploadId);
      const okPart = await req(`${s.url}${part.path}`, { method: 'PUT', headers: { 'content-type': FORM }, body: `${part.body}--XyZ--` });
      assert.equal(okPart.status, 200, okPart.text);
    });

    it('a client that goes away in the middle of a form leaves nothing and the server keeps serving', async () => {
      const before = await rowsAndFiles();
      const { path, body } = FORMS['PUT with _totalSize'](bucket);
      for (const n of [0, 40, body.length - 3]) {
        const head = requestHead('PUT', path, [['Host', 'h'], ['Content-Type', FORM], ['Content-Length', String(body.length + 100)]]);
        const r = await rawExchange(port, Buffer.concat([head, Buffer.from(body.slice(0, n), 'latin1')]), { endAfterSend: true });
        if (r.status !== 0) assertJsonRefusal(r, 400, `cut at ${n}`);
      }
      assert.equal((await req(`${s.url}/healthz`)).status, 200);
      // The server learns of a client gone mid-body when its socket closes, and removes the upload's
      // temporary file then, possibly after our last exchange returned: wait (bounded) for that.
      let now = await rowsAndFiles();
      for (const end = Date.now() + 5000; Date.now() < end && JSON.stringify(now) !== JSON.stringify(before); ) {
        await new Promise((r) => setTimeout(r, 50));
        now = await rowsAndFiles();
      }
      assert.deepEqual(now, before);
    });
  });

  describe('7. NUL and text no database can hold', () => {
    const cursor = (v: unknown[]) => Buffer.from(JSON.stringify(v)).toString('base64url');

    it('a key with NUL or another control character: 400 on GET, HEAD, DELETE and the multipart routes', async () => {
      for (const key of ['%00', 'a%00b', 'known.txt%00', '%01', '%7F']) {
        for (const method of ['GET', 'HEAD', 'DELETE']) {
          const r = await req(`${s.files}/${bucket}/${key}`, { method });
          assert.equal(r.status, 400, `${method} ${key}`);
          if (method !== 'HEAD') assert.equal(r.json.status, 400, `${method} ${key}`);
        }
        assert.equal((await req(`${s.files}/${bucket}/${key}?uploadId=${uploadId}`)).status, 400, key);
        assert.equal((await req(`${s.files}/${bucket}/${key}?uploadId=${uploadId}`, { method: 'DELETE' })).status, 400, key);
        assert.equal((await req(`${s.files}/${bucket}/${key}?uploads&size=10&partSize=5`, { method: 'POST' })).status, 400, key);
      }
      assert.equal((await req(`${s.files}/${bucket}/known.txt`)).text, 'known');
    });

    it('raw bytes above 0x7F in a path (valid UTF-8 or not) are refused in JSON; escaped UTF-8 names its key', async () => {
      const head = (target: string) => Buffer.concat([Buffer.from('PUT ', 'latin1'), Buffer.from(target, 'latin1'), Buffer.from(' HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx')]);
      for (const target of [`/files/${bucket}/caf\u00c3\u00a9`, `/files/${bucket}/caf\u00ff`, `/files/${bucket}/k?prefix=\u00ff`]) {
        assertJsonRefusal(await rawExchange(port, head(target)), 400, JSON.stringify(target));
      }
      const good = await rawExchange(port, head(`/files/${bucket}/caf%C3%A9`));
      assert.equal(good.status, 200, good.body);
      assert.equal(JSON.parse(good.body).key, 'café');
    });

    it('a listing prefix or cursor holding NUL (or a lone surrogate): 422, not a database error', async () => {
      for (const q of [
        '?prefix=%00', '?prefix=a%00', '?versions&prefix=%00', '?prefix=%01',
        `?after=${cursor(['\u0000'])}`, `?after=${cursor(['k\u0000'])}`, `?versions&after=${cursor(['\u0000', 3])}`, `?after=${cursor(['\ud800'])}`, '?after=%00',
      ]) {
        const r = await req(`${s.files}/${bucket}${q}`);
        assert.equal(r.status, 422, `${q}: ${r.text}`);
        assert.equal(r.json.status, 422);
      }
      // Real cursors still work.
      const page = await req(`${s.files}/${bucket}?limit=1`);
      assert.equal(page.status, 200);
      assert.equal((await req(page.json.links.next as string)).status, 200);
    });

    it('tags with NUL, a control character or invalid UTF-8: 400, nothing stored', async () => {
      const before = await rowsAndFiles();
      for (const tags of ['%00=%00', 'a=%00', 'a=b%0Ac', 'a=%FF', '%C0%AF=x', 'a=\u00c3']) {
        const r = await put(`${s.files}/${bucket}/tagged.txt`, 'x', { 'x-invenio-file-tags': tags });
        assert.equal(r.status, 400, `${tags}: ${r.text}`);
        assert.equal(r.json.status, 400);
      }
      assert.deepEqual(await rowsAndFiles(), before);
      // UTF-8 tags, percent-encoded or raw, are stored as the text they encode.
      const head = requestHead('PUT', `/files/${bucket}/tagged.txt`, [['Host', 'h'], ['x-invenio-file-tags', 'a=caf%C3%A9&b=\u00c3\u00a9t\u00c3\u00a9'], ['Content-Length', '1'], ['Connection', 'close']]);
      const ok = await rawExchange(port, Buffer.concat([head, Buffer.from('x')]));
      assert.equal(ok.status, 200, ok.body);
      assert.deepEqual(JSON.parse(ok.body).tags, { a: 'café', b: 'été' });
    });
  });

  describe('11. refusals Node would answer itself', () => {
    const target = () => `/files/${bucket}/known.txt`;

    it('Expect: garbage gets 417 with a JSON body', async () => {
      const r = await rawExchange(port, requestHead('GET', target(), [['Host', 'h'], ['Expect', 'garbage'], ['Connection', 'close']]));
      assertJsonRefusal(r, 417, 'Expect: garbage');
      const p = await rawExchange(port, Buffer.concat([requestHead('PUT', `/files/${bucket}/e.txt`, [['Host', 'h'], ['Expect', 'x-nope'], ['Content-Length', '1'], ['Connection', 'close']]), Buffer.from('x')]));
      assertJsonRefusal(p, 417, 'Expect on an upload');
      assert.equal((await req(`${s.files}/${bucket}/e.txt`)).status, 404);
    });

    it('an HTTP/1.1 request without Host gets 400 with a JSON body; HTTP/1.0 needs none', async () => {
      const r = await rawExchange(port, requestHead('GET', target(), [['Connection', 'close']]));
      assertJsonRefusal(r, 400, 'no Host');
      assert.match(JSON.parse(r.body).message, /Host/);
      const h = await rawExchange(port, requestHead('HEAD', target(), [['Connection', 'close']]), { head: true });
      assertJsonRefusal(h, 400, 'HEAD without Host', true);
      const old = await rawExchange(port, Buffer.from(`GET ${target()} HTTP/1.0\r\n\r\n`));
      assert.equal(old.status, 200);
      assert.equal(old.body, 'known');
    });

    it('malformed HTTP, CONNECT and oversized headers get the catalogue JSON', async () => {
      const cases: Array<[string, Buffer, number]> = [
        ['garbage request line', Buffer.from('HELLO\r\n\r\n'), 400],
        ['NUL in the path', Buffer.from(`GET ${target()}\u0000 HTTP/1.1\r\nHost: h\r\n\r\n`, 'latin1'), 400],
        ['bad chunk size', Buffer.from(`PUT ${target()} HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n`), 400],
        ['two Content-Lengths', Buffer.from(`PUT ${target()} HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx`), 400],
        ['CONNECT', Buffer.from('CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n'), 405],
        ['headers too large', Buffer.from(`GET ${target()} HTTP/1.1\r\nHost: h\r\nX-Big: ${'b'.repeat(20 * 1024)}\r\n\r\n`), 431],
      ];
      for (const [what, bytes, status] of cases) assertJsonRefusal(await rawExchange(port, bytes), status, what);
      assert.equal((await req(`${s.files}/${bucket}/known.txt`)).text, 'known');
    });
  });
});

describe('9. credentials in a URL are not logged', () => {
  it('redactCredentials hides access_token and the signature family, nothing else', () => {
    assert.equal(
      redactCredentials('/files/b/k?access_token=s3cr3t&versionId=v1&X-Amz-Signature=abc&X-Amz-Credential=AKIA%2F2026&x-amz-security-token=t&sig=q&download'),
      '/files/b/k?access_token=[redacted]&versionId=v1&X-Amz-Signature=[redacted]&X-Amz-Credential=[redacted]&x-amz-security-token=[redacted]&sig=[redacted]&download',
    );
    assert.equal(redactCredentials('GET /x?after=abc&prefix=token'), 'GET /x?after=abc&prefix=token');
    assert.equal(redactCredentials('bad url "/x?Signature=zz"'), 'bad url "/x?Signature=[redacted]"');
  });

  it('a request with ?access_token= is logged with the token redacted (server log at info)', async () => {
    const { env, drop, dir } = await processEnv({ LOG_LEVEL: 'info', FILES_REST_PERMISSION_FACTORY: 'token' });
    const p = await spawnFilesRest('serve', env);
    try {
      const secret = 'frt_0123456789abcdef0123456789abcdef_SECRETSECRETSECRETSECRETSECRETSECRETSECRETx';
      const r = await req(`${p.files}/00000000-0000-4000-8000-000000000000?access_token=${secret}&X-Amz-Signature=SIGSECRET&X-Amz-Credential=CREDSECRET`);
      assert.equal(r.status, 401);
      // A malformed URL too (its error is logged by the framework).
      await req(`${p.files}/x/%E0%A4%A?access_token=${secret}`);
      await p.waitFor(/access_token=\[redacted\]/);
      await p.waitFor(/request completed/);
      const out = p.output();
      assert.ok(!out.includes('SECRETSECRET'), 'the token is in the log');
      assert.ok(!out.includes('SIGSECRET') && !out.includes('CREDSECRET'), 'a signature is in the log');
      assert.match(out, /X-Amz-Signature=\[redacted\]/);
    } finally {
      await p.kill();
      await drop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
