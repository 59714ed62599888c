// Fuzz of the S3 door over raw sockets (node:net), as test/fuzz-raw.test.ts fuzzes the REST door:
// malformed signatures (Authorization header and presigned query), dates, payload hashes, aws-chunked
// framing (bad chunk sizes, truncated chunks, wrong chunk signatures, trailers without or with a wrong
// checksum, a decoded length that lies) and XML bodies. From a seeded generator, so every run sends
// the same requests; every request is signed validly where the point is to fuzz what follows
// (@smithy/signature-v4, and chunk signatures chained by hand). Whatever comes in: no 5xx, an S3 XML
// error document on every refusal, the server alive and serving, nothing stored.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '@smithy/core/checksum';
import { HttpRequest } from '@smithy/core/protocols';
import zlib from 'node:zlib';
import { prng } from './support/bytes.js';
import { rawExchange, type RawSocketResult } from './support/raw-http.js';
import { fileRemovalsSettled, startTestServer, storedFiles, type TestServer } from './support/server.js';
import { newDoorKey } from './support/s3-door.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const REGION = 'us-east-1';
const BUCKET = 'fuzz-bucket';

interface Planned {
  what: string;
  bytes: Buffer;
  /** Incomplete on purpose: the client half-closes after sending (the server would wait for more). */
  open: boolean;
}

/** x-amz-checksum-crc32 of `b`: the big-endian CRC32, base64. */
function crc32Base64(b: Buffer): string {
  const out = Buffer.alloc(4);
  out.writeUInt32BE((zlib as unknown as { crc32(d: Buffer): number }).crc32(b) >>> 0);
  return out.toString('base64');
}

const sha256hex = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();

function pick<T>(rnd: () => number, items: readonly T[]): T {
  return items[Math.floor(rnd() * items.length)]!;
}

/** `s` with the character at a random place in [from, to) changed to another one of `alphabet`. */
function changeOne(rnd: () => number, s: string, from: number, to: number, alphabet: string): string {
  const i = from + Math.floor(rnd() * (to - from));
  const others = alphabet.replace(s[i]!, '');
  return s.slice(0, i) + others[Math.floor(rnd() * others.length)] + s.slice(i + 1);
}

describe('Fuzz over raw sockets: malformed S3 requests', () => {
  let t: TestServer;
  let port: number;
  let host: string;
  let id: string;
  let secret: string;
  let signer: SignatureV4;
  /** An upload in progress that declared CRC32, with part 1 sent: what the multipart generator fuzzes. */
  const MP_KEY = 'mp/fuzzed.bin';
  const MP_PART = Buffer.from('the first part of the fuzzed upload');
  let mpUpload = '';

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    id = k.accessKeyId;
    secret = k.secret;
    const u = new URL(t.s3Url);
    port = Number(u.port);
    host = u.host;
    signer = new SignatureV4({ credentials: { accessKeyId: id, secretAccessKey: secret }, region: REGION, service: 's3', sha256: Sha256 });
    // The bucket and one object, through a validly signed request of the generator's own kind.
    const setup = await rawExchange(port, await signedRequest('PUT', `/${BUCKET}`, {}, Buffer.alloc(0), 'UNSIGNED-PAYLOAD'));
    assert.equal(setup.status, 200, setup.body);
    const put = await rawExchange(port, await signedRequest('PUT', `/${BUCKET}/known.txt`, {}, Buffer.from('known'), 'UNSIGNED-PAYLOAD'));
    assert.equal(put.status, 200, put.body);
    const created = await rawExchange(port, await signedQueryRequest('POST', `/${BUCKET}/${MP_KEY}`, { uploads: '' }, { 'x-amz-checksum-algorithm': 'CRC32' }, Buffer.alloc(0)));
    assert.equal(created.status, 200, created.body);
    mpUpload = /<UploadId>([^<]+)<\/UploadId>/.exec(created.body)![1]!;
    const part = await rawExchange(port, await signedQueryRequest('PUT', `/${BUCKET}/${MP_KEY}`, { partNumber: '1', uploadId: mpUpload }, { 'x-amz-checksum-crc32': crc32Base64(MP_PART) }, MP_PART));
    assert.equal(part.status, 200, part.body);
  });
  after(() => t?.close());

  /** Signs a request with @smithy/signature-v4 and returns its headers (Content-Length added unsigned). */
  async function sign(method: string, path: string, headers: Record<string, string>, contentSha256: string, opts: { query?: Record<string, string>; date?: Date } = {}) {
    const req = new HttpRequest({ method, protocol: 'http:', hostname: '127.0.0.1', port, path, query: opts.query ?? {}, headers: { host, 'x-amz-content-sha256': contentSha256, ...headers } });
    const signed = await signer.sign(req, { signingDate: opts.date ?? new Date() });
    return signed.headers as Record<string, string>;
  }

  function wire(method: string, target: string, headers: Record<string, string>, body: Buffer): Buffer {
    const all = { ...headers, 'content-length': String(body.length), connection: 'close' };
    return Buffer.concat([Buffer.from(`${method} ${target} HTTP/1.1\r\n${Object.entries(all).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`, 'latin1'), body]);
  }

  async function signedRequest(method: string, path: string, headers: Record<string, string>, body: Buffer, contentSha256 = sha256hex(body)): Promise<Buffer> {
    return wire(method, path, await sign(method, path, headers, contentSha256), body);
  }

  /** As signedRequest, with a query (`uploads` has no value: `?uploads`). */
  async function signedQueryRequest(method: string, path: string, query: Record<string, string>, headers: Record<string, string>, body: Buffer): Promise<Buffer> {
    const target = `${path}?${Object.entries(query).map(([k, v]) => (v === '' ? k : `${k}=${encodeURIComponent(v)}`)).join('&')}`;
    return wire(method, target, await sign(method, path, headers, sha256hex(body), { query }), body);
  }

  /** The signing key of today's scope, to chain chunk signatures as a client does. */
  function chunkSigner(authorization: string, amzDate: string) {
    const seed = /Signature=([0-9a-f]{64})/.exec(authorization)![1]!;
    const day = amzDate.slice(0, 8);
    const scope = `${day}/${REGION}/s3/aws4_request`;
    const key = hmac(hmac(hmac(hmac(`AWS4${secret}`, day), REGION), 's3'), 'aws4_request');
    let prev = seed;
    return (data: Buffer) => {
      const sts = ['AWS4-HMAC-SHA256-PAYLOAD', amzDate, scope, prev, sha256hex(''), sha256hex(data)].join('\n');
      prev = createHmac('sha256', key).update(sts).digest('hex');
      return prev;
    };
  }

  // --- The generators. Each returns a request that must be refused. ---

  /** A PUT signed in its header, then one part of the Authorization made wrong. */
  async function badAuthorization(rnd: () => number, i: number): Promise<Planned> {
    const path = `/${BUCKET}/auth-${i}`;
    const h = await sign('PUT', path, {}, 'UNSIGNED-PAYLOAD');
    const auth = h.authorization!;
    const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(auth);
    assert.ok(m, auth);
    const [, akid, day, region, signedHeaders, sig] = m as unknown as string[];
    const kind = pick(rnd, ['signature', 'signature-length', 'key', 'day', 'region', 'service', 'signed-headers', 'algorithm', 'garbage', 'missing-part', 'date-header', 'sha-header', 'host', 'duplicate']);
    let a = auth;
    const headers = { ...h };
    switch (kind) {
      case 'signature':
        a = auth.replace(sig!, changeOne(rnd, sig!, 0, 64, '0123456789abcdef'));
        break;
      case 'signature-length':
        a = auth.replace(sig!, sig!.slice(0, Math.floor(rnd() * 64)) + pick(rnd, ['', 'g', 'zz', sig!]));
        break;
      case 'key':
        a = auth.replace(`Credential=${akid}`, `Credential=${pick(rnd, ['', 'FRNOSUCHKEY000000000', changeOne(rnd, akid!, 0, akid!.length, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'), `${akid}\u00ff`])}`);
        break;
      case 'day':
        a = auth.replace(`/${day}/`, `/${pick(rnd, ['20200101', '2026', 'yyyymmdd', '99999999', '', changeOne(rnd, day!, 0, 8, '0123456789')])}/`);
        break;
      case 'region':
        a = auth.replace(`/${region}/`, `/${pick(rnd, ['', 'eu-west-1x', '\u00e9', 'a b'])}/`);
        if (a.includes(`/${region}/`) && region !== '') a = a.replace(`/${region}/`, '/bad-region/');
        break;
      case 'service':
        a = auth.replace('/s3/aws4_request', pick(rnd, ['/iam/aws4_request', '/s3/aws4_requesT', '/s3/', '/s3/aws4_request/extra']));
        break;
      case 'signed-headers':
        a = auth.replace(`SignedHeaders=${signedHeaders}`, `SignedHeaders=${pick(rnd, ['', 'host', 'x-amz-date', `${signedHeaders};x-missing`, signedHeaders!.split(';').reverse().join(';'), `${signedHeaders};content-type`, signedHeaders!.toUpperCase()])}`);
        if (a === auth) a = auth.replace(`SignedHeaders=${signedHeaders}`, 'SignedHeaders=host');
        break;
      case 'algorithm':
        a = auth.replace('AWS4-HMAC-SHA256', pick(rnd, ['AWS4-HMAC-SHA512', 'AWS4-HMAC-SHA1', 'aws4-hmac-sha256', 'AWS', '']));
        break;
      case 'garbage':
        a = pick(rnd, ['AWS4-HMAC-SHA256', 'AWS4-HMAC-SHA256 ', 'Bearer xyz', `AWS ${id}:c2ln`, 'AWS4-HMAC-SHA256 Credential=', randomFrom(rnd, 40), `${auth}\u0000`]);
        break;
      case 'missing-part': {
        const parts = ['Credential', 'SignedHeaders', 'Signature'];
        const drop = pick(rnd, parts);
        a = auth.replace(new RegExp(`(, )?${drop}=[^,]*`), '');
        break;
      }
      case 'date-header':
        headers['x-amz-date'] = pick(rnd, ['', 'yesterday', '20261301T000000Z', headers['x-amz-date']!.slice(0, 15), `${headers['x-amz-date']!.slice(0, 8)}T250000Z`, '19700101T000000Z', '29991231T235959Z']);
        break;
      case 'sha-header':
        headers['x-amz-content-sha256'] = pick(rnd, ['', 'unsigned-payload', 'STREAMING-NOPE', 'zz'.repeat(32), sha256hex('other')]);
        break;
      case 'host':
        headers.host = pick(rnd, ['example.com', `${host}:1`, '']);
        break;
      case 'duplicate':
        a = `${auth}, Signature=${sig}`;
        break;
    }
    headers.authorization = a;
    if (headers.authorization === auth && kind !== 'date-header' && kind !== 'sha-header' && kind !== 'host') headers.authorization = auth.replace(sig!, '0'.repeat(64));
    return { what: `auth:${kind}`, bytes: wire('PUT', path, headers, Buffer.from(`body ${i}`)), open: false };
  }

  function randomFrom(rnd: () => number, n: number): string {
    let s = '';
    for (let k = 0; k < n; k++) s += String.fromCharCode(32 + Math.floor(rnd() * 95));
    return s;
  }

  /** A presigned PUT with one query parameter made wrong, or a skewed, expired or future date. */
  async function badPresigned(rnd: () => number, i: number): Promise<Planned> {
    const path = `/${BUCKET}/presigned-${i}`;
    const kind = pick(rnd, ['signature', 'expires', 'date', 'credential', 'algorithm', 'expired', 'future', 'both', 'signed-headers']);
    const date = kind === 'expired' ? new Date(Date.now() - (2 + Math.floor(rnd() * 100)) * 3600_000) : kind === 'future' ? new Date(Date.now() + (1 + Math.floor(rnd() * 100)) * 3600_000) : new Date();
    const req = await signer.presign(new HttpRequest({ method: 'PUT', protocol: 'http:', hostname: '127.0.0.1', port, path, headers: { host } }), { expiresIn: 600, signingDate: date });
    const q = { ...(req.query as Record<string, string>) };
    let extra: Record<string, string> = {};
    switch (kind) {
      case 'signature':
        q['X-Amz-Signature'] = changeOne(rnd, q['X-Amz-Signature']!, 0, 64, '0123456789abcdef');
        break;
      case 'expires':
        q['X-Amz-Expires'] = pick(rnd, ['', '-1', '604801', '1e3', 'abc', '99999999999999999999', '0x10']);
        break;
      case 'date':
        q['X-Amz-Date'] = pick(rnd, ['', 'now', '20261301T000000Z', '2026-01-01T00:00:00Z', q['X-Amz-Date']!.slice(0, 10)]);
        break;
      case 'credential':
        q['X-Amz-Credential'] = pick(rnd, ['', id, `${id}/x`, q['X-Amz-Credential']!.replace('/s3/', '/sqs/'), q['X-Amz-Credential']!.replace(id, 'FRNOSUCHKEY000000000')]);
        break;
      case 'algorithm':
        q['X-Amz-Algorithm'] = pick(rnd, ['', 'AWS4-HMAC-SHA512', 'aws4-hmac-sha256']);
        break;
      case 'both':
        extra = { authorization: `AWS4-HMAC-SHA256 Credential=${id}/20260101/${REGION}/s3/aws4_request, SignedHeaders=host, Signature=${'0'.repeat(64)}` };
        break;
      case 'signed-headers':
        q['X-Amz-SignedHeaders'] = pick(rnd, ['', 'host;x-amz-meta-a', 'content-type;host']);
        break;
    }
    const search = Object.entries(q).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
    return { what: `presigned:${kind}`, bytes: wire('PUT', `${path}?${search}`, { host, ...extra }, Buffer.from(`body ${i}`)), open: false };
  }

  /** A validly signed aws-chunked PUT whose body is broken one way. */
  async function badChunked(rnd: () => number, i: number): Promise<Planned> {
    const path = `/${BUCKET}/chunked-${i}`;
    const mode = pick(rnd, ['STREAMING-UNSIGNED-PAYLOAD-TRAILER', 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD'] as const);
    const data = Buffer.from(randomFrom(rnd, 1 + Math.floor(rnd() * 3000)), 'latin1');
    const cut = Math.max(1, Math.floor(rnd() * data.length));
    const chunks = [data.subarray(0, cut), data.subarray(cut)].filter((c) => c.length > 0);
    const trailer = mode === 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
    const headers: Record<string, string> = { 'content-encoding': 'aws-chunked', 'x-amz-decoded-content-length': String(data.length) };
    if (trailer) headers['x-amz-trailer'] = 'x-amz-checksum-crc32';
    const kind = pick(rnd, ['size-garbage', 'size-off', 'truncated', 'flip', 'decoded-length', 'extra-after', ...(trailer ? ['no-trailer', 'wrong-trailer', 'other-trailer', 'trailer-name'] : ['chunk-signature', 'no-signature'])]);
    if (kind === 'decoded-length') headers['x-amz-decoded-content-length'] = pick(rnd, [String(data.length + 1), String(data.length - 1), '', '-1', 'x', '1e3']);
    const h = await sign('PUT', path, headers, mode);
    const chunkSig = trailer ? null : chunkSigner(h.authorization!, h['x-amz-date']!);
    const sizeLine = (c: Buffer) => (chunkSig ? `${c.length.toString(16)};chunk-signature=${chunkSig(c)}` : c.length.toString(16));
    const parts: string[] = chunks.map((c) => `${sizeLine(c)}\r\n${c.toString('latin1')}\r\n`);
    let final = chunkSig ? `${sizeLine(Buffer.alloc(0))}\r\n\r\n` : `0\r\nx-amz-checksum-crc32:${crc32Base64(data)}\r\n\r\n`;
    let open = false;
    switch (kind) {
      case 'size-garbage':
        parts[0] = parts[0]!.replace(/^[0-9a-f]+/, pick(rnd, ['zz', '-1', '', ' ', 'ffffffffffffffff', '0x10', '+1', '1 2']));
        break;
      case 'size-off': {
        const n = chunks[0]!.length + pick(rnd, [1, -1, 2, 100]);
        parts[0] = parts[0]!.replace(/^[0-9a-f]+/, Math.max(0, n).toString(16));
        if (n <= 0) parts[0] = parts[0]!.replace(/^[0-9a-f]+/, 'ff');
        break;
      }
      case 'chunk-signature':
        parts[0] = parts[0]!.replace(/chunk-signature=([0-9a-f]{64})/, (_, s: string) => `chunk-signature=${changeOne(rnd, s, 0, 64, '0123456789abcdef')}`);
        break;
      case 'no-signature':
        parts[0] = parts[0]!.replace(/;chunk-signature=[0-9a-f]{64}/, pick(rnd, ['', ';chunk-signature=', ';chunk-signature=xyz', ';sig=00']));
        break;
      case 'no-trailer':
        final = pick(rnd, ['0\r\n\r\n', '0\r\n', '0\r\nx-amz-checksum-crc32:\r\n\r\n']);
        break;
      case 'wrong-trailer':
        final = `0\r\nx-amz-checksum-crc32:${pick(rnd, ['AAAAAA==', '!!!!', 'AAAAAAAA', crc32Base64(Buffer.concat([data, Buffer.from('x')]))])}\r\n\r\n`;
        break;
      case 'other-trailer':
        final = `0\r\nx-amz-checksum-sha256:${createHash('sha256').update(data).digest('base64')}\r\n\r\n`;
        break;
      case 'trailer-name':
        final = `0\r\n${pick(rnd, ['x-amz-checksum-crc32 ', 'x-amz-checksum-crc', 'x-amz-meta-a', ':'])}:${crc32Base64(data)}\r\n\r\n`;
        break;
      case 'extra-after':
        final += pick(rnd, ['garbage', '0\r\n\r\n', '\r\n\r\n\r\n', '5\r\nhello\r\n']);
        break;
    }
    let body = Buffer.from(parts.join('') + final, 'latin1');
    if (kind === 'truncated') {
      // Cut anywhere before the last three bytes (the final empty line may be left out, legally).
      body = body.subarray(0, Math.floor(rnd() * (body.length - 3)));
      open = true;
    }
    if (kind === 'flip') {
      // One byte of the framing or the data changed (never by case alone: header names ignore it).
      const at = Math.floor(rnd() * (body.length - 3));
      const copy = Buffer.from(body);
      copy[at] = copy[at]! ^ pick(rnd, [0x01, 0x02, 0x04, 0x08, 0x10, 0x40, 0x80]);
      body = copy;
    }
    return { what: `chunked:${mode}:${kind}`, bytes: wire('PUT', path, h, body), open };
  }

  /** A signed payload whose x-amz-content-sha256 does not match, or a Content-MD5 that lies. */
  async function badPayloadHash(rnd: () => number, i: number): Promise<Planned> {
    const path = `/${BUCKET}/hash-${i}`;
    const body = Buffer.from(randomFrom(rnd, 1 + Math.floor(rnd() * 500)), 'latin1');
    const kind = pick(rnd, ['sha', 'md5', 'md5-garbage', 'crc-header']);
    const extra: Record<string, string> = {};
    if (kind === 'md5') extra['content-md5'] = createHash('md5').update(Buffer.concat([body, Buffer.from('!')])).digest('base64');
    if (kind === 'md5-garbage') extra['content-md5'] = pick(rnd, ['', 'abc', '====', 'A'.repeat(100)]);
    if (kind === 'crc-header') extra['x-amz-checksum-crc32'] = pick(rnd, ['AAAAAA==', 'zz', crc32Base64(Buffer.concat([body, Buffer.from('!')]))]);
    const sha = kind === 'sha' ? sha256hex(Buffer.concat([body, Buffer.from('!')])) : sha256hex(body);
    return { what: `hash:${kind}`, bytes: wire('PUT', path, await sign('PUT', path, extra, sha), body), open: false };
  }

  /**
   * Multipart requests with malformed or contradicting checksums, validly signed: a
   * CreateMultipartUpload declaring what S3 refuses, a part of another algorithm or a wrong value,
   * a completion with a bad object checksum, type or size, or a bad part list.
   */
  async function badMultipart(rnd: () => number, i: number): Promise<Planned> {
    const kind = pick(rnd, ['create', 'part', 'complete-header', 'complete-xml']);
    const complete = (h: Record<string, string>, body: Buffer) => signedQueryRequest('POST', `/${BUCKET}/${MP_KEY}`, { uploadId: mpUpload }, h, body);
    const etag = `"${createHash('md5').update(MP_PART).digest('hex')}"`;
    const crc = crc32Base64(MP_PART);
    const listing = (inner: string) => Buffer.from(`<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>${etag}</ETag>${inner}</Part></CompleteMultipartUpload>`);
    switch (kind) {
      case 'create': {
        const h = pick<Record<string, string>>(rnd, [
          { 'x-amz-checksum-algorithm': pick(rnd, ['MD4', 'crc33', 'sha-256', 'XXHASH3', randomFrom(rnd, 8)]) },
          { 'x-amz-checksum-algorithm': pick(rnd, ['SHA1', 'SHA256']), 'x-amz-checksum-type': 'FULL_OBJECT' },
          { 'x-amz-checksum-algorithm': 'CRC64NVME', 'x-amz-checksum-type': 'COMPOSITE' },
          { 'x-amz-checksum-type': pick(rnd, ['COMPOSITE', 'FULL_OBJECT']) },
          { 'x-amz-checksum-algorithm': 'CRC32', 'x-amz-checksum-type': pick(rnd, ['FULL', 'X', randomFrom(rnd, 5)]) },
        ]);
        return { what: `multipart:create:${JSON.stringify(h)}`, bytes: await signedQueryRequest('POST', `/${BUCKET}/mp-new-${i}`, { uploads: '' }, h, Buffer.alloc(0)), open: false };
      }
      case 'part': {
        const body = Buffer.from(randomFrom(rnd, 1 + Math.floor(rnd() * 200)), 'latin1');
        const h = pick<Record<string, string>>(rnd, [
          { 'x-amz-checksum-sha256': createHash('sha256').update(body).digest('base64') },
          { 'x-amz-checksum-crc32': pick(rnd, ['AAAAAA==', 'zz', crc]) },
          { 'x-amz-sdk-checksum-algorithm': pick(rnd, ['SHA1', 'CRC32C', 'CRC64NVME']) },
        ]);
        return { what: `multipart:part:${JSON.stringify(h)}`, bytes: await signedQueryRequest('PUT', `/${BUCKET}/${MP_KEY}`, { partNumber: '2', uploadId: mpUpload }, h, body), open: false };
      }
      case 'complete-header': {
        const h = pick<Record<string, string>>(rnd, [
          { 'x-amz-checksum-crc32': pick(rnd, ['bad', 'AAAAAA==-1', 'AAAAAA==', '-1', `${crc}-99999`, `${crc}x-1`]) },
          { 'x-amz-checksum-sha256': createHash('sha256').update(MP_PART).digest('base64') },
          { 'x-amz-checksum-type': pick(rnd, ['FULL_OBJECT', 'X', '']) },
          { 'x-amz-mp-object-size': pick(rnd, ['-1', 'abc', '5', '1e3', String(MP_PART.length + 1)]) },
          { 'x-amz-checksum-crc32': `${crc}-1`, 'x-amz-checksum-crc32c': 'AAAAAA==' },
        ]);
        return { what: `multipart:complete-header:${JSON.stringify(h)}`, bytes: await complete(h, listing(`<ChecksumCRC32>${crc}</ChecksumCRC32>`)), open: false };
      }
      default: {
        const body = pick(rnd, [
          listing(''),
          listing(`<ChecksumCRC32>${pick(rnd, ['AAAAAA==', '', 'zz', crc.toLowerCase() === crc ? 'AAAA' : crc.toLowerCase()])}</ChecksumCRC32>`),
          listing(`<ChecksumCRC32>${crc}</ChecksumCRC32><ChecksumCRC32>${crc}`),
          Buffer.from(`<CompleteMultipartUpload><Part><PartNumber>${pick(rnd, ['0', '-1', '10001', 'x', ''])}</PartNumber><ETag>${etag}</ETag></Part></CompleteMultipartUpload>`),
          Buffer.from(randomFrom(rnd, 1 + Math.floor(rnd() * 100)), 'latin1'),
        ]);
        return { what: 'multipart:complete-xml', bytes: await complete({}, body), open: false };
      }
    }
  }

  /** CreateBucket, PutBucketVersioning, PutBucketCors and PutBucketTagging with a malformed XML body, validly signed. */
  async function badXml(rnd: () => number, i: number): Promise<Planned> {
    const op = pick(rnd, ['create', 'versioning', 'cors', 'tagging'] as const);
    const create = op === 'create';
    const valid =
      op === 'create'
        ? `<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><LocationConstraint>${pick(rnd, ['eu-west-1', 'us-east-2'])}</LocationConstraint></CreateBucketConfiguration>`
        : op === 'versioning'
          ? '<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>'
          : op === 'cors'
            ? '<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><CORSRule><AllowedOrigin>https://a.example</AllowedOrigin><AllowedMethod>GET</AllowedMethod><ExposeHeader>ETag</ExposeHeader></CORSRule></CORSConfiguration>'
            : '<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet><Tag><Key>project</Key><Value>ETag</Value></Tag></TagSet></Tagging>';
    const kind = pick(rnd, ['truncated', 'ampersand', 'lt', 'root', 'nul', 'charref', 'doctype', 'garbage']);
    let xml: string;
    switch (kind) {
      case 'truncated':
        xml = valid.slice(0, 1 + Math.floor(rnd() * (valid.length - 2)));
        break;
      case 'ampersand':
      case 'lt': {
        const at = 1 + Math.floor(rnd() * (valid.length - 2));
        xml = valid.slice(0, at) + (kind === 'lt' ? '<' : '&') + valid.slice(at);
        break;
      }
      case 'root':
        xml = valid.replace(/(CreateBucketConfiguration|VersioningConfiguration|CORSConfiguration|Tagging)/g, pick(rnd, ['Nope', 'Wrong']));
        break;
      case 'nul':
        xml = valid.replace('><', '>\u0000<');
        break;
      case 'charref':
        xml = valid.replace(/>(Enabled|eu-west-1|us-east-2|ETag)</, `>$1${pick(rnd, ['&#x110000;', '&#0;', '&#xFFFE;', '&#99999999999;', '&nope;', '&#xD800;', '&#13;&#10;X: 1'])}<`);
        break;
      case 'doctype':
        xml = `<!DOCTYPE x [<!ENTITY a "${'a'.repeat(50)}">]>${valid}`;
        break;
      default:
        xml = randomFrom(rnd, 1 + Math.floor(rnd() * 200));
    }
    const body = Buffer.from(xml, 'latin1');
    const path = create ? `/fz-xml-${i}` : `/${BUCKET}`;
    const query = create ? undefined : { [op]: '' };
    const h = await sign('PUT', path, {}, sha256hex(body), { query });
    return { what: `xml:${op}:${kind}`, bytes: wire('PUT', create ? path : `${path}?${op}`, h, body), open: false };
  }

  async function state() {
    await fileRemovalsSettled(t);
    const db = t.server.core.ctx.db;
    const count = async (table: 'object_versions' | 'files' | 'buckets' | 'multipart_uploads') => Number((await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    const sizes = (await db.selectFrom('buckets').select(['id', 'size', 'cors', 'tags']).orderBy('id').execute()).map((b) => `${b.id}:${Number(b.size)}:${b.cors}:${b.tags}`);
    const parts = (await db.selectFrom('parts').select(['upload_id', 'part_number', 'checksum', 'client_checksum', 'size']).orderBy('upload_id').orderBy('part_number').execute()).map((p) => JSON.stringify(p));
    const uploads = (await db.selectFrom('multipart_uploads').select(['id', 'state', 'size']).orderBy('id').execute()).map((u) => JSON.stringify(u));
    return { versions: await count('object_versions'), files: await count('files'), buckets: await count('buckets'), uploads, parts, sizes, stored: await storedFiles(t) };
  }

  it('1,400 seeded malformed requests: no 5xx, S3 XML errors, the door serving afterwards, nothing stored', async () => {
    const rnd = prng(20260314);
    const gens = [badAuthorization, badPresigned, badChunked, badChunked, badChunked, badPayloadHash, badXml, badMultipart];
    const plan: Planned[] = [];
    for (let i = 0; plan.length < 1400; i++) plan.push(await pick(rnd, gens)(rnd, i));
    const before = await state();

    const statuses = new Map<number, number>();
    const codes = new Map<string, number>();
    let unanswered = 0;
    const check = (p: Planned, r: RawSocketResult) => {
      const what = `${p.what}: ${JSON.stringify(p.bytes.subarray(0, 600).toString('latin1'))} → ${r.status} ${r.body.slice(0, 300)}`;
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status === 0) {
        unanswered++;
        assert.ok(p.open || r.gaveUp, `no answer to a complete request: ${what}`);
        return;
      }
      assert.ok(r.status >= 400 && r.status < 500, what);
      assert.equal(r.headers['content-type'], 'application/xml', what);
      assert.ok(r.headers['x-amz-request-id'], what);
      const m = /^<\?xml version="1.0" encoding="UTF-8"\?><Error><Code>(\w+)<\/Code><Message>[^<]*<\/Message>/.exec(r.body);
      assert.ok(m, what);
      codes.set(m[1]!, (codes.get(m[1]!) ?? 0) + 1);
    };
    let next = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (next < plan.length) {
          const p = plan[next++]!;
          check(p, await rawExchange(port, p.bytes, { endAfterSend: p.open, waitMs: 3000 }));
        }
      }),
    );
    console.log(`# S3 fuzz: ${plan.length} requests, statuses ${JSON.stringify([...statuses].sort((a, b) => a[0] - b[0]))}, codes ${JSON.stringify([...codes].sort())}`);
    // The generators reached the signature checks, the framing and the XML, not one refusal only.
    for (const c of ['SignatureDoesNotMatch', 'AccessDenied', 'IncompleteBody', 'MalformedXML', 'BadDigest', 'AuthorizationHeaderMalformed', 'InvalidRequest', 'InvalidPart']) assert.ok((codes.get(c) ?? 0) > 0, `no ${c} among ${JSON.stringify([...codes])}`);
    assert.ok(unanswered < plan.length / 10, `${unanswered} requests got no answer`);

    // Nothing stored: rows, bucket sizes, buckets and the files on disk are as before.
    assert.deepEqual(await state(), before);
    // Alive and serving.
    const ok = await rawExchange(port, await signedRequest('PUT', `/${BUCKET}/after.txt`, {}, Buffer.from('still here')));
    assert.equal(ok.status, 200, ok.body);
    const got = await rawExchange(port, await signedRequest('GET', `/${BUCKET}/after.txt`, {}, Buffer.alloc(0)));
    assert.equal(got.body, 'still here');
  });
});
