import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from './support/process.js';
import { processEnv } from './support/fixtures.js';
import { loadConfig, ConfigError } from '../src/config.js';
import { taskDefinitions, type Core } from '../src/service.js';
import net from 'node:net';

describe('Admin commands', () => {
  let env: Record<string, string>;
  let dir: string;
  let drop: () => Promise<void>;
  before(async () => {
    const e = await processEnv();
    env = e.env;
    dir = e.dir;
    drop = e.drop;
    // Admin commands never create a database: `init` does (as `serve` would).
    const init = await runCli(['init', '--json'], { ...env, FILES_REST_AUTO_LOCATION: '0' });
    assert.equal(init.code, 0, init.stderr);
    assert.equal(JSON.parse(init.stdout).created, true);
  });
  after(async () => {
    await drop();
    await rm(dir, { recursive: true, force: true });
  });
  const cli = async (...args: string[]) => {
    const r = await runCli(args, env);
    return { ...r, json: r.stdout.trim().startsWith('{') || r.stdout.trim().startsWith('[') ? JSON.parse(r.stdout) : undefined };
  };

  it('location create, list and set-default; --json anywhere on the line', async () => {
    let r = await cli('location', 'create', 'primary', `${dir}/primary`, '--default', '--json');
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.json, { name: 'primary', uri: `${dir}/primary`, default: true });
    r = await cli('--json', 'location', 'create', 'archive', `${dir}/archive`);
    assert.equal(r.json.default, false);
    r = await cli('location', 'list', '--json');
    assert.deepEqual(r.json, [
      { name: 'archive', uri: `${dir}/archive`, default: false },
      { name: 'primary', uri: `${dir}/primary`, default: true },
    ]);
    r = await cli('location', 'set-default', 'archive');
    assert.equal(r.code, 0);
    assert.match(r.stdout, /archive is now the default/);
    r = await cli('location', 'list', '--json');
    assert.deepEqual(r.json.map((l: { name: string; default: boolean }) => [l.name, l.default]), [['archive', true], ['primary', false]]);
    r = await cli('location', 'create', 'primary', '/tmp/x');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /already exists/);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    r = await cli('location', 'set-default', 'nope');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /nope/);
  });

  it('bucket create, show, set, lock, unlock, delete, restore', async () => {
    let r = await cli('bucket', 'create');
    assert.equal(r.code, 0, r.stderr);
    const id = r.stdout.trim();
    assert.match(id, /^[0-9a-f-]{36}$/);
    r = await cli('bucket', 'show', id, '--json');
    const keys = Object.keys(r.json);
    assert.equal(keys[0], 'id');
    for (const k of ['size', 'quota_size', 'max_file_size', 'locked', 'created', 'updated', 'links', 'deleted', 'default_location']) assert.ok(keys.includes(k), k);
    assert.equal(r.json.deleted, false);
    r = await cli('bucket', 'set', id, '--quota-size', '1000', '--max-file-size', '100', '--location', 'primary', '--json');
    assert.equal(r.json.quota_size, 1000);
    assert.equal(r.json.max_file_size, 100);
    assert.equal(r.json.default_location, 'primary');
    r = await cli('bucket', 'set', id, '--quota-size', 'none', '--json');
    assert.equal(r.json.quota_size, null);
    assert.equal(r.json.max_file_size, 100);
    assert.equal((await cli('bucket', 'lock', id, '--json')).json.locked, true);
    assert.equal((await cli('bucket', 'unlock', id, '--json')).json.locked, false);
    assert.equal((await cli('bucket', 'delete', id, '--json')).json.deleted, true);
    assert.equal((await cli('bucket', 'restore', id, '--json')).json.deleted, false);
    r = await cli('bucket', 'set', id, '--quota-size', '-5');
    assert.notEqual(r.code, 0);
    r = await cli('bucket', 'show', '00000000-0000-4000-8000-000000000000');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /Bucket does not exist/);
    r = await cli('bucket', 'create', '--location', 'nope');
    assert.notEqual(r.code, 0);
  });

  it('bucket snapshot and sync', async () => {
    const src = (await cli('bucket', 'create')).stdout.trim();
    const snap = await cli('bucket', 'snapshot', src, '--json');
    assert.equal(snap.code, 0, snap.stderr);
    assert.notEqual(snap.json.id, src);
    const dst = (await cli('bucket', 'create')).stdout.trim();
    const sync = await cli('bucket', 'sync', src, dst, '--delete-extras', '--json');
    assert.equal(sync.code, 0, sync.stderr);
    assert.deepEqual(sync.json.changes, []);
  });

  it('token create (all actions, or a bucket and a list) and revoke', async () => {
    const b = (await cli('bucket', 'create')).stdout.trim();
    let r = await cli('token', 'create', '--json');
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(Object.keys(r.json), ['id', 'token', 'bucket', 'actions', 'expires']);
    assert.equal(r.json.bucket, null);
    assert.equal(r.json.actions.length, 11);
    r = await cli('token', 'create', '--bucket', b, '--json');
    assert.equal(r.json.bucket, b);
    assert.ok(!r.json.actions.includes('location-update'));
    r = await cli('token', 'create', '--bucket', b, '--actions', 'object-read,bucket-read', '--json');
    assert.deepEqual(r.json.actions, ['object-read', 'bucket-read']);
    r = await cli('token', 'create', '--actions', 'object-read,fly');
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /fly/);
    const t = (await cli('token', 'create', '--json')).json;
    assert.equal((await cli('token', 'revoke', t.id)).code, 0);
    assert.notEqual((await cli('token', 'revoke', '00000000-0000-4000-8000-000000000000')).code, 0);
  });

  it('task list, retry of a failed task, and task run of a periodic task', async () => {
    let r = await cli('task', 'run', 'expire-uploads', '--json');
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.json.done, true);
    r = await cli('task', 'run', 'no-such-task');
    assert.notEqual(r.code, 0);
    r = await cli('task', 'list', '--json');
    assert.ok(Array.isArray(r.json));
    r = await cli('task', 'list', '--failed', '--json');
    assert.deepEqual(r.json, []);
    assert.notEqual((await cli('task', 'retry', '99999')).code, 0);
  });

  it('task run --help names every periodic task', async () => {
    const r = await runCli(['task', 'run', '--help'], env);
    assert.equal(r.code, 0, r.stderr);
    const core = { ctx: { config: loadConfig({}) } } as unknown as Core;
    const periodic = taskDefinitions(core).filter((d) => d.periodicSeconds).map((d) => d.name);
    assert.ok(periodic.includes('sweep-storage'));
    for (const name of periodic) assert.ok(r.stdout.includes(name), `${name} missing from: ${r.stdout}`);
  });

  it('start-up failures name the setting: DATABASE_URL and its address, PORT', async () => {
    let r = await runCli(['serve'], { ...env, DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/files' });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /DATABASE_URL/);
    assert.match(r.stderr, /127\.0\.0\.1:1\b/);
    assert.doesNotMatch(r.stderr, /migration|secret/);
    const busy = net.createServer();
    await new Promise<void>((res) => busy.listen(0, '127.0.0.1', () => res()));
    try {
      const port = (busy.address() as net.AddressInfo).port;
      r = await runCli(['serve'], { ...env, PORT: String(port), FILES_REST_WORKER: '0' });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, new RegExp(`files-rest: cannot listen on 127\\.0\\.0\\.1:${port}: .*in use.*PORT`));
    } finally {
      busy.close();
    }
  });

  it('unknown commands and bad settings fail with a one-line reason', async () => {
    let r = await runCli(['bucket', 'frobnicate'], env);
    assert.notEqual(r.code, 0);
    r = await runCli(['serve'], { ...env, PORT: 'eighty' });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /PORT/);
    assert.equal(r.stderr.trim().split('\n').length, 1);
    r = await runCli(['serve'], { ...env, FILES_REST_DEFAULT_QUOTA_SIZE: '-1' });
    assert.match(r.stderr, /FILES_REST_DEFAULT_QUOTA_SIZE/);
    r = await runCli(['serve'], { ...env, FILES_REST_SOMETHING_WRONG: '1' });
    assert.match(r.stderr, /FILES_REST_SOMETHING_WRONG/);
  });
});

describe('Admin commands on a missing database', () => {
  it('fail naming DATABASE_URL and the place they looked, create nothing; init creates the database', async () => {
    const { env, dir, drop } = await processEnv({ FILES_REST_AUTO_LOCATION: '0' });
    try {
      const where = env.DATABASE_URL!.startsWith('sqlite:') ? env.DATABASE_URL!.slice('sqlite:'.length) : new URL(env.DATABASE_URL!).pathname;
      for (const args of [['location', 'list'], ['token', 'create'], ['bucket', 'create']]) {
        const r = await runCli(args, env);
        assert.notEqual(r.code, 0, `${args.join(' ')}: ${r.stdout}`);
        assert.match(r.stderr, /DATABASE_URL/);
        assert.ok(r.stderr.includes(where), r.stderr);
        assert.match(r.stderr, /files-rest init/);
        assert.equal(r.stderr.trim().split('\n').length, 1);
        assert.equal(r.stdout, '');
      }
      assert.deepEqual(await readdir(dir), [], 'no database file was created');
      // Still missing: the failed commands left no schema behind (PostgreSQL).
      assert.notEqual((await runCli(['location', 'list'], env)).code, 0);
      let r = await runCli(['init'], { ...env, FILES_REST_AUTO_LOCATION: '1' });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /created the files-rest database/);
      r = await runCli(['location', 'list', '--json'], env);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), [{ name: 'default', uri: join(dir, 'data'), default: true }]);
      r = await runCli(['init'], env);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /already exists/);
    } finally {
      await drop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('run in another directory with the default DATABASE_URL: an error, no ./var created there', async () => {
    const elsewhere = await mkdtemp(join(tmpdir(), 'files-rest-elsewhere-'));
    try {
      const r = await runCli(['location', 'list'], { FILES_REST_PERMISSION_FACTORY: 'allow-all' }, { cwd: elsewhere });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /DATABASE_URL=sqlite:\.\/var\/files-rest\.db/);
      assert.ok(r.stderr.includes(join(elsewhere, 'var', 'files-rest.db')), r.stderr);
      assert.deepEqual(await readdir(elsewhere), []);
    } finally {
      await rm(elsewhere, { recursive: true, force: true });
    }
  });
});

describe('Settings', () => {
  it('defaults are those of CONTRACT.md', () => {
    const c = loadConfig({});
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.port, 8080);
    assert.equal(c.urlPrefix, '');
    assert.equal(c.databaseUrl, 'sqlite:./var/files-rest.db');
    assert.equal(c.dataDir, './var/data');
    assert.equal(c.permissionFactory, 'token');
    assert.equal(c.objectKeyMaxLen, 255);
    assert.equal(c.multipartMaxParts, 10000);
    assert.equal(c.multipartChunkSizeMin, 5 * 1024 * 1024);
    assert.equal(c.multipartChunkSizeMax, 5 * 1024 * 1024 * 1024);
    assert.equal(c.multipartExpires, 4);
    assert.equal(c.maxContentLength, null);
    assert.equal(c.defaultMaxFileSize, null);
    assert.equal(c.defaultQuotaSize, null);
    assert.equal(c.xsendfileEnabled, false);
    assert.equal(c.storageFactory, 'fs');
    assert.equal(c.storagePathSplitLength, 2);
    assert.equal(c.storagePathDimensions, 2);
    assert.equal(c.allowRangeRequests, true);
    assert.equal(c.multipartAbortOnPartFailure, true);
    assert.equal(c.shutdownGrace, 30);
    assert.ok(Object.isFrozen(c));
  });

  it('a bad value names the setting', () => {
    const bad: Array<[string, string]> = [
      ['PORT', '70000'], ['PORT', 'x'], ['FILES_REST_DEFAULT_MAX_FILE_SIZE', '1.5'], ['FILES_REST_MULTIPART_EXPIRES', '-1'],
      ['FILES_REST_STORAGE_FACTORY', 'tape'], ['FILES_REST_PERMISSION_FACTORY', 'everyone'], ['FILES_REST_WORKER', 'maybe'],
      ['DATABASE_URL', 'mysql://x'], ['FILES_REST_BASE_URL', 'not a url'], ['FILES_REST_URL_PREFIX', 'api'],
      ['FILES_REST_UNKNOWN_THING', '1'],
    ];
    for (const [name, value] of bad) {
      assert.throws(() => loadConfig({ [name]: value }), (e: unknown) => e instanceof ConfigError && e.setting === name, `${name}=${value}`);
    }
    assert.equal(loadConfig({ FILES_REST_MULTIPART_EXPIRES: '0.0001' }).multipartExpires, 0.0001);
    assert.equal(loadConfig({ FILES_REST_URL_PREFIX: '/api/' }).urlPrefix, '/api');
  });
});
