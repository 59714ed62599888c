// CORS (FILES_REST_CORS_ORIGINS) and request rate limits (FILES_REST_RATE_LIMIT), both off by default.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './support/server.js';
import { put, req } from './support/http.js';
import { createToken } from '../src/auth/tokens.js';
import { loadConfig } from '../src/config.js';

const APP = 'http://app.example:3000';

describe('CORS', () => {
  let s: TestServer;
  let auth: Record<string, string>;
  let bucket: string;
  before(async () => {
    s = await startTestServer({ FILES_REST_CORS_ORIGINS: `${APP}, https://other.example`, FILES_REST_PERMISSION_FACTORY: 'token' });
    auth = { authorization: `Bearer ${(await createToken(s.server.core.ctx.db)).token}` };
    bucket = (await req(s.files, { method: 'POST', headers: auth })).json.id as string;
    await put(`${s.files}/${bucket}/f.txt`, 'hello', auth);
  });
  after(() => s.close());

  it('answers a preflight from an allowed origin without a credential', async () => {
    const r = await req(`${s.files}/${bucket}/f.txt`, {
      method: 'OPTIONS',
      headers: { origin: APP, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization, content-type' },
    });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('access-control-allow-origin'), APP);
    assert.match(r.headers.get('access-control-allow-methods') ?? '', /PUT/);
    assert.match(r.headers.get('access-control-allow-headers') ?? '', /authorization/i);
    assert.equal(r.headers.get('access-control-allow-credentials'), null);
    assert.equal(r.headers.get('access-control-max-age'), '600');
  });

  it('lets scripts of an allowed origin read downloads, their checksum headers and errors', async () => {
    const g = await req(`${s.files}/${bucket}/f.txt`, { headers: { ...auth, origin: APP, range: 'bytes=0-1' } });
    assert.equal(g.status, 206);
    assert.equal(g.headers.get('access-control-allow-origin'), APP);
    assert.match(g.headers.get('vary') ?? '', /Origin/i);
    const exposed = (g.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    for (const h of ['etag', 'content-range', 'content-disposition', 'content-md5', 'repr-digest']) assert.ok(exposed.includes(h), `exposes ${h}`);
    const denied = await req(`${s.files}/${bucket}`, { headers: { origin: APP } });
    assert.equal(denied.status, 401);
    assert.equal(denied.headers.get('access-control-allow-origin'), APP);
    assert.equal(denied.json.status, 401);
  });

  it('gives no CORS headers to other origins', async () => {
    const g = await req(`${s.files}/${bucket}/f.txt`, { headers: { ...auth, origin: 'http://evil.example' } });
    assert.equal(g.status, 200);
    assert.equal(g.headers.get('access-control-allow-origin'), null);
    const pre = await req(`${s.files}/${bucket}/f.txt`, { method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'GET' } });
    assert.equal(pre.headers.get('access-control-allow-origin'), null);
  });

  it('is off by default, and a malformed origin stops the start', async () => {
    const plain = await startTestServer();
    try {
      const b = (await req(plain.files, { method: 'POST' })).json.id as string;
      const g = await req(`${plain.files}/${b}`, { headers: { origin: APP } });
      assert.equal(g.status, 200);
      assert.equal(g.headers.get('access-control-allow-origin'), null);
      const pre = await req(`${plain.files}/${b}/k`, { method: 'OPTIONS', headers: { origin: APP, 'access-control-request-method': 'PUT' } });
      assert.equal(pre.status, 405);
      assert.equal(pre.headers.get('access-control-allow-origin'), null);
    } finally {
      await plain.close();
    }
    assert.throws(() => loadConfig({ FILES_REST_CORS_ORIGINS: 'app.example' }), /^ConfigError: FILES_REST_CORS_ORIGINS: not an origin/);
    assert.throws(() => loadConfig({ FILES_REST_CORS_ORIGINS: 'https://app.example/path' }), /FILES_REST_CORS_ORIGINS/);
    assert.deepEqual(loadConfig({ FILES_REST_CORS_ORIGINS: '*' }).corsOrigins, ['*']);
  });
});

describe('Rate limits', () => {
  let s: TestServer;
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
  before(async () => {
    s = await startTestServer({ FILES_REST_RATE_LIMIT: '5', FILES_REST_PERMISSION_FACTORY: 'token' });
  });
  after(() => s.close());

  it('each token gets FILES_REST_RATE_LIMIT requests a minute; then 429 in the usual JSON shape, with Retry-After', async () => {
    const a = bearer((await createToken(s.server.core.ctx.db)).token);
    const b = bearer((await createToken(s.server.core.ctx.db)).token);
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 6; i++) {
      last = await req(s.files, { method: 'POST', headers: a });
      statuses.push(last.status);
    }
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);
    assert.deepEqual(last!.json, { status: 429, message: last!.json.message });
    assert.match(last!.json.message, /^Too many requests; retry in \d+ (seconds?|minute)\.$/);
    assert.ok(Number(last!.headers.get('retry-after')) > 0);
    assert.equal(last!.headers.get('x-ratelimit-limit'), '5');
    assert.equal(last!.headers.get('x-ratelimit-remaining'), '0');
    // Another token has its own allowance.
    const other = await req(s.files, { method: 'POST', headers: b });
    assert.equal(other.status, 200);
    assert.equal(other.headers.get('x-ratelimit-remaining'), '4');
  });

  it('anonymous and bad-credential requests share their client address allowance; /healthz is not limited', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const headers: Record<string, string> = i % 2 ? { authorization: 'Bearer frt_wrong' } : {};
      statuses.push((await req(`${s.files}/00000000-0000-4000-8000-000000000000`, { headers })).status);
    }
    assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429]);
    for (let i = 0; i < 8; i++) assert.equal((await req(`${s.url}/healthz`)).status, 200);
    // A valid token from the same address is still served.
    const t = bearer((await createToken(s.server.core.ctx.db)).token);
    assert.equal((await req(s.files, { method: 'POST', headers: t })).status, 200);
  });

  it('behind a trusted proxy (FILES_REST_TRUST_PROXY), clients are told apart by X-Forwarded-For', async () => {
    const p = await startTestServer({ FILES_REST_RATE_LIMIT: '2', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_TRUST_PROXY: '127.0.0.1' });
    try {
      const from = (ip: string) => ({ 'x-forwarded-for': ip });
      const path = `${p.files}/00000000-0000-4000-8000-000000000000`;
      const one = [];
      for (let i = 0; i < 3; i++) one.push((await req(path, { headers: from('192.0.2.1') })).status);
      assert.deepEqual(one, [401, 401, 429]);
      assert.equal((await req(path, { headers: from('192.0.2.2') })).status, 401);
    } finally {
      await p.close();
    }
    assert.throws(() => loadConfig({ FILES_REST_TRUST_PROXY: '300.1.1.1' }), /^ConfigError: FILES_REST_TRUST_PROXY/);
    assert.throws(() => loadConfig({ FILES_REST_RATE_LIMIT: '0' }), /^ConfigError: FILES_REST_RATE_LIMIT/);
  });

  it('is off by default: no limit and no rate-limit headers', async () => {
    const plain = await startTestServer();
    try {
      for (let i = 0; i < 12; i++) {
        const r = await req(plain.files, { method: 'POST' });
        assert.equal(r.status, 200);
        assert.equal(r.headers.get('x-ratelimit-limit'), null);
      }
    } finally {
      await plain.close();
    }
  });
});
