// CORS on the S3 door: a bucket's CORS configuration through the AWS SDK (PutBucketCors,
// GetBucketCors, DeleteBucketCors), the AWS CLI, preflights and the headers of actual requests as S3
// evaluates the rules, the FILES_REST_CORS_ORIGINS default, and a real cross-origin page in headless
// Chromium that uploads with a presigned PUT and reads the answer (the browser enforces CORS, not us).
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import {
  CreateBucketCommand,
  DeleteBucketCorsCommand,
  GetBucketCorsCommand,
  GetObjectCommand,
  PutBucketCorsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import { matchCorsRule } from '../src/s3/cors.js';
import { startTestServer, type TestServer } from './support/server.js';
import { s3Code } from './support/s3-door.js';
import { startWebApp, type WebApp } from './support/web-app.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const AWS_CLI = '/usr/bin/aws';


async function startKeyed(env: Record<string, string> = {}) {
  const t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY, ...env });
  const k = await createAccessKey(t.server.core.ctx.db, requireServerKeys(t.config, null, { create: true }));
  const s3 = new S3Client({
    endpoint: t.s3Url,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: k.info.accessKeyId, secretAccessKey: k.secret },
  });
  return { t, s3, id: k.info.accessKeyId, secret: k.secret };
}

/** A preflight as a browser sends it. */
function preflight(url: string, origin: string | null, method: string | null, headers?: string) {
  const h: Record<string, string> = {};
  if (origin !== null) h.origin = origin;
  if (method !== null) h['access-control-request-method'] = method;
  if (headers !== undefined) h['access-control-request-headers'] = headers;
  return fetch(url, { method: 'OPTIONS', headers: h });
}

describe('S3 door: CORS', () => {
  let t: TestServer;
  let s3: S3Client;
  let id: string;
  let secret: string;

  before(async () => {
    ({ t, s3, id, secret } = await startKeyed());
  });
  after(async () => {
    s3?.destroy();
    await t?.close();
  });

  it('the rules are matched in order, origins with one wildcard, methods and asked headers', () => {
    const rules = [
      { allowedOrigins: ['*suffix'], allowedMethods: ['GET'], allowedHeaders: [], exposeHeaders: [] },
      { allowedOrigins: ['start*end'], allowedMethods: ['GET'], allowedHeaders: ['x-amz-*'], exposeHeaders: [] },
      { allowedOrigins: ['*'], allowedMethods: ['PUT'], allowedHeaders: ['Content-Type'], exposeHeaders: [] },
    ];
    assert.equal(matchCorsRule(rules, 'foo.suffix', 'GET'), rules[0]);
    assert.equal(matchCorsRule(rules, 'foo.suffix.get', 'GET'), null);
    assert.equal(matchCorsRule(rules, 'startend', 'GET'), rules[1]);
    assert.equal(matchCorsRule(rules, 'start12end', 'GET', ['x-amz-meta-a', 'x-amz-date']), rules[1]);
    assert.equal(matchCorsRule(rules, '0start12end', 'GET'), null);
    assert.equal(matchCorsRule(rules, 'start12end', 'GET', ['authorization']), null);
    assert.equal(matchCorsRule(rules, 'http://any', 'PUT', ['content-type']), rules[2]);
    assert.equal(matchCorsRule(rules, 'http://any', 'DELETE'), null);
  });

  it('PutBucketCors, GetBucketCors and DeleteBucketCors through the SDK; none set is NoSuchCORSConfiguration', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'cors-config' }));
    assert.deepEqual(await s3Code(s3.send(new GetBucketCorsCommand({ Bucket: 'cors-config' }))), { name: 'NoSuchCORSConfiguration', status: 404 });
    const CORSRules = [
      { ID: 'uploads', AllowedOrigins: ['https://app.example.org'], AllowedMethods: ['PUT', 'POST'], AllowedHeaders: ['*'], ExposeHeaders: ['ETag'], MaxAgeSeconds: 3000 },
      { AllowedOrigins: ['*'], AllowedMethods: ['GET', 'HEAD'] },
    ];
    await s3.send(new PutBucketCorsCommand({ Bucket: 'cors-config', CORSConfiguration: { CORSRules } }));
    const got = await s3.send(new GetBucketCorsCommand({ Bucket: 'cors-config' }));
    assert.deepEqual(got.CORSRules, [CORSRules[0], { ...CORSRules[1] }]);
    await s3.send(new DeleteBucketCorsCommand({ Bucket: 'cors-config' }));
    assert.equal((await s3Code(s3.send(new GetBucketCorsCommand({ Bucket: 'cors-config' })))).name, 'NoSuchCORSConfiguration');
  });

  it('a configuration S3 refuses is refused, and the one set before stays', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'cors-invalid' }));
    const keep = [{ AllowedOrigins: ['https://a.example'], AllowedMethods: ['GET'] }];
    await s3.send(new PutBucketCorsCommand({ Bucket: 'cors-invalid', CORSConfiguration: { CORSRules: keep } }));
    for (const rule of [
      { AllowedOrigins: ['https://a.example'], AllowedMethods: ['PATCH'] },
      { AllowedOrigins: ['https://*.*.example'], AllowedMethods: ['GET'] },
      { AllowedOrigins: ['https://a.example'], AllowedMethods: ['GET'], AllowedHeaders: ['x-*-*'] },
      // Answered in a header: a value no header can carry would break every answer to the bucket.
      { AllowedOrigins: ['https://a.example'], AllowedMethods: ['GET'], ExposeHeaders: ['ETag\r\nX-Evil: 1'] },
      { AllowedOrigins: ['https://a.example'], AllowedMethods: ['GET'], ExposeHeaders: ['Prix-€'] },
      { AllowedOrigins: ['https://a.example'], AllowedMethods: ['GET'], AllowedHeaders: ['bad header'] },
      { AllowedOrigins: ['https://a .example'], AllowedMethods: ['GET'] },
    ]) {
      assert.deepEqual(await s3Code(s3.send(new PutBucketCorsCommand({ Bucket: 'cors-invalid', CORSConfiguration: { CORSRules: [rule] } }))), { name: 'InvalidRequest', status: 400 });
    }
    const tooMany = Array.from({ length: 101 }, () => ({ AllowedOrigins: ['*'], AllowedMethods: ['GET'] }));
    assert.equal((await s3Code(s3.send(new PutBucketCorsCommand({ Bucket: 'cors-invalid', CORSConfiguration: { CORSRules: tooMany } })))).name, 'InvalidRequest');
    const got = await s3.send(new GetBucketCorsCommand({ Bucket: 'cors-invalid' }));
    assert.deepEqual(got.CORSRules, keep);
    // Malformed XML, signed by hand through the SDK's middleware-free path: a raw body the SDK would not build.
    const { SignatureV4 } = await import('@smithy/signature-v4');
    const { Sha256 } = await import('@smithy/core/checksum');
    const { HttpRequest } = await import('@smithy/core/protocols');
    const signer = new SignatureV4({ service: 's3', region: 'us-east-1', credentials: { accessKeyId: id, secretAccessKey: secret }, sha256: Sha256 });
    const url = new URL(`${t.s3Url}/cors-invalid?cors`);
    for (const body of ['<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><Bogus>1</Bogus></CORSRule></CORSConfiguration>', '<CORSConfiguration><CORSRule>', '<Other/>']) {
      const signed = await signer.sign(
        new HttpRequest({ method: 'PUT', protocol: 'http:', hostname: url.hostname, port: Number(url.port), path: '/cors-invalid', query: { cors: '' }, headers: { host: url.host, 'content-length': String(Buffer.byteLength(body)) }, body }),
      );
      const r = await fetch(`${t.s3Url}/cors-invalid?cors`, { method: 'PUT', headers: signed.headers as Record<string, string>, body });
      assert.equal(r.status, 400, body);
      assert.match(await r.text(), /<Code>MalformedXML<\/Code>/);
    }
    assert.deepEqual((await s3.send(new GetBucketCorsCommand({ Bucket: 'cors-invalid' }))).CORSRules, keep);
  });

  it('preflights: allowed as the first matching rule says, 403 otherwise, 400 without origin or method', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'cors-preflight' }));
    await s3.send(
      new PutBucketCorsCommand({
        Bucket: 'cors-preflight',
        CORSConfiguration: {
          CORSRules: [
            { AllowedMethods: ['PUT', 'DELETE'], AllowedOrigins: ['http://www.example1.com'], AllowedHeaders: ['x-amz-meta-*', 'content-type'], ExposeHeaders: ['ETag', 'x-amz-version-id'], MaxAgeSeconds: 600 },
            { AllowedMethods: ['GET'], AllowedOrigins: ['*'] },
          ],
        },
      }),
    );
    const url = `${t.s3Url}/cors-preflight/some/key.txt`;
    let r = await preflight(url, 'http://www.example1.com', 'PUT', 'Content-Type, X-Amz-Meta-Owner');
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), 'http://www.example1.com');
    assert.equal(r.headers.get('access-control-allow-methods'), 'PUT, DELETE');
    assert.equal(r.headers.get('access-control-allow-headers'), 'content-type, x-amz-meta-owner');
    assert.equal(r.headers.get('access-control-expose-headers'), 'ETag, x-amz-version-id');
    assert.equal(r.headers.get('access-control-max-age'), '600');
    assert.equal(r.headers.get('access-control-allow-credentials'), 'true');
    assert.match(r.headers.get('vary') ?? '', /Origin/);
    // A header the rule does not allow; a method no rule gives that origin; another origin.
    r = await preflight(url, 'http://www.example1.com', 'PUT', 'authorization');
    assert.equal(r.status, 403);
    assert.match(await r.text(), /<Code>AccessForbidden<\/Code>/);
    assert.equal(r.headers.get('access-control-allow-origin'), null);
    assert.equal((await preflight(url, 'http://www.example1.com', 'POST')).status, 403);
    assert.equal((await preflight(url, 'http://other.example', 'PUT')).status, 403);
    // Any origin may GET: `*`.
    r = await preflight(url, 'http://other.example', 'GET');
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), '*');
    assert.equal(r.headers.get('access-control-allow-methods'), 'GET');
    assert.equal(r.headers.get('access-control-allow-credentials'), null);
    // Not a preflight a browser would send.
    for (const [o, m] of [[null, 'GET'], ['http://www.example1.com', null], ['http://www.example1.com', 'PATCH']] as const) {
      r = await preflight(url, o, m);
      assert.equal(r.status, 400, `${o} ${m}`);
      assert.match(await r.text(), /<Code>BadRequest<\/Code>/);
    }
    // A bucket without a configuration (and no default), and a bucket that does not exist.
    await s3.send(new CreateBucketCommand({ Bucket: 'cors-none' }));
    assert.equal((await preflight(`${t.s3Url}/cors-none/k`, 'http://www.example1.com', 'GET')).status, 403);
    assert.equal((await preflight(`${t.s3Url}/cors-missing/k`, 'http://www.example1.com', 'GET')).status, 403);
  });

  it('actual requests from an allowed origin carry the headers, refusals included; others carry none', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'cors-actual' }));
    await s3.send(
      new PutBucketCorsCommand({
        Bucket: 'cors-actual',
        CORSConfiguration: { CORSRules: [{ AllowedMethods: ['GET', 'HEAD'], AllowedOrigins: ['https://*.example.org'], ExposeHeaders: ['ETag'] }] },
      }),
    );
    await s3.send(new PutObjectCommand({ Bucket: 'cors-actual', Key: 'a.txt', Body: 'hello' }));
    const signedGet = await getSignedUrl(s3, new GetObjectCommand({ Bucket: 'cors-actual', Key: 'a.txt' }), { expiresIn: 60 });
    let r = await fetch(signedGet, { headers: { origin: 'https://app.example.org' } });
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'hello');
    assert.equal(r.headers.get('access-control-allow-origin'), 'https://app.example.org');
    assert.equal(r.headers.get('access-control-allow-methods'), 'GET, HEAD');
    assert.equal(r.headers.get('access-control-expose-headers'), 'ETag');
    // An anonymous GET is refused (403), and the page can read why.
    r = await fetch(`${t.s3Url}/cors-actual/a.txt`, { headers: { origin: 'https://app.example.org' } });
    assert.equal(r.status, 403);
    assert.equal(r.headers.get('access-control-allow-origin'), 'https://app.example.org');
    assert.match(await r.text(), /<Code>AccessDenied<\/Code>/);
    // Another origin, and a method the rule does not give: no CORS headers.
    r = await fetch(signedGet, { headers: { origin: 'https://app.example.com' } });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), null);
    await r.arrayBuffer();
    r = await fetch(`${t.s3Url}/cors-actual/b.txt`, { method: 'PUT', headers: { origin: 'https://app.example.org' }, body: 'x' });
    assert.equal(r.status, 403);
    assert.equal(r.headers.get('access-control-allow-origin'), null);
    await r.arrayBuffer();
  });

  it('the AWS CLI sets and reads a configuration (put-bucket-cors / get-bucket-cors)', async (tt) => {
    if (!existsSync(AWS_CLI)) return tt.skip('the AWS CLI (Debian package awscli) is not installed');
    await s3.send(new CreateBucketCommand({ Bucket: 'cors-cli' }));
    const env = { ...process.env, AWS_ACCESS_KEY_ID: id, AWS_SECRET_ACCESS_KEY: secret, AWS_DEFAULT_REGION: 'us-east-1', AWS_CONFIG_FILE: '/dev/null', AWS_SHARED_CREDENTIALS_FILE: '/dev/null' };
    const aws = (...args: string[]) =>
      new Promise<string>((resolve, reject) =>
        execFile(AWS_CLI, ['--endpoint-url', t.s3Url, ...args], { env }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout))),
      );
    const config = { CORSRules: [{ AllowedOrigins: ['https://cli.example'], AllowedMethods: ['GET'], AllowedHeaders: ['*'] }] };
    await aws('s3api', 'put-bucket-cors', '--bucket', 'cors-cli', '--cors-configuration', JSON.stringify(config));
    assert.deepEqual(JSON.parse(await aws('s3api', 'get-bucket-cors', '--bucket', 'cors-cli')), config);
    await aws('s3api', 'delete-bucket-cors', '--bucket', 'cors-cli');
    await assert.rejects(aws('s3api', 'get-bucket-cors', '--bucket', 'cors-cli'), /NoSuchCORSConfiguration/);
  });
});

describe('S3 door: CORS from FILES_REST_CORS_ORIGINS for buckets without a configuration', () => {
  let t: TestServer;
  let s3: S3Client;
  before(async () => {
    ({ t, s3 } = await startKeyed({ FILES_REST_CORS_ORIGINS: 'https://app.example.org' }));
  });
  after(async () => {
    s3?.destroy();
    await t?.close();
  });

  it('the setting allows its origins every method and header; a bucket configuration replaces it', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'default-cors' }));
    let r = await preflight(`${t.s3Url}/default-cors/k`, 'https://app.example.org', 'PUT', 'authorization, x-amz-date, x-amz-content-sha256');
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('access-control-allow-origin'), 'https://app.example.org');
    assert.equal(r.headers.get('access-control-allow-headers'), 'authorization, x-amz-date, x-amz-content-sha256');
    assert.match(r.headers.get('access-control-expose-headers') ?? '', /ETag.*x-amz-version-id/);
    assert.equal(r.headers.get('access-control-allow-credentials'), null);
    assert.equal((await preflight(`${t.s3Url}/default-cors/k`, 'https://evil.example', 'PUT')).status, 403);
    await s3.send(new PutBucketCorsCommand({ Bucket: 'default-cors', CORSConfiguration: { CORSRules: [{ AllowedOrigins: ['https://other.example'], AllowedMethods: ['GET'] }] } }));
    assert.equal((await preflight(`${t.s3Url}/default-cors/k`, 'https://app.example.org', 'PUT')).status, 403);
    r = await preflight(`${t.s3Url}/default-cors/k`, 'https://other.example', 'GET');
    assert.equal(r.status, 200);
  });
});

describe('S3 door: a cross-origin page in headless Chromium', () => {
  let t: TestServer;
  let s3: S3Client;
  let app: WebApp;

  before(async () => {
    ({ t, s3 } = await startKeyed());
    app = await startWebApp();
  });
  after(async () => {
    await app?.close();
    s3?.destroy();
    await t?.close();
  });

  it('uploads with a presigned PUT and reads the ETag only once the bucket allows the page', async (tt) => {
    const context = app.context;
    if (!context) return tt.skip(app.skip ?? 'chromium did not start');
    const pageUrl = app.origin;
    await s3.send(new CreateBucketCommand({ Bucket: 'browser-cors' }));
    const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: 'browser-cors', Key: 'from-page.txt', ContentType: 'text/plain' }), { expiresIn: 300 });
    const tab = await context.newPage();
    try {
      await tab.goto(pageUrl);
      const upload = () =>
        tab.evaluate(async (url) => {
          try {
            const r = await fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'uploaded by a page' });
            return { status: r.status, etag: r.headers.get('etag') };
          } catch (e) {
            return { error: String(e) };
          }
        }, putUrl);
      // Without a configuration the browser refuses the preflight's answer: the upload never happens.
      const refused = await upload();
      assert.ok('error' in refused, JSON.stringify(refused));
      await assert.rejects(s3.send(new GetObjectCommand({ Bucket: 'browser-cors', Key: 'from-page.txt' })), { name: 'NoSuchKey' });
      await s3.send(
        new PutBucketCorsCommand({
          Bucket: 'browser-cors',
          CORSConfiguration: { CORSRules: [{ AllowedOrigins: [pageUrl], AllowedMethods: ['PUT', 'GET'], AllowedHeaders: ['content-type'], ExposeHeaders: ['ETag'] }] },
        }),
      );
      const done = await upload();
      assert.deepEqual(done, { status: 200, etag: '"' + (await import('node:crypto')).createHash('md5').update('uploaded by a page').digest('hex') + '"' });
      const got = await s3.send(new GetObjectCommand({ Bucket: 'browser-cors', Key: 'from-page.txt' }));
      assert.equal(await got.Body!.transformToString(), 'uploaded by a page');
      assert.equal(got.ContentType, 'text/plain');
    } finally {
      await tab.close();
    }
  });
});
