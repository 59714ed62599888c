// Proxy downloads (FILES_REST_XSENDFILE_ENABLED=1) through a real nginx on 127.0.0.1: files-rest
// authorises and answers with X-Accel-Redirect and the download headers; nginx serves the bytes
// (and ranges) from an internal location. nginx comes from Debian's package; without it (and no
// way to install it) the nginx half is skipped with the reason, the files-rest half still runs.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestServer, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { createBucket, md5, put, req, waitFor } from './support/http.js';
import { patternBuffer } from './support/bytes.js';
import { findOrInstall, type Found } from './support/system.js';
import { ACCEL_COPIED_HEADERS, startNginx, type RunningNginx } from './support/nginx.js';
import { startTestS3, type TestS3 } from './support/s3.js';
import { createLocation, listLocations } from '../src/domain/locations.js';
import { createToken } from '../src/auth/tokens.js';
import type { SignalDetailsMap } from '../src/domain/signals.js';

// These tests read, damage or count the files of uploads by path: small uploads too are files here.
storeSmallObjectsAsFiles();

/** Headers that must reach the client through nginx exactly as files-rest would send them itself. */
const SAME_HEADERS = ['content-type', 'content-disposition', 'cache-control', ...ACCEL_COPIED_HEADERS.map((h) => h.toLowerCase())].filter(
  (h) => h !== 'x-request-id',
);

describe('X-Accel-Redirect (FILES_REST_XSENDFILE_ENABLED=1)', () => {
  let s: TestServer;
  let token: string;
  let downloads: SignalDetailsMap['file-downloaded'][];
  const auth = () => ({ authorization: `Bearer ${token}` });

  before(async () => {
    // fs storage whatever TEST_STORAGE says: these tests are about paths in an fs location.
    s = await startTestServer({ FILES_REST_XSENDFILE_ENABLED: '1', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_STORAGE_FACTORY: 'fs' });
    token = (await createToken(s.server.core.ctx.db)).token;
    downloads = [];
    s.server.signals.connect('file-downloaded', (_e, _s, d) => {
      downloads.push(d);
    });
  });
  after(() => s.close());

  it('answers a GET with X-Accel-Redirect to <prefix><location>/<relative path>, no body, and the download headers', async () => {
    const b = await createBucket(s.files, auth());
    const data = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>');
    await put(`${s.files}/${b}/pic.svg`, data, auth());
    const head = await req(`${s.files}/${b}/pic.svg`, { method: 'HEAD', headers: auth() });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('x-accel-redirect'), null, 'HEAD serves no bytes and is not redirected');

    const r = await req(`${s.files}/${b}/pic.svg`, { headers: auth() });
    assert.equal(r.status, 200);
    assert.equal(r.text, '');
    assert.equal(r.headers.get('content-length'), '0');
    const target = r.headers.get('x-accel-redirect');
    assert.match(target ?? '', /^\/user_files\/default\/[0-9a-f]{2}\/[0-9a-f]{2}\/[0-9a-f-]+\/data$/);
    const [location] = await listLocations(s.server.core.ctx.db);
    const onDisk = join(location!.uri, target!.slice('/user_files/default/'.length));
    assert.ok(existsSync(onDisk), `${onDisk} is the stored file`);
    for (const h of SAME_HEADERS) assert.equal(r.headers.get(h), head.headers.get(h), h);
    assert.equal(r.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(r.headers.get('content-security-policy'), "default-src 'none';");
    assert.equal(r.headers.get('content-md5'), Buffer.from(md5(data), 'hex').toString('base64'));

    const d = await waitFor(async () => downloads.find((x) => x.obj.key === 'pic.svg'));
    assert.equal(d.proxied, true);
    assert.equal(d.bytes, data.length);
    assert.equal(downloads.filter((x) => x.obj.key === 'pic.svg').length, 1, 'HEAD sent no signal');
  });

  it('answers conditional requests and bad ranges itself, without a redirect', async () => {
    const b = await createBucket(s.files, auth());
    const v = await put(`${s.files}/${b}/a.txt`, 'hello', auth());
    const etag = v.headers.get('etag')!;
    const nm = await req(`${s.files}/${b}/a.txt`, { headers: { ...auth(), 'if-none-match': etag } });
    assert.equal(nm.status, 304);
    assert.equal(nm.headers.get('x-accel-redirect'), null);
    const bad = await req(`${s.files}/${b}/a.txt`, { headers: { ...auth(), range: 'bytes=10-' } });
    assert.equal(bad.status, 416);
    assert.equal(bad.json.status, 416);
    assert.equal(bad.headers.get('x-accel-redirect'), null);
    const anon = await req(`${s.files}/${b}/a.txt`);
    assert.equal(anon.status, 401);
    assert.equal(anon.headers.get('x-accel-redirect'), null);
  });

  it('honours FILES_REST_XSENDFILE_PREFIX', async () => {
    const other = await startTestServer({ FILES_REST_XSENDFILE_ENABLED: '1', FILES_REST_XSENDFILE_PREFIX: '/internal/files-rest/', FILES_REST_STORAGE_FACTORY: 'fs' });
    try {
      const b = await createBucket(other.files);
      await put(`${other.files}/${b}/k`, 'x');
      const r = await req(`${other.files}/${b}/k`);
      assert.match(r.headers.get('x-accel-redirect') ?? '', /^\/internal\/files-rest\/default\/[0-9a-f]{2}\//);
    } finally {
      await other.close();
    }
  });

  it('streams the file as usual when the backend cannot name it for a proxy (no sendFile)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'files-rest-backend-'));
    await writeFile(join(dir, 'package.json'), '{"type":"module"}');
    const fsBackend = new URL('../src/storage/fs/fs-backend.js', import.meta.url).href;
    await writeFile(
      join(dir, 'no-sendfile.js'),
      `import { FsBackend } from ${JSON.stringify(fsBackend)};
       export default function factory(config) {
         const b = new FsBackend({ splitLength: config.storagePathSplitLength, dimensions: config.storagePathDimensions });
         b.sendFile = undefined;
         return b;
       }
      `,
    );
    const plain = await startTestServer({ FILES_REST_XSENDFILE_ENABLED: '1', FILES_REST_STORAGE_FACTORY: join(dir, 'no-sendfile.js') });
    try {
      const b = await createBucket(plain.files);
      await put(`${plain.files}/${b}/k.txt`, 'streamed');
      const r = await req(`${plain.files}/${b}/k.txt`);
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('x-accel-redirect'), null);
      assert.equal(r.text, 'streamed');
      assert.equal(r.headers.get('content-length'), '8');
    } finally {
      await plain.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  describe('through nginx', () => {
    let found: Found;
    let nginx: RunningNginx | null = null;
    before(async () => {
      found = await findOrInstall('nginx', ['/usr/sbin/nginx', '/usr/bin/nginx']);
      const binary = found.path;
      if (binary === undefined) {
        console.log(`# SKIP nginx tests: ${found.skip}`);
        return;
      }
      const locations = await listLocations(s.server.core.ctx.db);
      nginx = await startNginx(binary, join(s.dir, 'nginx'), {
        upstream: s.url,
        apiPath: '/files',
        accelPrefix: '/user_files/',
        locations: locations.map((l) => ({ name: l.name, dir: l.uri })),
      });
    });
    after(async () => {
      await nginx?.stop();
    });

    it('serves the bytes and the same headers as files-rest; Range and If-Range work', async (t) => {
      if (!nginx) return t.skip(found.skip ?? 'nginx did not start');
      const files = `${nginx.url}/files`;
      const b = await createBucket(files, auth());
      const data = patternBuffer(300_001);
      const up = await put(`${files}/${b}/dir/report.html`, data, auth());
      assert.equal(up.status, 200, up.text);
      const url = `${files}/${b}/dir/report.html`;
      const direct = await req(`${s.files}/${b}/dir/report.html`, { method: 'HEAD', headers: auth() });

      const before = downloads.length;
      const g = await fetch(url, { headers: auth() });
      const body = Buffer.from(await g.arrayBuffer());
      assert.equal(g.status, 200);
      assert.equal(body.length, data.length);
      assert.equal(md5(body), md5(data));
      assert.equal(g.headers.get('x-accel-redirect'), null, 'nginx consumes the header');
      for (const h of SAME_HEADERS) assert.equal(g.headers.get(h), direct.headers.get(h), `${h} through nginx`);
      assert.equal(g.headers.get('accept-ranges'), 'bytes');
      const d = await waitFor(async () => downloads.slice(before).find((x) => x.obj.key === 'dir/report.html'));
      assert.equal(d.proxied, true);

      const r = await fetch(url, { headers: { ...auth(), range: 'bytes=1000-1999' } });
      assert.equal(r.status, 206);
      assert.equal(r.headers.get('content-range'), `bytes 1000-1999/${data.length}`);
      assert.ok(Buffer.from(await r.arrayBuffer()).equals(data.subarray(1000, 2000)));
      assert.equal(r.headers.get('etag'), direct.headers.get('etag'));

      const tail = await fetch(url, { headers: { ...auth(), range: 'bytes=-17' } });
      assert.equal(tail.status, 206);
      assert.ok(Buffer.from(await tail.arrayBuffer()).equals(data.subarray(data.length - 17)));

      const ifRange = await fetch(url, { headers: { ...auth(), range: 'bytes=0-9', 'if-range': direct.headers.get('etag')! } });
      assert.equal(ifRange.status, 206);
      assert.ok(Buffer.from(await ifRange.arrayBuffer()).equals(data.subarray(0, 10)));
      const stale = await fetch(url, { headers: { ...auth(), range: 'bytes=0-9', 'if-range': '"md5:00000000000000000000000000000000"' } });
      assert.equal(stale.status, 200);
      assert.equal((await stale.arrayBuffer()).byteLength, data.length);

      const unsat = await req(url, { headers: { ...auth(), range: `bytes=${data.length}-` } });
      assert.equal(unsat.status, 416);
      assert.equal(unsat.json.status, 416);

      const att = await fetch(`${url}?download`, { headers: auth() });
      assert.equal(att.status, 200);
      assert.equal(att.headers.get('content-disposition'), 'attachment; filename=report.html');
      assert.equal((await att.arrayBuffer()).byteLength, data.length);

      const head = await fetch(url, { method: 'HEAD', headers: auth() });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get('content-length'), String(data.length));
    });

    it('never serves the internal location to a client, nor a file to a caller files-rest refuses', async (t) => {
      if (!nginx) return t.skip(found.skip ?? 'nginx did not start');
      const files = `${nginx.url}/files`;
      const b = await createBucket(files, auth());
      await put(`${files}/${b}/secret.txt`, 'top secret', auth());
      const target = (await req(`${s.files}/${b}/secret.txt`, { headers: auth() })).headers.get('x-accel-redirect')!;
      const direct = await fetch(`${nginx.url}${target}`);
      assert.equal(direct.status, 404);
      assert.doesNotMatch(await direct.text(), /top secret/);
      const anon = await req(`${files}/${b}/secret.txt`);
      assert.equal(anon.status, 401);
      assert.equal(anon.json.status, 401);
      const other = await createToken(s.server.core.ctx.db, { bucket: await createBucket(s.files, auth()) });
      const wrong = await req(`${files}/${b}/secret.txt`, { headers: { authorization: `Bearer ${other.token}` } });
      assert.equal(wrong.status, 404);
      assert.doesNotMatch(wrong.text, /top secret/);
    });
  });
});

describe('X-Accel-Redirect to S3 presigned URLs through nginx', () => {
  let found: Found;
  let s3: TestS3 | null = null;
  let s: TestServer | null = null;
  let nginx: RunningNginx | null = null;

  before(async () => {
    found = await findOrInstall('nginx', ['/usr/sbin/nginx', '/usr/bin/nginx']);
    s3 = await startTestS3();
    await s3.createBucket('accel');
    s = await startTestServer({ ...s3.env, FILES_REST_STORAGE_FACTORY: 's3', FILES_REST_AUTO_LOCATION: '0', FILES_REST_XSENDFILE_ENABLED: '1' });
    await createLocation(s.server.core.ctx, { name: 's3', uri: 's3://accel/data', isDefault: true });
    const binary = found.path;
    if (binary === undefined) {
      console.log(`# SKIP nginx tests: ${found.skip}`);
      return;
    }
    nginx = await startNginx(binary, join(s.dir, 'nginx'), {
      upstream: s.url,
      apiPath: '/files',
      accelPrefix: '/user_files/',
      locations: [],
      remote: true,
    });
  });
  after(async () => {
    await nginx?.stop();
    await s?.close();
    await s3?.close();
  });

  it('files-rest redirects to <prefix>_remote/<scheme>/<host>/<path>?<presigned query>', async () => {
    const b = await createBucket(s!.files);
    await put(`${s!.files}/${b}/x.bin`, 'remote bytes');
    const r = await req(`${s!.files}/${b}/x.bin`);
    assert.equal(r.status, 200);
    const target = new URL(r.headers.get('x-accel-redirect')!, 'http://proxy');
    const endpoint = new URL(s3!.endpoint);
    assert.equal(target.pathname.startsWith(`/user_files/_remote/http/${endpoint.host}/accel/data/`), true, target.pathname);
    assert.ok(target.searchParams.get('X-Amz-Signature'));
    assert.equal(r.headers.get('content-length'), '0');
    assert.equal(r.text, '');
  });

  it('nginx fetches the bytes from S3 with the files-rest headers; Range works', async (t) => {
    if (!nginx) return t.skip(found.skip ?? 'nginx did not start');
    const files = `${nginx.url}/files`;
    const b = await createBucket(files);
    const data = patternBuffer(70_000, 3);
    await put(`${files}/${b}/page.html`, data);
    const direct = await req(`${s!.files}/${b}/page.html`, { method: 'HEAD' });
    const g = await fetch(`${files}/${b}/page.html`);
    assert.equal(g.status, 200, await nginx.errorLog());
    assert.equal(md5(Buffer.from(await g.arrayBuffer())), md5(data));
    for (const h of SAME_HEADERS) assert.equal(g.headers.get(h), direct.headers.get(h), `${h} through nginx from S3`);
    const r = await fetch(`${files}/${b}/page.html`, { headers: { range: 'bytes=5-24' } });
    assert.equal(r.status, 206);
    assert.equal(r.headers.get('content-range'), `bytes 5-24/${data.length}`);
    assert.ok(Buffer.from(await r.arrayBuffer()).equals(data.subarray(5, 25)));
  });
});
