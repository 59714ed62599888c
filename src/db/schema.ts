import type { Generated, Kysely, Transaction } from 'kysely';
import { sql } from 'kysely';

/**
 * Table types. Booleans are stored as 0/1 integers and times as integer microseconds since the
 * epoch, so the same SQL runs on SQLite and PostgreSQL.
 */
export interface LocationTable {
  id: string;
  name: string;
  uri: string;
  is_default: number;
  created: number;
  updated: number;
}

export interface BucketTable {
  id: string;
  default_location: string;
  default_storage_class: string;
  /** Sum of the sizes of the stored versions that have a file. */
  size: number;
  /** Bytes reserved by multipart uploads in progress; counts against the quota. */
  reserved_size: number;
  quota_size: number | null;
  max_file_size: number | null;
  locked: number;
  deleted: number;
  created: number;
  updated: number;
}

export interface FileInstanceTable {
  id: string;
  location_id: string | null;
  uri: string | null;
  storage_class: string;
  size: number;
  checksum: string | null;
  readable: number;
  writable: number;
  last_check_at: number | null;
  last_check: number | null;
  created: number;
  updated: number;
}

export interface ObjectVersionTable {
  seq: Generated<number>;
  version_id: string;
  bucket_id: string;
  key: string;
  file_id: string | null;
  mimetype: string | null;
  is_head: number;
  /** JSON object of string → string */
  tags: string;
  created: number;
  updated: number;
}

export interface TaskTable {
  id: Generated<number>;
  name: string;
  payload: string;
  /** queued | running | done | failed */
  state: string;
  attempts: number;
  max_attempts: number;
  run_at: number;
  locked_by: string | null;
  locked_until: number | null;
  last_error: string | null;
  created: number;
  updated: number;
}

export interface PeriodicTaskTable {
  name: string;
  next_run: number;
}

export interface TokenTable {
  id: string;
  secret_hash: string;
  bucket_id: string | null;
  /** comma-separated action names */
  actions: string;
  expires: number | null;
  revoked: number;
  created: number;
}

export interface MultipartUploadTable {
  id: string;
  bucket_id: string;
  key: string;
  file_id: string;
  size: number;
  part_size: number;
  last_part_number: number;
  last_part_size: number;
  /** in_progress | completing | completed | aborted */
  state: string;
  /** version id the completion will create, fixed at completion time */
  version_id: string | null;
  /** What the storage backend's `initialize` returned (S3 multipart upload id). */
  storage_ref: string | null;
  /** MD5 state: bytes hashed in order so far */
  hashed_bytes: number;
  error: string | null;
  created: number;
  updated: number;
}

export interface PartTable {
  upload_id: string;
  part_number: number;
  checksum: string;
  /** The backend's tag for the stored part (S3 ETag). */
  storage_etag: string | null;
  created: number;
  updated: number;
}

export interface Database {
  locations: LocationTable;
  buckets: BucketTable;
  files: FileInstanceTable;
  object_versions: ObjectVersionTable;
  tasks: TaskTable;
  periodic_tasks: PeriodicTaskTable;
  tokens: TokenTable;
  multipart_uploads: MultipartUploadTable;
  parts: PartTable;
}

export type Dialect = 'sqlite' | 'postgres';
export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;
/** Either the database or an open transaction. */
export type Executor = Db | Tx;

/**
 * `1` written into the SQL text rather than bound. A condition that selects a partial index
 * (`where is_head = 1`, `where is_default = 1`) must be a literal: with a bound parameter SQLite
 * re-plans the statement on every execution to check that the index still applies, which made
 * finding an object's head version four times slower.
 */
export const TRUE_LITERAL = sql.lit(1);
