import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { loadConfig, type Config } from '../../src/config.js';
import { createServer, startServer, type Server } from '../../src/service.js';

export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** Which database the suite runs on: TEST_DATABASE=postgres or the default SQLite. */
export function testDatabase(): 'sqlite' | 'postgres' {
  return process.env.TEST_DATABASE === 'postgres' ? 'postgres' : 'sqlite';
}

/** Creates a fresh PostgreSQL database for one test server; returns its URL and a drop function. */
export async function createPgDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const pg = (await import('pg')).default;
  const name = `files_rest_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
  return {
    url,
    drop: async () => {
      const c = new pg.Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

/**
 * Which storage the HTTP suites use for the default location: S3 (TEST_STORAGE=s3 on the fauxqs
 * emulator, TEST_STORAGE=rgw on Ceph's RADOS Gateway) or the file system.
 */
export function testStorage(): 'fs' | 's3' {
  return process.env.TEST_STORAGE === 's3' || process.env.TEST_STORAGE === 'rgw' ? 's3' : 'fs';
}

/** Which S3 server holds the default location when testStorage() is 's3'. */
export function testS3Server(): 'fauxqs' | 'rgw' {
  return process.env.TEST_STORAGE === 'rgw' ? 'rgw' : 'fauxqs';
}

/**
 * Every stored file of every location of a running server (through the backends: fs or S3), owner
 * markers aside, and every small file kept in the database (`inline:` URIs, FILES_REST_INLINE_MAX_SIZE).
 */
export async function storedFiles(t: TestServer): Promise<string[]> {
  const { listLocations } = await import('../../src/domain/locations.js');
  const { isMarkerUri } = await import('../../src/domain/location-owner.js');
  const ctx = t.server.core.ctx;
  const out: string[] = [];
  for (const loc of await listLocations(ctx.db)) {
    const backend = ctx.storage.forUri(loc.uri);
    if (backend.list) for await (const f of backend.list(loc.uri)) if (!isMarkerUri(f.uri)) out.push(f.uri);
  }
  for (const r of await ctx.db.selectFrom('inline_files').select('uri').execute()) out.push(r.uri);
  return out.sort();
}

/**
 * For a test file about the files of a location (it reads, damages or counts them by path, or hands
 * them to a proxy): every upload, however small, is stored as a file, as with
 * FILES_REST_INLINE_MAX_SIZE=0. Small objects kept in the database have their own tests (inline.test.ts).
 */
export function storeSmallObjectsAsFiles(): void {
  process.env.TEST_INLINE_MAX_SIZE = '0';
}

/**
 * Waits (at most `ms`) until no `remove-file-data` task is queued or running: a hard delete removes
 * its bytes in the background, so a test that compares the stored files before and after a step
 * must not let an earlier test's removal land in between.
 */
export async function fileRemovalsSettled(t: TestServer, ms = 15_000): Promise<void> {
  const db = t.server.core.ctx.db;
  const end = Date.now() + ms;
  for (;;) {
    const row = await db
      .selectFrom('tasks')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('name', '=', 'remove-file-data')
      .where('state', 'in', ['queued', 'running'])
      .executeTakeFirstOrThrow();
    if (Number(row.n) === 0) return;
    if (Date.now() > end) throw new Error(`${row.n} file removals still pending after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface TestServer {
  url: string;
  /** The S3 door's URL (FILES_REST_S3_PORT=auto), '' when off. */
  s3Url: string;
  /** URL of the bucket collection (`…/files`). */
  files: string;
  server: Server;
  config: Config;
  dir: string;
  databaseUrl: string;
  env: Record<string, string>;
  close(): Promise<void>;
}

/**
 * What every files-rest a test starts needs: a temporary directory and a database of the run's kind
 * (SQLite in the directory, or a new PostgreSQL database that `drop` removes), and the settings
 * every test server starts with (127.0.0.1, any port, data in the directory, allow-all, fast polling).
 * With `ownDatabase: false` no PostgreSQL database is made (the caller brings its own DATABASE_URL).
 */
export async function testEnvironment(
  prefix: string,
  opts: { ownDatabase?: boolean } = {},
): Promise<{ dir: string; drop: () => Promise<void>; env: Record<string, string> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  let databaseUrl = `sqlite:${join(dir, 'db.sqlite')}`;
  let drop = async () => {};
  if (testDatabase() === 'postgres' && opts.ownDatabase !== false) {
    const pg = await createPgDatabase();
    databaseUrl = pg.url;
    drop = pg.drop;
  }
  return {
    dir,
    drop,
    env: {
      HOST: '127.0.0.1',
      PORT: '0',
      DATABASE_URL: databaseUrl,
      FILES_REST_DATA_DIR: join(dir, 'data'),
      FILES_REST_PERMISSION_FACTORY: 'allow-all',
      FILES_REST_TASK_POLL_INTERVAL: '50',
      // The S3 door's default port (9000) would be shared by every test server: off unless a test asks (`auto`).
      FILES_REST_S3_PORT: 'off',
      ...(process.env.TEST_INLINE_MAX_SIZE !== undefined ? { FILES_REST_INLINE_MAX_SIZE: process.env.TEST_INLINE_MAX_SIZE } : {}),
      // TEST_SQLITE_DRIVER=node runs the suite on node:sqlite instead of better-sqlite3.
      ...(process.env.TEST_SQLITE_DRIVER ? { FILES_REST_SQLITE_DRIVER: process.env.TEST_SQLITE_DRIVER } : {}),
    },
  };
}

/**
 * Starts a real files-rest server on 127.0.0.1 with its own data directory and database.
 * `env` holds settings as an operator would write them.
 */
export async function startTestServer(env: Record<string, string> = {}): Promise<TestServer> {
  const { dir, drop, env: base } = await testEnvironment('files-rest-test-', { ownDatabase: env.DATABASE_URL === undefined });
  const fullEnv: Record<string, string> = { ...base, LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent', ...env };
  // TEST_STORAGE=s3 or rgw: the server's default location is a bucket of an S3-compatible server
  // (unless the test chose its own storage or location set-up): fauxqs started for this server, or a
  // bucket of its own on the run's Ceph RGW cluster (test/support/rgw.ts).
  let s3: { close(): Promise<void> } | null = null;
  const s3Bucket = testS3Server() === 'rgw' ? `files-rest-test-${randomBytes(6).toString('hex')}` : 'files-rest-test';
  if (testStorage() === 's3' && env.FILES_REST_STORAGE_FACTORY === undefined && env.FILES_REST_AUTO_LOCATION === undefined) {
    let started;
    if (testS3Server() === 'rgw') {
      const { startTestRgw } = await import('./rgw.js');
      started = await startTestRgw();
      if ('skip' in started) throw new Error(`TEST_STORAGE=rgw: ${started.skip}`);
    } else {
      const { startTestS3 } = await import('./s3.js');
      started = await startTestS3();
    }
    s3 = started;
    await started.createBucket(s3Bucket);
    Object.assign(fullEnv, started.env, { FILES_REST_STORAGE_FACTORY: 's3', FILES_REST_AUTO_LOCATION: '0' });
  }
  let server: Server;
  let url: string;
  try {
    const config = loadConfig(fullEnv);
    server = await createServer(config, { log: pino({ level: config.logLevel }) });
    if (s3) {
      const { createLocation } = await import('../../src/domain/locations.js');
      await createLocation(server.core.ctx, { name: 'default', uri: `s3://${s3Bucket}/data`, isDefault: true });
    }
    url = await startServer(server);
  } catch (e) {
    // A start that fails leaves nothing running or behind.
    await s3?.close();
    await drop();
    await rm(dir, { recursive: true, force: true });
    throw e;
  }
  const config = server.core.config;
  return {
    url,
    s3Url: server.s3Url,
    files: `${url}${config.urlPrefix}/files`,
    server,
    config,
    dir,
    databaseUrl: fullEnv.DATABASE_URL!,
    env: fullEnv,
    async close() {
      await server.stop();
      await s3?.close();
      await drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
