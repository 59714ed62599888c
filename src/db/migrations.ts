import { Migrator, sql, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import type { Dialect } from './schema.js';

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
    throw new Error(`database migration ${failed?.migrationName ?? ''} failed: ${String((error as Error)?.message ?? error)}`);
  }
}

/** Names of migrations not yet applied (empty when the schema is current). */
export async function pendingMigrations(db: AnyDb, dialect: Dialect): Promise<string[]> {
  const migrator = new Migrator({ db, provider: new StaticProvider(dialect) });
  const all = await migrator.getMigrations();
  return all.filter((m) => !m.executedAt).map((m) => m.name);
}
