// The browser door, part 1 (issue 16): signed URLs (POST ?sign, the admin CLI, the SDK), publicly
// readable buckets (both doors), ?access_token= under the token factory, and GET /files.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './support/server.js';
import { startEmbedded } from './support/embedded.js';
import { put, req, type Res } from './support/http.js';
import { runCli } from './support/process.js';
import { createToken } from '../src/auth/tokens.js';
import { signGrant } from '../src/auth/signed-urls.js';
import type { Action } from '../src/auth/actions.js';
import { FilesClient } from '../src/client/index.js';

const K1 = Buffer.alloc(32, 1).toString('base64');
const K2 = Buffer.alloc(32, 2).toString('base64');

function refused(r: Res, status: number, message: RegExp): void {
  assert.equal(r.status, status, r.text);
  assert.equal(r.json.status, status);
  assert.match(r.json.message, message);
}

/** The URL with one query parameter set to another value (or removed when `value` is null). */
function withParam(url: string, name: string, value: string | null): string {
  const u = new URL(url);
  if (value === null) u.searchParams.delete(name);
  else u.searchParams.set(name, value);
  return u.toString();
}

describe('Signed URLs, public buckets, ?access_token=, GET /files (token factory)', () => {
  let s: TestServer;
  let admin: string;
  let bucket: string;
  let oldVersion: string;
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
  const token = async (opts: { bucket?: string | null; actions?: Action[] } = {}) => (await createToken(s.server.core.ctx.db, opts)).token;

  async function sign(key: string, query: string, t = admin): Promise<Res> {
    return req(`${s.files}/${bucket}/${key}?sign&${query}`, { method: 'POST', headers: bearer(t) });
  }

  before(async () => {
    s = await startTestServer({ FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: K1, FILES_REST_S3_PORT: 'auto', FILES_REST_SIGNED_URL_MAX_EXPIRES: '86400' });
    admin = await token();
    bucket = (await req(s.files, { method: 'POST', headers: bearer(admin) })).json.id as string;
    oldVersion = (await put(`${s.files}/${bucket}/a.txt`, 'old', bearer(admin))).json.version_id as string;
    assert.equal((await put(`${s.files}/${bucket}/a.txt`, 'new', bearer(admin))).status, 200);
    assert.equal((await put(`${s.files}/${bucket}/page.html`, '<script>alert(1)</script>', { ...bearer(admin), 'content-type': 'text/html' })).status, 200);
  });
  after(() => s.close());

  it('a download URL serves the head without a credential, HEAD too, with the headers of any download', async () => {
    const signed = await sign('page.html', 'expiresIn=600');
    assert.equal(signed.status, 200, signed.text);
    assert.equal(signed.json.method, 'GET');
    assert.equal(signed.json.single_use, false);
    assert.ok(Date.parse(signed.json.expires) > Date.now());
    const anon = await req(signed.json.url);
    assert.equal(anon.status, 200, anon.text);
    assert.equal(anon.text, '<script>alert(1)</script>');
    const authed = await req(`${s.files}/${bucket}/page.html`, { headers: bearer(admin) });
    for (const h of ['content-type', 'content-disposition', 'x-content-type-options', 'content-security-policy', 'etag', 'content-length']) {
      assert.equal(anon.headers.get(h), authed.headers.get(h), h);
    }
    assert.doesNotMatch(anon.headers.get('content-type') ?? '', /html/);
    assert.equal((await req(signed.json.url, { method: 'HEAD' })).status, 200);
  });

  it('a download URL of a version serves that version; the version cannot be taken off or changed', async () => {
    const signed = await sign('a.txt', `versionId=${oldVersion}`);
    assert.equal(signed.status, 200, signed.text);
    const r = await req(signed.json.url);
    assert.equal(r.text, 'old');
    refused(await req(withParam(signed.json.url, 'versionId', null)), 403, /not valid/);
    const head = await sign('a.txt', '');
    refused(await req(withParam(head.json.url, 'versionId', oldVersion)), 403, /not valid/);
  });

  it('tampering with the path, the expiry, the signature or the method is refused with 403 and a JSON message', async () => {
    const { url } = (await sign('a.txt', 'expiresIn=600')).json as { url: string };
    refused(await req(url.replace('/a.txt?', '/page.html?')), 403, /signed URL is not valid/);
    refused(await req(url.replace(bucket, (await req(s.files, { method: 'POST', headers: bearer(admin) })).json.id)), 403, /not valid/);
    const expires = new URL(url).searchParams.get('expires')!;
    refused(await req(withParam(url, 'expires', String(Number(expires) + 1))), 403, /not valid/);
    const sig = new URL(url).searchParams.get('signature')!;
    refused(await req(withParam(url, 'signature', (sig[0] === 'A' ? 'B' : 'A') + sig.slice(1))), 403, /not valid/);
    refused(await req(withParam(url, 'signature', 'short')), 403, /not valid/);
    // The wrong method: a download URL does not upload or delete.
    refused(await req(url, { method: 'PUT', body: 'x' }), 403, /not valid/);
    refused(await req(url, { method: 'DELETE' }), 403, /not valid/);
    assert.equal((await req(`${s.files}/${bucket}/a.txt`, { headers: bearer(admin) })).text, 'new');
  });

  it('an expired URL is refused with 403; a validity above the maximum is not handed out', async () => {
    const expires = Math.floor(Date.now() / 1000) - 10;
    const grant = { method: 'GET' as const, bucketId: bucket, key: 'a.txt', versionId: null, expires, nonce: null };
    const { requireServerKeys } = await import('../src/auth/server-key.js');
    const signature = signGrant(requireServerKeys(s.config, null), grant);
    refused(await req(`${s.files}/${bucket}/a.txt?expires=${expires}&signature=${signature}`), 403, /has expired/);
    // The same grant a minute ahead is genuine: the refusal above is the expiry's.
    const later = { ...grant, expires: expires + 70 };
    assert.equal((await req(`${s.files}/${bucket}/a.txt?expires=${later.expires}&signature=${signGrant(requireServerKeys(s.config, null), later)}`)).status, 200);
    const r = await sign('a.txt', 'expiresIn=86401');
    assert.equal(r.status, 422, r.text);
    assert.match(JSON.stringify(r.json.errors), /at most 86400/);
  });

  it('a token without the action cannot sign for it', async () => {
    const lister = await token({ bucket, actions: ['bucket-read'] });
    refused(await sign('a.txt', '', lister), 403, /object-read/);
    const reader = await token({ bucket, actions: ['object-read'] });
    assert.equal((await sign('a.txt', '', reader)).status, 200);
    refused(await sign('a.txt', `versionId=${oldVersion}`, reader), 403, /object-read-version/);
    refused(await sign('a.txt', 'action=upload', reader), 403, /bucket-update/);
    const elsewhere = await token({ bucket: (await req(s.files, { method: 'POST', headers: bearer(admin) })).json.id, actions: ['object-read'] });
    assert.equal((await sign('a.txt', '', elsewhere)).status, 404);
    assert.equal((await req(`${s.files}/${bucket}/a.txt?sign`, { method: 'POST' })).status, 401);
  });

  it('an upload URL uploads exactly once; it does not reach another operation', async () => {
    const signed = await sign('up.bin', 'action=upload');
    assert.equal(signed.status, 200, signed.text);
    assert.equal(signed.json.method, 'PUT');
    assert.equal(signed.json.single_use, true);
    refused(await req(withParam(signed.json.url, 'uploadId', '00000000-0000-4000-8000-000000000000'), { method: 'PUT', body: 'x' }), 403, /not valid/);
    refused(await req(signed.json.url), 403, /not valid/);
    const first = await put(signed.json.url, 'uploaded');
    assert.equal(first.status, 200, first.text);
    refused(await put(signed.json.url, 'again'), 403, /already been used/);
    assert.equal((await req(`${s.files}/${bucket}/up.bin`, { headers: bearer(admin) })).text, 'uploaded');
  });

  it('URLs signed with a key dropped from FILES_REST_SERVER_KEY_PREVIOUS stop working (revoked by rotation)', async () => {
    const { url } = (await sign('a.txt', '')).json as { url: string };
    const path = url.slice(s.url.length);
    const shared = { DATABASE_URL: s.databaseUrl, FILES_REST_DATA_DIR: s.env.FILES_REST_DATA_DIR!, FILES_REST_PERMISSION_FACTORY: 'token' };
    const rotated = await startTestServer({ ...shared, FILES_REST_SERVER_KEY: K2, FILES_REST_SERVER_KEY_PREVIOUS: K1 });
    try {
      assert.equal((await req(`${rotated.url}${path}`)).text, 'new');
    } finally {
      await rotated.close();
    }
    const dropped = await startTestServer({ ...shared, FILES_REST_SERVER_KEY: K2 });
    try {
      refused(await req(`${dropped.url}${path}`), 403, /no longer holds/);
    } finally {
      await dropped.close();
    }
  });

  it('the SDK, the client CLI and the admin CLI sign URLs that work', async () => {
    const client = new FilesClient({ url: s.url, token: admin });
    const viaSdk = await client.sign(bucket, 'a.txt', { versionId: oldVersion, expiresIn: 60 });
    assert.equal((await req(viaSdk.url)).text, 'old');
    const cli = await runCli(['sign', 'a.txt', '--bucket', bucket, '--expires-in', '60'], { FILES_REST_URL: s.url, FILES_REST_TOKEN: admin });
    assert.equal(cli.code, 0, cli.stderr);
    assert.equal((await req(cli.stdout.trim())).text, 'new');
    const adm = await runCli(['url', 'sign', bucket, 'sdk.txt', '--upload', '--json'], { ...s.env });
    assert.equal(adm.code, 0, adm.stderr);
    const doc = JSON.parse(adm.stdout) as { url: string; method: string };
    assert.equal(doc.method, 'PUT');
    const u = new URL(doc.url);
    assert.equal((await put(`${s.url}${u.pathname}${u.search}`, 'from admin')).status, 200);
    assert.equal((await req(`${s.files}/${bucket}/sdk.txt`, { headers: bearer(admin) })).text, 'from admin');
  });

  it('a publicly readable bucket serves downloads without a credential (REST and S3), nothing else; off by default', async () => {
    const pub = (await req(s.files, { method: 'POST', headers: bearer(admin) })).json.id as string;
    assert.equal((await put(`${s.files}/${pub}/p.txt`, 'public', bearer(admin))).status, 200);
    assert.equal((await req(`${s.files}/${pub}/p.txt`)).status, 401);
    assert.equal((await req(`${s.s3Url}/${pub}/p.txt`)).status, 403);
    const on = await runCli(['bucket', 'set', pub, '--public-read', 'on', '--json'], { ...s.env });
    assert.equal(on.code, 0, on.stderr);
    assert.equal(JSON.parse(on.stdout).public_read, true);
    const listed = await req(`${s.files}/${pub}`, { headers: bearer(admin) });
    assert.equal(listed.json.public_read, true);
    assert.equal((await req(`${s.files}/${pub}/p.txt`)).text, 'public');
    assert.equal((await req(`${s.files}/${pub}/p.txt`, { method: 'HEAD' })).status, 200);
    assert.equal((await req(`${s.s3Url}/${pub}/p.txt`)).status, 200);
    // Listing, uploads and deletes still need a credential; other buckets stay private.
    assert.equal((await req(`${s.files}/${pub}`)).status, 401);
    assert.equal((await req(`${s.files}/${pub}?versions`)).status, 401);
    assert.equal((await put(`${s.files}/${pub}/p.txt`, 'x')).status, 401);
    assert.equal((await req(`${s.files}/${pub}/p.txt`, { method: 'DELETE' })).status, 401);
    assert.equal((await req(`${s.files}/${bucket}/a.txt`)).status, 401);
    assert.equal((await req(`${s.files}/00000000-0000-4000-8000-000000000000/p.txt`)).status, 401);
    assert.equal((await runCli(['bucket', 'set', pub, '--public-read', 'off'], { ...s.env })).code, 0);
    assert.equal((await req(`${s.files}/${pub}/p.txt`)).status, 401);
    assert.equal((await req(`${s.files}/${pub}`, { headers: bearer(admin) })).json.public_read, false);
  });

  it('?access_token= is a credential under the token factory', async () => {
    assert.equal((await req(`${s.files}/${bucket}/a.txt?access_token=${admin}`)).text, 'new');
    assert.equal((await req(`${s.files}/${bucket}/a.txt?access_token=frt_nope`)).status, 401);
    const reader = await token({ bucket, actions: ['object-read'] });
    assert.equal((await req(`${s.files}/${bucket}/a.txt?access_token=${reader}`, { method: 'DELETE' })).status, 403);
  });

  it('GET /files lists the buckets the credential may read, paged', async () => {
    const all: string[] = [];
    let url: string | undefined = `${s.files}?limit=2`;
    for (let pages = 0; url && pages < 50; pages++) {
      const r: Res = await req(url, { headers: bearer(admin) });
      assert.equal(r.status, 200, r.text);
      assert.ok(r.json.contents.length <= 2);
      for (const b of r.json.contents) {
        assert.deepEqual(Object.keys(b).sort(), ['created', 'id', 'links', 'locked', 'max_file_size', 'public_read', 'quota_size', 'size', 'updated']);
        all.push(b.id);
      }
      url = r.json.links.next;
    }
    const count = await s.server.core.ctx.db.selectFrom('buckets').select((eb) => eb.fn.countAll<number>().as('n')).where('deleted', '=', 0).executeTakeFirstOrThrow();
    assert.ok(all.length > 2);
    assert.equal(all.length, Number(count.n));
    assert.deepEqual([...all].sort(), all);
    const scoped = await req(s.files, { headers: bearer(await token({ bucket, actions: ['bucket-read'] })) });
    assert.deepEqual(scoped.json.contents.map((b: { id: string }) => b.id), [bucket]);
    assert.equal(scoped.json.links.next, undefined);
    const noRead = await req(s.files, { headers: bearer(await token({ actions: ['object-read'] })) });
    assert.deepEqual(noRead.json.contents, []);
    assert.equal((await req(s.files)).status, 401);
    assert.equal((await req(`${s.files}?limit=0`, { headers: bearer(admin) })).status, 422);
  });
});

describe('?access_token= in the logs, and under allow-all', () => {
  it('is redacted from the request log', async () => {
    const e = await startEmbedded({ LOG_LEVEL: 'info', FILES_REST_PERMISSION_FACTORY: 'token' });
    try {
      const { token } = await createToken(e.server.core.ctx.db);
      const r = await req(`${e.files}?access_token=${token}`);
      assert.equal(r.status, 200, r.text);
      const text = JSON.stringify(e.logs);
      assert.match(text, /access_token=\[redacted\]/);
      assert.ok(!text.includes(token.slice(-20)), 'the token is in the log');
    } finally {
      await e.close();
    }
  });

  it('is not read under allow-all (a bad one is no refusal)', async () => {
    const s = await startTestServer();
    try {
      assert.equal((await req(`${s.files}?access_token=garbage`)).status, 200);
    } finally {
      await s.close();
    }
  });
});
