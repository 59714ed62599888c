// The S3 protocol primitives (src/s3/), unit-tested without a server: requests signed by the AWS
// SDK's own signer (through S3Client with a capturing request handler, @smithy/signature-v4 and the
// presigner) must verify, and any altered byte, wrong secret, stale or expired request must not;
// aws-chunked bodies encoded as the SDKs do must decode byte-identically, and every framing fault
// must end the stream with an S3 error; checksums must agree with the SDK's implementations.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '@smithy/core/checksum';
import { HttpRequest, HttpResponse, buildQueryString } from '@smithy/core/protocols';
import { Crc32, Crc32c, Crc64Nvme } from '@aws-sdk/checksums/crc';
import { S3Error, isS3Error, renderS3ErrorXml, xmlEscape } from '../src/s3/errors.js';
import { canonicalUri, formatLongDate, headersFromRaw, parseLongDate, parseSigV4, verifySigV4, type ParsedSigV4, type SigV4Input, type VerifiedSigV4 } from '../src/s3/sigv4.js';
import { signingKey, signingKeyCacheSize } from '../src/s3/signing-key.js';
import { HmacSha256Key } from '../src/util/hmac.js';
import { AwsChunkedDecoder, createAwsChunkedDecoder, type AwsChunkedOptions } from '../src/s3/chunked.js';
import {
  CHECKSUM_ALGORITHMS,
  checkContentMd5,
  checksumOf,
  createChecksumHasher,
  parseContentMd5,
  validateChecksumValue,
} from '../src/s3/checksums.js';

const AKID = 'AKIDEXAMPLE123';
const SECRET = 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY';
const REGION = 'eu-west-3';
const DATE = new Date('2026-11-24T10:00:00Z');
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/** A seeded PRNG (mulberry32), so that every random test is reproducible. */
function rng(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomBuffer(rand: () => number, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rand() * 256);
  return b;
}

function sha256hex(data: Uint8Array | string): string {
  return createHash('sha256').update(data).digest('hex');
}

function lowerHeaders(h: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));
}

/** The request as a server sees it: what the SDK's Node HTTP handler would put on the wire. */
function wire(request: HttpRequest): SigV4Input & { headers: Record<string, string> } {
  return {
    method: request.method,
    rawPath: request.path,
    rawQuery: buildQueryString(request.query ?? {}),
    headers: lowerHeaders(request.headers),
  };
}

function check(input: SigV4Input, secret = SECRET, now = new Date()): VerifiedSigV4 | S3Error | null {
  const parsed = parseSigV4(input);
  if (parsed === null || isS3Error(parsed)) return parsed;
  return verifySigV4(parsed, secret, now);
}

function assertAccepted(input: SigV4Input, now?: Date): VerifiedSigV4 {
  const r = check(input, SECRET, now);
  assert.ok(r !== null && !isS3Error(r), `refused: ${isS3Error(r) ? `${r.code} ${r.message} ${JSON.stringify(r.details)}` : r}`);
  return r;
}

function assertRefused(input: SigV4Input, code?: string, secret = SECRET, now?: Date): S3Error | null {
  const r = check(input, secret, now);
  assert.ok(r === null || isS3Error(r), `accepted: ${JSON.stringify(input)}`);
  if (code !== undefined) assert.equal(r?.code, code, r?.message);
  return r;
}

async function collect(body: unknown): Promise<Buffer> {
  if (body === undefined || body === null) return Buffer.alloc(0);
  if (typeof body === 'string') return Buffer.from(body);
  if (body instanceof Uint8Array) return Buffer.from(body);
  const parts: Buffer[] = [];
  for await (const c of body as AsyncIterable<Buffer | string>) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

interface Captured {
  request: HttpRequest;
  body: Buffer;
}

/** An S3Client whose requests are captured (with their bodies) instead of sent. */
function capturingClient(): { client: S3Client; captured: Captured[] } {
  const captured: Captured[] = [];
  const client = new S3Client({
    region: REGION,
    endpoint: 'http://127.0.0.1:9000',
    forcePathStyle: true,
    credentials: { accessKeyId: AKID, secretAccessKey: SECRET },
    maxAttempts: 1,
    requestHandler: {
      async handle(request: HttpRequest) {
        captured.push({ request, body: await collect(request.body) });
        return { response: new HttpResponse({ statusCode: 200, headers: {}, body: Readable.from([]) }) };
      },
      updateHttpClientConfig() {},
      httpHandlerConfigs: () => ({}),
    } as never,
  });
  return { client, captured };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- any S3 command
type AnyCommand = any;

async function capture(command: AnyCommand): Promise<Captured> {
  const { client, captured } = capturingClient();
  try {
    await client.send(command);
  } catch {
    // An empty response may not deserialise: only the request matters here.
  }
  assert.equal(captured.length, 1);
  return captured[0]!;
}

function signer(region = REGION, secret = SECRET): SignatureV4 {
  return new SignatureV4({ credentials: { accessKeyId: AKID, secretAccessKey: secret }, region, service: 's3', sha256: Sha256, uriEscapePath: false });
}

/** Signs a hand-made request with @smithy/signature-v4 as S3 clients do (no path double-encoding). */
async function signed(opts: {
  method?: string;
  path: string;
  query?: Record<string, string | string[] | null>;
  headers?: Record<string, string>;
  payload?: string;
  date?: Date;
  region?: string;
}): Promise<HttpRequest> {
  const request = new HttpRequest({
    method: opts.method ?? 'GET',
    protocol: 'https:',
    hostname: 'files.example.org',
    path: opts.path,
    query: (opts.query ?? {}) as Record<string, string>,
    headers: { host: 'files.example.org', 'x-amz-content-sha256': opts.payload ?? EMPTY_SHA256, ...opts.headers },
  });
  return (await signer(opts.region).sign(request, { signingDate: opts.date ?? DATE })) as HttpRequest;
}

/** Every single-character alteration of a string (each position, one different character). */
function* alterations(s: string): Generator<string> {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const replacement = c === 0x7e ? '!' : String.fromCharCode(c + 1 > 0x7e ? 0x21 : c + 1);
    yield s.slice(0, i) + replacement + s.slice(i + 1);
  }
}

describe('SigV4: header-signed requests from the AWS SDK', () => {
  const keys = [
    'plain.txt',
    'with space.txt',
    'ünïcødé/日本語 ✓.bin',
    'plus+sign',
    'eq=ual&amp',
    'til~de',
    'dir//double/slash',
    '/leading-slash',
    'trailing/',
    "bang!star*quote'(paren)",
    'percent%20literal',
    'question?hash#',
    'colon:semi;at@dollar$comma,',
  ];

  for (const key of keys) {
    it(`GetObject of ${JSON.stringify(key)} verifies`, async () => {
      const { request } = await capture(new GetObjectCommand({ Bucket: 'bucket', Key: key }));
      const auth = assertAccepted(wire(request));
      assert.equal(auth.accessKeyId, AKID);
      assert.equal(auth.region, REGION);
      assert.equal(auth.payload, 'sha256');
      assert.equal(auth.payloadSha256, EMPTY_SHA256);
    });
  }

  it('PutObject with a body verifies, and names the body hash the door must check', async () => {
    const data = Buffer.from('hello, world\n');
    const { request } = await capture(new PutObjectCommand({ Bucket: 'bucket', Key: 'a b/c+d', Body: data }));
    const auth = assertAccepted(wire(request));
    assert.equal(auth.payload, request.headers['x-amz-content-sha256'] === 'UNSIGNED-PAYLOAD' ? 'UNSIGNED-PAYLOAD' : 'sha256');
    if (auth.payload === 'sha256') assert.equal(auth.payloadSha256, sha256hex(data));
  });

  it('ListObjectsV2 with query parameters verifies', async () => {
    const { request } = await capture(
      new ListObjectsV2Command({ Bucket: 'bucket', Prefix: 'a b/+=~ü', Delimiter: '/', StartAfter: 'x&y=z', MaxKeys: 7 }),
    );
    assert.ok(Object.keys(request.query).length >= 4);
    assertAccepted(wire(request));
  });

  it('CreateMultipartUpload (?uploads, a parameter without a value) and UploadPart verify', async () => {
    const create = await capture(new CreateMultipartUploadCommand({ Bucket: 'bucket', Key: 'big file' }));
    assert.match(wire(create.request).rawQuery, /uploads/);
    assertAccepted(wire(create.request));
    const part = await capture(new UploadPartCommand({ Bucket: 'bucket', Key: 'big file', UploadId: 'u/p+i=d', PartNumber: 3, Body: Buffer.from('x') }));
    assertAccepted(wire(part.request));
  });

  it('a bare parameter on the wire (`?uploads`) verifies against a signature over `uploads=`', async () => {
    const r = await signed({ method: 'POST', path: '/bucket/key', query: { uploads: '' } });
    assertAccepted({ ...wire(r), rawQuery: 'uploads' }, DATE);
    assertAccepted({ ...wire(r), rawQuery: 'uploads=' }, DATE);
  });

  it('repeated query names and parameters with and without values verify', async () => {
    const r = await signed({ path: '/bucket', query: { tag: ['b', 'a', 'a b'], empty: '', 'sp ace': 'x y', 'k+=': 'v&=' } });
    assert.match(wire(r).rawQuery, /tag=b&tag=a/);
    assertAccepted(wire(r), DATE);
  });

  it('any region in the credential scope is accepted', async () => {
    for (const region of ['us-east-1', 'eu-central-1', 'auto', 'local-dev']) {
      const r = await signed({ path: '/bucket/key', region });
      assert.equal(assertAccepted(wire(r), DATE).region, region);
    }
  });

  it('a path sent with a different but equivalent escaping verifies (decoded, then encoded once)', async () => {
    const r = await signed({ path: '/bucket/a~b%20c' });
    assertAccepted({ ...wire(r), rawPath: '/bucket/a%7Eb%20c' }, DATE);
    assertAccepted({ ...wire(r), rawPath: '/bucket/a%7eb%20c' }, DATE);
  });

  it('a client that signs its own unescaped wire path is accepted (the as-sent form)', async () => {
    const r = await signed({ path: '/bucket/a:b,c' });
    assert.equal(canonicalUri('/bucket/a:b,c'), '/bucket/a%3Ab%2Cc');
    assertAccepted(wire(r), DATE);
  });

  it('the path is not double-encoded: a signature over a double-encoded path fails', async () => {
    const r = await signed({ path: '/bucket/a%2520b' });
    assertAccepted({ ...wire(r), rawPath: '/bucket/a%2520b' }, DATE);
    assertRefused({ ...wire(r), rawPath: '/bucket/a%20b' }, 'SignatureDoesNotMatch', SECRET, DATE);
  });

  it('repeated headers are joined with commas; blanks in values are collapsed', async () => {
    const r = await signed({ path: '/bucket/k', headers: { 'x-amz-meta-list': 'a,b', 'x-amz-meta-s': 'one two three' } });
    const input = wire(r);
    assertAccepted({ ...input, headers: { ...input.headers, 'x-amz-meta-list': ['a', ' b '], 'x-amz-meta-s': '  one   two \t three ' } }, DATE);
  });

  it('a header value that is not ASCII verifies whether its UTF-8 bytes or its latin1 bytes were sent (the signature covers its UTF-8)', async () => {
    // Node.js gives each received header byte as one character: UTF-8 "é" arrives as "Ã©", latin1 as "é".
    const r = await signed({ method: 'PUT', path: '/bucket/k', headers: { 'x-amz-meta-meta1': 'Hello World\u00e9' } });
    const input = wire(r);
    const sentUtf8 = Buffer.from('Hello World\u00e9', 'utf8').toString('latin1');
    assertAccepted({ ...input, headers: { ...input.headers, 'x-amz-meta-meta1': sentUtf8 } }, DATE);
    assertAccepted(input, DATE);
    // Other bytes than either form are still refused.
    assertRefused({ ...input, headers: { ...input.headers, 'x-amz-meta-meta1': 'Hello World\u00c3\u00aa' } }, 'SignatureDoesNotMatch', SECRET, DATE);
  });

  it('long dates: formatted as ISO 8601 basic, and parsed back, over many dates', () => {
    for (let i = 0; i < 2000; i++) {
      const d = new Date(Math.floor(Math.random() * 253402300799) * 1000);
      const text = d.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
      assert.equal(formatLongDate(d), text);
      assert.equal(parseLongDate(text)?.getTime(), d.getTime());
    }
    assert.equal(formatLongDate(new Date(Date.UTC(2026, 0, 5, 3, 4, 5))), '20260105T030405Z');
    assert.equal(parseLongDate('20260230T000000Z'), undefined);
    // The last date parsed is kept: a repeat, an invalid text after a valid one, and alternation all answer right.
    const a = '20261124T101112Z';
    const b = '20261124T101113Z';
    for (const text of [a, a, b, a, '20261124T101160Z', a, b, b]) {
      const parsed = parseLongDate(text);
      assert.equal(parsed?.getTime(), text.endsWith('60Z') ? undefined : Date.UTC(2026, 10, 24, 10, 11, Number(text.slice(13, 15))), text);
    }
  });

  it('the Date header stands in for x-amz-date', async () => {
    // The SDK always signs x-amz-date; a client using Date signs that instead (signed here by hand,
    // the HMAC by the SDK's string signer).
    const date = DATE.toUTCString();
    const canonical = `GET\n/bucket/k\n\ndate:${date}\nhost:files.example.org\nx-amz-content-sha256:${EMPTY_SHA256}\n\ndate;host;x-amz-content-sha256\n${EMPTY_SHA256}`;
    const scope = `20261124/${REGION}/s3/aws4_request`;
    const sts = `AWS4-HMAC-SHA256\n20261124T100000Z\n${scope}\n${sha256hex(canonical)}`;
    const signature = await signer().sign(sts, { signingDate: DATE });
    const input: SigV4Input = {
      method: 'GET',
      rawPath: '/bucket/k',
      rawQuery: '',
      headers: {
        host: 'files.example.org',
        date,
        'x-amz-content-sha256': EMPTY_SHA256,
        authorization: `AWS4-HMAC-SHA256 Credential=${AKID}/${scope}, SignedHeaders=date;host;x-amz-content-sha256, Signature=${signature}`,
      },
    };
    assertAccepted(input, DATE);
    assertRefused({ ...input, headers: { ...input.headers, date: new Date(DATE.getTime() + 1000).toUTCString() } }, 'SignatureDoesNotMatch', SECRET, DATE);
  });

  it('a wrong secret and a request more than 15 minutes off the clock are refused', async () => {
    const r = await signed({ path: '/bucket/k' });
    assertAccepted(wire(r), DATE);
    assertRefused(wire(r), 'SignatureDoesNotMatch', SECRET + 'x', DATE);
    assertRefused(wire(r), 'SignatureDoesNotMatch', SECRET.slice(1), DATE);
    assertAccepted(wire(r), new Date(DATE.getTime() + 14 * 60_000));
    assertAccepted(wire(r), new Date(DATE.getTime() - 14 * 60_000));
    const skewed = assertRefused(wire(r), 'RequestTimeTooSkewed', SECRET, new Date(DATE.getTime() + 16 * 60_000));
    assert.equal(skewed?.status, 403);
    assertRefused(wire(r), 'RequestTimeTooSkewed', SECRET, new Date(DATE.getTime() - 16 * 60_000));
  });

  it('a SignatureDoesNotMatch carries the string to sign and the canonical request, as S3 does', async () => {
    const r = await signed({ path: '/bucket/k' });
    const err = assertRefused(wire(r), 'SignatureDoesNotMatch', 'wrong', DATE)!;
    assert.match(err.details.StringToSign ?? '', /^AWS4-HMAC-SHA256\n20261124T100000Z\n20261124\/eu-west-3\/s3\/aws4_request\n[0-9a-f]{64}$/);
    assert.match(err.details.CanonicalRequest ?? '', /^GET\n\/bucket\/k\n\nhost:files.example.org\n/);
  });

  it('every single altered byte of path, query, signed headers or Authorization is refused', async () => {
    const { request } = await capture(new ListObjectsV2Command({ Bucket: 'bucket', Prefix: 'dir ü/+x', Delimiter: '/' }));
    const input = wire(request);
    assertAccepted(input);
    const now = new Date();
    let n = 0;
    for (const p of alterations(input.rawPath)) {
      assertRefused({ ...input, rawPath: p }, undefined, SECRET, now);
      n++;
    }
    for (const q of alterations(input.rawQuery)) {
      assertRefused({ ...input, rawQuery: q }, undefined, SECRET, now);
      n++;
    }
    for (const m of alterations(input.method)) assertRefused({ ...input, method: m }, undefined, SECRET, now);
    const headers = input.headers as Record<string, string>;
    const signedNames = /SignedHeaders=([^,]+)/.exec(headers.authorization!)![1]!.split(';');
    for (const name of [...signedNames, 'authorization']) {
      for (const v of alterations(headers[name]!)) {
        const r = check({ ...input, headers: { ...headers, [name]: v } }, SECRET, now);
        // The access key id is not in the string to sign: altered, it names another key, whose
        // secret the caller looks up (so it is refused there, not here).
        if (r !== null && !isS3Error(r)) assert.notEqual(r.accessKeyId, AKID, `${name}: ${v} accepted`);
        else assert.ok(r === null || isS3Error(r));
        n++;
      }
    }
    assert.ok(n > 200, `only ${n} alterations`);
  });

  it('an x-amz-* header that was not signed is refused (AccessDenied, HeadersNotSigned)', async () => {
    const r = await signed({ path: '/bucket/k' });
    const input = wire(r);
    const err = assertRefused({ ...input, headers: { ...input.headers, 'x-amz-meta-extra': '1' } }, 'AccessDenied', SECRET, DATE);
    assert.equal(err?.details.HeadersNotSigned, 'x-amz-meta-extra');
    // Unsigned non-amz headers are fine (proxies add them).
    assertAccepted({ ...input, headers: { ...input.headers, 'user-agent': 'curl', 'x-forwarded-for': '1.2.3.4' } }, DATE);
  });
});

describe('SigV4: the headers as the S3 door reads them, and the Authorization header\'s forms', () => {
  /** Node's rawHeaders for a captured request, names in the case a client may send them. */
  function rawOf(headers: Record<string, string>, extra: [string, string][] = []): string[] {
    const raw: string[] = [];
    for (const [k, v] of Object.entries(headers)) raw.push(k.replace(/(^|-)([a-z])/g, (_m, a: string, b: string) => a + b.toUpperCase()), v);
    for (const [k, v] of extra) raw.push(k, v);
    return raw;
  }

  it('headersFromRaw: lower-case names, repeated values kept in order', () => {
    const h = headersFromRaw(['Host', 'h', 'X-Amz-Meta-A', '1', 'x-amz-meta-a', '2', 'Content-Length', '5']);
    assert.deepEqual([...h.entries()], [['host', ['h']], ['x-amz-meta-a', ['1', '2']], ['content-length', ['5']]]);
    assert.equal(headersFromRaw([]).size, 0);
  });

  it('a request parses and verifies alike from the map and from an object of headers, a repeated signed header included', async () => {
    const { request } = await capture(new PutObjectCommand({ Bucket: 'bucket', Key: 'k', Body: 'hello', Metadata: { a: 'b' } }));
    const record = wire(request);
    const viaRecord = assertAccepted(record);
    const viaMap = assertAccepted({ ...record, headers: headersFromRaw(rawOf(record.headers)) });
    assert.deepEqual(viaMap, viaRecord);
    // A signed header sent twice is joined with "," in the canonical request, from either form.
    const twice = wire(await signed({ path: '/bucket/k', headers: { 'x-amz-meta-x': 'one,two' } }));
    const raw = rawOf(Object.fromEntries(Object.entries(twice.headers).filter(([k]) => k !== 'x-amz-meta-x')), [
      ['X-Amz-Meta-X', 'one'],
      ['x-amz-meta-x', 'two'],
    ]);
    assertAccepted({ ...twice, headers: headersFromRaw(raw) }, DATE);
  });

  it('the Authorization header in other valid forms (no space, several spaces, parts in another order, upper-case hex) verifies as the standard one', async () => {
    const input = wire(await signed({ path: '/bucket/k' }));
    const m = /^AWS4-HMAC-SHA256 Credential=(\S+), SignedHeaders=(\S+), Signature=(\S+)$/.exec(input.headers.authorization!);
    assert.ok(m, input.headers.authorization);
    const [, credential, signedHeaders, signature] = m;
    const expected = assertAccepted(input, DATE);
    for (const authorization of [
      `AWS4-HMAC-SHA256 Credential=${credential},SignedHeaders=${signedHeaders},Signature=${signature}`,
      `AWS4-HMAC-SHA256 Credential=${credential},  SignedHeaders=${signedHeaders} , Signature=${signature}`,
      `AWS4-HMAC-SHA256 Signature=${signature}, Credential=${credential}, SignedHeaders=${signedHeaders}`,
      `AWS4-HMAC-SHA256 Credential=${credential}, SignedHeaders=${signedHeaders}, Signature=${signature!.toUpperCase()}`,
    ]) {
      assert.deepEqual(assertAccepted({ ...input, headers: { ...input.headers, authorization } }, DATE), expected, authorization);
    }
  });
});

describe('SigV4: malformed and unsupported credentials', () => {
  async function base(): Promise<SigV4Input> {
    return wire(await signed({ path: '/bucket/k' }));
  }
  function withAuth(input: SigV4Input, authorization: string): SigV4Input {
    return { ...input, headers: { ...input.headers, authorization } };
  }
  const sig = 'a'.repeat(64);

  it('no credentials at all is anonymous (null)', () => {
    assert.equal(parseSigV4({ method: 'GET', rawPath: '/b/k', rawQuery: 'x=1', headers: { host: 'h' } }), null);
  });

  it('the Authorization header parts are checked one by one', async () => {
    const input = await base();
    const cases: Array<[string, string]> = [
      [`AWS4-HMAC-SHA256 Credential=${AKID}/20261124/eu-west-3/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date`, 'AuthorizationHeaderMalformed'],
      [`AWS4-HMAC-SHA256 Credential=${AKID}/20261124/eu-west-3/s3, SignedHeaders=host, Signature=${sig}`, 'AuthorizationHeaderMalformed'],
      [`AWS4-HMAC-SHA256 Credential=${AKID}/20261124/eu-west-3/ec2/aws4_request, SignedHeaders=host, Signature=${sig}`, 'AuthorizationHeaderMalformed'],
      [`AWS4-HMAC-SHA256 Credential=${AKID}/20261125/eu-west-3/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=${sig}`, 'AuthorizationHeaderMalformed'],
      [`AWS4-HMAC-SHA256 Credential=${AKID}/20261124/eu-west-3/s3/aws4_request, SignedHeaders=x-amz-date, Signature=${sig}`, 'AuthorizationHeaderMalformed'],
      [`AWS4-HMAC-SHA256 Credential=${AKID}/20261124/eu-west-3/s3/aws4_request, SignedHeaders=Host, Signature=${sig}`, 'AuthorizationHeaderMalformed'],
      [`AWS4-HMAC-SHA256 Credential=${AKID}/20261124/eu-west-3/s3/aws4_request, SignedHeaders=host, Signature=xyz`, 'AuthorizationHeaderMalformed'],
      [`AWS4-HMAC-SHA256 Credential=/20261124/eu-west-3/s3/aws4_request, SignedHeaders=host, Signature=${sig}`, 'AuthorizationHeaderMalformed'],
      [`AWS4-HMAC-SHA256 Foo=bar, Credential=${AKID}/20261124/eu-west-3/s3/aws4_request, SignedHeaders=host, Signature=${sig}`, 'AuthorizationHeaderMalformed'],
      [`AWS ${AKID}:c2lnbmF0dXJl`, 'InvalidRequest'],
      [`AWS4-ECDSA-P256-SHA256 Credential=${AKID}/20261124/s3/aws4_request, SignedHeaders=host, Signature=${sig}`, 'NotImplemented'],
      ['Bearer abc', 'InvalidArgument'],
    ];
    for (const [authorization, code] of cases) {
      const r = parseSigV4(withAuth(input, authorization));
      assert.ok(isS3Error(r), authorization);
      assert.equal(r.code, code, `${authorization}: ${r.message}`);
    }
  });

  it('missing or bad x-amz-content-sha256, a missing date, a session token are refused', async () => {
    const input = await base();
    const h = input.headers as Record<string, string>;
    const { ['x-amz-content-sha256']: _sha, ...noSha } = h;
    // Without a body, the missing header means the hash of no bytes (curl --aws-sigv4 before 8.x).
    const bodyless = parseSigV4({ ...input, headers: noSha });
    assert.ok(!isS3Error(bodyless) && bodyless !== null);
    assert.equal(bodyless.payload, 'sha256');
    assert.equal(bodyless.payloadHash, createHash('sha256').update('').digest('hex'));
    assert.equal((parseSigV4({ ...input, headers: { ...noSha, 'content-length': '0' } }) as ParsedSigV4).payloadHash, bodyless.payloadHash);
    // With one, it cannot be guessed: refused as S3 refuses it.
    for (const body of [{ 'content-length': '5' }, { 'transfer-encoding': 'chunked' }]) {
      const e = parseSigV4({ ...input, headers: { ...noSha, ...body } }) as S3Error;
      assert.equal(e.code, 'InvalidRequest');
      assert.match(e.message, /x-amz-content-sha256/);
    }
    assert.equal((parseSigV4({ ...input, headers: { ...h, 'x-amz-content-sha256': 'abc' } }) as S3Error).code, 'InvalidArgument');
    assert.equal(
      (parseSigV4({ ...input, headers: { ...h, 'x-amz-content-sha256': 'STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD' } }) as S3Error).code,
      'NotImplemented',
    );
    const { ['x-amz-date']: _date, ...noDate } = h;
    const e = parseSigV4({ ...input, headers: noDate }) as S3Error;
    assert.equal(e.code, 'AccessDenied');
    assert.match(e.message, /valid Date or x-amz-date/);
    assert.equal((parseSigV4({ ...input, headers: { ...h, 'x-amz-date': '20261124T250000Z' } }) as S3Error).code, 'AccessDenied');
    assert.equal((parseSigV4({ ...input, headers: { ...h, 'x-amz-security-token': 'tok' } }) as S3Error).code, 'InvalidToken');
  });

  it('both the header and the query mechanism at once is refused', async () => {
    const input = await base();
    const r = parseSigV4({ ...input, rawQuery: `X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=${sig}` }) as S3Error;
    assert.equal(r.code, 'InvalidArgument');
  });

  it('SigV2 query authentication is refused as unsupported', () => {
    const r = parseSigV4({ method: 'GET', rawPath: '/b/k', rawQuery: 'AWSAccessKeyId=AKID&Expires=1&Signature=abc', headers: { host: 'h' } }) as S3Error;
    assert.equal(r.code, 'InvalidRequest');
  });
});

describe('SigV4: presigned URLs', () => {
  async function presigned(command: AnyCommand, expiresIn = 60, signingDate = DATE): Promise<SigV4Input> {
    const { client } = capturingClient();
    const url = new URL(await getSignedUrl(client, command as never, { expiresIn, signingDate }));
    return { method: command instanceof PutObjectCommand ? 'PUT' : 'GET', rawPath: url.pathname, rawQuery: url.search.slice(1), headers: { host: url.host } };
  }

  for (const key of ['k', 'a b/ü+c=d~e', 'dir//x', "!*'()"]) {
    it(`a presigned GET of ${JSON.stringify(key)} verifies until it expires`, async () => {
      const input = await presigned(new GetObjectCommand({ Bucket: 'bucket', Key: key }), 60);
      const auth = assertAccepted(input, new Date(DATE.getTime() + 59_000));
      assert.equal(auth.payload, 'UNSIGNED-PAYLOAD');
      assertAccepted(input, new Date(DATE.getTime() + 60_000));
      const err = assertRefused(input, 'AccessDenied', SECRET, new Date(DATE.getTime() + 61_000));
      assert.equal(err?.message, 'Request has expired');
      assert.equal(err?.details['X-Amz-Expires'], '60');
    });
  }

  it('a presigned PUT verifies; a week-long one is accepted; a wrong secret is refused', async () => {
    const input = await presigned(new PutObjectCommand({ Bucket: 'bucket', Key: 'up load' }), 604800);
    assertAccepted(input, new Date(DATE.getTime() + 604000_000));
    assertRefused(input, 'SignatureDoesNotMatch', 'nope', DATE);
  });

  it('a presigned URL from the future (beyond the allowed skew) is not valid yet', async () => {
    const input = await presigned(new GetObjectCommand({ Bucket: 'bucket', Key: 'k' }), 3600);
    assertAccepted(input, new Date(DATE.getTime() - 14 * 60_000));
    assertRefused(input, 'AccessDenied', SECRET, new Date(DATE.getTime() - 16 * 60_000));
  });

  it('every single altered byte of a presigned URL is refused', async () => {
    const input = await presigned(new GetObjectCommand({ Bucket: 'bucket', Key: 'a b/c', ResponseContentType: 'text/plain' }), 300);
    const now = new Date(DATE.getTime() + 1000);
    assertAccepted(input, now);
    for (const p of alterations(input.rawPath)) assertRefused({ ...input, rawPath: p }, undefined, SECRET, now);
    for (const q of alterations(input.rawQuery)) assertRefused({ ...input, rawQuery: q }, undefined, SECRET, now);
    for (const h of alterations('127.0.0.1:9000')) assertRefused({ ...input, headers: { host: h } }, undefined, SECRET, now);
  });

  it('X-Amz-Expires out of 1..604800, missing parameters, a session token are refused', async () => {
    const input = await presigned(new GetObjectCommand({ Bucket: 'bucket', Key: 'k' }), 60);
    const q = new URLSearchParams(input.rawQuery);
    const variants: Array<[(p: URLSearchParams) => void, string]> = [
      [(p) => p.set('X-Amz-Expires', '0'), 'AuthorizationQueryParametersError'],
      [(p) => p.set('X-Amz-Expires', '604801'), 'AuthorizationQueryParametersError'],
      [(p) => p.set('X-Amz-Expires', '-5'), 'AuthorizationQueryParametersError'],
      [(p) => p.set('X-Amz-Expires', 'ten'), 'AuthorizationQueryParametersError'],
      [(p) => p.delete('X-Amz-Date'), 'AuthorizationQueryParametersError'],
      [(p) => p.delete('X-Amz-SignedHeaders'), 'AuthorizationQueryParametersError'],
      [(p) => p.delete('X-Amz-Algorithm'), 'AuthorizationQueryParametersError'],
      [(p) => p.set('X-Amz-Algorithm', 'AWS4-HMAC-SHA512'), 'AuthorizationQueryParametersError'],
      [(p) => p.set('X-Amz-Date', '2026-11-24T10:00:00Z'), 'AuthorizationQueryParametersError'],
      [(p) => p.set('X-Amz-Credential', `${AKID}/20261124/eu-west-3/sqs/aws4_request`), 'AuthorizationQueryParametersError'],
      [(p) => p.set('X-Amz-Security-Token', 'tok'), 'InvalidToken'],
    ];
    for (const [change, code] of variants) {
      const p = new URLSearchParams(q);
      change(p);
      const r = parseSigV4({ ...input, rawQuery: p.toString() });
      assert.ok(isS3Error(r), p.toString());
      assert.equal(r.code, code, `${p.toString()}: ${r.message}`);
    }
    const extra = parseSigV4({ ...input, headers: { ...input.headers, 'x-amz-acl': 'public-read' } }) as S3Error;
    assert.equal(extra.code, 'AccessDenied');
  });
});

describe('SigV4: as curl --aws-sigv4 signs before 8.x', () => {
  // curl 7.88 (Debian 12): no x-amz-content-sha256 header, the hash of no bytes in the canonical
  // request, and the query string exactly as given on the command line (not sorted, `versions` bare).
  function curlSigned(query: string, secret = SECRET): SigV4Input {
    const longDate = formatLongDate(DATE);
    const scope = `${longDate.slice(0, 8)}/us-east-1/s3/aws4_request`;
    const canonical = `GET\n/bucket\n${query}\nhost:h:1\nx-amz-date:${longDate}\n\nhost;x-amz-date\n${createHash('sha256').update('').digest('hex')}`;
    const sts = `AWS4-HMAC-SHA256\n${longDate}\n${scope}\n${createHash('sha256').update(canonical).digest('hex')}`;
    const signature = createHmac('sha256', signingKey(secret, longDate.slice(0, 8), 'us-east-1').bytes).update(sts).digest('hex');
    return {
      method: 'GET',
      rawPath: '/bucket',
      rawQuery: query,
      headers: { host: 'h:1', 'x-amz-date': longDate, authorization: `AWS4-HMAC-SHA256 Credential=${AKID}/${scope}, SignedHeaders=host;x-amz-date, Signature=${signature}` },
    };
  }

  it('a `+` in a query is a space (as the door reads it): signed as %20; a signature over %2B does not cover a sent `+`', () => {
    // curlSigned signs the canonical query it is given and sends the same text; resend it with `+`.
    const asSpace = curlSigned('list-type=2&prefix=a%20b');
    assertAccepted({ ...asSpace, rawQuery: 'list-type=2&prefix=a+b' }, DATE);
    const asPlus = curlSigned('list-type=2&prefix=a%2Bb');
    assertAccepted(asPlus, DATE);
    assertRefused({ ...asPlus, rawQuery: 'list-type=2&prefix=a+b' }, 'SignatureDoesNotMatch', SECRET, DATE);
  });

  it('a query signed as sent (unsorted, a bare name) verifies; the same signature over another query does not', () => {
    for (const q of ['list-type=2&delimiter=%2F', 'versions&prefix=small', 'prefix=a&list-type=2']) assertAccepted(curlSigned(q), DATE);
    const signed = curlSigned('list-type=2&prefix=a');
    assertRefused({ ...signed, rawQuery: 'list-type=2&prefix=b' }, 'SignatureDoesNotMatch', SECRET, DATE);
    assertRefused(curlSigned('list-type=2&delimiter=%2F', 'not-the-secret'), 'SignatureDoesNotMatch', SECRET, DATE);
  });
});

describe('SigV4: signing keys', () => {
  it('are derived as AWS does and cached per (secret, date, region), at most 64, least recently used first out', () => {
    const hmac = (k: Buffer | string, d: string) => createHmac('sha256', k).update(d).digest();
    const byHand = hmac(hmac(hmac(hmac(`AWS4${SECRET}`, '20261124'), 'us-east-1'), 's3'), 'aws4_request');
    const first = signingKey(SECRET, '20261124', 'us-east-1');
    assert.ok(first.bytes.equals(byHand));
    for (let i = 0; i < 100; i++) signingKey(SECRET, '20261124', `region-${i}`);
    assert.equal(signingKeyCacheSize(), 64);
    assert.ok(signingKey(SECRET, '20261124', 'us-east-1').bytes.equals(first.bytes));
    assert.ok(!signingKey(SECRET, '20261125', 'us-east-1').bytes.equals(first.bytes));
    assert.ok(!signingKey(`${SECRET}x`, '20261124', 'us-east-1').bytes.equals(first.bytes));
    // The previous call's key is answered first: alternating requests each get their own key.
    const other = hmac(hmac(hmac(hmac(`AWS4${SECRET}x`, '20261124'), 'eu-west-1'), 's3'), 'aws4_request');
    for (let i = 0; i < 4; i++) {
      assert.ok(signingKey(SECRET, '20261124', 'us-east-1').bytes.equals(byHand));
      assert.ok(signingKey(SECRET, '20261124', 'us-east-1').bytes.equals(byHand));
      assert.ok(signingKey(`${SECRET}x`, '20261124', 'eu-west-1').bytes.equals(other));
    }
  });
});

describe('SigV4: random garbage', () => {
  it('parseSigV4 and verifySigV4 never throw on random input (seeded)', () => {
    const rand = rng(42);
    const alphabet = 'AWS4-HMAC-SHA256 Credential=/aws4_request,;= SignedHeaders=hostx-amz-date Signature=0123456789abcdef%&?XZ\t';
    const pick = (n: number) => Array.from({ length: n }, () => alphabet[Math.floor(rand() * alphabet.length)]).join('');
    for (let i = 0; i < 3000; i++) {
      const input: SigV4Input = {
        method: pick(3),
        rawPath: `/${pick(Math.floor(rand() * 20))}`,
        rawQuery: rand() < 0.5 ? pick(Math.floor(rand() * 60)) : `X-Amz-Algorithm=AWS4-HMAC-SHA256&${pick(80)}`,
        headers: {
          host: pick(5),
          authorization: rand() < 0.5 ? `AWS4-HMAC-SHA256 ${pick(Math.floor(rand() * 120))}` : undefined,
          'x-amz-date': rand() < 0.5 ? '20261124T100000Z' : pick(16),
          'x-amz-content-sha256': rand() < 0.5 ? EMPTY_SHA256 : pick(10),
        },
      };
      const parsed = parseSigV4(input);
      if (parsed !== null && !isS3Error(parsed)) assert.ok(isS3Error(verifySigV4(parsed, SECRET, DATE)));
      // Random bytes, including invalid UTF-8 escapes and lone percent signs.
      const bytes = randomBuffer(rand, 40).toString('latin1');
      const p2 = parseSigV4({ method: 'GET', rawPath: `/%${bytes}%ff%zz`, rawQuery: `${bytes}&%E2%82&X-Amz-Credential=%`, headers: { host: 'h' } });
      assert.ok(p2 === null || isS3Error(p2));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// aws-chunked

/** Splits a body into random pieces (or single bytes) the way a socket might deliver it. */
function pieces(body: Buffer, rand: () => number, max = 70_000): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < body.length; ) {
    const n = Math.max(1, Math.floor(rand() * max));
    out.push(body.subarray(i, i + n));
    i += n;
  }
  return out;
}

interface Decoded {
  data?: Buffer;
  error?: unknown;
  trailers?: Record<string, string>;
}

async function decodeWith(decoder: AwsChunkedDecoder, parts: Buffer[]): Promise<Decoded> {
  const out: Buffer[] = [];
  try {
    await pipeline(
      Readable.from(parts),
      decoder,
      new Writable({
        write(c: Buffer, _e, cb) {
          out.push(c);
          cb();
        },
      }),
    );
    return { data: Buffer.concat(out), trailers: { ...decoder.trailers } };
  } catch (error) {
    return { error };
  }
}

async function decode(body: Buffer, options: AwsChunkedOptions, seed = 1, max?: number): Promise<Decoded> {
  return decodeWith(new AwsChunkedDecoder(options), pieces(body, rng(seed), max));
}

function assertS3Error(r: Decoded, code: string): void {
  assert.ok(r.error !== undefined, `no error (expected ${code})`);
  assert.ok(isS3Error(r.error), `not an S3Error: ${String(r.error)}`);
  assert.equal(r.error.code, code, r.error.message);
}

/** A chunked request signed with @smithy/signature-v4: its wire input and our verification of it. */
async function streamingRequest(mode: string, decodedLength: number, trailer?: string): Promise<{ input: SigV4Input; auth: VerifiedSigV4 }> {
  const headers: Record<string, string> = {
    'content-encoding': 'aws-chunked',
    'x-amz-decoded-content-length': String(decodedLength),
  };
  if (trailer) headers['x-amz-trailer'] = trailer;
  const r = await signed({ method: 'PUT', path: '/bucket/chunked object', payload: mode, headers });
  const input = wire(r);
  const auth = assertAccepted(input, DATE);
  assert.equal(auth.payload, mode);
  return { input, auth };
}

/**
 * Encodes a body as an SDK does for STREAMING-AWS4-HMAC-SHA256-PAYLOAD(-TRAILER), every signature
 * computed by @smithy/signature-v4's own string signer.
 */
async function encodeSigned(
  auth: VerifiedSigV4,
  data: Buffer,
  chunkSize: number,
  trailer?: { name: string; value: string },
): Promise<{ body: Buffer; signatures: string[] }> {
  const s = signer();
  const out: Buffer[] = [];
  const signatures: string[] = [];
  let previous = auth.seedSignature;
  const chunks: Buffer[] = [];
  for (let i = 0; i < data.length; i += chunkSize) chunks.push(data.subarray(i, i + chunkSize));
  chunks.push(Buffer.alloc(0));
  for (const chunk of chunks) {
    const sts = `AWS4-HMAC-SHA256-PAYLOAD\n${auth.longDate}\n${auth.scope}\n${previous}\n${EMPTY_SHA256}\n${sha256hex(chunk)}`;
    previous = await s.sign(sts, { signingDate: DATE });
    signatures.push(previous);
    out.push(Buffer.from(`${chunk.length.toString(16)};chunk-signature=${previous}\r\n`));
    if (chunk.length > 0) out.push(chunk, Buffer.from('\r\n'));
  }
  if (trailer) {
    const canonical = `${trailer.name}:${trailer.value}\n`;
    const sts = `AWS4-HMAC-SHA256-TRAILER\n${auth.longDate}\n${auth.scope}\n${previous}\n${sha256hex(canonical)}`;
    const trailerSig = await s.sign(sts, { signingDate: DATE });
    out.push(Buffer.from(`${trailer.name}:${trailer.value}\r\nx-amz-trailer-signature:${trailerSig}\r\n\r\n`));
  } else out.push(Buffer.from('\r\n'));
  return { body: Buffer.concat(out), signatures };
}

/** Encodes as the JS SDK does for STREAMING-UNSIGNED-PAYLOAD-TRAILER (getAwsChunkedEncodingStream). */
function encodeUnsigned(data: Buffer, chunkSize: number, trailer?: { name: string; value: string }): Buffer {
  const out: Buffer[] = [];
  for (let i = 0; i < data.length; i += chunkSize) {
    const c = data.subarray(i, i + chunkSize);
    out.push(Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n'));
  }
  out.push(Buffer.from('0\r\n'));
  if (trailer) out.push(Buffer.from(`${trailer.name}:${trailer.value}\r\n`));
  out.push(Buffer.from('\r\n'));
  return Buffer.concat(out);
}

describe('aws-chunked: the SDK\'s own unsigned-trailer encoding', () => {
  it('PutObject with a stream body: the captured request verifies and its body decodes byte-identically with its CRC32 trailer', async () => {
    const data = randomBytes(200_000);
    const { request, body } = await capture(
      new PutObjectCommand({ Bucket: 'bucket', Key: 'streamed', Body: Readable.from([data.subarray(0, 70_000), data.subarray(70_000)]), ContentLength: data.length }),
    );
    const input = wire(request);
    const auth = assertAccepted(input);
    assert.equal(auth.payload, 'STREAMING-UNSIGNED-PAYLOAD-TRAILER', `the SDK sent ${auth.payload}`);
    assert.equal(input.headers['x-amz-trailer'], 'x-amz-checksum-crc32');
    const decoder = createAwsChunkedDecoder(auth, input.headers);
    assert.ok(!isS3Error(decoder));
    const r = await decodeWith(decoder, pieces(body, rng(7), 9000));
    assert.equal(r.error, undefined);
    assert.ok(r.data!.equals(data));
    assert.equal(r.trailers!['x-amz-checksum-crc32'], await checksumOf('CRC32', data));
  });

  it('PutObject with CRC32C and CRC64NVME checksums names them in the trailer', async () => {
    for (const ChecksumAlgorithm of ['CRC32C', 'CRC64NVME'] as const) {
      const data = randomBytes(5000);
      const { request, body } = await capture(
        new PutObjectCommand({ Bucket: 'bucket', Key: 'k', Body: Readable.from([data]), ContentLength: data.length, ChecksumAlgorithm }),
      );
      const input = wire(request);
      const auth = assertAccepted(input);
      const decoder = createAwsChunkedDecoder(auth, input.headers);
      assert.ok(!isS3Error(decoder));
      const r = await decodeWith(decoder, [body]);
      assert.ok(r.data!.equals(data));
      assert.equal(r.trailers![`x-amz-checksum-${ChecksumAlgorithm.toLowerCase()}`], await checksumOf(ChecksumAlgorithm, data));
    }
  });
});

describe('aws-chunked: signed payloads', () => {
  const sizes = [0, 1, 8192, 65536, 65537, 300_000];
  for (const size of sizes) {
    it(`STREAMING-AWS4-HMAC-SHA256-PAYLOAD of ${size} bytes decodes byte-identically however it is split`, async () => {
      const data = randomBuffer(rng(size), size);
      const { input, auth } = await streamingRequest('STREAMING-AWS4-HMAC-SHA256-PAYLOAD', size);
      const { body } = await encodeSigned(auth, data, 65536);
      for (const max of [3, 100, 70_000, 1 << 20]) {
        if (max === 3 && size > 70_000) continue;
        const decoder = createAwsChunkedDecoder(auth, input.headers);
        assert.ok(!isS3Error(decoder));
        const r = await decodeWith(decoder, pieces(body, rng(max), max));
        assert.equal(r.error, undefined, String(r.error));
        assert.ok(r.data!.equals(data));
        assert.deepEqual(r.trailers, {});
      }
    });
  }

  it('STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER decodes and exposes the signed trailer', async () => {
    const data = randomBytes(150_000);
    const crc = await checksumOf('CRC32C', data);
    const { input, auth } = await streamingRequest('STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER', data.length, 'x-amz-checksum-crc32c');
    const { body } = await encodeSigned(auth, data, 65536, { name: 'x-amz-checksum-crc32c', value: crc });
    const decoder = createAwsChunkedDecoder(auth, input.headers);
    assert.ok(!isS3Error(decoder));
    const r = await decodeWith(decoder, pieces(body, rng(3), 5000));
    assert.equal(r.error, undefined, String(r.error));
    assert.ok(r.data!.equals(data));
    assert.deepEqual(r.trailers, { 'x-amz-checksum-crc32c': crc });
  });

  describe('framing errors end the stream with an S3 error', () => {
    const data = randomBuffer(rng(99), 100_000);
    async function setup(trailer = false) {
      const mode = trailer ? 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER' : 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
      const { auth } = await streamingRequest(mode, data.length, trailer ? 'x-amz-checksum-crc32' : undefined);
      const crc = await checksumOf('CRC32', data);
      const { body, signatures } = await encodeSigned(auth, data, 65536, trailer ? { name: 'x-amz-checksum-crc32', value: crc } : undefined);
      const options: AwsChunkedOptions = {
        mode,
        signing: auth,
        decodedContentLength: data.length,
        trailerNames: trailer ? ['x-amz-checksum-crc32'] : [],
      };
      return { auth, body, signatures, options, crc };
    }
    const replace = (body: Buffer, from: string, to: string) => Buffer.from(body.toString('latin1').replace(from, to), 'latin1');

    it('a bad hex size is InvalidRequest', async () => {
      const { body, options } = await setup();
      assertS3Error(await decode(replace(body, '10000;', 'zz000;'), options), 'InvalidRequest');
      assertS3Error(await decode(replace(body, '10000;', ';'), options), 'InvalidRequest');
      assertS3Error(await decode(replace(body, '10000;', ' 10000;'), options), 'InvalidRequest');
      assertS3Error(await decode(Buffer.concat([Buffer.from('1'.repeat(5000)), body]), options), 'InvalidRequest');
    });

    it('a size larger than allowed is InvalidArgument; larger than the decoded length is IncompleteBody', async () => {
      const { body, options } = await setup();
      assertS3Error(await decode(body, { ...options, maxChunkSize: 1000 }), 'InvalidArgument');
      assertS3Error(await decode(replace(body, '10000;', 'ffffffffffffffff;'), options), 'InvalidArgument');
      assertS3Error(await decode(body, { ...options, decodedContentLength: data.length - 1 }), 'IncompleteBody');
      assertS3Error(await decode(body, { ...options, decodedContentLength: data.length + 1 }), 'IncompleteBody');
    });

    it('a missing CRLF after chunk data is InvalidRequest', async () => {
      const { body, options } = await setup();
      const at = body.indexOf('\r\n'); // the end of the first size line
      const dataEnd = at + 2 + 65536;
      assert.equal(body.toString('latin1', dataEnd, dataEnd + 2), '\r\n');
      const broken = Buffer.concat([body.subarray(0, dataEnd), Buffer.from('\n\n'), body.subarray(dataEnd + 2)]);
      assertS3Error(await decode(broken, options, 5, 10), 'InvalidRequest');
      const missing = Buffer.concat([body.subarray(0, dataEnd), body.subarray(dataEnd + 2)]);
      assertS3Error(await decode(missing, options), 'InvalidRequest');
    });

    it('a truncated body (anywhere) is IncompleteBody', async () => {
      const { body, options } = await setup();
      for (const cut of [0, 5, 90, 1000, 65536, body.length - 120, body.length - 90]) {
        assertS3Error(await decode(body.subarray(0, cut), options), 'IncompleteBody');
      }
    });

    it('a wrong chunk signature, altered data or reordered chunks are SignatureDoesNotMatch', async () => {
      const { body, options, signatures } = await setup();
      const altered = Buffer.from(body);
      altered[500] = altered[500]! ^ 1;
      assertS3Error(await decode(altered, options), 'SignatureDoesNotMatch');
      assertS3Error(await decode(replace(body, signatures[1]!, 'f'.repeat(64)), options), 'SignatureDoesNotMatch');
      assertS3Error(await decode(replace(body, signatures[2]!, signatures[1]!), options), 'SignatureDoesNotMatch');
      assertS3Error(await decode(body, { ...options, signing: { ...options.signing!, seedSignature: '0'.repeat(64) } }), 'SignatureDoesNotMatch');
      assertS3Error(await decode(replace(body, `;chunk-signature=${signatures[0]!}`, ''), options), 'InvalidRequest');
    });

    it('trailing garbage after the end is InvalidRequest', async () => {
      const { body, options } = await setup();
      assertS3Error(await decode(Buffer.concat([body, Buffer.from('x')]), options), 'InvalidRequest');
      assertS3Error(await decode(Buffer.concat([body, body]), options), 'InvalidRequest');
    });

    it('trailer faults: missing, unannounced, empty, altered, unsigned', async () => {
      const { body, options, crc } = await setup(true);
      assert.deepEqual((await decode(body, options)).trailers, { 'x-amz-checksum-crc32': crc });
      // The checksum trailer missing (the final chunk followed by the end).
      const end = body.indexOf('x-amz-checksum-crc32:');
      const noTrailer = Buffer.concat([body.subarray(0, end), Buffer.from('\r\n')]);
      assertS3Error(await decode(noTrailer, options), 'InvalidRequest');
      assertS3Error(await decode(replace(body, 'x-amz-checksum-crc32:', 'x-amz-checksum-sha1:'), options), 'InvalidRequest');
      assertS3Error(await decode(replace(body, `x-amz-checksum-crc32:${crc}`, 'x-amz-checksum-crc32:'), options), 'InvalidRequest');
      assertS3Error(await decode(replace(body, `x-amz-checksum-crc32:${crc}`, 'x-amz-checksum-crc32:AAAAAA=='), options), 'SignatureDoesNotMatch');
      const sigAt = body.indexOf('x-amz-trailer-signature:');
      const unsignedTrailer = Buffer.concat([body.subarray(0, sigAt), Buffer.from('\r\n')]);
      assertS3Error(await decode(unsignedTrailer, options), 'SignatureDoesNotMatch');
      assertS3Error(await decode(replace(body, 'x-amz-checksum-crc32:', 'x-amz-checksum-crc32 '), options), 'InvalidRequest');
    });
  });
});

describe('aws-chunked: unsigned payload with trailer', () => {
  const options = (n: number): AwsChunkedOptions => ({
    mode: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
    decodedContentLength: n,
    trailerNames: ['x-amz-checksum-crc32'],
  });

  it('decodes byte-identically with small and large chunks, and exposes the trailer', async () => {
    const data = randomBytes(1_000_000);
    const crc = await checksumOf('CRC32', data);
    for (const chunk of [1000, 65536, 8 * 1024 * 1024]) {
      const r = await decode(encodeUnsigned(data, chunk, { name: 'x-amz-checksum-crc32', value: crc }), options(data.length), chunk);
      assert.equal(r.error, undefined, String(r.error));
      assert.ok(r.data!.equals(data));
      assert.deepEqual(r.trailers, { 'x-amz-checksum-crc32': crc });
    }
  });

  it('an empty body decodes', async () => {
    const crc = await checksumOf('CRC32', Buffer.alloc(0));
    const r = await decode(encodeUnsigned(Buffer.alloc(0), 10, { name: 'x-amz-checksum-crc32', value: crc }), options(0));
    assert.equal(r.data?.length, 0);
    assert.equal(r.trailers?.['x-amz-checksum-crc32'], crc);
  });

  it('the final empty line may be missing; anything else after the trailer may not', async () => {
    const data = Buffer.from('abc');
    const body = encodeUnsigned(data, 10, { name: 'x-amz-checksum-crc32', value: 'NSRBwg==' });
    const r = await decode(body.subarray(0, body.length - 2), options(3));
    assert.ok(r.data?.equals(data));
    assertS3Error(await decode(body.subarray(0, body.length - 1), options(3)), 'IncompleteBody');
    assertS3Error(await decode(Buffer.concat([body, Buffer.from('\r\n')]), options(3)), 'InvalidRequest');
  });

  it('framing errors: bad size, missing CRLF, truncation, length mismatch, trailer missing or unannounced', async () => {
    const data = randomBytes(3000);
    const trailer = { name: 'x-amz-checksum-crc32', value: await checksumOf('CRC32', data) };
    const body = encodeUnsigned(data, 1000, trailer);
    assertS3Error(await decode(Buffer.from(body.toString('latin1').replace('3e8\r\n', '3g8\r\n'), 'latin1'), options(3000)), 'InvalidRequest');
    assertS3Error(await decode(Buffer.from(body.toString('latin1').replace('3e8\r\n', '3e9\r\n'), 'latin1'), options(3000)), 'InvalidRequest');
    assertS3Error(await decode(body.subarray(0, 1500), options(3000)), 'IncompleteBody');
    assertS3Error(await decode(body, options(2999)), 'IncompleteBody');
    assertS3Error(await decode(encodeUnsigned(data, 1000), options(3000)), 'InvalidRequest');
    assertS3Error(await decode(body, { ...options(3000), trailerNames: ['x-amz-checksum-sha256'] }), 'InvalidRequest');
    assertS3Error(await decode(body, { ...options(3000), trailerNames: [] }), 'InvalidRequest');
  });

  it('createAwsChunkedDecoder refuses missing or bad x-amz-decoded-content-length and x-amz-trailer', () => {
    const auth = { payload: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER' as const, signingKey: new HmacSha256Key(Buffer.alloc(32)), longDate: '', scope: '', seedSignature: '' };
    assert.equal((createAwsChunkedDecoder(auth, { 'x-amz-trailer': 'x-amz-checksum-crc32' }) as S3Error).code, 'MissingContentLength');
    assert.equal((createAwsChunkedDecoder(auth, { 'x-amz-trailer': 'x-amz-checksum-crc32', 'x-amz-decoded-content-length': '-1' }) as S3Error).code, 'InvalidArgument');
    assert.equal((createAwsChunkedDecoder(auth, { 'x-amz-decoded-content-length': '5' }) as S3Error).code, 'InvalidRequest');
    assert.ok(createAwsChunkedDecoder(auth, { 'X-Amz-Trailer': 'x-amz-checksum-crc32', 'x-amz-decoded-content-length': '5' }) instanceof AwsChunkedDecoder);
    assert.equal((createAwsChunkedDecoder({ ...auth, payload: 'UNSIGNED-PAYLOAD' }, {}) as S3Error).code, 'InvalidRequest');
  });
});

describe('aws-chunked: random garbage', () => {
  it('random bytes and randomly mutated bodies end cleanly: an S3Error or (unsigned only) some data, never a throw or a hang', async () => {
    const rand = rng(2026);
    const { auth } = await streamingRequest('STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER', 20_000, 'x-amz-checksum-crc32');
    const data = randomBuffer(rand, 20_000);
    const crc = await checksumOf('CRC32', data);
    const signedBody = (await encodeSigned(auth, data, 8192, { name: 'x-amz-checksum-crc32', value: crc })).body;
    const unsignedBody = encodeUnsigned(data, 8192, { name: 'x-amz-checksum-crc32', value: crc });
    const signedOptions: AwsChunkedOptions = {
      mode: 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER',
      signing: auth,
      decodedContentLength: data.length,
      trailerNames: ['x-amz-checksum-crc32'],
    };
    const unsignedOptions: AwsChunkedOptions = { mode: 'STREAMING-UNSIGNED-PAYLOAD-TRAILER', decodedContentLength: data.length, trailerNames: ['x-amz-checksum-crc32'] };
    for (let i = 0; i < 300; i++) {
      // Pure garbage, sometimes starting like a valid size line.
      const garbage = Buffer.concat([Buffer.from(rand() < 0.5 ? '2000\r\n' : ''), randomBuffer(rand, Math.floor(rand() * 20_000))]);
      for (const options of [signedOptions, unsignedOptions]) {
        const r = await decode(garbage, options, i, 3000);
        assert.ok(isS3Error(r.error), `garbage ${i}: ${String(r.error)}`);
      }
      // A valid body with a few random bytes changed, inserted or removed.
      for (const [body, options] of [[signedBody, signedOptions], [unsignedBody, unsignedOptions]] as const) {
        const mutated = Buffer.from(body);
        const at = Math.floor(rand() * mutated.length);
        const kind = rand();
        let input: Buffer;
        if (kind < 0.4) {
          mutated[at] = (mutated[at]! + 1 + Math.floor(rand() * 255)) & 0xff;
          input = mutated;
        } else if (kind < 0.7) input = Buffer.concat([body.subarray(0, at), randomBuffer(rand, 1 + Math.floor(rand() * 4)), body.subarray(at)]);
        else input = Buffer.concat([body.subarray(0, at), body.subarray(at + 1 + Math.floor(rand() * 4))]);
        const r = await decode(input, options, i, 5000);
        if (options === signedOptions) assert.ok(isS3Error(r.error), `signed mutation ${i} at ${at}: ${String(r.error)}`);
        else assert.ok(r.error === undefined ? r.data!.length === data.length : isS3Error(r.error), `unsigned mutation ${i}: ${String(r.error)}`);
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Checksums and errors

describe('checksums', () => {
  it('known vectors of "123456789"', async () => {
    const d = Buffer.from('123456789');
    const hex = async (a: (typeof CHECKSUM_ALGORITHMS)[number]) => Buffer.from(await checksumOf(a, d), 'base64').toString('hex');
    assert.equal(await hex('CRC32'), 'cbf43926');
    assert.equal(await hex('CRC32C'), 'e3069283');
    assert.equal(await hex('CRC64NVME'), 'ae8b14860a799888');
    assert.equal(await hex('SHA1'), 'f7c3bc1d808e04732adf679965ccc34ca7ae3441');
    assert.equal(await hex('SHA256'), '15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225');
  });

  it('incremental CRCs agree with the AWS SDK\'s own implementations on random data split anywhere', async () => {
    const rand = rng(5);
    for (let i = 0; i < 20; i++) {
      const data = randomBuffer(rand, Math.floor(rand() * 100_000));
      const parts = pieces(data, rand, 10_000);
      for (const [alg, Impl] of [['CRC32', Crc32], ['CRC32C', Crc32c], ['CRC64NVME', Crc64Nvme]] as const) {
        const ours = await createChecksumHasher(alg);
        for (const p of parts) ours.update(p);
        const theirs = new Impl();
        theirs.update(data);
        assert.equal(ours.digest(), Buffer.from(await theirs.digest()).toString('base64'), `${alg} of ${data.length} bytes`);
      }
      for (const alg of ['SHA1', 'SHA256'] as const) {
        const ours = await createChecksumHasher(alg);
        for (const p of parts) ours.update(p);
        assert.equal(ours.digest(), createHash(alg === 'SHA1' ? 'sha1' : 'sha256').update(data).digest('base64'));
      }
    }
  });

  it('checksum values and Content-MD5 are checked for form, then for match', () => {
    assert.equal(validateChecksumValue('CRC32', 'y/Q5Jg=='), undefined);
    assert.equal(validateChecksumValue('CRC32', 'y/Q5Jg')?.code, 'InvalidRequest');
    assert.equal(validateChecksumValue('CRC64NVME', 'y/Q5Jg==')?.code, 'InvalidRequest');
    assert.equal(validateChecksumValue('SHA256', 'not base64!')?.code, 'InvalidRequest');
    const md5 = createHash('md5').update('x').digest();
    const parsed = parseContentMd5(md5.toString('base64'));
    assert.ok(Buffer.isBuffer(parsed));
    assert.equal(checkContentMd5(parsed, md5), undefined);
    assert.equal(checkContentMd5(parsed, createHash('md5').update('y').digest())?.code, 'BadDigest');
    assert.equal((parseContentMd5('abc') as S3Error).code, 'InvalidDigest');
    assert.equal((parseContentMd5(md5.toString('hex')) as S3Error).code, 'InvalidDigest');
    assert.equal((parseContentMd5(Buffer.alloc(15).toString('base64')) as S3Error).code, 'InvalidDigest');
  });
});

describe('S3 errors', () => {
  it('carry S3\'s code and status, and render as S3\'s XML document, escaped', () => {
    const e = new S3Error('SignatureDoesNotMatch', undefined, { StringToSign: 'a<b>&"c"', 'bad name': 'x' });
    assert.equal(e.status, 403);
    assert.equal(new S3Error('NotImplemented').status, 501);
    assert.equal(new S3Error('AuthorizationHeaderMalformed').status, 400);
    const xml = renderS3ErrorXml(e, { resource: "/b/k&'<\u0001>", requestId: 'r1' });
    assert.equal(
      xml,
      '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code>' +
        '<Message>The request signature we calculated does not match the signature you provided. Check your key and signing method.</Message>' +
        '<StringToSign>a&lt;b&gt;&amp;&quot;c&quot;</StringToSign>' +
        '<Resource>/b/k&amp;&apos;&lt;\uFFFD&gt;</Resource><RequestId>r1</RequestId></Error>',
    );
    assert.equal(xmlEscape('\uD800x\uDC00'), '\uFFFDx\uFFFD');
    assert.equal(xmlEscape('😀'), '😀');
  });
});
