/**
 * Bulk seeding for the metadata-scale workloads (W6, W7). Inserting a million objects through HTTP
 * would take hours, so buckets are filled directly in the database, with the service stopped, in
 * one transaction of set-based INSERT … SELECT statements.
 *
 * Each seeded object is a head version with its own file-instance row (4 KiB, a fixed checksum, a
 * unique URI under the data directory), exactly as an upload leaves them; only the bytes are
 * missing on disk, which listing and new uploads never look at. Keys look like
 * `data/123/file-00012345.bin` and are inserted out of key order, as real uploads would be.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';

export const SEED_OBJECT_SIZE = 4096;
/** md5 of 4096 zero bytes: the seeded files' recorded checksum. */
const SEED_CHECKSUM = 'md5:620f0b67a91f7f74151bc5be745b7110';

export interface SeededBucket {
  id: string;
  objects: number;
  seconds: number;
  /** The whole database's size on disk once seeded (all buckets seeded so far), in bytes. */
  databaseBytes: number;
  /** PostgreSQL: the size of each table with its indexes, and of each index of object_versions, in bytes. */
  relationBytes?: Record<string, number>;
}

function prefixes() {
  const r = randomBytes(4).toString('hex');
  return { file: `${r}-5eed-4000-8000-`, version: `${r}-5eed-4000-9000-` };
}

/** Seeds one bucket with `count` objects in a SQLite database (the service must be stopped). */
export async function seedSqlite(file: string, dataDir: string, count: number): Promise<SeededBucket> {
  const { default: SQLite } = await import('better-sqlite3');
  const db = new SQLite(file);
  const t0 = performance.now();
  try {
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = OFF');
    db.pragma('foreign_keys = ON');
    const loc = db.prepare('select id from locations where is_default = 1').get() as { id: string } | undefined;
    if (!loc) throw new Error('no default location: start the service once before seeding');
    const id = randomUUID();
    const p = prefixes();
    const now = Date.now() * 1000;
    const uriBase = join(dataDir, 'bench-seed', id) + '/';
    db.transaction(() => {
      db.prepare(
        `insert into buckets (id, default_location, default_storage_class, size, reserved_size, quota_size, max_file_size, locked, deleted, created, updated)
         values (?, ?, 'S', ?, 0, null, null, 0, 0, ?, ?)`,
      ).run(id, loc.id, count * SEED_OBJECT_SIZE, now, now);
      db.prepare(
        `with recursive n(i) as (select 0 union all select i + 1 from n where i + 1 < ?)
         insert into files (id, location_id, uri, storage_class, size, checksum, readable, writable, last_check_at, last_check, created, updated)
         select printf('%s%012x', ?, i), ?, ? || printf('%012x', i) || '/data', 'S', ?, ?, 1, 0, null, null, ?, ? from n`,
      ).run(count, p.file, loc.id, uriBase, SEED_OBJECT_SIZE, SEED_CHECKSUM, now, now);
      db.prepare(
        `with recursive n(i) as (select 0 union all select i + 1 from n where i + 1 < ?)
         insert into object_versions (version_id, bucket_id, key, file_id, mimetype, is_head, tags, created, updated)
         select printf('%s%012x', ?, i), ?, printf('data/%03d/file-%08d.bin', i % 1000, i), printf('%s%012x', ?, i),
                'application/octet-stream', 1, '{}', ?, ? from n`,
      ).run(count, p.version, id, p.file, now, now);
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
    return { id, objects: count, seconds: (performance.now() - t0) / 1000, databaseBytes: statSync(file).size };
  } finally {
    db.close();
  }
}

/** Seeds one bucket with `count` objects in a PostgreSQL database, then VACUUM ANALYZEs (as autovacuum soon would). */
export async function seedPostgres(url: string, dataDir: string, count: number): Promise<SeededBucket> {
  const pg = (await import('pg')).default;
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  const t0 = performance.now();
  try {
    const loc = await c.query<{ id: string }>('select id from locations where is_default = 1');
    const locId = loc.rows[0]?.id;
    if (!locId) throw new Error('no default location: start the service once before seeding');
    const id = randomUUID();
    const p = prefixes();
    const now = Date.now() * 1000;
    const uriBase = join(dataDir, 'bench-seed', id) + '/';
    await c.query('set synchronous_commit = off');
    await c.query('begin');
    try {
      await c.query(
        `insert into buckets (id, default_location, default_storage_class, size, reserved_size, quota_size, max_file_size, locked, deleted, created, updated)
         values ($1, $2, 'S', $3, 0, null, null, 0, 0, $4, $4)`,
        [id, locId, count * SEED_OBJECT_SIZE, now],
      );
      await c.query(
        `insert into files (id, location_id, uri, storage_class, size, checksum, readable, writable, last_check_at, last_check, created, updated)
         select $1 || lpad(to_hex(i), 12, '0'), $2, $3 || lpad(to_hex(i), 12, '0') || '/data', 'S', $4, $5, 1, 0, null, null, $6, $6
         from generate_series(0, $7::int - 1) as i`,
        [p.file, locId, uriBase, SEED_OBJECT_SIZE, SEED_CHECKSUM, now, count],
      );
      await c.query(
        `insert into object_versions (version_id, bucket_id, key, file_id, mimetype, is_head, tags, created, updated)
         select $1 || lpad(to_hex(i), 12, '0'), $2, 'data/' || lpad((i % 1000)::text, 3, '0') || '/file-' || lpad(i::text, 8, '0') || '.bin',
                $3 || lpad(to_hex(i), 12, '0'), 'application/octet-stream', 1, '{}', $4, $4
         from generate_series(0, $5::int - 1) as i`,
        [p.version, id, p.file, now, count],
      );
      await c.query('commit');
    } catch (e) {
      await c.query('rollback').catch(() => {});
      throw e;
    }
    await c.query('vacuum analyze buckets, files, object_versions');
    const seconds = (performance.now() - t0) / 1000;
    const size = await c.query<{ bytes: string }>('select pg_database_size(current_database()) as bytes');
    const rel = await c.query<{ name: string; bytes: string }>(
      `select relname as name, pg_total_relation_size(oid) as bytes from pg_class where relname in ('object_versions', 'files', 'buckets', 'tasks')
       union all
       select indexrelname, pg_relation_size(indexrelid) from pg_stat_user_indexes where relname = 'object_versions'`,
    );
    const relationBytes = Object.fromEntries(rel.rows.map((r) => [r.name, Number(r.bytes)]));
    return { id, objects: count, seconds, databaseBytes: Number(size.rows[0]!.bytes), relationBytes };
  } finally {
    await c.end();
  }
}

/** Creates a fresh PostgreSQL database next to `adminUrl`'s; returns its URL and a drop function. */
export async function createPgDatabase(adminUrl: string): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const pg = (await import('pg')).default;
  const name = `files_rest_bench_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    name,
    drop: async () => {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      try {
        await c.query(`drop database if exists ${name} with (force)`);
      } finally {
        await c.end();
      }
    },
  };
}
