// The S3 door's operational gaps closed: FILES_REST_BODY_IDLE_TIMEOUT cuts a stalled S3 upload (a
// PutObject, an UploadPart, a PostObject form) as it cuts a REST one (RequestTimeout, connection closed, nothing stored), and S3 requests are counted
// in the main port's /metrics by operation and status, with the bytes received and sent.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { requestHead, rawExchange } from './support/raw-http.js';
import { fileRemovalsSettled, startTestServer, storedFiles, type TestServer } from './support/server.js';

function metricValue(text: string, line: RegExp): number {
  const m = text.split('\n').find((l) => line.test(l));
  return m ? Number(m.slice(m.lastIndexOf(' ') + 1)) : 0;
}

/**
 * Sends a request's head and the first part of its body on a raw socket; once the refusal has come,
 * sends the rest of the body and then a second request on the same connection. All the answers.
 */
function refusedMidBody(port: number, head: string, first: Buffer, rest: Buffer): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = '';
    sock.on('data', (d) => {
      got += d.toString('latin1');
      if ((got.match(/HTTP\/1\.1 /g) ?? []).length === 1 && got.includes('</Error>')) {
        sock.write(rest, () => sock.write('GET /idle?list-type=2 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n'));
      }
    });
    sock.on('end', () => resolve(got));
    sock.on('error', reject);
    sock.write(head);
    sock.write(first);
  });
}

describe('S3 door: idle uploads and metrics', () => {
  let t: TestServer;
  before(async () => {
    // allow-all: anonymous requests, so the raw sockets need no signature.
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_BODY_IDLE_TIMEOUT: '1' });
    const r = await fetch(`${t.s3Url}/idle`, { method: 'PUT' });
    assert.equal(r.status, 200, await r.text());
  });
  after(() => t?.close());

  it('a PutObject whose body stalls is cut after FILES_REST_BODY_IDLE_TIMEOUT: RequestTimeout, connection closed, nothing stored', async () => {
    await fileRemovalsSettled(t);
    const before = await storedFiles(t);
    const port = Number(new URL(t.s3Url).port);
    const head = requestHead('PUT', '/idle/stalled.bin', [['Host', 'h'], ['Content-Length', '100000']]);
    // 10 bytes of 100 000, then silence; the client waits up to 10 s for an answer.
    const r = await rawExchange(port, Buffer.concat([head, Buffer.alloc(10, 1)]), { waitMs: 10_000, hardMs: 20_000 });
    assert.equal(r.gaveUp, false, 'the server answered by itself');
    assert.equal(r.status, 400, r.body);
    assert.match(r.body, /<Code>RequestTimeout<\/Code>/);
    assert.equal(r.headers.connection, 'close');
    assert.deepEqual(await storedFiles(t), before);
    const got = await fetch(`${t.s3Url}/idle/stalled.bin`);
    assert.equal(got.status, 404);
  });

  it('an UploadPart whose body stalls is cut the same way; a re-send of the part then goes through', async () => {
    const init = await fetch(`${t.s3Url}/idle/part.bin?uploads`, { method: 'POST' });
    assert.equal(init.status, 200);
    const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(await init.text())![1]!;
    const port = Number(new URL(t.s3Url).port);
    const path = `/idle/part.bin?partNumber=1&uploadId=${uploadId}`;
    const head = requestHead('PUT', path, [['Host', 'h'], ['Content-Length', '100000']]);
    const r = await rawExchange(port, Buffer.concat([head, Buffer.alloc(10, 1)]), { waitMs: 10_000, hardMs: 20_000 });
    assert.equal(r.gaveUp, false, 'the server answered by itself');
    assert.equal(r.status, 400, r.body);
    assert.match(r.body, /<Code>RequestTimeout<\/Code>/);
    assert.equal(r.headers.connection, 'close');
    const body = Buffer.alloc(1000, 2);
    const again = await fetch(`${t.s3Url}${path}`, { method: 'PUT', body });
    assert.equal(again.status, 200, await again.text());
    const etag = again.headers.get('etag')!;
    const done = await fetch(`${t.s3Url}/idle/part.bin?uploadId=${uploadId}`, {
      method: 'POST',
      body: `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${etag}</ETag></Part></CompleteMultipartUpload>`,
    });
    assert.equal(done.status, 200, await done.text());
    const got = await fetch(`${t.s3Url}/idle/part.bin`);
    assert.ok(Buffer.from(await got.arrayBuffer()).equals(body));
  });

  it('an UploadPart that sends its headers and never a byte of its body is cut the same way, and releases what it reserved', async () => {
    const init = await fetch(`${t.s3Url}/idle/silent.bin?uploads`, { method: 'POST' });
    const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(await init.text())![1]!;
    const port = Number(new URL(t.s3Url).port);
    const head = requestHead('PUT', `/idle/silent.bin?partNumber=1&uploadId=${uploadId}`, [['Host', 'h'], ['Content-Length', '5000']]);
    const r = await rawExchange(port, head, { waitMs: 10_000, hardMs: 20_000 });
    assert.equal(r.gaveUp, false, 'the server answered by itself');
    assert.equal(r.status, 400, r.body);
    assert.match(r.body, /<Code>RequestTimeout<\/Code>/);
    const parts = await fetch(`${t.s3Url}/idle/silent.bin?uploadId=${uploadId}`);
    assert.doesNotMatch(await parts.text(), /<Part>/);
    const row = await t.server.core.ctx.db.selectFrom('multipart_uploads').select('size').where('id', '=', uploadId).executeTakeFirstOrThrow();
    assert.equal(Number(row.size), 0, 'the part\'s reservation was released');
  });

  it('a PostObject form that stalls before its file part, or within it, is cut the same way; nothing stored', async () => {
    await fileRemovalsSettled(t);
    const before = await storedFiles(t);
    const port = Number(new URL(t.s3Url).port);
    const fields = '--b\r\ncontent-disposition: form-data; name="key"\r\n\r\nposted.bin\r\n';
    for (const sent of [fields, `${fields}--b\r\ncontent-disposition: form-data; name="file"; filename="f"\r\n\r\nten bytes.`]) {
      const head = requestHead('POST', '/idle', [['Host', 'h'], ['Content-Type', 'multipart/form-data; boundary=b'], ['Content-Length', '100000']]);
      const r = await rawExchange(port, Buffer.concat([head, Buffer.from(sent)]), { waitMs: 10_000, hardMs: 20_000 });
      assert.equal(r.gaveUp, false, 'the server answered by itself');
      assert.equal(r.status, 400, r.body);
      assert.match(r.body, /<Code>RequestTimeout<\/Code>/);
      assert.equal(r.headers.connection, 'close');
    }
    assert.deepEqual(await storedFiles(t), before);
    assert.equal((await fetch(`${t.s3Url}/idle/posted.bin`)).status, 404);
  });

  it('a refused request with a small body still being sent: the answer comes, the rest of the body is dropped, the connection serves the next request', async () => {
    const port = Number(new URL(t.s3Url).port);
    const body = Buffer.alloc(2000, 0x61);
    // A POST to a bucket that is not a form is refused (412) before its body is read.
    const head = `POST /idle HTTP/1.1\r\nHost: h\r\nContent-Type: application/octet-stream\r\nContent-Length: ${body.length}\r\n\r\n`;
    const answers = await refusedMidBody(port, head, body.subarray(0, 1000), body.subarray(1000));
    assert.match(answers, /^HTTP\/1\.1 412 /);
    assert.doesNotMatch(answers.split('</Error>')[0]!, /connection: close/i);
    assert.match(answers, /HTTP\/1\.1 200 [\s\S]*<ListBucketResult/, 'the connection served the next request');
  });

  it('a form refused after its fields were read, its file still being sent: the answer comes, the rest is drained, the connection serves the next request', async () => {
    const port = Number(new URL(t.s3Url).port);
    const policy = Buffer.from(JSON.stringify({ expiration: new Date(Date.now() + 600_000).toISOString(), conditions: [] })).toString('base64');
    let head = '';
    for (const [k, v] of Object.entries({ key: 'refused.bin', AWSAccessKeyId: 'FRNOSUCHKEY', policy, signature: 'c2lnbmF0dXJl' })) {
      head += `--b\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
    }
    head += '--b\r\ncontent-disposition: form-data; name="file"; filename="f"\r\n\r\n';
    const rest = Buffer.concat([Buffer.alloc(3000, 0x61), Buffer.from('\r\n--b--\r\n')]);
    const first = Buffer.concat([Buffer.from(head), Buffer.alloc(1000, 0x61)]);
    const length = first.length + rest.length;
    const request = `POST /idle HTTP/1.1\r\nHost: h\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: ${length}\r\n\r\n`;
    const answers = await refusedMidBody(port, request, first, rest);
    assert.match(answers, /^HTTP\/1\.1 403 [\s\S]*<Code>InvalidAccessKeyId<\/Code>/);
    assert.doesNotMatch(answers.split('</Error>')[0]!, /connection: close/i);
    assert.match(answers, /HTTP\/1\.1 200 [\s\S]*<ListBucketResult/, 'the connection served the next request');
    assert.equal((await fetch(`${t.s3Url}/idle/refused.bin`)).status, 404);
  });

  it('/metrics counts S3 requests by operation and status, and the bytes in and out', async () => {
    const scrape = async () => (await fetch(`${t.url}/metrics`)).text();
    const before = await scrape();
    const body = Buffer.alloc(12345, 7);
    assert.equal((await fetch(`${t.s3Url}/idle/m.bin`, { method: 'PUT', body })).status, 200);
    const got = await fetch(`${t.s3Url}/idle/m.bin`);
    assert.equal((await got.arrayBuffer()).byteLength, body.length);
    assert.equal((await fetch(`${t.s3Url}/idle/none`)).status, 404);
    assert.equal((await fetch(`${t.s3Url}/idle?list-type=2`)).status, 200);
    const after = await scrape();
    const delta = (re: RegExp) => metricValue(after, re) - metricValue(before, re);
    assert.equal(delta(/^files_rest_door_requests_total\{door="s3",operation="PutObject",status="200"\}/), 1, after);
    assert.equal(delta(/^files_rest_door_requests_total\{door="s3",operation="GetObject",status="200"\}/), 1);
    assert.equal(delta(/^files_rest_door_requests_total\{door="s3",operation="GetObject",status="404"\}/), 1);
    assert.equal(delta(/^files_rest_door_requests_total\{door="s3",operation="ListObjectsV2",status="200"\}/), 1);
    assert.equal(delta(/^files_rest_door_received_bytes_total\{door="s3"\}/), body.length);
    assert.ok(delta(/^files_rest_door_sent_bytes_total\{door="s3"\}/) > body.length, 'object, error document and listing');
    assert.ok(delta(/^files_rest_door_request_duration_seconds_count\{door="s3",operation="PutObject"\}/) === 1);
  });
});
