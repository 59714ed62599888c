import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startTestServer, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { createBucket, put, req } from './support/http.js';
import { filesUnder } from './support/fixtures.js';
import { createLocation } from '../src/domain/locations.js';

// These tests read, damage or count the files of uploads by path: small uploads too are files here.
storeSmallObjectsAsFiles();

describe('A storage backend of your own (FILES_REST_STORAGE_FACTORY=<module>)', () => {
  let s: TestServer;
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'files-rest-module-'));
    const fsBackend = pathToFileURL(join(process.cwd(), 'dist/src/storage/fs/fs-backend.js')).href;
    // A backend for `vault://NAME` URIs that keeps files under a directory of its own, built on the fs backend.
    await writeFile(
      join(dir, 'vault.mjs'),
      `import { FsBackend } from ${JSON.stringify(fsBackend)};
const root = ${JSON.stringify(join(dir, 'vault'))};
export default function factory(config) {
  const fs = new FsBackend({ splitLength: config.storagePathSplitLength, dimensions: config.storagePathDimensions });
  const toPath = (uri) => root + '/' + uri.slice('vault://'.length);
  const toUri = (path) => 'vault://' + path.slice(root.length + 1);
  return {
    name: 'vault',
    handles: (uri) => uri.startsWith('vault://'),
    normalizeLocationUri: (uri) => uri.replace(/\\/+$/, ''),
    makeUri: (loc, id) => toUri(fs.makeUri(toPath(loc), id)),
    initialize: (uri, size, o) => fs.initialize(toPath(uri), size, o),
    open: (uri, range) => fs.open(toPath(uri), range),
    save: (uri, src, o) => fs.save(toPath(uri), src, o),
    update: (uri, src, part) => fs.update(toPath(uri), src, part),
    delete: (uri) => fs.delete(toPath(uri)),
  };
}
`,
    );
    s = await startTestServer({ FILES_REST_STORAGE_FACTORY: join(dir, 'vault.mjs'), FILES_REST_AUTO_LOCATION: '0' });
    await createLocation(s.server.core.ctx, { name: 'vault', uri: 'vault://main', isDefault: true });
  });
  after(async () => {
    await s.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('stores, serves and deletes files through the module', async () => {
    const b = await createBucket(s.files);
    const v = (await put(`${s.files}/${b}/a.txt`, 'kept in the vault')).json;
    assert.equal((await filesUnder(join(dir, 'vault', 'main'))).length, 1);
    assert.equal((await req(`${s.files}/${b}/a.txt`)).text, 'kept in the vault');
    assert.equal((await req(`${s.files}/${b}/a.txt`, { headers: { Range: 'bytes=8-11' } })).text, 'the ');
    assert.equal((await req(`${s.files}/${b}/a.txt?versionId=${v.version_id}`, { method: 'DELETE' })).status, 204);
    const deadline = Date.now() + 10_000;
    while ((await filesUnder(join(dir, 'vault', 'main'))).length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.equal((await filesUnder(join(dir, 'vault', 'main'))).length, 0);
  });

  it('a module path that exports no factory stops the start with a clear message', async () => {
    await writeFile(join(dir, 'empty.mjs'), 'export const nothing = 1;\n');
    await assert.rejects(startTestServer({ FILES_REST_STORAGE_FACTORY: join(dir, 'empty.mjs') }), /FILES_REST_STORAGE_FACTORY/);
  });
});
