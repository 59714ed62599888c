// FILES_REST_BODY_IDLE_TIMEOUT: an upload whose client stops sending mid-body is cut (408
// UPLOAD_TIMEOUT), cleaned up like a disconnect and logged; PUT, multipart parts and form uploads.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startTestServer, storedFiles, type TestServer } from './support/server.js';
import { createBucket, md5, req } from './support/http.js';
import { ERRORS } from '../src/errors.js';
import { ConfigError, loadConfig } from '../src/config.js';

const MiB = 1024 * 1024;
const timeoutMessage = ERRORS.UPLOAD_TIMEOUT.message.replace('{seconds}', '1');

/**
 * Sends the request head and `first`, then nothing more (keeping the connection open) unless `rest`
 * chunks are given, which are sent one by one `every` milliseconds. Resolves with the answer.
 */
function stalledRequest(
  url: string,
  method: string,
  headers: Record<string, string>,
  first: Buffer,
  opts: { rest?: Buffer[]; every?: number } = {},
): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const r = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, agent: false, headers });
    let answered = false;
    r.on('response', (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        r.destroy();
        resolve({ status: res.statusCode ?? 0, text, headers: res.headers });
      });
    });
    r.on('error', (e) => {
      if (!answered) reject(e);
    });
    r.write(first);
    const rest = [...(opts.rest ?? [])];
    const next = () => {
      const c = rest.shift();
      if (!c) return r.end();
      r.write(c, () => setTimeout(next, opts.every ?? 0));
    };
    if (opts.rest) setTimeout(next, opts.every ?? 0);
  });
}

function form(fields: Record<string, string>, boundary = 'xBOUNDARYx'): { head: Buffer; tail: Buffer; type: string; length: (fileSize: number) => number } {
  let head = '';
  for (const [k, v] of Object.entries(fields)) head += `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
  head += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
  const tail = `\r\n--${boundary}--\r\n`;
  return {
    head: Buffer.from(head),
    tail: Buffer.from(tail),
    type: `multipart/form-data; boundary=${boundary}`,
    length: (n) => Buffer.byteLength(head) + n + Buffer.byteLength(tail),
  };
}

describe('Body idle timeout (FILES_REST_BODY_IDLE_TIMEOUT)', { timeout: 60_000 }, () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_BODY_IDLE_TIMEOUT: '1' });
  });
  after(() => s.close());

  const is408 = (r: { status: number; text: string }) => {
    assert.equal(r.status, 408, r.text);
    assert.deepEqual(JSON.parse(r.text), { status: 408, message: timeoutMessage });
  };

  it('a PUT that stops sending mid-body is cut with 408; nothing is stored or left behind', async () => {
    const b = await createBucket(s.files);
    const before = await storedFiles(s);
    const r = await stalledRequest(`${s.files}/${b}/stalled.bin`, 'PUT', { 'content-length': String(MiB) }, Buffer.alloc(100 * 1024, 1));
    is408(r);
    assert.equal(r.headers.connection, 'close');
    assert.deepEqual((await storedFiles(s)).filter((f) => !before.includes(f)), []);
    const listed = await req(`${s.files}/${b}?versions`);
    assert.deepEqual(listed.json.contents, []);
  });

  it('a slow client that keeps sending is not cut', async () => {
    const b = await createBucket(s.files);
    const chunks = Array.from({ length: 8 }, (_, i) => Buffer.alloc(1024, i));
    const r = await stalledRequest(`${s.files}/${b}/slow.bin`, 'PUT', { 'content-length': String(9 * 1024) }, Buffer.alloc(1024, 9), { rest: chunks, every: 100 });
    assert.equal(r.status, 200, r.text);
    assert.equal(JSON.parse(r.text).checksum, `md5:${md5(Buffer.concat([Buffer.alloc(1024, 9), ...chunks]))}`);
  });

  it('a multipart part that stalls is cut with 408 and the upload is cleaned up like a disconnect', async () => {
    const b = await createBucket(s.files);
    const init = await req(`${s.files}/${b}/mp.bin?uploads&size=${10 * MiB}&partSize=${5 * MiB}`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    const r = await stalledRequest(`${s.files}/${b}/mp.bin?uploadId=${init.json.id}&partNumber=0`, 'PUT', { 'content-length': String(5 * MiB) }, Buffer.alloc(64 * 1024, 2));
    is408(r);
    // FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE=1: the upload is gone.
    assert.equal((await req(`${s.files}/${b}/mp.bin?uploadId=${init.json.id}`)).status, 404);
  });

  it('a multipart part that never sends a byte of its body is cut with 408 too (it waited for Node\'s 300 s request timeout)', async () => {
    const b = await createBucket(s.files);
    const init = await req(`${s.files}/${b}/silent.bin?uploads&size=${10 * MiB}&partSize=${5 * MiB}`, { method: 'POST' });
    assert.equal(init.status, 200, init.text);
    const r = await stalledRequest(`${s.files}/${b}/silent.bin?uploadId=${init.json.id}&partNumber=0`, 'PUT', { 'content-length': String(5 * MiB) }, Buffer.alloc(0));
    is408(r);
    assert.equal(r.headers.connection, 'close');
  });

  it('a form upload that stalls in its file, or before its file part, is cut with 408', async () => {
    const b = await createBucket(s.files);
    const before = await storedFiles(s);
    const f = form({ _totalSize: String(MiB) });
    const inFile = await stalledRequest(
      `${s.files}/${b}/form.bin`,
      'PUT',
      { 'content-type': f.type, 'content-length': String(f.length(MiB)) },
      Buffer.concat([f.head, Buffer.alloc(10 * 1024, 3)]),
    );
    is408(inFile);
    const preamble = await stalledRequest(
      `${s.files}/${b}/form2.bin`,
      'PUT',
      { 'content-type': f.type, 'content-length': String(f.length(MiB)) },
      f.head.subarray(0, 20),
    );
    is408(preamble);
    assert.deepEqual((await storedFiles(s)).filter((f) => !before.includes(f)), []);
  });

  it('a bad value stops the start, naming the setting', () => {
    for (const bad of ['abc', '-1', '1s']) {
      assert.throws(() => loadConfig({ FILES_REST_BODY_IDLE_TIMEOUT: bad }), (e: unknown) => e instanceof ConfigError && e.setting === 'FILES_REST_BODY_IDLE_TIMEOUT');
    }
    assert.equal(loadConfig({}).bodyIdleTimeout, 30);
    assert.equal(loadConfig({ FILES_REST_BODY_IDLE_TIMEOUT: '0.5' }).bodyIdleTimeout, 0.5);
  });
});
