// The S3 door against aws4fetch (npm `aws4fetch`, Cloudflare's small SigV4 signer for fetch, common in
// edge runtimes, service workers and browser apps), unmodified and with its defaults: one `AwsClient`
// ({ service: 's3', region: 'us-east-1' }) whose `fetch` signs each request in the Authorization
// header, and whose `sign(url, { aws: { signQuery: true } })` makes presigned URLs, fetched here with
// plain fetch. There is no SDK in between: the application writes the URLs, the headers and the XML
// itself, as aws4fetch users do. How aws4fetch signs for S3, which is what the door must accept:
//  - every request that is not presigned carries `x-amz-content-sha256: UNSIGNED-PAYLOAD` unless the
//    application names the body's SHA-256 itself (aws4fetch does not hash bodies for S3);
//  - Content-Type, Content-Length and Range are never signed; every other header (x-amz-meta-*,
//    Content-MD5, x-amz-copy-source) is;
//  - the path is signed as S3 reads it: percent-decoded once, a `+` taken as a space, then encoded
//    once; the query as `URLSearchParams` reads it (a `+` is a space), each name and value encoded
//    with `%20` for a space, while the URL sent keeps the application's (or URLSearchParams') `+`;
//  - a presigned URL lives `X-Amz-Expires` seconds (86400 unless the URL already has the parameter).
// Covered: CreateBucket; PutObject of a string, a Uint8Array, a ReadableStream (with and without a
// length), unsigned and with the body's SHA-256, with Content-Type and x-amz-meta-*; GET whole and
// ranged, HEAD; ListObjectsV2 with prefix and delimiter over keys that need encoding; DeleteObjects
// with Content-MD5 and with x-amz-checksum-sha256; CopyObject; a multipart upload driven by hand;
// presigned GET and PUT; refusals (expired URL, wrong secret, a clock 20 minutes off). Bytes are
// compared everywhere, and one object is read back through the AWS SDK v3 as well. A refused
// signature fails with the canonical request aws4fetch signed next to the one the door computed.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { AwsClient, AwsV4Signer } from 'aws4fetch';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { startTestServer, type TestServer } from './support/server.js';
import { doorClient, multipartEtag, newDoorKey } from './support/s3-door.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const MiB = 1024 * 1024;
const BUCKET = `aws4fetch-${randomBytes(4).toString('hex')}`;
/** Keys that need encoding in a URL: a space, non-ASCII, and the characters encodeURIComponent and SigV4 treat differently. */
const ODD_KEYS = ['odd/a b.txt', 'odd/é ü 日本.txt', 'odd/a+b=c.txt', "odd/~t*s'q!b(p).txt", 'odd/sub/x.txt'];

type Init = NonNullable<Parameters<AwsClient['fetch']>[1]>;

interface Answer {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
  /** What was asked, for the failure message. */
  url: string;
  init: Init;
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');
/** A key as a URL path: each segment through encodeURIComponent, as an application writes it. */
const encodeKey = (key: string) => key.split('/').map(encodeURIComponent).join('/');

function unescapeXml(s: string): string {
  return s.replace(/&(lt|gt|quot|apos|amp|#x?[0-9a-fA-F]+);/g, (_m, e: string) =>
    e === 'lt' ? '<' : e === 'gt' ? '>' : e === 'quot' ? '"' : e === 'apos' ? "'" : e === 'amp' ? '&' : String.fromCodePoint(e[1] === 'x' ? parseInt(e.slice(2), 16) : Number(e.slice(1))),
  );
}

function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** The content of every `<name>` element of an XML answer, unescaped unless `raw`. */
function elements(xml: string, name: string, raw = false): string[] {
  return [...xml.matchAll(new RegExp(`<${name}>([\\s\\S]*?)</${name}>`, 'g'))].map((m) => (raw ? m[1]! : unescapeXml(m[1]!)));
}

function code(a: Answer): string | undefined {
  return elements(a.text, 'Code')[0];
}

describe('S3 door: aws4fetch (AwsClient) as it is', () => {
  let t: TestServer;
  let accessKeyId = '';
  let secretAccessKey = '';
  let aws: AwsClient;
  let s3: S3Client;
  const bucketUrl = () => `${t.s3Url}/${BUCKET}`;
  const objectUrl = (key: string, query = '') => `${bucketUrl()}/${encodeKey(key)}${query}`;

  /** One request through aws.fetch (signing, sending; aws4fetch retries only 5xx and 429). */
  async function call(url: string, init: Init = {}, client = aws): Promise<Answer> {
    const res = await client.fetch(url, init);
    const body = Buffer.from(await res.arrayBuffer());
    return { status: res.status, headers: res.headers, body, text: body.toString('utf8'), url, init };
  }

  /** A plain fetch (a presigned URL). */
  async function plain(url: string, init: RequestInit = {}): Promise<Answer> {
    const res = await fetch(url, init);
    const body = Buffer.from(await res.arrayBuffer());
    return { status: res.status, headers: res.headers, body, text: body.toString('utf8'), url, init: init as Init };
  }

  /**
   * Why an answer is not the one expected: the request, the door's answer and, for
   * SignatureDoesNotMatch, the canonical request aws4fetch signed (recomputed with the date the door
   * read) next to the one the door computed.
   */
  async function explain(a: Answer, expected: number): Promise<string> {
    const method = a.init.method ?? 'GET';
    let out = `expected ${expected}, got ${a.status} for ${method} ${a.url}\n${a.text}`;
    if (code(a) !== 'SignatureDoesNotMatch') return out;
    const doorCr = elements(a.text, 'CanonicalRequest')[0] ?? '';
    const datetime = (elements(a.text, 'StringToSign')[0] ?? '').split('\n')[1] ?? '';
    const presigned = new URL(a.url).searchParams.has('X-Amz-Signature');
    const url = new URL(a.url);
    url.searchParams.delete('X-Amz-Signature');
    const signer = new AwsV4Signer({
      url: url.toString(),
      method,
      headers: presigned ? {} : a.init.headers,
      accessKeyId,
      secretAccessKey,
      service: 's3',
      region: 'us-east-1',
      datetime,
      signQuery: presigned,
    });
    out += `\n--- SignedHeaders (aws4fetch): ${signer.signedHeaders}`;
    out += `\n--- canonical request aws4fetch signed:\n${await signer.canonicalString()}\n--- canonical request the door computed:\n${doorCr}\n---`;
    return out;
  }

  async function expectStatus(a: Answer, status: number): Promise<void> {
    if (a.status !== status) assert.fail(await explain(a, status));
  }

  async function expectError(a: Answer, status: number, errorCode: string): Promise<void> {
    if (a.status !== status || code(a) !== errorCode) assert.fail(`${await explain(a, status)}\n(expected the error ${errorCode})`);
  }

  /**
   * ListObjectsV2 of the bucket, the query written with encodeURIComponent (a space is `%20`; the
   * `+` URLSearchParams writes for it has a test of its own).
   */
  async function list(params: Record<string, string>): Promise<{ keys: string[]; prefixes: string[]; a: Answer }> {
    const q = Object.entries({ 'list-type': '2', ...params }).map(([n, v]) => `${n}=${encodeURIComponent(v)}`).join('&');
    const a = await call(`${bucketUrl()}?${q}`);
    await expectStatus(a, 200);
    const prefixes = elements(a.text, 'CommonPrefixes', true).flatMap((c) => elements(c, 'Prefix'));
    return { keys: elements(a.text, 'Key'), prefixes, a };
  }

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    accessKeyId = k.accessKeyId;
    secretAccessKey = k.secret;
    aws = new AwsClient({ accessKeyId, secretAccessKey, service: 's3', region: 'us-east-1' });
    s3 = doorClient(t, k);
  });

  after(async () => {
    s3?.destroy();
    await t?.close();
  });

  it('CreateBucket (PUT /bucket), then HeadBucket', async () => {
    const made = await call(bucketUrl(), { method: 'PUT' });
    await expectStatus(made, 200);
    const head = await call(bucketUrl(), { method: 'HEAD' });
    await expectStatus(head, 200);
  });

  it('PutObject of a string, unsigned (aws4fetch’s default), with Content-Type and x-amz-meta-*: GET whole and ranged, HEAD gives the metadata back', async () => {
    const text = 'hello from aws4fetch — ünïcödé\n'.repeat(50);
    const bytes = Buffer.from(text, 'utf8');
    const init: Init = { method: 'PUT', body: text, headers: { 'Content-Type': 'text/plain; charset=utf-8', 'x-amz-meta-colour': 'blue', 'X-Amz-Meta-Two-Words': 'a  b' } };
    // What aws4fetch builds: UNSIGNED-PAYLOAD named and signed; Content-Type not signed.
    const signed = await aws.sign(objectUrl('hello.txt'), init);
    assert.equal(signed.headers.get('x-amz-content-sha256'), 'UNSIGNED-PAYLOAD');
    assert.match(signed.headers.get('authorization') ?? '', /SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-meta-colour;x-amz-meta-two-words,/);

    const put = await call(objectUrl('hello.txt'), init);
    await expectStatus(put, 200);
    assert.equal(put.headers.get('etag'), `"${md5(bytes)}"`);

    const got = await call(objectUrl('hello.txt'));
    await expectStatus(got, 200);
    assert.ok(got.body.equals(bytes));
    assert.equal(got.headers.get('content-type'), 'text/plain; charset=utf-8');

    const ranged = await call(objectUrl('hello.txt'), { headers: { Range: 'bytes=6-25' } });
    await expectStatus(ranged, 206);
    assert.ok(ranged.body.equals(bytes.subarray(6, 26)));
    assert.equal(ranged.headers.get('content-range'), `bytes 6-25/${bytes.length}`);
    const suffix = await call(objectUrl('hello.txt'), { headers: { Range: 'bytes=-7' } });
    await expectStatus(suffix, 206);
    assert.ok(suffix.body.equals(bytes.subarray(bytes.length - 7)));

    const head = await call(objectUrl('hello.txt'), { method: 'HEAD' });
    await expectStatus(head, 200);
    assert.equal(head.headers.get('x-amz-meta-colour'), 'blue');
    // Signed with its blanks collapsed (SigV4's canonical form), and stored.
    assert.equal(head.headers.get('x-amz-meta-two-words')?.replace(/ +/g, ' '), 'a b');
    assert.equal(head.headers.get('content-length'), String(bytes.length));
    assert.equal(head.headers.get('etag'), `"${md5(bytes)}"`);
    assert.equal(head.body.length, 0);
  });

  it('PutObject of a Uint8Array and a Buffer: unsigned, and with the body’s SHA-256 named (a wrong one is XAmzContentSHA256Mismatch, nothing stored)', async () => {
    const data = randomBytes(300_000);
    const u8 = new Uint8Array(data.buffer, data.byteOffset, data.length);
    await expectStatus(await call(objectUrl('bin/u8.bin'), { method: 'PUT', body: u8 }), 200);
    const hashed = await call(objectUrl('bin/hashed.bin'), { method: 'PUT', body: data, headers: { 'x-amz-content-sha256': sha256(data) } });
    await expectStatus(hashed, 200);
    assert.equal(hashed.headers.get('etag'), `"${md5(data)}"`);
    for (const key of ['bin/u8.bin', 'bin/hashed.bin']) {
      const got = await call(objectUrl(key));
      await expectStatus(got, 200);
      assert.ok(got.body.equals(data), key);
    }
    const wrong = await call(objectUrl('bin/wrong.bin'), { method: 'PUT', body: data, headers: { 'x-amz-content-sha256': sha256('other bytes') } });
    await expectError(wrong, 400, 'XAmzContentSHA256Mismatch');
    await expectError(await call(objectUrl('bin/wrong.bin')), 404, 'NoSuchKey');
  });

  it('PutObject of a ReadableStream: with a Content-Length, unsigned and hashed, it is stored; without one S3 answers 411 MissingContentLength', async () => {
    const data = randomBytes(3 * MiB + 123);
    const stream = (bytes = data) =>
      new ReadableStream<Uint8Array>({
        start(c) {
          for (let at = 0; at < bytes.length; at += 64 * 1024) c.enqueue(new Uint8Array(bytes.subarray(at, at + 64 * 1024)));
          c.close();
        },
      });
    const length = { 'Content-Length': String(data.length) };
    await expectStatus(await call(objectUrl('stream/unsigned.bin'), { method: 'PUT', body: stream(), headers: length }), 200);
    await expectStatus(await call(objectUrl('stream/hashed.bin'), { method: 'PUT', body: stream(), headers: { ...length, 'x-amz-content-sha256': sha256(data) } }), 200);
    for (const key of ['stream/unsigned.bin', 'stream/hashed.bin']) {
      const got = await call(objectUrl(key));
      await expectStatus(got, 200);
      assert.ok(got.body.equals(data), key);
    }
    // fetch sends a stream without a length as Transfer-Encoding: chunked, which S3 refuses for
    // PutObject. A small one, sent whole before the refusal (which closes the connection) comes back.
    const chunked = await call(objectUrl('stream/chunked.bin'), { method: 'PUT', body: stream(data.subarray(0, 1000)) });
    await expectError(chunked, 411, 'MissingContentLength');
    await expectError(await call(objectUrl('stream/chunked.bin')), 404, 'NoSuchKey');
  });

  it('keys that need encoding (space, non-ASCII, + = ~ * \' ! ( ), written with encodeURIComponent: PUT, GET, ListObjectsV2 with prefix and delimiter', async () => {
    for (const key of ODD_KEYS) await expectStatus(await call(objectUrl(key), { method: 'PUT', body: `content of ${key}` }), 200);
    for (const key of ODD_KEYS) {
      const got = await call(objectUrl(key));
      await expectStatus(got, 200);
      assert.equal(got.text, `content of ${key}`);
    }
    const l = await list({ prefix: 'odd/', delimiter: '/' });
    assert.deepEqual(l.keys.sort(), ODD_KEYS.filter((k) => !k.startsWith('odd/sub/')).sort());
    assert.deepEqual(l.prefixes, ['odd/sub/']);
    assert.equal(elements(l.a.text, 'KeyCount')[0], '5');
    // A prefix with characters encodeURIComponent leaves alone but SigV4 encodes, and non-ASCII.
    assert.deepEqual((await list({ prefix: "odd/~t*s'q!b(" })).keys, ["odd/~t*s'q!b(p).txt"]);
    assert.deepEqual((await list({ prefix: 'odd/é ü' })).keys, ['odd/é ü 日本.txt']);
    assert.deepEqual((await list({ prefix: 'odd/a+b=' })).keys, ['odd/a+b=c.txt']);
    // The listing the AWS SDK v3 reads agrees.
    const sdk = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'odd/' }));
    assert.deepEqual((sdk.Contents ?? []).map((c) => c.Key).sort(), [...ODD_KEYS].sort());
  });

  // S3 canonicalises the query it received before checking the signature, `+` read as a space, so
  // `+` and `%20` sign alike (the AWS SDK for Java v1 sends `+` and signs `%20`; mhart/aws4fetch#83,
  // epam/cloud-pipeline#4577). The operation reads the prefix with the same rule.
  it('a query with a space, as URLSearchParams writes it (`+`), is signed by aws4fetch as %20: S3 reads `+` as a space and accepts it (ListObjectsV2 prefix)', async () => {
    const q = new URLSearchParams({ 'list-type': '2', prefix: 'odd/a b' });
    assert.match(q.toString(), /prefix=odd%2Fa\+b/);
    const a = await call(`${bucketUrl()}?${q}`);
    await expectStatus(a, 200);
    assert.deepEqual(elements(a.text, 'Key'), ['odd/a b.txt']);
  });

  // S3 reads a `+` in the path as a space (its console's object URLs write a space so), and signs it
  // as `%20` (nginx/nginx-s3-gateway#77); aws4fetch's `replace(/\+/g, ' ')` before decoding the path
  // is there for that. `new URL()` leaves a `+` as is, so a key put in a URL unencoded arrives so.
  // S3 reads a literal `+` in a path as a space, and aws4fetch signs it so; the door reads it as a
  // plus, as MinIO does (a naive client's "C++ notes.txt" stays that key), and signs it so. The
  // signature must cover the key the door will use: aws4fetch's is refused and nothing stored. A key
  // with a plus sent as %2B (encodeURIComponent) works: see the odd-keys test above.
  it('a literal `+` in the path: the door reads a plus (S3 a space); aws4fetch signed a space, so SignatureDoesNotMatch, nothing stored', async () => {
    const a = await call(`${bucketUrl()}/plus/one+two.txt`, { method: 'PUT', body: 'plus is a space' });
    await expectStatus(a, 403);
    assert.deepEqual(elements(a.text, 'Code'), ['SignatureDoesNotMatch']);
    for (const key of ['plus/one two.txt', 'plus/one+two.txt']) await expectStatus(await call(objectUrl(key), { method: 'HEAD' }), 404);
  });

  it('CopyObject (x-amz-copy-source, signed): bytes and metadata copied, from a key that needs encoding', async () => {
    const src = 'odd/é ü 日本.txt';
    const put = await call(objectUrl(src), { method: 'PUT', body: 'copy me', headers: { 'Content-Type': 'text/x-copy', 'x-amz-meta-origin': 'aws4fetch' } });
    await expectStatus(put, 200);
    const copy = await call(objectUrl('copies/ü copy.txt'), { method: 'PUT', headers: { 'x-amz-copy-source': `/${BUCKET}/${encodeKey(src)}` } });
    await expectStatus(copy, 200);
    assert.deepEqual(elements(copy.text, 'ETag'), [`"${md5('copy me')}"`]);
    const head = await call(objectUrl('copies/ü copy.txt'), { method: 'HEAD' });
    await expectStatus(head, 200);
    assert.equal(head.headers.get('content-type'), 'text/x-copy');
    assert.equal(head.headers.get('x-amz-meta-origin'), 'aws4fetch');
    assert.equal((await call(objectUrl('copies/ü copy.txt'))).text, 'copy me');
  });

  it('DeleteObjects (POST ?delete) with Content-MD5, and with x-amz-checksum-sha256 instead', async () => {
    const batch = (keys: string[]) => `<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>false</Quiet>${keys.map((k) => `<Object><Key>${escapeXml(k)}</Key></Object>`).join('')}</Delete>`;
    const first = batch(["odd/~t*s'q!b(p).txt", 'odd/a+b=c.txt']);
    const byMd5 = await call(`${bucketUrl()}?delete`, {
      method: 'POST',
      body: first,
      headers: { 'Content-Type': 'application/xml', 'Content-MD5': createHash('md5').update(first).digest('base64') },
    });
    await expectStatus(byMd5, 200);
    assert.deepEqual(elements(byMd5.text, 'Key').sort(), ['odd/a+b=c.txt', "odd/~t*s'q!b(p).txt"]);
    assert.equal(elements(byMd5.text, 'Error').length, 0);

    const second = batch(['odd/a b.txt', 'odd/sub/x.txt']);
    const byChecksum = await call(`${bucketUrl()}?delete`, {
      method: 'POST',
      body: second,
      headers: { 'Content-Type': 'application/xml', 'x-amz-checksum-sha256': createHash('sha256').update(second).digest('base64') },
    });
    await expectStatus(byChecksum, 200);
    assert.deepEqual(elements(byChecksum.text, 'Key').sort(), ['odd/a b.txt', 'odd/sub/x.txt']);
    assert.deepEqual((await list({ prefix: 'odd/' })).keys, ['odd/é ü 日本.txt']);
  });

  it('a multipart upload driven by hand (5 MiB, 5 MiB, a small last part): the S3 multipart ETag, bytes read back by aws4fetch and by the AWS SDK v3', async () => {
    const parts = [randomBytes(5 * MiB), randomBytes(5 * MiB), randomBytes(1234)];
    const key = 'big/multi part é.bin';
    const created = await call(objectUrl(key, '?uploads'), { method: 'POST', headers: { 'Content-Type': 'application/x-test', 'x-amz-meta-via': 'multipart' } });
    await expectStatus(created, 200);
    const uploadId = elements(created.text, 'UploadId')[0] ?? '';
    assert.ok(uploadId);
    const etags: string[] = [];
    for (const [i, body] of parts.entries()) {
      // Part 2 names its SHA-256; the others go unsigned (aws4fetch's default).
      const headers = i === 1 ? { 'x-amz-content-sha256': sha256(body) } : undefined;
      const up = await call(objectUrl(key, `?partNumber=${i + 1}&uploadId=${encodeURIComponent(uploadId)}`), { method: 'PUT', body, headers });
      await expectStatus(up, 200);
      assert.equal(up.headers.get('etag'), `"${md5(body)}"`);
      etags.push(up.headers.get('etag')!);
    }
    const xml = `<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${etags.map((e, i) => `<Part><PartNumber>${i + 1}</PartNumber><ETag>${escapeXml(e)}</ETag></Part>`).join('')}</CompleteMultipartUpload>`;
    const done = await call(objectUrl(key, `?uploadId=${encodeURIComponent(uploadId)}`), { method: 'POST', body: xml, headers: { 'Content-Type': 'application/xml' } });
    await expectStatus(done, 200);
    const whole = Buffer.concat(parts);
    assert.deepEqual(elements(done.text, 'ETag'), [multipartEtag(parts)]);
    assert.deepEqual(elements(done.text, 'Key'), [key]);

    const got = await call(objectUrl(key));
    await expectStatus(got, 200);
    assert.ok(got.body.equals(whole));
    assert.equal(got.headers.get('etag'), multipartEtag(parts));
    const tail = await call(objectUrl(key), { headers: { Range: `bytes=${5 * MiB - 10}-${5 * MiB + 9}` } });
    await expectStatus(tail, 206);
    assert.ok(tail.body.equals(whole.subarray(5 * MiB - 10, 5 * MiB + 10)));

    // The same object through the AWS SDK v3.
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
    assert.equal(head.ETag, multipartEtag(parts));
    assert.equal(head.ContentType, 'application/x-test');
    assert.deepEqual(head.Metadata, { via: 'multipart' });
    const sdk = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
    assert.ok(Buffer.from(await sdk.Body!.transformToByteArray()).equals(whole));
  });

  it('presigned GET and PUT (sign with signQuery), fetched with plain fetch', async () => {
    const data = randomBytes(100_000);
    const putUrl = (await aws.sign(objectUrl('presigned/up é.bin'), { method: 'PUT', aws: { signQuery: true } })).url;
    assert.match(putUrl, /X-Amz-Expires=86400&/);
    const put = await plain(putUrl, { method: 'PUT', body: data });
    await expectStatus(put, 200);
    assert.equal(put.headers.get('etag'), `"${md5(data)}"`);
    const getUrl = (await aws.sign(objectUrl('presigned/up é.bin'), { aws: { signQuery: true } })).url;
    const got = await plain(getUrl);
    await expectStatus(got, 200);
    assert.ok(got.body.equals(data));
    // The signature covers the method: the GET URL does not PUT.
    await expectError(await plain(getUrl, { method: 'PUT', body: 'x' }), 403, 'SignatureDoesNotMatch');
  });

  // aws4fetch signs the query with `%20` and hands back the URL URLSearchParams writes, with `+`
  // (mhart/aws4fetch#83: AWS S3 accepts it; some S3-compatible servers do not).
  it('a presigned GET with response-content-disposition holding spaces (URLSearchParams writes `+`, aws4fetch signs %20; S3 accepts it)', async () => {
    const url = new URL(objectUrl('presigned/up é.bin'));
    url.searchParams.set('response-content-disposition', 'attachment; filename="hello world.bin"');
    const signed = (await aws.sign(url, { aws: { signQuery: true } })).url;
    assert.match(signed, /response-content-disposition=attachment%3B\+filename%3D%22hello\+world\.bin%22/);
    const got = await plain(signed);
    await expectStatus(got, 200);
    assert.equal(got.headers.get('content-disposition'), 'attachment; filename="hello world.bin"');
    assert.equal(got.body.length, 100_000);
  });

  it('refusals: an expired presigned URL (403 AccessDenied, Request has expired), a wrong secret (403 SignatureDoesNotMatch), a clock 20 minutes off (403 RequestTimeTooSkewed)', async () => {
    const longDate = (ms: number) => new Date(ms).toISOString().replace(/[:-]|\.\d{3}/g, '');
    // X-Amz-Expires already in the URL is kept by aws4fetch; signed 2 minutes ago for 60 seconds.
    const expiredUrl = (await aws.sign(objectUrl('hello.txt', '?X-Amz-Expires=60'), { aws: { signQuery: true, datetime: longDate(Date.now() - 120_000) } })).url;
    const expired = await plain(expiredUrl);
    await expectError(expired, 403, 'AccessDenied');
    assert.deepEqual(elements(expired.text, 'Message'), ['Request has expired']);

    const wrong = new AwsClient({ accessKeyId, secretAccessKey: `${secretAccessKey.slice(0, -2)}xx`, service: 's3', region: 'us-east-1' });
    const bad = await call(objectUrl('hello.txt'), {}, wrong);
    await expectError(bad, 403, 'SignatureDoesNotMatch');
    // The door's canonical request is the one aws4fetch signed (only the key differs).
    const datetime = (elements(bad.text, 'StringToSign')[0] ?? '').split('\n')[1] ?? '';
    const signer = new AwsV4Signer({ url: objectUrl('hello.txt'), accessKeyId, secretAccessKey, service: 's3', region: 'us-east-1', datetime });
    assert.equal(elements(bad.text, 'CanonicalRequest')[0], await signer.canonicalString());
    const badPut = await call(objectUrl('wrong-secret.txt'), { method: 'PUT', body: 'no' }, wrong);
    await expectError(badPut, 403, 'SignatureDoesNotMatch');
    await expectError(await call(objectUrl('wrong-secret.txt')), 404, 'NoSuchKey');

    for (const off of [-20, 20]) {
      const skewed = await call(objectUrl('hello.txt'), { aws: { datetime: longDate(Date.now() + off * 60_000) } });
      await expectError(skewed, 403, 'RequestTimeTooSkewed');
    }
  });
});
