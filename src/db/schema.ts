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
  /** The bucket's S3 name (unique among buckets), or null. */
  name?: string | null;
  /** 1: anyone may download the bucket's objects without a credential (0005_public_buckets). */
  public_read: Generated<number>;
  /** Copies of each file the bucket requires (replication policy); null: FILES_REST_DEFAULT_COPIES (0008_replicas). */
  copies?: number | null;
  /** The region named when it was created through the S3 door (LocationConstraint), or null (0011_bucket_region). */
  region?: string | null;
  /** The bucket's CORS rules as JSON (domain/bucket-cors.ts), or null for none (0012_bucket_cors). */
  cors?: string | null;
  /** The bucket's tags as a JSON object (domain/bucket-tags.ts), or null for none (0013_bucket_tags). */
  tags?: string | null;
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
  /** JSON object of string → string: headers a door stored as given (S3: Content-Type, x-amz-meta-*, checksums); null: none. */
  metadata?: string | null;
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
  /** The door that started it: `rest` (declared size and part size) or `s3` (sizes learnt as parts arrive). */
  door: Generated<string>;
  /** JSON the S3 door stores with the object at completion (headers, the multipart ETag); null for REST uploads. */
  metadata: string | null;
  created: number;
  updated: number;
}

/** A tus upload in progress (src/domain/resumable.ts). */
export interface ResumableUploadTable {
  id: string;
  bucket_id: string;
  key: string;
  file_id: string;
  /** Upload-Length; null while deferred. */
  length: number | null;
  /** Bytes received and durable (fsynced before this was written). */
  upload_offset: number;
  /** Bytes held in the bucket's reserved_size for this upload (its length once known). */
  reserved: number;
  mimetype: string | null;
  /** The Upload-Metadata header as received, echoed by HEAD. */
  metadata: string | null;
  /** Who is writing bytes now (host:pid:random), and when it last said so. */
  writer: string | null;
  heartbeat: number | null;
  expires: number;
  created: number;
  updated: number;
}

export interface PartTable {
  upload_id: string;
  part_number: number;
  checksum: string;
  /** The backend's tag for the stored part (S3 ETag). */
  storage_etag: string | null;
  /** The part's size in bytes (S3 door uploads; null for REST parts, whose size the layout gives). */
  size: number | null;
  /**
   * A checksum the client asked for besides MD5, as `<ALGORITHM>:<value>` (an S3 part's
   * `x-amz-checksum-crc32` is `CRC32:<base64>`); null when none. The door that wrote it reads it.
   */
  client_checksum: string | null;
  created: number;
  updated: number;
}

/** An S3 access key pair: the secret encrypted with the server key (src/auth/server-key.ts). */
export interface AccessKeyTable {
  id: string;
  access_key_id: string;
  /** AES-256-GCM: base64 of iv(12) ‖ tag(16) ‖ ciphertext. */
  secret_encrypted: string;
  bucket_id: string | null;
  /** comma-separated action names */
  actions: string;
  expires: number | null;
  revoked: number;
  created: number;
}

/** One row, written by migration 0002: the database's own id (location owner markers name it). */
export interface DatabaseIdentityTable {
  id: string;
  created: number;
}

/** A write of a part in progress: who writes it, and when it last said it is alive. */
export interface PartWriteTable {
  upload_id: string;
  part_number: number;
  writer: string;
  heartbeat: number;
}

/**
 * A further copy of a file instance, in another location (0008_replicas). The file instance's own
 * location and URI are its first copy; these rows are the others, at most one per location.
 */
export interface FileCopyTable {
  file_id: string;
  location_id: string;
  uri: string;
  last_check_at: number | null;
  /** 1: matched at the last check; 0: missing, truncated or corrupted; null: never checked since made. */
  last_check: number | null;
  created: number;
  updated: number;
}

/** One check, failure, repair or replication of one copy of a file (its fixity history). */
export interface FixityEventTable {
  id: Generated<number>;
  file_id: string;
  location_id: string;
  at: number;
  /** check | failure | repair | replicate */
  kind: string;
  ok: number;
  /** What was found (`md5:<hex>`), when the bytes could be read. */
  checksum_found: string | null;
  detail: string | null;
}

/** Events older than FILES_REST_FIXITY_HISTORY_DAYS, summarised per file, copy location and kind. */
export interface FixitySummaryTable {
  file_id: string;
  location_id: string;
  kind: string;
  /** Events summarised: how many, how many were not ok, the first and the last. */
  count: number;
  failed: number;
  first_at: number;
  last_at: number;
}

/**
 * The bytes of a small file instance kept in the database (storage/inline): written in the same
 * transaction as the file instance's row, so one commit makes both durable.
 */
export interface InlineFileTable {
  /** The file instance's URI (`inline:<file id>`). */
  uri: string;
  data: Buffer;
  created: number;
}

export interface Database {
  database_identity: DatabaseIdentityTable;
  locations: LocationTable;
  buckets: BucketTable;
  files: FileInstanceTable;
  object_versions: ObjectVersionTable;
  tasks: TaskTable;
  periodic_tasks: PeriodicTaskTable;
  tokens: TokenTable;
  multipart_uploads: MultipartUploadTable;
  parts: PartTable;
  part_writes: PartWriteTable;
  resumable_uploads: ResumableUploadTable;
  access_keys: AccessKeyTable;
  signed_url_uses: SignedUrlUseTable;
  file_copies: FileCopyTable;
  fixity_events: FixityEventTable;
  fixity_summary: FixitySummaryTable;
  inline_files: InlineFileTable;
}

/** A single-use signed upload URL that has been used (its nonce), kept until the URL expires. */
export interface SignedUrlUseTable {
  nonce: string;
  /** When the URL expires, microseconds since the epoch: the row may go then. */
  expires: number;
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
