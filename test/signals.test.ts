// Events (SPEC.md "Events"): in-process signals for embedding applications, through the package's
// own embedding API: createServer(config) returns the server with its `signals`.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startEmbedded, type Embedded } from './support/embedded.js';
import { md5, put, req, streamRequest, waitFor } from './support/http.js';
import { patternStream } from './support/fixtures.js';
import type { SignalDetailsMap, SignalName } from '../src/index.js';

type Seen = { event: SignalName; sender: unknown; details: SignalDetailsMap[SignalName] };

describe('Signals', () => {
  let e: Embedded;
  let seen: Seen[];
  const downloads = () => seen.filter((x) => x.event === 'file-downloaded') as Array<Seen & { details: SignalDetailsMap['file-downloaded'] }>;

  before(async () => {
    e = await startEmbedded({ FILES_REST_MULTIPART_CHUNKSIZE_MIN: '2', FILES_REST_MULTIPART_CHUNKSIZE_MAX: '20' });
    seen = [];
    for (const name of ['file-uploaded', 'file-downloaded', 'file-deleted'] as const) {
      e.server.signals.connect(name, (event, sender, details) => {
        seen.push({ event, sender, details });
      });
    }
  });
  after(() => e.close());

  async function bucket(): Promise<string> {
    return (await req(e.files, { method: 'POST' })).json.id as string;
  }

  it('file-uploaded, file-downloaded and file-deleted (soft, then hard) reach handlers with the server as sender', async () => {
    const b = await bucket();
    seen.length = 0;
    const v1 = (await put(`${e.files}/${b}/doc.txt`, 'hello')).json;
    const g = await req(`${e.files}/${b}/doc.txt`);
    assert.equal(g.text, 'hello');
    await waitFor(async () => downloads().length === 1);
    assert.equal((await req(`${e.files}/${b}/doc.txt`, { method: 'DELETE' })).status, 204);
    assert.equal((await req(`${e.files}/${b}/doc.txt?versionId=${v1.version_id}`, { method: 'DELETE' })).status, 204);

    assert.deepEqual(
      seen.map((x) => [x.event, x.details.obj.key, x.details.obj.versionId, x.details.kind ?? null]),
      [
        ['file-uploaded', 'doc.txt', v1.version_id, null],
        ['file-downloaded', 'doc.txt', v1.version_id, null],
        ['file-deleted', 'doc.txt', v1.version_id, 'soft'],
        ['file-deleted', 'doc.txt', v1.version_id, 'hard'],
      ],
    );
    for (const x of seen) assert.equal(x.sender, e.server);
    assert.equal(seen[0]!.details.obj.file?.size, 5);
    assert.equal(seen[0]!.details.obj.file?.checksum, `md5:${md5('hello')}`);
    assert.equal(seen[0]!.details.obj.bucketId, b);
    assert.equal(downloads()[0]!.details.bytes, 5);
  });

  it('file-downloaded is sent only when bytes were served: not for HEAD, 304, 412 or 416; a range counts its bytes', async () => {
    const b = await bucket();
    const etag = (await put(`${e.files}/${b}/r.bin`, '0123456789')).headers.get('etag')!;
    seen.length = 0;
    assert.equal((await req(`${e.files}/${b}/r.bin`, { method: 'HEAD' })).status, 200);
    assert.equal((await req(`${e.files}/${b}/r.bin`, { headers: { 'if-none-match': etag } })).status, 304);
    assert.equal((await req(`${e.files}/${b}/r.bin`, { headers: { 'if-modified-since': new Date(Date.now() + 60_000).toUTCString() } })).status, 304);
    assert.equal((await req(`${e.files}/${b}/r.bin`, { headers: { 'if-match': '"md5:0"' } })).status, 412);
    assert.equal((await req(`${e.files}/${b}/r.bin`, { headers: { range: 'bytes=50-' } })).status, 416);
    // Handlers run in order; a signal from the requests above would come before these.
    assert.equal((await req(`${e.files}/${b}/r.bin`, { headers: { range: 'bytes=2-4' } })).text, '234');
    assert.equal((await req(`${e.files}/${b}/r.bin`)).text, '0123456789');
    await waitFor(async () => downloads().length >= 2);
    assert.deepEqual(downloads().map((x) => x.details.bytes), [3, 10]);
  });

  it('a client that goes away mid-download is not counted as a download', async () => {
    const b = await bucket();
    const size = 24 * 1024 * 1024;
    const up = await streamRequest(`${e.files}/${b}/big.bin`, 'PUT', patternStream(size), size);
    assert.equal(up.status, 200);
    await put(`${e.files}/${b}/small.txt`, 'x');
    seen.length = 0;
    await new Promise<void>((resolve, reject) => {
      const u = new URL(`${e.files}/${b}/big.bin`);
      const r = http.get({ host: u.hostname, port: u.port, path: u.pathname }, (res) => {
        res.once('data', () => {
          r.destroy();
          resolve();
        });
      });
      r.on('error', (err) => ((err as NodeJS.ErrnoException).code === 'ECONNRESET' ? resolve() : reject(err)));
    });
    assert.equal((await req(`${e.files}/${b}/small.txt`)).text, 'x');
    await waitFor(async () => downloads().some((x) => x.details.obj.key === 'small.txt'));
    assert.deepEqual(downloads().map((x) => x.details.obj.key), ['small.txt']);
  });

  it('the merge of a multipart upload sends file-uploaded with the new version', async () => {
    const b = await bucket();
    const u = (await req(`${e.files}/${b}/m.bin?uploads&size=4&partSize=2`, { method: 'POST' })).json;
    await put(`${e.files}/${b}/m.bin?uploadId=${u.id}&partNumber=0`, 'ab');
    await put(`${e.files}/${b}/m.bin?uploadId=${u.id}&partNumber=1`, 'cd');
    seen.length = 0;
    const done = await req(`${e.files}/${b}/m.bin?uploadId=${u.id}`, { method: 'POST' });
    assert.equal(done.status, 200, done.text);
    const up = await waitFor(async () => seen.find((x) => x.event === 'file-uploaded'));
    assert.equal(up.details.obj.key, 'm.bin');
    assert.equal(up.details.obj.file?.size, 4);
  });

  it('a handler that throws or rejects does not break the request; the failure is logged; later handlers still run', async () => {
    const offs = [
      e.server.signals.connect('file-uploaded', () => {
        throw new Error('boom in a sync handler');
      }),
      e.server.signals.connect('file-downloaded', async () => {
        throw new Error('boom in an async handler');
      }),
    ];
    const after: SignalName[] = [];
    offs.push(e.server.signals.connect('file-uploaded', (ev) => void after.push(ev)));
    offs.push(e.server.signals.connect('file-downloaded', (ev) => void after.push(ev)));
    try {
      const b = await bucket();
      const p = await put(`${e.files}/${b}/t.txt`, 'still works');
      assert.equal(p.status, 200);
      const g = await req(`${e.files}/${b}/t.txt`);
      assert.equal(g.status, 200);
      assert.equal(g.text, 'still works');
      await waitFor(async () => after.length === 2);
      assert.deepEqual(after, ['file-uploaded', 'file-downloaded']);
      const failures = await waitFor(async () => {
        const f = e.logs.filter((l) => l.msg === 'signal handler failed');
        return f.length >= 2 ? f : null;
      });
      assert.deepEqual(failures.map((l) => [l.signal, (l.err as { message: string }).message]).sort(), [
        ['file-downloaded', 'boom in an async handler'],
        ['file-uploaded', 'boom in a sync handler'],
      ]);
    } finally {
      offs.forEach((off) => off());
    }
  });

  it('connect returns a function that disconnects the handler', async () => {
    const got: string[] = [];
    const off = e.server.signals.connect('file-uploaded', (_ev, _s, d) => void got.push(d.obj.key));
    const b = await bucket();
    await put(`${e.files}/${b}/one`, '1');
    off();
    await put(`${e.files}/${b}/two`, '2');
    assert.deepEqual(got, ['one']);
  });
});
