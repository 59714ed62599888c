import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import type { Dialect } from './schema.js';
import { isConnectionError } from './database.js';
import { newId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';

/**
 * Schema migrations. Each is written once for both databases: the few type names that differ are
 * chosen by `types(dialect)`; everything else is portable SQL.
 */
function types(dialect: Dialect) {
  return {
    serial: dialect === 'postgres' ? 'bigserial' : 'integer',
    key: dialect === 'postgres' ? sql`text collate "C"` : sql`text`,
  } as const;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

const migrations: Record<string, (dialect: Dialect) => Migration> = {
  '0001_core': (dialect) => ({
    async up(db: AnyDb) {
      const t = types(dialect);
      await db.schema
        .createTable('locations')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('name', 'text', (c) => c.notNull().unique())
        .addColumn('uri', 'text', (c) => c.notNull())
        .addColumn('is_default', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .execute();
      // At most one default location, enforced by the database.
      await sql`create unique index locations_one_default on locations (is_default) where is_default = 1`.execute(db);

      await db.schema
        .createTable('buckets')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('default_location', 'text', (c) => c.notNull().references('locations.id'))
        .addColumn('default_storage_class', 'text', (c) => c.notNull().defaultTo('S'))
        .addColumn('size', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('reserved_size', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('quota_size', 'bigint')
        .addColumn('max_file_size', 'bigint')
        .addColumn('locked', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('deleted', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .addCheckConstraint('buckets_size_nonnegative', sql`size >= 0 and reserved_size >= 0`)
        .execute();

      await db.schema
        .createTable('files')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('location_id', 'text', (c) => c.references('locations.id'))
        .addColumn('uri', 'text', (c) => c.unique())
        .addColumn('storage_class', 'text', (c) => c.notNull().defaultTo('S'))
        .addColumn('size', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('checksum', 'text')
        .addColumn('readable', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('writable', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('last_check_at', 'bigint')
        .addColumn('last_check', 'integer')
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .execute();
      await sql`create index files_last_check_at on files (last_check_at)`.execute(db);
      await sql`create index files_location on files (location_id)`.execute(db);

      await db.schema
        .createTable('object_versions')
        .addColumn('seq', t.serial, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey()))
        .addColumn('version_id', 'text', (c) => c.notNull().unique())
        .addColumn('bucket_id', 'text', (c) => c.notNull().references('buckets.id'))
        .addColumn('key', t.key, (c) => c.notNull())
        .addColumn('file_id', 'text', (c) => c.references('files.id'))
        .addColumn('mimetype', 'text')
        .addColumn('is_head', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('tags', 'text', (c) => c.notNull().defaultTo('{}'))
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .execute();
      // Exactly one head per (bucket, key), on every database.
      await sql`create unique index object_versions_one_head on object_versions (bucket_id, key) where is_head = 1`.execute(db);
      await sql`create index object_versions_by_key on object_versions (bucket_id, key, seq)`.execute(db);
      await sql`create index object_versions_by_file on object_versions (file_id)`.execute(db);

      await db.schema
        .createTable('tasks')
        .addColumn('id', t.serial, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey()))
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('payload', 'text', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('max_attempts', 'integer', (c) => c.notNull())
        .addColumn('run_at', 'bigint', (c) => c.notNull())
        .addColumn('locked_by', 'text')
        .addColumn('locked_until', 'bigint')
        .addColumn('last_error', 'text')
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .execute();
      await sql`create index tasks_runnable on tasks (state, run_at)`.execute(db);

      await db.schema
        .createTable('periodic_tasks')
        .addColumn('name', 'text', (c) => c.primaryKey())
        .addColumn('next_run', 'bigint', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('tokens')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('secret_hash', 'text', (c) => c.notNull().unique())
        .addColumn('bucket_id', 'text', (c) => c.references('buckets.id'))
        .addColumn('actions', 'text', (c) => c.notNull())
        .addColumn('expires', 'bigint')
        .addColumn('revoked', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created', 'bigint', (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('multipart_uploads')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('bucket_id', 'text', (c) => c.notNull().references('buckets.id'))
        .addColumn('key', t.key, (c) => c.notNull())
        .addColumn('file_id', 'text', (c) => c.notNull().references('files.id'))
        .addColumn('size', 'bigint', (c) => c.notNull())
        .addColumn('part_size', 'bigint', (c) => c.notNull())
        .addColumn('last_part_number', 'integer', (c) => c.notNull())
        .addColumn('last_part_size', 'bigint', (c) => c.notNull())
        .addColumn('state', 'text', (c) => c.notNull())
        .addColumn('version_id', 'text')
        .addColumn('storage_ref', 'text')
        .addColumn('hashed_bytes', 'bigint', (c) => c.notNull().defaultTo(0))
        .addColumn('error', 'text')
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .execute();
      await sql`create index multipart_uploads_by_bucket on multipart_uploads (bucket_id, state, created)`.execute(db);

      await db.schema
        .createTable('parts')
        .addColumn('upload_id', 'text', (c) => c.notNull().references('multipart_uploads.id').onDelete('cascade'))
        .addColumn('part_number', 'integer', (c) => c.notNull())
        .addColumn('checksum', 'text', (c) => c.notNull())
        .addColumn('storage_etag', 'text')
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('parts_pk', ['upload_id', 'part_number'])
        .execute();
    },
  }),
  // The database's stable id. A location's storage holds a marker naming it (domain/location-owner.ts),
  // so two databases never treat each other's files as their own.
  '0002_database_identity': () => ({
    async up(db: AnyDb) {
      await db.schema
        .createTable('database_identity')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('created', 'bigint', (c) => c.notNull())
        .execute();
      await db.insertInto('database_identity').values({ id: newId(), created: nowMicros() }).execute();
    },
  }),
  // A write of a multipart part in progress (domain/part-claims.ts): re-sends of one part are
  // serialised across every API process sharing the database.
  '0003_part_writes': () => ({
    async up(db: AnyDb) {
      await db.schema
        .createTable('part_writes')
        .addColumn('upload_id', 'text', (c) => c.notNull())
        .addColumn('part_number', 'integer', (c) => c.notNull())
        .addColumn('writer', 'text', (c) => c.notNull())
        .addColumn('heartbeat', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('part_writes_pk', ['upload_id', 'part_number'])
        .execute();
    },
  }),
  // The S3 door (src/s3): bucket names, stored object metadata, access key pairs.
  '0004_s3_door': () => ({
    async up(db: AnyDb) {
      await db.schema.alterTable('buckets').addColumn('name', 'text').execute();
      await sql`create unique index buckets_name on buckets (name)`.execute(db);
      await db.schema.alterTable('object_versions').addColumn('metadata', 'text').execute();
      await db.schema
        .createTable('access_keys')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('access_key_id', 'text', (c) => c.notNull().unique())
        .addColumn('secret_encrypted', 'text', (c) => c.notNull())
        .addColumn('bucket_id', 'text')
        .addColumn('actions', 'text', (c) => c.notNull())
        .addColumn('expires', 'bigint')
        .addColumn('revoked', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created', 'bigint', (c) => c.notNull())
        .execute();
    },
  }),
  // Browser door (issue 16): publicly readable buckets; the used nonces of single-use signed upload URLs.
  '0005_public_buckets': () => ({
    async up(db: AnyDb) {
      await db.schema.alterTable('buckets').addColumn('public_read', 'integer', (c) => c.notNull().defaultTo(0)).execute();
      await db.schema
        .createTable('signed_url_uses')
        .addColumn('nonce', 'text', (c) => c.primaryKey())
        .addColumn('expires', 'bigint', (c) => c.notNull())
        .execute();
      await sql`create index signed_url_uses_expires on signed_url_uses (expires)`.execute(db);
    },
  }),
  // tus resumable uploads (src/domain/resumable.ts): one row per upload in progress; its bytes go
  // into its own file instance (a `files` row, readable 0), written in place.
  '0006_resumable_uploads': () => ({
    async up(db: AnyDb) {
      await db.schema
        .createTable('resumable_uploads')
        .addColumn('id', 'text', (c) => c.primaryKey())
        .addColumn('bucket_id', 'text', (c) => c.notNull())
        .addColumn('key', 'text', (c) => c.notNull())
        .addColumn('file_id', 'text', (c) => c.notNull())
        .addColumn('length', 'bigint')
        .addColumn('upload_offset', 'bigint', (c) => c.notNull())
        .addColumn('reserved', 'bigint', (c) => c.notNull())
        .addColumn('mimetype', 'text')
        .addColumn('metadata', 'text')
        .addColumn('writer', 'text')
        .addColumn('heartbeat', 'bigint')
        .addColumn('expires', 'bigint', (c) => c.notNull())
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('resumable_uploads_expires').on('resumable_uploads').column('expires').execute();
      await db.schema.createIndex('resumable_uploads_bucket').on('resumable_uploads').column('bucket_id').execute();
    },
  }),
  /** S3 multipart uploads: the door that started an upload, what it stores with the object, and each part's size (S3 parts are not all of one declared size). */
  '0007_s3_multipart': () => ({
    async up(db: AnyDb) {
      await db.schema.alterTable('multipart_uploads').addColumn('door', 'text', (c) => c.notNull().defaultTo('rest')).execute();
      await db.schema.alterTable('multipart_uploads').addColumn('metadata', 'text').execute();
      await db.schema.alterTable('parts').addColumn('size', 'bigint').execute();
    },
  }),
  /**
   * Replicas (issue 18): a bucket's replication policy, the further copies of file instances (the
   * file's own location and URI stay its first copy), and the fixity history of every copy.
   */
  '0008_replicas': (dialect) => ({
    async up(db: AnyDb) {
      const t = types(dialect);
      await db.schema.alterTable('buckets').addColumn('copies', 'integer').execute();
      await db.schema
        .createTable('file_copies')
        .addColumn('file_id', 'text', (c) => c.notNull())
        .addColumn('location_id', 'text', (c) => c.notNull().references('locations.id'))
        .addColumn('uri', 'text', (c) => c.notNull())
        .addColumn('last_check_at', 'bigint')
        .addColumn('last_check', 'integer')
        .addColumn('created', 'bigint', (c) => c.notNull())
        .addColumn('updated', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('file_copies_pk', ['file_id', 'location_id'])
        .execute();
      await sql`create index file_copies_location on file_copies (location_id)`.execute(db);
      await sql`create index file_copies_uri on file_copies (uri)`.execute(db);
      await db.schema
        .createTable('fixity_events')
        .addColumn('id', t.serial, (c) => (dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey()))
        .addColumn('file_id', 'text', (c) => c.notNull())
        .addColumn('location_id', 'text', (c) => c.notNull())
        .addColumn('at', 'bigint', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('ok', 'integer', (c) => c.notNull())
        .addColumn('checksum_found', 'text')
        .addColumn('detail', 'text')
        .execute();
      await sql`create index fixity_events_file on fixity_events (file_id, at)`.execute(db);
      await sql`create index fixity_events_at on fixity_events (at)`.execute(db);
      await db.schema
        .createTable('fixity_summary')
        .addColumn('file_id', 'text', (c) => c.notNull())
        .addColumn('location_id', 'text', (c) => c.notNull())
        .addColumn('kind', 'text', (c) => c.notNull())
        .addColumn('count', 'bigint', (c) => c.notNull())
        .addColumn('failed', 'bigint', (c) => c.notNull())
        .addColumn('first_at', 'bigint', (c) => c.notNull())
        .addColumn('last_at', 'bigint', (c) => c.notNull())
        .addPrimaryKeyConstraint('fixity_summary_pk', ['file_id', 'location_id', 'kind'])
        .execute();
    },
  }),
  '0009_inline_files': (dialect) => ({
    async up(db: AnyDb) {
      await db.schema
        .createTable('inline_files')
        .addColumn('uri', 'text', (c) => c.primaryKey())
        .addColumn('data', dialect === 'postgres' ? 'bytea' : 'blob', (c) => c.notNull())
        .addColumn('created', 'bigint', (c) => c.notNull())
        .execute();
    },
  }),
  /** A part's checksum besides MD5 (an S3 multipart upload's CRC32, SHA-256, …), for the object's checksum at completion. */
  '0010_part_checksums': () => ({
    async up(db: AnyDb) {
      await db.schema.alterTable('parts').addColumn('client_checksum', 'text').execute();
    },
  }),
  /** The region a bucket was created in through the S3 door (its LocationConstraint), answered by GetBucketLocation. */
  '0011_bucket_region': () => ({
    async up(db: AnyDb) {
      await db.schema.alterTable('buckets').addColumn('region', 'text').execute();
    },
  }),
  /** A bucket's CORS configuration (its rules as JSON), set through the S3 door's PutBucketCors. */
  '0012_bucket_cors': () => ({
    async up(db: AnyDb) {
      await db.schema.alterTable('buckets').addColumn('cors', 'text').execute();
    },
  }),
  /** A bucket's tags (a JSON object), set through the S3 door's PutBucketTagging. */
  '0013_bucket_tags': () => ({
    async up(db: AnyDb) {
      await db.schema.alterTable('buckets').addColumn('tags', 'text').execute();
    },
  }),
};

class StaticProvider implements MigrationProvider {
  constructor(private readonly dialect: Dialect) {}
  async getMigrations(): Promise<Record<string, Migration>> {
    return Object.fromEntries(Object.entries(migrations).map(([name, m]) => [name, m(this.dialect)]));
  }
}

export const MIGRATION_NAMES = Object.keys(migrations);

export async function migrateToLatest(db: AnyDb, dialect: Dialect): Promise<void> {
  const migrator = new Migrator({ db, provider: new StaticProvider(dialect) });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error || failed) {
    const cause = error ?? new Error('unknown error');
    // Not the migration's fault: the caller names DATABASE_URL and the address.
    if (isConnectionError(cause)) throw cause;
    const name = failed?.migrationName ? ` ${failed.migrationName}` : '';
    throw new Error(`database migration${name} failed: ${String((cause as Error)?.message ?? cause)}`, { cause });
  }
}

/** Names of migrations not yet applied (empty when the schema is current). */
export async function pendingMigrations(db: AnyDb, dialect: Dialect): Promise<string[]> {
  const migrator = new Migrator({ db, provider: new StaticProvider(dialect) });
  const all = await migrator.getMigrations();
  return all.filter((m) => !m.executedAt).map((m) => m.name);
}
