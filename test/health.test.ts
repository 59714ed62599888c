// /healthz (the process is alive) and /readyz (database and storage reachable, migrations
// current), at the server root; and the logs: one JSON line per event, the request id on every
// request's lines, no credential ever written.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestServer, type TestServer } from './support/server.js';
import { processEnv } from './support/fixtures.js';
import { runCli, spawnFilesRest, type ServerProcess } from './support/process.js';
import { req, waitFor } from './support/http.js';
import { createLocation } from '../src/domain/locations.js';
import { newId } from '../src/util/ids.js';
import { nowMicros } from '../src/util/time.js';

describe('/healthz and /readyz', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_URL_PREFIX: '/api', FILES_REST_PERMISSION_FACTORY: 'token' });
  });
  after(() => s.close());

  it('answer at the server root, outside the URL prefix, without a credential', async () => {
    const h = await req(`${s.url}/healthz`);
    assert.equal(h.status, 200);
    assert.deepEqual(h.json, { status: 'ok' });
    const r = await req(`${s.url}/readyz`);
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { status: 'ready' });
    assert.equal((await req(`${s.url}/api/healthz`)).status, 404);
    assert.equal((await req(`${s.url}/api/files`, { method: 'POST' })).status, 401, 'the API itself still wants a token');
  });

  it('/readyz is 503 while a migration is pending, ready again once it is applied', async () => {
    const { db } = s.server.core.ctx;
    const last = await db
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      .selectFrom('kysely_migration' as any)
      .selectAll()
      .orderBy('name', 'desc')
      .limit(1)
      .executeTakeFirstOrThrow() as { name: string; timestamp: string };
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    await db.deleteFrom('kysely_migration' as any).where('name', '=', last.name).execute();
    try {
      const r = await req(`${s.url}/readyz`);
      assert.equal(r.status, 503);
      assert.equal(r.json.status, 503);
      assert.equal(r.json.message, `Not ready: migrations pending: ${last.name}`);
      assert.equal((await req(`${s.url}/healthz`)).status, 200, 'alive all the same');
    } finally {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      await db.insertInto('kysely_migration' as any).values(last).execute();
    }
    assert.equal((await req(`${s.url}/readyz`)).status, 200);
  });

  it('/readyz is 503 while a location cannot be reached', async () => {
    const { ctx } = s.server.core;
    const blocker = join(s.dir, 'not-a-directory');
    await writeFile(blocker, 'a file where a directory should be');
    // Storage that cannot be reached refuses a new location (its owner marker cannot be written):
    // the row stands for a location whose storage went away after it was made.
    await assert.rejects(createLocation(ctx, { name: 'unreachable', uri: join(blocker, 'store') }));
    const loc = { id: newId() };
    const now = nowMicros();
    await ctx.db.insertInto('locations').values({ id: loc.id, name: 'unreachable', uri: join(blocker, 'store'), is_default: 0, created: now, updated: now }).execute();
    try {
      const r = await req(`${s.url}/readyz`);
      assert.equal(r.status, 503);
      assert.match(r.json.message, /^Not ready: /);
    } finally {
      await ctx.db.deleteFrom('locations').where('id', '=', loc.id).execute();
    }
    assert.equal((await req(`${s.url}/readyz`)).status, 200);
  });
});

describe('Logs', () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void>;
  let server: ServerProcess;
  let token: string;

  before(async () => {
    const e = await processEnv({ FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_WORKER: '0' });
    ({ env, dir, drop } = e);
    server = await spawnFilesRest('serve', { ...env, LOG_LEVEL: 'info' });
    const created = await runCli(['token', 'create', '--json'], env);
    assert.equal(created.code, 0, created.stderr);
    token = JSON.parse(created.stdout).token as string;
  });
  after(async () => {
    await server?.kill('SIGKILL');
    await drop();
    await rm(dir, { recursive: true, force: true });
  });

  it('are JSON lines with the request id on every line of a request, and never carry a token', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const made = await req(server.files, { method: 'POST', headers: { ...auth, 'x-request-id': 'trace-abc-123' } });
    assert.equal(made.status, 200);
    assert.equal(made.headers.get('x-request-id'), 'trace-abc-123');
    const bucket = made.json.id as string;
    assert.equal((await req(`${server.files}/${bucket}/k.txt`, { method: 'PUT', body: 'x', headers: auth })).status, 200);
    const forged = `${token.slice(0, -4)}AAAA`;
    const refused = await req(`${server.files}/${bucket}`, { headers: { authorization: `Bearer ${forged}` } });
    assert.equal(refused.status, 401);
    const generated = refused.headers.get('x-request-id');
    assert.ok(generated, 'a request without X-Request-Id gets one');

    const lines = () =>
      server
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    await waitFor(async () => lines().filter((l) => l.reqId === generated && l.msg === 'request completed').length === 1, 10_000);

    const all = lines();
    const perRequest = all.filter((l) => 'req' in l || 'res' in l || l.msg === 'incoming request' || l.msg === 'request completed');
    assert.ok(perRequest.length >= 6, `${perRequest.length} request lines`);
    for (const l of perRequest) {
      assert.equal(typeof l.reqId, 'string', `request id on ${JSON.stringify(l)}`);
      assert.equal(typeof l.time, 'number');
      assert.equal(typeof l.level, 'number');
    }
    const traced = all.filter((l) => l.reqId === 'trace-abc-123').map((l) => l.msg);
    assert.deepEqual(traced, ['incoming request', 'request completed']);
    // No secret, anywhere in what the process wrote.
    const out = server.output();
    // A token is `frt_<id, 32 hex>_<secret, base64url>`; the secret may itself hold `_`.
    const secretOf = (t: string) => {
      const m = /^frt_[0-9a-f]{32}_(.+)$/.exec(t);
      assert.ok(m, `token of an unknown form: ${t}`);
      return m[1]!;
    };
    for (const secret of [token, forged, secretOf(token), secretOf(forged)]) {
      const at = out.indexOf(secret);
      assert.equal(at === -1, true, `a token was logged: …${out.slice(Math.max(0, at - 200), at + secret.length + 200)}…`);
    }
    assert.equal(/"authorization"/i.test(out), false, 'an Authorization header was logged');
  });
});
