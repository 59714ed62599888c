// SigV2 (HMAC-SHA1) on the S3 door, with requests signed here by the rules of AWS's SigV2 and
// botocore's HmacV1Auth: the header form (Date, or x-amz-date with the date position empty or
// holding the Date header as botocore sends it), presigned query strings (Expires), sub-resources
// and response overrides in the signed resource, Content-MD5 signed and checked, clock skew,
// expiry, scoped keys, and malformed credentials: always an S3 error in XML, nothing stored.
// Real clients (boto3's default presigned URLs, s3cmd's signurl and signature_v2) are in
// s3-clients.test.ts.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { createBucket, getLiveBucket } from '../src/domain/buckets.js';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import { startTestServer, type TestServer } from './support/server.js';

const SERVER_KEY = randomBytes(32).toString('base64');

interface Answer {
  status: number;
  body: string;
  headers: Headers;
}

describe('S3 door: SigV2', () => {
  let t: TestServer;
  let id: string;
  let secret: string;
  let scoped: { id: string; secret: string };
  let bucket: string;
  let otherBucket: string;

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const ctx = t.server.core.ctx;
    const keys = requireServerKeys(t.config, null, { create: true });
    const k = await createAccessKey(ctx.db, keys);
    id = k.info.accessKeyId;
    secret = k.secret;
    bucket = (await createBucket(ctx, { name: 'sigv2' })).id;
    otherBucket = (await createBucket(ctx, { name: 'sigv2-other' })).id;
    const s = await createAccessKey(ctx.db, keys, { bucket: otherBucket });
    scoped = { id: s.info.accessKeyId, secret: s.secret };
  });
  after(async () => {
    await t?.close();
  });

  const sign = (key: string, sts: string) => createHmac('sha1', key).update(sts, 'utf8').digest('base64');
  const amzHeaders = (h: Record<string, string>) =>
    Object.entries(h)
      .map(([k, v]) => [k.toLowerCase(), v.trim()] as const)
      .filter(([k]) => k.startsWith('x-amz-'))
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => `${k}:${v}\n`)
      .join('');

  async function send(method: string, target: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
    // Bytes, not a string: fetch would add a Content-Type the signature did not cover.
    const r = await fetch(`${t.s3Url}${target}`, { method, headers, body: body === undefined ? undefined : new Uint8Array(Buffer.from(body)), redirect: 'manual' });
    return { status: r.status, body: await r.text(), headers: r.headers };
  }

  /** A request signed in the Authorization header; `resource` is the signed resource (the path and signed sub-resources). */
  async function signed(
    method: string,
    target: string,
    opts: { headers?: Record<string, string>; body?: string; resource?: string; key?: [string, string]; datePosition?: (date: string) => string } = {},
  ): Promise<Answer> {
    const date = new Date().toUTCString();
    const headers: Record<string, string> = { date, ...opts.headers };
    const [keyId, keySecret] = opts.key ?? [id, secret];
    const position = opts.datePosition ? opts.datePosition(headers.date ?? '') : headers['x-amz-date'] !== undefined ? '' : headers.date!;
    const sts = `${method}\n${headers['content-md5'] ?? ''}\n${headers['content-type'] ?? ''}\n${position}\n${amzHeaders(headers)}${opts.resource ?? target.split('?')[0]}`;
    return send(method, target, { ...headers, authorization: `AWS ${keyId}:${sign(keySecret, sts)}` }, opts.body);
  }

  /** A presigned URL's target (`?AWSAccessKeyId=…&Expires=…&Signature=…` appended). */
  function presign(method: string, target: string, expires: number, resource = target.split('?')[0]!, key: [string, string] = [id, secret]): string {
    const sts = `${method}\n\n\n${expires}\n${resource}`;
    const sep = target.includes('?') ? '&' : '?';
    return `${target}${sep}AWSAccessKeyId=${encodeURIComponent(key[0])}&Expires=${expires}&Signature=${encodeURIComponent(sign(key[1], sts))}`;
  }

  const code = (a: Answer) => /<Code>([^<]+)<\/Code>/.exec(a.body)?.[1];

  it('header-signed PUT, GET, HEAD, DELETE: with Date, with x-amz-date and the date position empty, or holding Date as botocore signs it', async () => {
    const body = 'signed with SigV2';
    const md5 = createHash('md5').update(body).digest('base64');
    const put = await signed('PUT', '/sigv2/a%20b.txt', { headers: { 'content-md5': md5, 'content-type': 'text/plain', 'x-amz-meta-who': 'v2' }, body });
    assert.equal(put.status, 200, put.body);
    assert.equal(put.headers.get('etag'), `"${createHash('md5').update(body).digest('hex')}"`);
    const get = await signed('GET', '/sigv2/a%20b.txt');
    assert.equal(get.status, 200, get.body);
    assert.equal(get.body, body);
    assert.equal(get.headers.get('x-amz-meta-who'), 'v2');
    const amzDate = new Date().toUTCString();
    assert.equal((await signed('HEAD', '/sigv2/a%20b.txt', { headers: { 'x-amz-date': amzDate } })).status, 200);
    assert.equal((await signed('HEAD', '/sigv2/a%20b.txt', { headers: { 'x-amz-date': amzDate }, datePosition: (d) => d })).status, 200);
    // The bucket's own resource is /bucket/ whether the path is /bucket or /bucket/.
    const list = await signed('GET', '/sigv2?prefix=a', { resource: '/sigv2/' });
    assert.equal(list.status, 200, list.body);
    assert.match(list.body, /<Key>a b\.txt<\/Key>/);
    assert.equal((await signed('GET', '/sigv2?prefix=a', { resource: '/sigv2' })).status, 200);
    // Sub-resources are signed, other parameters are not.
    const tagged = await signed('PUT', '/sigv2/a%20b.txt?tagging', { body: '<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>', resource: '/sigv2/a%20b.txt?tagging' });
    assert.equal(tagged.status, 200, tagged.body);
    const unsignedSub = await signed('GET', '/sigv2/a%20b.txt?tagging');
    assert.equal(unsignedSub.status, 403);
    assert.equal(code(unsignedSub), 'SignatureDoesNotMatch');
    const del = await signed('DELETE', '/sigv2/a%20b.txt');
    assert.equal(del.status, 204, del.body);
    assert.equal(del.headers.get('x-amz-delete-marker'), 'true');
  });

  it('presigned: GET with a response override, PUT, expiry, an altered URL, a scoped key on another bucket', async () => {
    await signed('PUT', '/sigv2/shared.txt', { body: 'shared' });
    const soon = Math.floor(Date.now() / 1000) + 300;
    const override = 'response-content-disposition=attachment%3B%20filename%3D%22s.txt%22';
    const get = await send('GET', presign('GET', `/sigv2/shared.txt?${override}`, soon, '/sigv2/shared.txt?response-content-disposition=attachment; filename="s.txt"'));
    assert.equal(get.status, 200, get.body);
    assert.equal(get.body, 'shared');
    assert.equal(get.headers.get('content-disposition'), 'attachment; filename="s.txt"');
    // The override is signed: another one is refused.
    const swapped = presign('GET', `/sigv2/shared.txt?${override}`, soon, '/sigv2/shared.txt?response-content-disposition=attachment; filename="s.txt"').replace('s.txt', 't.txt');
    assert.equal(code(await send('GET', swapped)), 'SignatureDoesNotMatch');
    // A `+` in a value is a plus (percent-decoding as botocore's unquote).
    const typed = await send('GET', presign('GET', '/sigv2/shared.txt?response-content-type=application%2Fvnd.x%2Bjson', soon, '/sigv2/shared.txt?response-content-type=application/vnd.x+json'));
    assert.equal(typed.status, 200, typed.body);
    assert.equal(typed.headers.get('content-type'), 'application/vnd.x+json');
    const put = await send('PUT', presign('PUT', '/sigv2/via-url.txt', soon), {}, 'put through a SigV2 URL');
    assert.equal(put.status, 200, put.body);
    assert.equal((await signed('GET', '/sigv2/via-url.txt')).body, 'put through a SigV2 URL');
    const expired = await send('GET', presign('GET', '/sigv2/shared.txt', Math.floor(Date.now() / 1000) - 5));
    assert.equal(expired.status, 403);
    assert.equal(code(expired), 'AccessDenied');
    assert.match(expired.body, /Request has expired/);
    assert.equal(code(await send('GET', presign('GET', '/sigv2/shared.txt', soon).replace('shared.txt', 'via-url.txt'))), 'SignatureDoesNotMatch');
    const other = await send('PUT', presign('PUT', '/sigv2/scoped.txt', soon, undefined, [scoped.id, scoped.secret]), {}, 'x');
    assert.equal(other.status, 403);
    assert.equal(code(other), 'AccessDenied');
    assert.equal((await signed('HEAD', '/sigv2/scoped.txt')).status, 404);
    const inScope = await send('PUT', presign('PUT', '/sigv2-other/scoped.txt', soon, undefined, [scoped.id, scoped.secret]), {}, 'x');
    assert.equal(inScope.status, 200, inScope.body);
  });

  it('refusals: skew, a wrong secret or key, malformed credentials, two mechanisms, a session token, a body that is not its signed Content-MD5: S3 errors, nothing stored', async () => {
    const before = await getLiveBucket(t.server.core.ctx.db, bucket);
    const old = new Date(Date.now() - 20 * 60 * 1000).toUTCString();
    const cases: [string, Promise<Answer>, number, string][] = [
      ['skew', signed('PUT', '/sigv2/r1', { headers: { date: old }, body: 'x' }), 403, 'RequestTimeTooSkewed'],
      ['wrong secret', signed('PUT', '/sigv2/r2', { key: [id, 'wrong'], body: 'x' }), 403, 'SignatureDoesNotMatch'],
      ['unknown key', signed('PUT', '/sigv2/r3', { key: ['AKNOSUCHKEY0000000000', secret], body: 'x' }), 403, 'InvalidAccessKeyId'],
      ['no colon', send('PUT', '/sigv2/r4', { date: new Date().toUTCString(), authorization: 'AWS nocolon' }, 'x'), 400, 'InvalidArgument'],
      ['not base64', send('PUT', '/sigv2/r5', { date: new Date().toUTCString(), authorization: `AWS ${id}:%%%` }, 'x'), 403, 'AccessDenied'],
      ['no date', send('PUT', '/sigv2/r6', { authorization: `AWS ${id}:${sign(secret, 'x')}` }, 'x'), 403, 'AccessDenied'],
      ['two mechanisms', send('PUT', `${presign('PUT', '/sigv2/r7', Math.floor(Date.now() / 1000) + 60)}`, { date: new Date().toUTCString(), authorization: `AWS ${id}:${sign(secret, 'x')}` }, 'x'), 400, 'InvalidArgument'],
      ['query without Expires', send('PUT', `/sigv2/r8?AWSAccessKeyId=${id}&Signature=${encodeURIComponent(sign(secret, 'x'))}`, {}, 'x'), 403, 'AccessDenied'],
      ['Expires not a number', send('PUT', `/sigv2/r9?AWSAccessKeyId=${id}&Expires=soon&Signature=${encodeURIComponent(sign(secret, 'x'))}`, {}, 'x'), 403, 'AccessDenied'],
      ['a date before 1970', signed('PUT', '/sigv2/r13', { headers: { 'x-amz-date': 'Tue, 07 Jul 1950 21:53:04 GMT' }, body: 'x' }), 403, 'AccessDenied'],
      ['session token', signed('PUT', '/sigv2/r10', { headers: { 'x-amz-security-token': 'tok' }, body: 'x' }), 400, 'InvalidToken'],
      ['Content-MD5 of another body', signed('PUT', '/sigv2/r11', { headers: { 'content-md5': createHash('md5').update('y').digest('base64') }, body: 'x' }), 400, 'BadDigest'],
    ];
    for (const [what, p, status, want] of cases) {
      const a = await p;
      assert.equal(a.status, status, `${what}: ${a.body}`);
      assert.equal(code(a), want, what);
    }
    // An x-amz-* header added after signing is part of what SigV2 signs.
    const date = new Date().toUTCString();
    const sts = `PUT\n\n\n${date}\n/sigv2/r12`;
    const added = await send('PUT', '/sigv2/r12', { date, 'x-amz-meta-added': '1', authorization: `AWS ${id}:${sign(secret, sts)}` }, 'x');
    assert.equal(code(added), 'SignatureDoesNotMatch');
    for (let i = 1; i <= 13; i++) assert.equal((await signed('HEAD', `/sigv2/r${i}`)).status, 404, `r${i}`);
    assert.equal((await getLiveBucket(t.server.core.ctx.db, bucket)).size, before.size);
  });

  it('200 mangled SigV2 credentials: 4xx in XML every time, never a 5xx, and the door serves afterwards', async () => {
    let seed = 20261128;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
    const junk = ['', ':', '%', '%zz', '\u00ff', ' ', '+', '=', 'AWS', '\t', '%00', 'a'.repeat(300)];
    const mangle = (s: string) => {
      const at = Math.floor(rnd() * (s.length + 1));
      return pick(['insert', 'cut', 'replace'] as const) === 'cut' ? s.slice(0, at) : s.slice(0, at) + pick(junk) + s.slice(at + (rnd() < 0.5 ? 1 : 0));
    };
    for (let i = 0; i < 200; i++) {
      const date = new Date().toUTCString();
      const good = `AWS ${id}:${sign(secret, `GET\n\n\n${date}\n/sigv2/shared.txt`)}`;
      const expires = String(Math.floor(Date.now() / 1000) + 60);
      let a: Answer;
      if (rnd() < 0.5) {
        const headers: Record<string, string> = { date: rnd() < 0.2 ? mangle(date) : date, authorization: mangle(good) };
        a = await send('GET', '/sigv2/shared.txt', Object.fromEntries(Object.entries(headers).filter(([, v]) => /^[\t\x20-\x7e]*$/.test(v))));
      } else {
        const q = presign('GET', '/sigv2/shared.txt', Number(expires));
        a = await send('GET', q.replace(/(AWSAccessKeyId|Expires|Signature)=[^&]*/, (m) => mangle(m)).replace(/[^\x21-\x7e]/g, '%20'));
      }
      assert.ok(a.status < 500, `${i}: ${a.status} ${a.body}`);
      if (a.status >= 400) assert.match(a.body, /^<\?xml[^>]*><Error><Code>\w+<\/Code>/, `${i}`);
    }
    const ok = await signed('GET', '/sigv2/shared.txt');
    assert.equal(ok.status, 200);
  });
});

describe('S3 door: SigV2 turned off (FILES_REST_S3_SIGV2=0)', () => {
  let t: TestServer;
  let id: string;
  let secret: string;
  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY, FILES_REST_S3_SIGV2: '0' });
    const k = await createAccessKey(t.server.core.ctx.db, requireServerKeys(t.config, null, { create: true }));
    id = k.info.accessKeyId;
    secret = k.secret;
    await createBucket(t.server.core.ctx, { name: 'off' });
  });
  after(async () => {
    await t?.close();
  });

  it('header-signed and presigned SigV2 requests are InvalidRequest, naming AWS4-HMAC-SHA256; nothing stored', async () => {
    const date = new Date().toUTCString();
    const sig = createHmac('sha1', secret).update(`PUT\n\n\n${date}\n/off/k`).digest('base64');
    const header = await fetch(`${t.s3Url}/off/k`, { method: 'PUT', headers: { date, authorization: `AWS ${id}:${sig}` }, body: new Uint8Array(Buffer.from('x')) });
    assert.equal(header.status, 400);
    assert.match(await header.text(), /<Code>InvalidRequest<\/Code>.*AWS4-HMAC-SHA256/);
    const expires = Math.floor(Date.now() / 1000) + 60;
    const qsig = createHmac('sha1', secret).update(`PUT\n\n\n${expires}\n/off/k`).digest('base64');
    const query = await fetch(`${t.s3Url}/off/k?AWSAccessKeyId=${id}&Expires=${expires}&Signature=${encodeURIComponent(qsig)}`, { method: 'PUT', body: new Uint8Array(Buffer.from('x')) });
    assert.equal(query.status, 400);
    assert.match(await query.text(), /<Code>InvalidRequest<\/Code>/);
    const b = await t.server.core.ctx.db.selectFrom('object_versions').select('key').execute();
    assert.deepEqual(b, []);
  });
});
