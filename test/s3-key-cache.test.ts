// The S3 door's cache of verified access keys (FILES_REST_S3_KEY_CACHE_SECONDS): a key revoked
// through this process is refused at once, one revoked elsewhere once its cached time is up, an
// expired key is refused though cached, a wrong signature never gets a key cached, and the cache
// is bounded.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { ListBucketsCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import type { Db } from '../src/db/schema.js';
import type { ServerKeys } from '../src/auth/server-key.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import {
  ACCESS_KEY_CACHE_MAX,
  accessKeyCacheSize,
  cachedAccessKey,
  createAccessKey,
  forgetAccessKey,
  rememberAccessKey,
  revokeAccessKey,
  type UsableAccessKey,
} from '../src/s3/access-keys.js';
import { startTestServer, type TestServer } from './support/server.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function s3Code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof S3ServiceException) return e.name;
    throw e;
  }
  assert.fail('expected an S3 error');
}

describe('the access key cache', () => {
  const db = {} as Db;
  const keys: ServerKeys = { current: randomBytes(32), previous: [], source: 'test' };
  const key = (id: string, expires: number | null = null): UsableAccessKey => ({
    id,
    secret: 'secret',
    identity: { id: `key:${id}`, bucket: null, actions: [] },
    expires,
  });

  it('serves a key until its time is up, and only to the same database and server keys', () => {
    const t0 = 1_000_000;
    rememberAccessKey(db, keys, 'FRTTL', key('ttl'), 5000, t0);
    assert.equal(cachedAccessKey(db, keys, 'FRTTL', t0 + 4999)?.id, 'ttl');
    assert.equal(cachedAccessKey({} as Db, keys, 'FRTTL', t0 + 1), null, 'another database misses');
    assert.equal(cachedAccessKey(db, { ...keys }, 'FRTTL', t0 + 1), null, 'other server keys miss');
    assert.equal(cachedAccessKey(db, keys, 'FRTTL', t0 + 5000), null, 'the time is up: ask the database');
    assert.equal(cachedAccessKey(db, keys, 'FRTTL', t0 + 1), null, 'and the entry is gone');
  });

  it('refuses a cached key once it has expired, whatever time the cache has left', () => {
    const t0 = 2_000_000;
    rememberAccessKey(db, keys, 'FREXP', key('exp', (t0 + 1000) * 1000), 60_000, t0);
    assert.equal(cachedAccessKey(db, keys, 'FREXP', t0 + 1000)?.id, 'exp');
    assert.equal(cachedAccessKey(db, keys, 'FREXP', t0 + 1001), null);
  });

  it('caches nothing with a time of 0; forgets a key by its id or its access key id', () => {
    rememberAccessKey(db, keys, 'FRZERO', key('zero'), 0);
    assert.equal(cachedAccessKey(db, keys, 'FRZERO'), null);
    rememberAccessKey(db, keys, 'FRBYID', key('by-id'), 60_000);
    rememberAccessKey(db, keys, 'FRBYAKID', key('by-akid'), 60_000);
    forgetAccessKey('by-id');
    forgetAccessKey('FRBYAKID');
    assert.equal(cachedAccessKey(db, keys, 'FRBYID'), null);
    assert.equal(cachedAccessKey(db, keys, 'FRBYAKID'), null);
  });

  it(`holds at most ${ACCESS_KEY_CACHE_MAX} keys, dropping the one cached longest ago`, () => {
    for (let i = 0; i < ACCESS_KEY_CACHE_MAX + 50; i++) rememberAccessKey(db, keys, `FRBOUND${i}`, key(`bound${i}`), 60_000);
    assert.equal(accessKeyCacheSize(), ACCESS_KEY_CACHE_MAX);
    assert.equal(cachedAccessKey(db, keys, 'FRBOUND0'), null);
    assert.equal(cachedAccessKey(db, keys, 'FRBOUND49'), null);
    assert.equal(cachedAccessKey(db, keys, 'FRBOUND50')?.id, 'bound50');
    assert.equal(cachedAccessKey(db, keys, `FRBOUND${ACCESS_KEY_CACHE_MAX + 49}`)?.id, `bound${ACCESS_KEY_CACHE_MAX + 49}`);
    for (let i = 0; i < ACCESS_KEY_CACHE_MAX + 50; i++) forgetAccessKey(`FRBOUND${i}`);
  });
});

describe('the S3 door with cached keys', () => {
  let t: TestServer;
  let keys: ServerKeys;
  const clients: S3Client[] = [];
  const client = (id: string, secret: string) => {
    const c = new S3Client({ endpoint: t.s3Url, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: id, secretAccessKey: secret }, maxAttempts: 1 });
    clients.push(c);
    return c;
  };

  before(async () => {
    // A minute of cache: any refusal below comes from revocation or expiry, not from the time running out.
    t = await startTestServer({
      FILES_REST_S3_PORT: 'auto',
      FILES_REST_PERMISSION_FACTORY: 'token',
      FILES_REST_SERVER_KEY: randomBytes(32).toString('base64'),
      FILES_REST_S3_KEY_CACHE_SECONDS: '60',
    });
    keys = requireServerKeys(t.config, null);
  });
  after(async () => {
    for (const c of clients) c.destroy();
    await t?.close();
  });

  it('a key revoked through this process is refused at once', async () => {
    const k = await createAccessKey(t.server.core.ctx.db, keys);
    const s3 = client(k.info.accessKeyId, k.secret);
    await s3.send(new ListBucketsCommand({}));
    await s3.send(new ListBucketsCommand({}));
    await revokeAccessKey(t.server.core.ctx.db, k.info.id);
    assert.equal(await s3Code(s3.send(new ListBucketsCommand({}))), 'InvalidAccessKeyId');
  });

  it('an expired key is refused though it is cached', async () => {
    const created = Date.now();
    const k = await createAccessKey(t.server.core.ctx.db, keys, { expiresInDays: 3 / 86_400 });
    const s3 = client(k.info.accessKeyId, k.secret);
    await s3.send(new ListBucketsCommand({}));
    // Revoked behind the door's back, as another process would: only the cached key answers now.
    await t.server.core.ctx.db.updateTable('access_keys').set({ revoked: 1 }).where('id', '=', k.info.id).execute();
    await sleep(Math.max(0, created + 3000 - Date.now()) + 200);
    assert.equal(await s3Code(s3.send(new ListBucketsCommand({}))), 'InvalidAccessKeyId');
  });

  it('a wrong signature is refused and gets nothing cached; a cached key still checks every signature', async () => {
    const k = await createAccessKey(t.server.core.ctx.db, keys);
    const before = accessKeyCacheSize();
    const wrong = client(k.info.accessKeyId, `${k.secret}x`);
    assert.equal(await s3Code(wrong.send(new ListBucketsCommand({}))), 'SignatureDoesNotMatch');
    assert.equal(accessKeyCacheSize(), before, 'nothing cached');
    await client(k.info.accessKeyId, k.secret).send(new ListBucketsCommand({}));
    assert.equal(accessKeyCacheSize(), before + 1);
    assert.equal(await s3Code(wrong.send(new ListBucketsCommand({}))), 'SignatureDoesNotMatch');
  });
});

describe('the S3 door with a short key cache', () => {
  it('a key revoked by another process is refused once the cached time is up', async () => {
    const t = await startTestServer({
      FILES_REST_S3_PORT: 'auto',
      FILES_REST_PERMISSION_FACTORY: 'token',
      FILES_REST_SERVER_KEY: randomBytes(32).toString('base64'),
      FILES_REST_S3_KEY_CACHE_SECONDS: '1',
    });
    const k = await createAccessKey(t.server.core.ctx.db, requireServerKeys(t.config, null));
    const s3 = new S3Client({ endpoint: t.s3Url, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: k.info.accessKeyId, secretAccessKey: k.secret }, maxAttempts: 1 });
    try {
      await s3.send(new ListBucketsCommand({}));
      // What `files-rest key revoke` does from its own process: the database only.
      await t.server.core.ctx.db.updateTable('access_keys').set({ revoked: 1 }).where('id', '=', k.info.id).execute();
      await sleep(1100);
      assert.equal(await s3Code(s3.send(new ListBucketsCommand({}))), 'InvalidAccessKeyId');
    } finally {
      s3.destroy();
      await t.close();
    }
  });
});
