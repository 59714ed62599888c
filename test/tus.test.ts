import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { createBucket, downloadMd5, md5, req, waitFor, type Res } from './support/http.js';
import { filesUnder, patternStream, processEnv } from './support/fixtures.js';
import { spawnFilesRest, type ServerProcess } from './support/process.js';
import { expireResumables } from '../src/domain/resumable.js';

const MiB = 1024 * 1024;
const OCTETS = 'application/offset+octet-stream';

function meta(pairs: Record<string, string>): string {
  return Object.entries(pairs).map(([k, v]) => `${k} ${Buffer.from(v).toString('base64')}`).join(',');
}

function tus(url: string, method: string, headers: Record<string, string> = {}, body?: Buffer): Promise<Res> {
  return req(url, { method, headers: { 'tus-resumable': '1.0.0', ...headers }, ...(body ? { body: new Uint8Array(body) } : {}) });
}

async function create(endpoint: string, headers: Record<string, string>, body?: Buffer): Promise<Res> {
  return tus(endpoint, 'POST', body ? { 'content-type': OCTETS, ...headers } : headers, body);
}

function patch(url: string, offset: number, body: Buffer, headers: Record<string, string> = {}): Promise<Res> {
  return tus(url, 'PATCH', { 'content-type': OCTETS, 'upload-offset': String(offset), ...headers }, body);
}

function digest(algorithm: string, data: Buffer): string {
  return createHash(algorithm).update(data).digest('base64');
}

// tus needs a location that writes in place (fs): under TEST_STORAGE=s3 only the refusal is tested.
const FS_ONLY = { skip: testStorage() === 's3' ? 'tus needs an fs location' : false };

describe('tus resumable uploads', FS_ONLY, () => {
  let t: TestServer;
  let tusRoot: string;
  before(async () => {
    t = await startTestServer({ FILES_REST_WORKER: '1' });
    tusRoot = t.files.replace(/\/files$/, '/tus');
  });
  after(async () => t.close());

  const bucketRow = (id: string) => t.server.core.ctx.db.selectFrom('buckets').select(['size', 'reserved_size', 'locked']).where('id', '=', id).executeTakeFirstOrThrow();

  it('OPTIONS tells the version, extensions, checksum algorithms and the bucket\'s maximum size', async () => {
    const b = await createBucket(t.files);
    const { setBucketProperties } = await import('../src/domain/buckets.js');
    await setBucketProperties(t.server.core.ctx, b, { maxFileSize: 12345 });
    const r = await req(`${tusRoot}/${b}/`, { method: 'OPTIONS' });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get('tus-resumable'), '1.0.0');
    assert.equal(r.headers.get('tus-version'), '1.0.0');
    assert.deepEqual(r.headers.get('tus-extension')!.split(','), ['creation', 'creation-with-upload', 'creation-defer-length', 'termination', 'expiration', 'checksum']);
    assert.equal(r.headers.get('tus-checksum-algorithm'), 'md5,sha1,sha256');
    assert.equal(r.headers.get('tus-max-size'), '12345');
  });

  it('creation, two PATCHes, HEAD between: the object is byte-identical, with its MD5', async () => {
    const b = await createBucket(t.files);
    const data = randomBytes(3 * MiB + 17);
    const c = await create(`${tusRoot}/${b}/`, { 'upload-length': String(data.length), 'upload-metadata': meta({ key: 'dir/a file', contentType: 'image/png' }) });
    assert.equal(c.status, 201, c.text);
    const url = c.headers.get('location')!;
    assert.match(url, new RegExp(`/tus/${b}/[0-9a-f-]{36}$`));
    assert.ok(c.headers.get('upload-expires'));
    assert.equal((await bucketRow(b)).reserved_size, data.length);
    let h = await tus(url, 'HEAD');
    assert.equal(h.status, 200);
    assert.equal(h.headers.get('upload-offset'), '0');
    assert.equal(h.headers.get('upload-length'), String(data.length));
    assert.equal(h.headers.get('cache-control'), 'no-store');
    assert.match(h.headers.get('upload-metadata')!, /^key /);
    const p1 = await patch(url, 0, data.subarray(0, 2 * MiB));
    assert.equal(p1.status, 204, p1.text);
    assert.equal(p1.headers.get('upload-offset'), String(2 * MiB));
    h = await tus(url, 'HEAD');
    assert.equal(h.headers.get('upload-offset'), String(2 * MiB));
    const p2 = await patch(url, 2 * MiB, data.subarray(2 * MiB));
    assert.equal(p2.status, 204, p2.text);
    assert.equal(p2.headers.get('upload-offset'), String(data.length));
    assert.ok(p2.headers.get('x-version-id'));
    const d = await downloadMd5(`${t.files}/${b}/dir/a%20file`);
    assert.equal(d.status, 200);
    assert.equal(d.md5, md5(data));
    const listing = await req(`${t.files}/${b}`);
    const obj = listing.json.contents.find((o: { key: string }) => o.key === 'dir/a file');
    assert.equal(obj.checksum, `md5:${md5(data)}`);
    assert.equal(obj.mimetype, 'image/png');
    const row = await bucketRow(b);
    assert.equal(row.size, data.length);
    assert.equal(row.reserved_size, 0);
    // Finished: the upload resource is gone.
    assert.equal((await tus(url, 'HEAD')).status, 404);
  });

  it('creation-with-upload: the POST body is the first bytes (all of them here)', async () => {
    const b = await createBucket(t.files);
    const data = randomBytes(100_000);
    const c = await create(`${tusRoot}/${b}/`, { 'upload-length': String(data.length), 'upload-metadata': meta({ filename: 'w.bin' }), 'upload-checksum': `sha1 ${digest('sha1', data)}` }, data);
    assert.equal(c.status, 201, c.text);
    assert.equal(c.headers.get('upload-offset'), String(data.length));
    assert.equal((await downloadMd5(`${t.files}/${b}/w.bin`)).md5, md5(data));
    // Part of the file in the POST, the rest by PATCH.
    const c2 = await create(`${tusRoot}/${b}/`, { 'upload-length': String(data.length), 'upload-metadata': meta({ key: 'w2.bin' }) }, data.subarray(0, 1000));
    assert.equal(c2.headers.get('upload-offset'), '1000');
    assert.equal((await patch(c2.headers.get('location')!, 1000, data.subarray(1000))).status, 204);
    assert.equal((await downloadMd5(`${t.files}/${b}/w2.bin`)).md5, md5(data));
     // An empty file is complete at its creation.
    const empty = await create(`${tusRoot}/${b}/`, { 'upload-length': '0', 'upload-metadata': meta({ key: 'empty' }) });
    assert.equal(empty.status, 201, empty.text);
    assert.ok(empty.headers.get('x-version-id'));
    const e = await downloadMd5(`${t.files}/${b}/empty`);
    assert.equal(e.status, 200);
    assert.equal(e.bytes, 0);
    // X-HTTP-Method-Override: PATCH (tus-js-client's overridePatchMethod, for proxies that drop PATCH).
    const o = await create(`${tusRoot}/${b}/`, { 'upload-length': '4', 'upload-metadata': meta({ key: 'override' }) });
    const r = await tus(o.headers.get('location')!, 'POST', { 'x-http-method-override': 'PATCH', 'content-type': OCTETS, 'upload-offset': '0' }, Buffer.from('abcd'));
    assert.equal(r.status, 204, r.text);
    assert.equal((await req(`${t.files}/${b}/override`)).text, 'abcd');
  });

  it('creation-defer-length: the length comes with a later PATCH and is reserved then', async () => {
    const b = await createBucket(t.files);
    const data = randomBytes(50_000);
    const c = await create(`${tusRoot}/${b}/`, { 'upload-defer-length': '1', 'upload-metadata': meta({ key: 'deferred.bin' }) });
    assert.equal(c.status, 201, c.text);
    const url = c.headers.get('location')!;
    let h = await tus(url, 'HEAD');
    assert.equal(h.headers.get('upload-defer-length'), '1');
    assert.equal(h.headers.get('upload-length'), null);
    assert.equal((await patch(url, 0, data.subarray(0, 20_000))).status, 204);
    assert.equal((await bucketRow(b)).reserved_size, 0);
    const last = await patch(url, 20_000, data.subarray(20_000), { 'upload-length': String(data.length) });
    assert.equal(last.status, 204, last.text);
    assert.equal((await downloadMd5(`${t.files}/${b}/deferred.bin`)).md5, md5(data));
    // A length shorter than what was received is refused.
    const c2 = await create(`${tusRoot}/${b}/`, { 'upload-defer-length': '1', 'upload-metadata': meta({ key: 'd2' }) });
    const u2 = c2.headers.get('location')!;
    await patch(u2, 0, data.subarray(0, 100));
    const bad = await patch(u2, 100, Buffer.alloc(0), { 'upload-length': '50' });
    assert.equal(bad.status, 400);
    h = await tus(u2, 'HEAD');
    assert.equal(h.headers.get('upload-offset'), '100');
  });

  it('refusals of the protocol: wrong offset 409, wrong Content-Type 415, no Tus-Resumable 412, bad checksum algorithm 400, past the length 413', async () => {
    const b = await createBucket(t.files);
    const c = await create(`${tusRoot}/${b}/`, { 'upload-length': '10', 'upload-metadata': meta({ key: 'r.bin' }) });
    const url = c.headers.get('location')!;
    const wrong = await patch(url, 5, Buffer.from('12345'));
    assert.equal(wrong.status, 409);
    assert.equal(wrong.json.status, 409);
    assert.match(wrong.json.message, /Upload-Offset 5 .* 0/);
    const type = await tus(url, 'PATCH', { 'content-type': 'application/octet-stream', 'upload-offset': '0' }, Buffer.from('12345'));
    assert.equal(type.status, 415);
    assert.equal(type.json.status, 415);
    const version = await req(url, { method: 'PATCH', headers: { 'content-type': OCTETS, 'upload-offset': '0' }, body: 'x' });
    assert.equal(version.status, 412);
    assert.equal(version.headers.get('tus-version'), '1.0.0');
    const algo = await patch(url, 0, Buffer.from('12345'), { 'upload-checksum': `crc32 ${Buffer.from('abcd').toString('base64')}` });
    assert.equal(algo.status, 400);
    assert.match(algo.json.message, /crc32/);
    const long = await patch(url, 0, Buffer.from('0123456789AB'));
    assert.equal(long.status, 413);
    assert.equal((await tus(url, 'HEAD')).headers.get('upload-offset'), '0');
    const noKey = await create(`${tusRoot}/${b}/`, { 'upload-length': '10' });
    assert.equal(noKey.status, 400);
    assert.match(noKey.json.message, /Upload-Metadata/);
    const badKey = await create(`${tusRoot}/${b}/`, { 'upload-length': '10', 'upload-metadata': meta({ key: 'k'.repeat(300) }) });
    assert.equal(badKey.status, 400);
    const both = await create(`${tusRoot}/${b}/`, { 'upload-length': '10', 'upload-defer-length': '1', 'upload-metadata': meta({ key: 'k' }) });
    assert.equal(both.status, 400);
    assert.equal((await tus(`${tusRoot}/${b}/00000000-0000-4000-8000-000000000000`, 'HEAD')).status, 404);
    assert.equal((await tus(`${tusRoot}/00000000-0000-4000-8000-000000000000/`, 'POST', { 'upload-length': '1', 'upload-metadata': meta({ key: 'k' }) })).status, 404);
  });

  it('checksum extension: a wrong checksum is 460 and the bytes of that PATCH are discarded', async () => {
    const b = await createBucket(t.files);
    const data = randomBytes(40_000);
    const c = await create(`${tusRoot}/${b}/`, { 'upload-length': String(data.length), 'upload-metadata': meta({ key: 'c.bin' }) });
    const url = c.headers.get('location')!;
    assert.equal((await patch(url, 0, data.subarray(0, 10_000), { 'upload-checksum': `md5 ${digest('md5', data.subarray(0, 10_000))}` })).status, 204);
    // Garbage sent with the checksum of the right bytes: refused, offset unchanged.
    const bad = await patch(url, 10_000, randomBytes(30_000), { 'upload-checksum': `sha256 ${digest('sha256', data.subarray(10_000))}` });
    assert.equal(bad.status, 460);
    assert.equal(bad.json.status, 460);
    assert.equal((await tus(url, 'HEAD')).headers.get('upload-offset'), '10000');
    const good = await patch(url, 10_000, data.subarray(10_000), { 'upload-checksum': `sha256 ${digest('sha256', data.subarray(10_000))}` });
    assert.equal(good.status, 204, good.text);
    assert.equal((await downloadMd5(`${t.files}/${b}/c.bin`)).md5, md5(data));
  });

  it('termination leaves nothing: no row, no file, the reservation back', async () => {
    const b = await createBucket(t.files);
    const c = await create(`${tusRoot}/${b}/`, { 'upload-length': String(MiB), 'upload-metadata': meta({ key: 't.bin' }) });
    const url = c.headers.get('location')!;
    assert.equal((await patch(url, 0, randomBytes(1000))).status, 204);
    assert.equal((await bucketRow(b)).reserved_size, MiB);
    const before = await filesUnder(join(t.dir, 'data'));
    const d = await tus(url, 'DELETE');
    assert.equal(d.status, 204);
    assert.equal((await tus(url, 'HEAD')).status, 404);
    assert.equal((await patch(url, 1000, Buffer.from('x'))).status, 404);
    const row = await bucketRow(b);
    assert.equal(row.reserved_size, 0);
    assert.equal(row.size, 0);
    await waitFor(async () => (await filesUnder(join(t.dir, 'data'))).length === before.length - 1);
    // An empty bucket again: it can be deleted (an upload in progress would keep it: BUCKET_NOT_EMPTY).
    const { deleteEmptyBucket } = await import('../src/domain/bucket-deletion.js');
    const b2 = await createBucket(t.files);
    await create(`${tusRoot}/${b2}/`, { 'upload-length': '5', 'upload-metadata': meta({ key: 'k' }) });
    await assert.rejects(deleteEmptyBucket(t.server.core.ctx, b2), /not empty/);
    await deleteEmptyBucket(t.server.core.ctx, b);
  });

  it('limits, quota reservation and the lock refuse in JSON', async () => {
    const { setBucketProperties } = await import('../src/domain/buckets.js');
    const b = await createBucket(t.files);
    await setBucketProperties(t.server.core.ctx, b, { quotaSize: 1000, maxFileSize: 800 });
    const tooBig = await create(`${tusRoot}/${b}/`, { 'upload-length': '900', 'upload-metadata': meta({ key: 'q' }) });
    assert.equal(tooBig.status, 400);
    assert.match(tooBig.json.message, /Maximum file size/);
    const first = await create(`${tusRoot}/${b}/`, { 'upload-length': '700', 'upload-metadata': meta({ key: 'q1' }) });
    assert.equal(first.status, 201);
    // The first upload's 700 bytes are reserved: 400 more do not fit the quota.
    const second = await create(`${tusRoot}/${b}/`, { 'upload-length': '400', 'upload-metadata': meta({ key: 'q2' }) });
    assert.equal(second.status, 400);
    assert.equal(second.json.message, 'Bucket quota exceeded.');
    // A deferred upload is held to the limits as its bytes arrive, and when its length is told.
    const deferred = await create(`${tusRoot}/${b}/`, { 'upload-defer-length': '1', 'upload-metadata': meta({ key: 'q3' }) });
    const du = deferred.headers.get('location')!;
    const over = await patch(du, 0, randomBytes(400));
    assert.equal(over.status, 400);
    assert.equal(over.json.message, 'Bucket quota exceeded.');
    assert.equal((await patch(du, 0, randomBytes(100), { 'upload-length': '400' })).status, 400);
    await t.server.core.ctx.db.updateTable('buckets').set({ locked: 1 }).where('id', '=', b).execute();
    const locked = await create(`${tusRoot}/${b}/`, { 'upload-length': '10', 'upload-metadata': meta({ key: 'l' }) });
    assert.equal(locked.status, 403);
    assert.equal(locked.json.message, 'Bucket is locked for modifications.');
    const lockedPatch = await patch(first.headers.get('location')!, 0, randomBytes(10));
    assert.equal(lockedPatch.status, 403);
  });

  it('expiration: Upload-Expires is told, and an upload past it is refused (410) and swept', async () => {
    const s = await startTestServer({ FILES_REST_TUS_EXPIRES: '0.00002', FILES_REST_WORKER: '0' });
    try {
      const root = s.files.replace(/\/files$/, '/tus');
      const b = await createBucket(s.files);
      const c = await create(`${root}/${b}/`, { 'upload-length': '5000', 'upload-metadata': meta({ key: 'e.bin' }) });
      const url = c.headers.get('location')!;
      assert.ok(Date.parse(c.headers.get('upload-expires')!) > Date.now() - 1000);
      assert.equal((await patch(url, 0, randomBytes(100))).status, 204);
      const files = await filesUnder(join(s.dir, 'data'));
      assert.equal(files.length, 1);
      await waitFor(async () => (await tus(url, 'HEAD')).status === 410);
      assert.equal(await expireResumables(s.server.core.ctx), 1);
      assert.equal((await tus(url, 'HEAD')).status, 404);
      const row = await s.server.core.ctx.db.selectFrom('buckets').select(['reserved_size']).where('id', '=', b).executeTakeFirstOrThrow();
      assert.equal(row.reserved_size, 0);
      // The file's removal is queued with the removal of the rows (this server runs no worker).
      const tasks = await s.server.core.ctx.db.selectFrom('tasks').select(['name']).execute();
      assert.ok(tasks.some((x) => x.name === 'remove-file-data'));
    } finally {
      await s.close();
    }
  });
});

describe('tus on an S3 location', { skip: process.env.TEST_SKIP_S3 === '1' }, () => {
  it('refuses creation with 501 RESUMABLE_LOCATION_UNSUPPORTED and stores nothing', async () => {
    const { startTestS3 } = await import('./support/s3.js');
    const s3 = await startTestS3();
    await s3.createBucket('tus-test');
    const s = await startTestServer({ ...s3.env, FILES_REST_STORAGE_FACTORY: 's3', FILES_REST_AUTO_LOCATION: '0' });
    try {
      const { createLocation } = await import('../src/domain/locations.js');
      await createLocation(s.server.core.ctx, { name: 'default', uri: 's3://tus-test/data', isDefault: true });
      const b = await createBucket(s.files);
      const r = await create(`${s.files.replace(/\/files$/, '/tus')}/${b}/`, { 'upload-length': '5', 'upload-metadata': meta({ key: 'k' }) });
      assert.equal(r.status, 501);
      assert.match(r.json.message, /resumable/);
      assert.equal((await s.server.core.ctx.db.selectFrom('resumable_uploads').select('id').execute()).length, 0);
    } finally {
      await s.close();
      await s3.close();
    }
  });
});

describe('tus under the token permission factory', FS_ONLY, () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_PERMISSION_FACTORY: 'token' });
  });
  after(async () => s.close());

  it('needs bucket-update, as a PUT does: 401 without a credential, 403 without the action, 404 for another bucket', async () => {
    const { createToken } = await import('../src/auth/tokens.js');
    const db = s.server.core.ctx.db;
    const admin = (await createToken(db, {})).token;
    const b = await createBucket(s.files, { authorization: `Bearer ${admin}` });
    const other = await createBucket(s.files, { authorization: `Bearer ${admin}` });
    const reader = (await createToken(db, { bucket: b, actions: ['bucket-read'] })).token;
    const writer = (await createToken(db, { bucket: b, actions: ['bucket-update'] })).token;
    const root = s.files.replace(/\/files$/, '/tus');
    const headers = { 'upload-length': '3', 'upload-metadata': meta({ key: 'p' }) };
    assert.equal((await create(`${root}/${b}/`, headers)).status, 401);
    const refused = await create(`${root}/${b}/`, { ...headers, authorization: `Bearer ${reader}` });
    assert.equal(refused.status, 403);
    assert.equal(refused.json.status, 403);
    assert.equal((await create(`${root}/${other}/`, { ...headers, authorization: `Bearer ${writer}` })).status, 404);
    const c = await create(`${root}/${b}/`, { ...headers, authorization: `Bearer ${writer}` });
    assert.equal(c.status, 201, c.text);
    const url = c.headers.get('location')!;
    assert.equal((await tus(url, 'HEAD', { authorization: `Bearer ${reader}` })).status, 403);
    assert.equal((await patch(url, 0, Buffer.from('abc'), { authorization: `Bearer ${reader}` })).status, 403);
    assert.equal((await patch(url, 0, Buffer.from('abc'), { authorization: `Bearer ${writer}` })).status, 204);
  });
});

describe('tus from a browser origin (CORS)', FS_ONLY, () => {
  const APP = 'https://app.example';
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_CORS_ORIGINS: APP });
  });
  after(async () => s.close());

  it('a PATCH preflight is allowed with the tus headers, and the answers expose them', async () => {
    const root = s.files.replace(/\/files$/, '/tus');
    const b = await createBucket(s.files);
    const pre = await req(`${root}/${b}/00000000-0000-4000-8000-000000000000`, {
      method: 'OPTIONS',
      headers: { origin: APP, 'access-control-request-method': 'PATCH', 'access-control-request-headers': 'tus-resumable, upload-offset, upload-checksum, content-type' },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get('access-control-allow-origin'), APP);
    assert.match(pre.headers.get('access-control-allow-methods')!, /PATCH/);
    assert.match(pre.headers.get('access-control-allow-headers')!, /upload-offset/i);
    assert.equal(pre.headers.get('tus-version'), '1.0.0');
    const c = await create(`${root}/${b}/`, { origin: APP, 'upload-length': '3', 'upload-metadata': meta({ key: 'cors' }) });
    assert.equal(c.status, 201);
    const exposed = (c.headers.get('access-control-expose-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    for (const h of ['location', 'upload-offset', 'upload-length', 'upload-expires', 'tus-resumable']) assert.ok(exposed.includes(h), h);
  });
});

/** A free TCP port on 127.0.0.1, so a restarted server keeps the upload's URL. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

describe('tus across a kill -9', FS_ONLY, () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void>;
  const procs: ServerProcess[] = [];
  before(async () => {
    const e = await processEnv({ PORT: String(await freePort()) });
    env = e.env;
    dir = e.dir;
    drop = e.drop;
  });
  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    await drop();
    await rm(dir, { recursive: true, force: true });
  });
  async function serve() {
    const p = await spawnFilesRest('serve', env);
    procs.push(p);
    return p;
  }

  it('HEAD after the restart reports no more than the synced appends, and the client resumes to a byte-identical object', async () => {
    let p = await serve();
    const b = await createBucket(p.files);
    const size = 24 * MiB;
    const expected = createHash('md5');
    for await (const chunk of patternStream(size, MiB, 3)) expected.update(chunk as Buffer);
    const c = await create(`${p.url}/tus/${b}/`, { 'upload-length': String(size), 'upload-metadata': meta({ key: 'crash.bin' }) });
    const url = c.headers.get('location')!;
    const pattern = Buffer.concat(await patternStream(size, MiB, 3).toArray());
    assert.equal((await patch(url, 0, pattern.subarray(0, 8 * MiB))).status, 204);
    // The second PATCH: half its bytes sent, then the server is killed.
    await new Promise<void>((resolve) => {
      const u = new URL(url);
      const r = http.request({
        host: u.hostname, port: u.port, path: u.pathname, method: 'PATCH',
        headers: { 'tus-resumable': '1.0.0', 'content-type': OCTETS, 'upload-offset': String(8 * MiB), 'content-length': String(16 * MiB) },
      });
      r.on('error', () => resolve());
      r.write(pattern.subarray(8 * MiB, 16 * MiB), async () => {
        await new Promise((res) => setTimeout(res, 200));
        await p.kill('SIGKILL');
        r.destroy();
        resolve();
      });
    });
    p = await serve();
    const h = await tus(url, 'HEAD');
    assert.equal(h.status, 200);
    const offset = Number(h.headers.get('upload-offset'));
    // Only the synced, committed first PATCH counts; the killed one's bytes are not reported.
    assert.equal(offset, 8 * MiB);
    const rest = await patch(url, offset, pattern.subarray(offset));
    assert.equal(rest.status, 204, rest.text);
    const d = await downloadMd5(`${p.files}/${b}/crash.bin`);
    assert.equal(d.bytes, size);
    const want = expected.digest('hex');
    assert.equal(d.md5, want);
    // The new process did not see the first bytes: its MD5 came from one read of the file, and is right.
    const listed = await req(`${p.files}/${b}`);
    assert.equal(listed.json.contents.find((o: { key: string }) => o.key === 'crash.bin').checksum, `md5:${want}`);
  });
});

describe('tus-js-client (Node) across a kill -9', FS_ONLY, () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void>;
  const procs: ServerProcess[] = [];
  // tus-js-client is a dev dependency: the real client, as browsers and Node programs use it.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let tusClient: any = null;
  before(async () => {
    tusClient = await import('tus-js-client');
    const e = await processEnv({ PORT: String(await freePort()) });
    env = e.env;
    dir = e.dir;
    drop = e.drop;
  });
  after(async () => {
    for (const p of procs) await p.kill('SIGKILL');
    await drop();
    await rm(dir, { recursive: true, force: true });
  });

  it('a 300 MiB upload: the server is killed mid-upload and restarted, the client resumes to a byte-identical object', async (t) => {
    const spawn = async () => {
      const p = await spawnFilesRest('serve', env);
      procs.push(p);
      return p;
    };
    let p = await spawn();
    const b = await createBucket(p.files);
    const size = 300 * MiB;
    const data = Buffer.concat(await patternStream(size, MiB, 11).toArray());
    let killed = false;
    let restarted: Promise<ServerProcess> | null = null;
    let uploadUrl = '';
    await new Promise<void>((resolve, reject) => {
      const upload = new tusClient.Upload(data, {
        endpoint: `${p.url}/tus/${b}/`,
        metadata: { key: 'big/tus.bin', filetype: 'application/octet-stream' },
        chunkSize: 16 * MiB,
        retryDelays: [300, 1000, 2000, 3000, 5000, 8000],
        onProgress: (sent: number) => {
          if (!killed && sent > 100 * MiB) {
            killed = true;
            uploadUrl = upload.url;
            restarted = p.kill('SIGKILL').then(() => spawn());
          }
        },
        onError: reject,
        onSuccess: () => resolve(),
      });
      upload.start();
    });
    assert.ok(killed, 'the server was killed mid-upload');
    p = await restarted!;
    assert.match(uploadUrl, /\/tus\//);
    const d = await downloadMd5(`${p.files}/${b}/big/tus.bin`);
    assert.equal(d.status, 200);
    assert.equal(d.bytes, size);
    assert.equal(d.md5, md5(data));
  });
});
