// Authentication and authorisation (SPEC.md "Authentication", CONTRACT.md "Clients"): every
// endpoint × every kind of credential, with the built-in token factory; a permission factory
// module of the operator's own; and the first start's admin token.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { req, type Res } from './support/http.js';
import { processEnv } from './support/fixtures.js';
import { runCli, spawnFilesRest } from './support/process.js';
import { ACTIONS, type Action } from '../src/auth/actions.js';
import { createToken, revokeToken } from '../src/auth/tokens.js';

// Multipart fixtures: two parts, the first PART bytes, the last 2. S3 (TEST_STORAGE=s3) refuses
// parts under 5 MiB but the last, so there the first part is 5 MiB; it is only ever sent by setups.
const PART = testStorage() === 's3' ? 5 * 1024 * 1024 : 2;
const SIZE = PART + 2;
const SMALL_PARTS = { FILES_REST_MULTIPART_CHUNKSIZE_MIN: '2', FILES_REST_MULTIPART_CHUNKSIZE_MAX: String(8 * 1024 * 1024) };
const FIRST_PART = 'a'.repeat(PART);

type Cred = 'none' | 'malformed' | 'unknown' | 'revoked' | 'expired' | 'other-bucket' | 'without' | 'with';

interface Call {
  method: string;
  /** Path and query after `/files`. */
  path: string;
  body?: string;
}

interface Endpoint {
  name: string;
  /** Every action the endpoint checks; a token lacking any one of them gets 403. */
  actions: Action[];
  /** POST /files: not about a bucket, so a token scoped to a bucket can never do it. */
  global?: boolean;
  ok: number;
  /** Makes what the request needs in a fresh bucket (with an all-powerful token) and returns the call. */
  setup(f: Fixture): Promise<Call>;
  /** After all the refused calls and the allowed one: the state shows exactly one change. */
  verify?(f: Fixture, call: Call, ok: Res): Promise<void>;
}

interface Fixture {
  bucket: string;
  admin: Record<string, string>;
  files: string;
}

describe('Permissions with the token factory (FILES_REST_PERMISSION_FACTORY=token)', () => {
  let s: TestServer;
  let admin: Record<string, string>;

  async function token(opts: { bucket?: string | null; actions?: Action[]; expiresInDays?: number } = {}): Promise<string> {
    return (await createToken(s.server.core.ctx.db, opts)).token;
  }
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

  async function call(c: Call, headers: Record<string, string>): Promise<Res> {
    return req(`${s.files}${c.path}`, { method: c.method, headers, ...(c.body !== undefined ? { body: c.body } : {}) });
  }
  async function ok(c: Call, expected = 200): Promise<Res> {
    const r = await call(c, admin);
    assert.equal(r.status, expected, `${c.method} ${c.path}: ${r.text}`);
    return r;
  }
  async function newBucket(): Promise<string> {
    return (await ok({ method: 'POST', path: '' })).json.id as string;
  }
  async function putObject(bucket: string, key: string, body: string): Promise<string> {
    return (await ok({ method: 'PUT', path: `/${bucket}/${key}`, body })).json.version_id as string;
  }
  async function initUpload(bucket: string, key: string): Promise<string> {
    return (await ok({ method: 'POST', path: `/${bucket}/${key}?uploads&size=${SIZE}&partSize=${PART}` })).json.id as string;
  }
  async function versionsOf(bucket: string): Promise<Array<Record<string, unknown>>> {
    return (await ok({ method: 'GET', path: `/${bucket}?versions` })).json.contents;
  }

  before(async () => {
    s = await startTestServer({ FILES_REST_PERMISSION_FACTORY: 'token', ...SMALL_PARTS });
    admin = bearer(await token());
  });
  after(() => s.close());

  const endpoints: Endpoint[] = [
    {
      name: 'POST /files (create a bucket)',
      actions: ['location-update'],
      global: true,
      ok: 200,
      setup: async () => ({ method: 'POST', path: '' }),
    },
    {
      name: 'HEAD /files/<bucket>',
      actions: ['bucket-read'],
      ok: 200,
      setup: async (f) => ({ method: 'HEAD', path: `/${f.bucket}` }),
    },
    {
      name: 'GET /files/<bucket> (latest versions)',
      actions: ['bucket-read'],
      ok: 200,
      setup: async (f) => {
        await putObject(f.bucket, 'a.txt', 'a');
        return { method: 'GET', path: `/${f.bucket}` };
      },
      verify: async (_f, _c, r) => assert.deepEqual(r.json.contents.map((v: { key: string }) => v.key), ['a.txt']),
    },
    {
      name: 'GET /files/<bucket>?versions',
      actions: ['bucket-read', 'bucket-read-versions'],
      ok: 200,
      setup: async (f) => ({ method: 'GET', path: `/${f.bucket}?versions` }),
    },
    {
      name: 'GET /files/<bucket>?uploads',
      actions: ['bucket-listmultiparts'],
      ok: 200,
      setup: async (f) => {
        await initUpload(f.bucket, 'big.bin');
        return { method: 'GET', path: `/${f.bucket}?uploads` };
      },
      verify: async (_f, _c, r) => assert.equal(r.json.length, 1),
    },
    {
      name: 'PUT /files/<bucket>/<key> (upload)',
      actions: ['bucket-update'],
      ok: 200,
      setup: async (f) => ({ method: 'PUT', path: `/${f.bucket}/new.txt`, body: 'new' }),
      verify: async (f) => assert.equal((await versionsOf(f.bucket)).length, 1, 'only the allowed upload was stored'),
    },
    {
      name: 'GET /files/<bucket>/<key> (download)',
      actions: ['object-read'],
      ok: 200,
      setup: async (f) => {
        await putObject(f.bucket, 'doc.txt', 'content');
        return { method: 'GET', path: `/${f.bucket}/doc.txt` };
      },
      verify: async (_f, _c, r) => assert.equal(r.text, 'content'),
    },
    {
      name: 'HEAD /files/<bucket>/<key>',
      actions: ['object-read'],
      ok: 200,
      setup: async (f) => {
        await putObject(f.bucket, 'doc.txt', 'content');
        return { method: 'HEAD', path: `/${f.bucket}/doc.txt` };
      },
    },
    {
      name: 'GET /files/<bucket>/<key>?versionId=<non-head version>',
      actions: ['object-read', 'object-read-version'],
      ok: 200,
      setup: async (f) => {
        const v1 = await putObject(f.bucket, 'doc.txt', 'old');
        await putObject(f.bucket, 'doc.txt', 'new');
        return { method: 'GET', path: `/${f.bucket}/doc.txt?versionId=${v1}` };
      },
      verify: async (_f, _c, r) => assert.equal(r.text, 'old'),
    },
    {
      name: 'GET /files/<bucket>/<key>?download',
      actions: ['object-read'],
      ok: 200,
      setup: async (f) => {
        await putObject(f.bucket, 'doc.txt', 'content');
        return { method: 'GET', path: `/${f.bucket}/doc.txt?download` };
      },
      verify: async (_f, _c, r) => assert.equal(r.headers.get('content-disposition'), 'attachment; filename=doc.txt'),
    },
    {
      name: 'DELETE /files/<bucket>/<key> (soft delete)',
      actions: ['object-read', 'object-delete'],
      ok: 204,
      setup: async (f) => {
        await putObject(f.bucket, 'doc.txt', 'content');
        return { method: 'DELETE', path: `/${f.bucket}/doc.txt` };
      },
      verify: async (f) => {
        const heads = (await versionsOf(f.bucket)).filter((v) => v.is_head);
        assert.equal(heads.length, 1);
        assert.equal(heads[0]!.delete_marker, true, 'one delete marker, from the allowed call');
      },
    },
    {
      name: 'DELETE /files/<bucket>/<key>?versionId=<head> (hard delete)',
      actions: ['object-read', 'object-delete', 'object-delete-version'],
      ok: 204,
      setup: async (f) => {
        const v = await putObject(f.bucket, 'doc.txt', 'content');
        return { method: 'DELETE', path: `/${f.bucket}/doc.txt?versionId=${v}` };
      },
      verify: async (f) => assert.equal((await versionsOf(f.bucket)).length, 0),
    },
    {
      name: 'DELETE /files/<bucket>/<key>?versionId=<non-head> (hard delete of an old version)',
      actions: ['object-read', 'object-read-version', 'object-delete', 'object-delete-version'],
      ok: 204,
      setup: async (f) => {
        const v1 = await putObject(f.bucket, 'doc.txt', 'old');
        await putObject(f.bucket, 'doc.txt', 'new');
        return { method: 'DELETE', path: `/${f.bucket}/doc.txt?versionId=${v1}` };
      },
      verify: async (f) => assert.equal((await versionsOf(f.bucket)).length, 1),
    },
    {
      name: 'POST /files/<bucket>/<key>?uploads (multipart init)',
      actions: ['bucket-update'],
      ok: 200,
      setup: async (f) => ({ method: 'POST', path: `/${f.bucket}/big.bin?uploads&size=${SIZE}&partSize=${PART}` }),
      verify: async (f) => assert.equal((await ok({ method: 'GET', path: `/${f.bucket}?uploads` })).json.length, 1),
    },
    {
      name: 'PUT /files/<bucket>/<key>?uploadId&partNumber (part)',
      actions: ['bucket-update'],
      ok: 200,
      setup: async (f) => {
        const u = await initUpload(f.bucket, 'big.bin');
        return { method: 'PUT', path: `/${f.bucket}/big.bin?uploadId=${u}&partNumber=1`, body: 'cd' };
      },
    },
    {
      name: 'GET /files/<bucket>/<key>?uploadId (list parts)',
      actions: ['multipart-read'],
      ok: 200,
      setup: async (f) => {
        const u = await initUpload(f.bucket, 'big.bin');
        await ok({ method: 'PUT', path: `/${f.bucket}/big.bin?uploadId=${u}&partNumber=1`, body: 'cd' });
        return { method: 'GET', path: `/${f.bucket}/big.bin?uploadId=${u}` };
      },
      verify: async (_f, _c, r) => assert.equal(r.json.parts.length, 1),
    },
    {
      name: 'POST /files/<bucket>/<key>?uploadId (complete)',
      actions: ['bucket-update'],
      ok: 200,
      setup: async (f) => {
        const u = await initUpload(f.bucket, 'big.bin');
        await ok({ method: 'PUT', path: `/${f.bucket}/big.bin?uploadId=${u}&partNumber=0`, body: FIRST_PART });
        await ok({ method: 'PUT', path: `/${f.bucket}/big.bin?uploadId=${u}&partNumber=1`, body: 'cd' });
        return { method: 'POST', path: `/${f.bucket}/big.bin?uploadId=${u}` };
      },
      verify: async (f) => assert.equal((await ok({ method: 'GET', path: `/${f.bucket}/big.bin` })).text, `${FIRST_PART}cd`),
    },
    {
      name: 'DELETE /files/<bucket>/<key>?uploadId (abort)',
      actions: ['multipart-delete'],
      ok: 204,
      setup: async (f) => {
        const u = await initUpload(f.bucket, 'big.bin');
        return { method: 'DELETE', path: `/${f.bucket}/big.bin?uploadId=${u}` };
      },
      verify: async (f) => assert.equal((await ok({ method: 'GET', path: `/${f.bucket}?uploads` })).json.length, 0),
    },
  ];

  for (const ep of endpoints) {
    it(`${ep.name}: 401 without a valid token, 404 for another bucket's, 403 without ${ep.actions.join(' or ')}, ${ep.ok} with them`, async () => {
      const bucket = await newBucket();
      const f: Fixture = { bucket, admin, files: s.files };
      const c = await ep.setup(f);
      const scope = ep.global ? null : bucket;

      const revoked = await createToken(s.server.core.ctx.db, { bucket: scope, actions: ep.actions });
      await revokeToken(s.server.core.ctx.db, revoked.info.id);
      const expired = await token({ bucket: scope, actions: ep.actions, expiresInDays: 1e-9 });
      const other = await token({ bucket: await newBucket() });
      const creds: Array<[Cred, Record<string, string>]> = [
        ['none', {}],
        ['malformed', { authorization: 'Basic dXNlcjpwYXNzd29yZA==' }],
        ['malformed', { authorization: 'Bearer' }],
        ['unknown', bearer('frt_00000000000000000000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')],
        ['unknown', bearer(`${admin.authorization!.slice(7, -4)}AAAA`)],
        ['revoked', bearer(revoked.token)],
        ['expired', bearer(expired)],
        ['other-bucket', bearer(other)],
      ];
      for (const missing of ep.actions) {
        creds.push(['without', bearer(await token({ bucket: scope, actions: ACTIONS.filter((a) => a !== missing && !(scope && a === 'location-update')) }))]);
      }
      const expected: Record<Cred, number> = {
        none: 401,
        malformed: 401,
        unknown: 401,
        revoked: 401,
        expired: 401,
        // Creating a bucket is not about a bucket: a bucket-scoped token sees it but may not do it.
        'other-bucket': ep.global ? 403 : 404,
        without: 403,
        with: ep.ok,
      };

      const got: string[] = [];
      const want: string[] = [];
      for (const [cred, headers] of creds) {
        const r = await call(c, headers);
        got.push(`${cred} ${r.status}`);
        want.push(`${cred} ${expected[cred]}`);
        if (r.status === 401) assert.match(r.headers.get('www-authenticate') ?? '', /^Bearer\b/, `${cred}: WWW-Authenticate`);
        if (c.method !== 'HEAD' && r.status >= 400) assert.equal(r.json?.status, r.status, `${cred}: JSON error body`);
      }
      const allowed = await call(c, bearer(await token({ bucket: scope, actions: ep.actions })));
      got.push(`with ${allowed.status}`);
      want.push(`with ${ep.ok}`);
      assert.deepEqual(got, want, allowed.text);
      await ep.verify?.(f, c, allowed);
    });
  }

  it('the 401 answers say why: no credential, a malformed header, an invalid token', async () => {
    const bucket = await newBucket();
    const none = await req(`${s.files}/${bucket}`);
    assert.equal(none.headers.get('www-authenticate'), 'Bearer');
    const malformed = await req(`${s.files}/${bucket}`, { headers: { authorization: 'Token abc' } });
    assert.equal(malformed.headers.get('www-authenticate'), 'Bearer error="invalid_request"');
    const invalid = await req(`${s.files}/${bucket}`, { headers: bearer('frt_nope') });
    assert.equal(invalid.headers.get('www-authenticate'), 'Bearer error="invalid_token"');
  });

  it('an expired or revoked token is told so (401, still a Bearer challenge); a 403 names the missing action', async () => {
    const bucket = await newBucket();
    const expired = await token({ bucket, expiresInDays: 1e-9 });
    const r1 = await req(`${s.files}/${bucket}`, { headers: bearer(expired) });
    assert.equal(r1.status, 401);
    assert.equal(r1.json.message, 'The token has expired; ask for a new one.');
    assert.equal(r1.headers.get('www-authenticate'), 'Bearer error="invalid_token", error_description="The token has expired"');
    const revoked = await createToken(s.server.core.ctx.db, { bucket });
    await revokeToken(s.server.core.ctx.db, revoked.info.id);
    const r2 = await req(`${s.files}/${bucket}`, { headers: bearer(revoked.token) });
    assert.equal(r2.status, 401);
    assert.equal(r2.json.message, 'The token has been revoked; ask for a new one.');
    assert.equal(r2.headers.get('www-authenticate'), 'Bearer error="invalid_token", error_description="The token has been revoked"');
    // A wrong secret for a revoked token's id reveals nothing about it.
    const guessed = `${revoked.token.slice(0, -4)}AAAA`;
    const r3 = await req(`${s.files}/${bucket}`, { headers: bearer(guessed) });
    assert.equal(r3.status, 401);
    assert.equal(r3.json.message, 'A valid credential is required (Authorization: Bearer <token>).');
    // 403: the message names the action the token lacks.
    const writer = bearer(await token({ bucket, actions: ['bucket-read', 'bucket-update', 'object-read', 'object-delete'] }));
    const v = await req(`${s.files}/${bucket}/k`, { method: 'PUT', body: 'x', headers: writer });
    assert.equal(v.status, 200, v.text);
    const hard = await req(`${s.files}/${bucket}/k?versionId=${v.json.version_id}`, { method: 'DELETE', headers: writer });
    assert.equal(hard.status, 403);
    assert.equal(hard.json.message, 'You do not have a permission for this action: it needs the object-delete-version action.');
  });

  it('an anonymous caller learns nothing: an unknown bucket, an invalid id and a wrong method all give 401', async () => {
    for (const [method, path] of [
      ['GET', '/00000000-0000-4000-8000-000000000000'],
      ['HEAD', '/not-a-uuid'],
      ['PUT', '/00000000-0000-4000-8000-000000000000/k'],
      ['DELETE', ''],
    ] as const) {
      const r = await req(`${s.files}${path}`, { method });
      assert.equal(r.status, 401, `${method} ${path}`);
    }
  });

  it('a bucket-scoped token cannot be given location-update, and one without scope can create buckets only with it', async () => {
    const bucket = await newBucket();
    await assert.rejects(createToken(s.server.core.ctx.db, { bucket, actions: ['location-update'] }), (e: { errors?: { message: string }[] }) =>
      /location-update/.test(e.errors?.[0]?.message ?? ''),
    );
    const scoped = await createToken(s.server.core.ctx.db, { bucket });
    assert.equal(scoped.info.actions.includes('location-update'), false);
    assert.equal((await req(s.files, { method: 'POST', headers: bearer(scoped.token) })).status, 403);
  });

  it('a token for one bucket reads and writes it, and gets 404 for every other bucket, existing or not', async () => {
    const mine = await newBucket();
    const theirs = await newBucket();
    await putObject(theirs, 'x.txt', 'theirs');
    const t = bearer(await token({ bucket: mine }));
    assert.equal((await req(`${s.files}/${mine}/x.txt`, { method: 'PUT', headers: t, body: 'mine' })).status, 200);
    assert.equal((await req(`${s.files}/${mine}/x.txt`, { headers: t })).text, 'mine');
    for (const path of [`/${theirs}`, `/${theirs}/x.txt`, `/${theirs}?versions`, `/00000000-0000-4000-8000-000000000000`]) {
      const r = await req(`${s.files}${path}`, { headers: t });
      assert.equal(r.status, 404, path);
      assert.doesNotMatch(r.text, /theirs/);
    }
    assert.equal((await req(`${s.files}/${theirs}/y.txt`, { method: 'PUT', headers: t, body: 'intruder' })).status, 404);
    assert.deepEqual((await versionsOf(theirs)).map((v) => v.key), ['x.txt']);
  });

  it('secrets are stored only as SHA-256 hashes', async () => {
    const { token: secret, info } = await createToken(s.server.core.ctx.db);
    const row = await s.server.core.ctx.db.selectFrom('tokens').selectAll().where('id', '=', info.id).executeTakeFirstOrThrow();
    const raw = secret.split('_').slice(2).join('_');
    assert.match(row.secret_hash, /^[0-9a-f]{64}$/);
    assert.equal(JSON.stringify(row).includes(raw), false);
  });
});

describe('A permission factory module (FILES_REST_PERMISSION_FACTORY=./module.js)', () => {
  let s: TestServer;
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'files-rest-factory-'));
    await writeFile(join(dir, 'package.json'), '{"type":"module"}');
    // Anyone may list and read; the holder of the "writer" key may also create and upload, not delete.
    await writeFile(
      join(dir, 'factory.js'),
      `export async function authenticate(bearer) {
         return bearer === 'writer-key' ? { id: 'writer', bucket: null, actions: [] } : null;
       }
       export default function factory({ action, resource, identity, request }) {
         return {
           can() {
             if (action === 'bucket-read' || action === 'object-read') return true;
             if (identity?.id !== 'writer') return false;
             if (action === 'location-update') return resource === null && request.method === 'POST';
             return action === 'bucket-update';
           },
         };
       }
      `,
    );
    s = await startTestServer({ FILES_REST_PERMISSION_FACTORY: join(dir, 'factory.js') });
  });
  after(async () => {
    await s.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('decides every request: anonymous reads pass, writes need its credential, other actions get 403', async () => {
    const writer = { authorization: 'Bearer writer-key' };
    assert.equal((await req(s.files, { method: 'POST' })).status, 401);
    const created = await req(s.files, { method: 'POST', headers: writer });
    assert.equal(created.status, 200);
    const b = created.json.id as string;
    assert.equal((await req(`${s.files}/${b}/k.txt`, { method: 'PUT', body: 'x' })).status, 401);
    assert.equal((await req(`${s.files}/${b}/k.txt`, { method: 'PUT', body: 'x', headers: { authorization: 'Bearer wrong' } })).status, 401);
    const up = await req(`${s.files}/${b}/k.txt`, { method: 'PUT', body: 'x', headers: writer });
    assert.equal(up.status, 200);
    const anonRead = await req(`${s.files}/${b}/k.txt`);
    assert.equal(anonRead.status, 200);
    assert.equal(anonRead.text, 'x');
    assert.equal((await req(`${s.files}/${b}`)).status, 200);
    const del = await req(`${s.files}/${b}/k.txt`, { method: 'DELETE', headers: writer });
    assert.equal(del.status, 403);
    assert.equal(del.json.status, 403);
    assert.equal((await req(`${s.files}/${b}/k.txt`, { method: 'DELETE' })).status, 401);
    assert.equal((await req(`${s.files}/${b}?versions`, { headers: writer })).status, 403);
  });

  it('a module without a default export stops the start with a message naming the setting', async () => {
    await writeFile(join(dir, 'empty.js'), 'export const nothing = 1;\n');
    // fs explicitly: a start that fails leaves nothing running (with TEST_STORAGE=s3 the test S3 server would stay up).
    await assert.rejects(
      startTestServer({ FILES_REST_PERMISSION_FACTORY: join(dir, 'empty.js'), FILES_REST_STORAGE_FACTORY: 'fs' }),
      /FILES_REST_PERMISSION_FACTORY/,
    );
  });
});

describe('Quick start with tokens', () => {
  it('the first start creates an admin token once and prints it; it works, and the CLI makes and revokes scoped ones', async () => {
    const { env, dir, drop } = await processEnv({ FILES_REST_PERMISSION_FACTORY: 'token' });
    try {
      const first = await spawnFilesRest('serve', env);
      let secret: string;
      try {
        await first.waitFor(/More tokens:/);
        const m = /^\s+(frt_\S+)\s*$/m.exec(first.output());
        assert.ok(m, `the first start prints a token:\n${first.output()}`);
        secret = m[1]!;
        assert.match(first.output(), /curl -H "Authorization: Bearer frt_\S+" -X POST http:\/\/127\.0\.0\.1:\d+\/files/);
        assert.equal((await req(first.files, { method: 'POST' })).status, 401);
        const r = await req(first.files, { method: 'POST', headers: { authorization: `Bearer ${secret}` } });
        assert.equal(r.status, 200, r.text);
      } finally {
        assert.equal(await first.kill(), 0);
      }

      const second = await spawnFilesRest('serve', env);
      try {
        // The token would be printed before the worker starts; wait for both pipes to catch up.
        await second.waitFor(/task worker started/);
        await new Promise((r) => setTimeout(r, 200));
        assert.doesNotMatch(second.output(), /frt_/, 'no new token on later starts');
        const admin = { authorization: `Bearer ${secret}` };
        const b = (await req(second.files, { method: 'POST', headers: admin })).json.id as string;
        const made = await runCli(['token', 'create', '--bucket', b, '--actions', 'bucket-read,object-read', '--json'], env);
        assert.equal(made.code, 0, made.stderr);
        const t = JSON.parse(made.stdout) as { id: string; token: string; bucket: string; actions: string[] };
        assert.equal(t.bucket, b);
        assert.deepEqual(t.actions, ['bucket-read', 'object-read']);
        const auth = { authorization: `Bearer ${t.token}` };
        assert.equal((await req(`${second.files}/${b}`, { headers: auth })).status, 200);
        assert.equal((await req(`${second.files}/${b}/k`, { method: 'PUT', body: 'x', headers: auth })).status, 403);
        const revoked = await runCli(['token', 'revoke', t.id], env);
        assert.equal(revoked.code, 0, revoked.stderr);
        assert.equal((await req(`${second.files}/${b}`, { headers: auth })).status, 401);
        const bad = await runCli(['token', 'create', '--actions', 'bucket-read,fly'], env);
        assert.notEqual(bad.code, 0);
        assert.match(bad.stderr, /fly/);
      } finally {
        await second.kill();
      }
    } finally {
      await drop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
