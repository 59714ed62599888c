import { isIP } from 'node:net';
import { availableParallelism } from 'node:os';

/**
 * Settings, read once from the environment into one frozen, typed object.
 * Nothing else in the code base reads `process.env`: the object is passed down.
 * A bad value stops the start with a one-line message naming the setting.
 */

export type StorageFactoryName = 'fs' | 's3' | string;
export type PermissionFactoryName = 'allow-all' | 'token' | string;

export interface Config {
  readonly host: string;
  readonly port: number;
  /** Path prefix in front of `/files`, '' or starting with '/' and without trailing '/'. */
  readonly urlPrefix: string;
  /** Absolute base URL used for `links`, without trailing '/', or null to use the request's Host. */
  readonly baseUrl: string | null;
  readonly databaseUrl: string;
  readonly dataDir: string;
  readonly autoLocation: boolean;
  readonly worker: boolean;
  /** FILES_REST_PROCESSES: HTTP server processes `serve` runs (node:cluster, sharing the ports); 1: this process alone. */
  readonly processes: number;
  /** FILES_REST_HEAP_GROWTH_PERCENT: V8's heap may grow this far (percent) past its last full collection's live size; 0: V8's own factor. */
  readonly heapGrowthPercent: number;
  readonly permissionFactory: PermissionFactoryName;
  readonly defaultMaxFileSize: number | null;
  readonly defaultQuotaSize: number | null;
  readonly objectKeyMaxLen: number;
  readonly multipartMaxParts: number;
  readonly multipartChunkSizeMin: number;
  readonly multipartChunkSizeMax: number;
  /** Days, fractions allowed. */
  readonly multipartExpires: number;
  readonly multipartAbortOnPartFailure: boolean;
  /** Days a tus upload lives after its last PATCH (fractions allowed) before it is swept. */
  readonly tusExpires: number;
  readonly maxContentLength: number | null;
  readonly xsendfileEnabled: boolean;
  /** Internal location prefix of X-Accel-Redirect paths; starts and ends with '/'. */
  readonly xsendfilePrefix: string;
  /** Webhook deliveries go here (POST, signed JSON); null turns webhooks off. */
  readonly webhookUrl: string | null;
  /** HMAC-SHA256 key of the `X-Files-Rest-Signature` header; set whenever webhookUrl is. */
  readonly webhookSecret: string | null;
  /** Which signals are delivered to the webhook. */
  readonly webhookEvents: readonly ('file-downloaded' | 'file-uploaded' | 'file-deleted')[];
  /** Requests per minute per token (or per client address when anonymous); null: no limit. */
  readonly rateLimit: number | null;
  /** Origins allowed by CORS ('*' for any); empty: CORS off. */
  readonly corsOrigins: readonly string[];
  /** Proxies whose X-Forwarded-For is believed (addresses, CIDRs, or loopback/linklocal/uniquelocal); empty: none. */
  readonly trustProxy: readonly string[];
  readonly storageFactory: StorageFactoryName;
  readonly storagePathSplitLength: number;
  readonly storagePathDimensions: number;
  readonly allowRangeRequests: boolean;
  /** Seconds an upload's body may stall (no byte arrives) before the upload is cut; 0: never. */
  readonly bodyIdleTimeout: number;
  /** Seconds in-flight requests get after SIGTERM. */
  readonly shutdownGrace: number;
  /** PostgreSQL connections per process. */
  readonly dbPoolSize: number;
  /** Bytes of a SQLite database file read through a memory map (0: none, every page is read with pread). */
  readonly sqliteMmapSize: number;
  /**
   * Uploads announcing at most this many bytes are kept in the database, committed with their
   * metadata (one WAL flush shared by many uploads), instead of as files in the location; 0: never.
   */
  readonly inlineMaxSize: number;
  /** FILES_REST_SQLITE_DRIVER: better-sqlite3 (default) or node (node:sqlite, Node.js 22.13+). */
  readonly sqliteDriver: 'better-sqlite3' | 'node';
  /** SQLite: threads that run the reads outside transactions while reads come fast (0: every statement on the event loop). */
  readonly sqliteReadThreads: number;
  /** Milliseconds a PostgreSQL statement may run (0: no limit); a query without an answer for 5 s more fails too. */
  readonly dbStatementTimeout: number;
  /** PostgreSQL: the hot queries as named prepared statements (off for a pooler that cannot keep them, such as PgBouncer before 1.21 in transaction mode). */
  readonly dbPreparedStatements: boolean;
  /** Milliseconds to wait for a PostgreSQL connection (a new one, or a free one when the pool is busy). */
  readonly dbConnectTimeout: number;
  /** Serve Prometheus metrics at /metrics (server root). */
  readonly metrics: boolean;
  readonly logLevel: string;
  /** Milliseconds between polls of the task queue when idle. */
  readonly taskPollInterval: number;
  /** Seconds a worker's claim on a task lasts without a heartbeat; a dead worker's task runs again after it. */
  readonly taskLease: number;
  /** Bytes per second one file migration may copy; null: unthrottled. */
  readonly migrationBytesPerSecond: number | null;
  /** Seconds the old copy of a migrated file is kept, so downloads already reading it can finish. */
  readonly migrationGrace: number;
  /** Days over which the periodic integrity check covers every file once. */
  readonly checksumVerifyPeriod: number;
  /** Seconds between runs of the periodic integrity check. */
  readonly checksumVerifyInterval: number;
  /** Most files and bytes one run of the periodic integrity check verifies. */
  readonly checksumVerifyMaxFiles: number;
  readonly checksumVerifyMaxBytes: number;
  /** False: a file whose last integrity check failed is not served (409 FILE_CORRUPTED). */
  readonly serveCorruptedFiles: boolean;
  /** Copies of each file a bucket without its own policy requires (1: no replication). */
  readonly defaultCopies: number;
  /** Locations that take the further copies, in order of preference; empty: every other location, by name. */
  readonly replicaLocations: readonly string[];
  /** Copies an upload waits for before it is acknowledged (1: the first copy only). */
  readonly uploadWaitCopies: number;
  /** Whole downloads checked against the MD5: `small` (up to 64 KiB, before a byte is sent), `all` (larger ones too, as they stream), `off`. */
  readonly checkDownloads: 'small' | 'all' | 'off';
  /** Days of fixity history kept event by event; older events are summarised per file, copy and kind. */
  readonly fixityHistoryDays: number;
  /** Upload adapters, in the order they are tried. */
  readonly uploadFactories: readonly string[];
  readonly multipartPartFactories: readonly string[];
  readonly fileTagsHeader: string;
  /** S3 endpoint URL for S3-compatible services, or null for AWS's own endpoint of the region. */
  readonly s3Endpoint: string | null;
  readonly s3Region: string;
  /** Static credentials; both null to use the AWS SDK's default credential chain. */
  readonly s3AccessKeyId: string | null;
  readonly s3SecretAccessKey: string | null;
  /** Path-style URLs (`endpoint/bucket/key`) instead of virtual-hosted ones (`bucket.endpoint/key`). */
  readonly s3ForcePathStyle: boolean;
  /** Seconds a presigned download URL (X-Accel-Redirect to S3) stays valid. */
  readonly s3PresignExpires: number;
  /** Port of the S3-compatible API (FILES_REST_S3_PORT): a number, 'auto' (any free port), or null (off). */
  readonly s3Port: number | 'auto' | null;
  /** FILES_REST_S3_MULTIPART_MIN_PART_SIZE: the least size of every part but the last of an S3 multipart upload (S3: 5 MiB). */
  readonly s3MultipartMinPartSize: number;
  /** FILES_REST_S3_MULTIPART_LAYOUT_WAIT: ms a part other than part 1 waits for part 1 to fix the part size (see s3-uploads.ts). */
  readonly s3MultipartLayoutWait: number;
  /**
   * FILES_REST_S3_KEY_CACHE_SECONDS: how long the S3 door keeps a verified access key (decrypted
   * secret, scope, expiry) in memory before reading it from the database again; 0 disables. A key
   * revoked by another process is still accepted here for at most this long.
   */
  readonly s3KeyCacheSeconds: number;
  /** FILES_REST_S3_SIGV2: the S3 door accepts SigV2 (HMAC-SHA1) signatures, headers and presigned URLs; default true. */
  readonly s3SigV2: boolean;
  /** FILES_REST_SERVER_KEY: base64 of 32 bytes encrypting S3 secrets; null: the key file beside a SQLite database. */
  readonly serverKey: string | null;
  /** FILES_REST_SERVER_KEY_PREVIOUS: keys still accepted for decryption (rotation), comma-separated base64. */
  readonly serverKeyPrevious: readonly string[];
  /** FILES_REST_CONSOLE: serve the web console at `{prefix}/console`. */
  readonly console: boolean;
  /** FILES_REST_SIGNED_URL_MAX_EXPIRES: the longest a signed URL may be valid, seconds. */
  readonly signedUrlMaxExpires: number;
  /** FILES_REST_SIGNED_URL_EXPIRES: a signed URL's validity when the caller names none, seconds (at most the maximum). */
  readonly signedUrlExpires: number;
}

export class ConfigError extends Error {
  constructor(readonly setting: string, message: string) {
    super(`${setting}: ${message}`);
    this.name = 'ConfigError';
  }
}

/** Every variable this service reads. FILES_REST_* names not listed here are refused (typo protection). */
/** FILES_REST_INLINE_MAX_SIZE's default: see the README's "Small objects in the database". */
export const DEFAULT_INLINE_MAX_SIZE = 64 * 1024;

const KNOWN = new Set([
  'HOST', 'PORT', 'DATABASE_URL', 'MAX_CONTENT_LENGTH', 'LOG_LEVEL',
  'FILES_REST_URL_PREFIX', 'FILES_REST_BASE_URL', 'FILES_REST_DATA_DIR', 'FILES_REST_AUTO_LOCATION',
  'FILES_REST_WORKER', 'FILES_REST_PROCESSES', 'FILES_REST_HEAP_GROWTH_PERCENT', 'FILES_REST_PERMISSION_FACTORY', 'FILES_REST_DEFAULT_MAX_FILE_SIZE',
  'FILES_REST_DEFAULT_QUOTA_SIZE', 'FILES_REST_OBJECT_KEY_MAX_LEN', 'FILES_REST_MULTIPART_MAX_PARTS',
  'FILES_REST_MULTIPART_CHUNKSIZE_MIN', 'FILES_REST_MULTIPART_CHUNKSIZE_MAX', 'FILES_REST_MULTIPART_EXPIRES', 'FILES_REST_TUS_EXPIRES',
  'FILES_REST_XSENDFILE_ENABLED', 'FILES_REST_STORAGE_FACTORY', 'FILES_REST_STORAGE_PATH_SPLIT_LENGTH',
  'FILES_REST_STORAGE_PATH_DIMENSIONS', 'FILES_REST_ALLOW_RANGE_REQUESTS',
  'FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE', 'FILES_REST_SHUTDOWN_GRACE', 'FILES_REST_BODY_IDLE_TIMEOUT', 'FILES_REST_TASK_POLL_INTERVAL', 'FILES_REST_TASK_LEASE',
  'FILES_REST_DB_POOL_SIZE', 'FILES_REST_DB_STATEMENT_TIMEOUT', 'FILES_REST_SQLITE_MMAP_SIZE', 'FILES_REST_INLINE_MAX_SIZE', 'FILES_REST_SQLITE_DRIVER', 'FILES_REST_SQLITE_READ_THREADS', 'FILES_REST_DB_CONNECT_TIMEOUT', 'FILES_REST_DB_PREPARED_STATEMENTS', 'FILES_REST_METRICS',
  'FILES_REST_MIGRATION_BYTES_PER_SECOND', 'FILES_REST_MIGRATION_GRACE', 'FILES_REST_CHECKSUM_VERIFY_PERIOD',
  'FILES_REST_CHECKSUM_VERIFY_INTERVAL', 'FILES_REST_CHECKSUM_VERIFY_MAX_FILES', 'FILES_REST_CHECKSUM_VERIFY_MAX_BYTES',
  'FILES_REST_SERVE_CORRUPTED_FILES',
  'FILES_REST_DEFAULT_COPIES', 'FILES_REST_REPLICA_LOCATIONS', 'FILES_REST_UPLOAD_WAIT_COPIES', 'FILES_REST_CHECK_DOWNLOADS', 'FILES_REST_FIXITY_HISTORY_DAYS',
  'FILES_REST_UPLOAD_FACTORIES', 'FILES_REST_MULTIPART_PART_FACTORIES', 'FILES_REST_FILE_TAGS_HEADER',
  'FILES_REST_XSENDFILE_PREFIX', 'FILES_REST_WEBHOOK_URL', 'FILES_REST_WEBHOOK_SECRET', 'FILES_REST_WEBHOOK_EVENTS',
  'FILES_REST_RATE_LIMIT', 'FILES_REST_CORS_ORIGINS', 'FILES_REST_TRUST_PROXY',
  'FILES_REST_S3_ENDPOINT', 'FILES_REST_S3_REGION', 'FILES_REST_S3_ACCESS_KEY_ID', 'FILES_REST_S3_SECRET_ACCESS_KEY',
  'FILES_REST_S3_FORCE_PATH_STYLE', 'FILES_REST_S3_PRESIGN_EXPIRES',
  'FILES_REST_S3_PORT', 'FILES_REST_S3_MULTIPART_MIN_PART_SIZE', 'FILES_REST_S3_MULTIPART_LAYOUT_WAIT', 'FILES_REST_S3_KEY_CACHE_SECONDS', 'FILES_REST_S3_SIGV2', 'FILES_REST_SERVER_KEY', 'FILES_REST_SERVER_KEY_PREVIOUS', 'FILES_REST_CONSOLE',
  'FILES_REST_SIGNED_URL_MAX_EXPIRES', 'FILES_REST_SIGNED_URL_EXPIRES',
  // read by the `files-rest` client commands, not by the server
  'FILES_REST_URL', 'FILES_REST_TOKEN',
]);

type Env = Record<string, string | undefined>;

function raw(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function integer(env: Env, name: string, dflt: number | null, opts: { min?: number } = {}): number | null {
  const v = raw(env, name);
  if (v === undefined) return dflt;
  if (v.toLowerCase() === 'none') return null;
  if (!/^\d+$/.test(v)) throw new ConfigError(name, `expected a whole number of bytes or units, got ${JSON.stringify(v)}`);
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new ConfigError(name, `value ${v} is too large`);
  if (opts.min !== undefined && n < opts.min) throw new ConfigError(name, `must be at least ${opts.min}, got ${n}`);
  return n;
}

/** FILES_REST_PROCESSES: a whole number from 1 to 64, or `auto` (one per core the process may use). */
function processCount(env: Env): number {
  const v = raw(env, 'FILES_REST_PROCESSES');
  if (v === undefined) return 1;
  if (v === 'auto') return Math.min(64, availableParallelism());
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 64) throw new ConfigError('FILES_REST_PROCESSES', `expected a whole number from 1 to 64 or 'auto', got ${JSON.stringify(v)}`);
  return Number(v);
}

function requiredInteger(env: Env, name: string, dflt: number, opts: { min?: number; max?: number } = {}): number {
  const n = integer(env, name, dflt, opts);
  if (n === null) throw new ConfigError(name, 'a value is required');
  if (opts.max !== undefined && n > opts.max) throw new ConfigError(name, `must be at most ${opts.max}, got ${n}`);
  return n;
}

function decimal(env: Env, name: string, dflt: number, opts: { positive?: boolean } = {}): number {
  const v = raw(env, name);
  if (v === undefined) return dflt;
  if (!/^(\d+(\.\d*)?|\.\d+)$/.test(v)) throw new ConfigError(name, `expected a non-negative number, got ${JSON.stringify(v)}`);
  const n = Number(v);
  if (opts.positive && n <= 0) throw new ConfigError(name, `must be greater than 0, got ${v}`);
  return n;
}

function sqliteDriverSetting(env: Env): 'better-sqlite3' | 'node' {
  const v = raw(env, 'FILES_REST_SQLITE_DRIVER') ?? 'better-sqlite3';
  if (v !== 'better-sqlite3' && v !== 'node') throw new ConfigError('FILES_REST_SQLITE_DRIVER', 'must be better-sqlite3 or node');
  return v;
}

function checkDownloadsSetting(env: Env): 'small' | 'all' | 'off' {
  const v = raw(env, 'FILES_REST_CHECK_DOWNLOADS') ?? 'small';
  if (v !== 'small' && v !== 'all' && v !== 'off') throw new ConfigError('FILES_REST_CHECK_DOWNLOADS', `must be small, all or off, got ${JSON.stringify(v)}`);
  return v;
}

function flag(env: Env, name: string, dflt: boolean): boolean {
  const v = raw(env, name);
  if (v === undefined) return dflt;
  const l = v.toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(l)) return true;
  if (['0', 'false', 'no', 'off'].includes(l)) return false;
  throw new ConfigError(name, `expected 0 or 1, got ${JSON.stringify(v)}`);
}

function list(env: Env, name: string, dflt: string[]): string[] {
  const v = raw(env, name);
  if (v === undefined) return dflt;
  const items = v.split(',').map((s) => s.trim()).filter(Boolean);
  if (items.length === 0) throw new ConfigError(name, 'expected a comma-separated list with at least one entry');
  return items;
}

const WEBHOOK_EVENTS = ['file-downloaded', 'file-uploaded', 'file-deleted'] as const;
const PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

function httpUrl(env: Env, name: string): string | null {
  const v = raw(env, name);
  if (v === undefined) return null;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(name, `not an absolute URL: ${JSON.stringify(v)}`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(name, 'must be an http or https URL');
  return v;
}

/** X-Accel-Redirect prefix, webhooks, rate limits, CORS and trusted proxies. */
function securitySettings(env: Env) {
  const xsendfilePrefix = raw(env, 'FILES_REST_XSENDFILE_PREFIX') ?? '/user_files/';
  if (!/^\/([A-Za-z0-9._~-]+\/)*$/.test(xsendfilePrefix)) {
    throw new ConfigError('FILES_REST_XSENDFILE_PREFIX', `must be a path that starts and ends with '/', got ${JSON.stringify(xsendfilePrefix)}`);
  }
  const webhookUrl = httpUrl(env, 'FILES_REST_WEBHOOK_URL');
  const webhookSecret = raw(env, 'FILES_REST_WEBHOOK_SECRET') ?? null;
  if (webhookUrl !== null && webhookSecret === null) {
    throw new ConfigError('FILES_REST_WEBHOOK_SECRET', 'required when FILES_REST_WEBHOOK_URL is set (deliveries are always signed)');
  }
  if (webhookSecret !== null && webhookSecret.length < 16) {
    throw new ConfigError('FILES_REST_WEBHOOK_SECRET', 'must be at least 16 characters');
  }
  const events = list(env, 'FILES_REST_WEBHOOK_EVENTS', [...WEBHOOK_EVENTS]);
  for (const e of events) {
    if (!(WEBHOOK_EVENTS as readonly string[]).includes(e)) {
      throw new ConfigError('FILES_REST_WEBHOOK_EVENTS', `unknown event ${JSON.stringify(e)} (known: ${WEBHOOK_EVENTS.join(', ')})`);
    }
  }
  const corsOrigins = raw(env, 'FILES_REST_CORS_ORIGINS') === undefined ? [] : list(env, 'FILES_REST_CORS_ORIGINS', []);
  for (const o of corsOrigins) {
    if (o === '*') continue;
    let u: URL | null = null;
    try {
      u = new URL(o);
    } catch {
      u = null;
    }
    if (!u || (u.protocol !== 'http:' && u.protocol !== 'https:') || u.origin !== o) {
      throw new ConfigError('FILES_REST_CORS_ORIGINS', `not an origin (scheme://host[:port], no path): ${JSON.stringify(o)}`);
    }
  }
  const trustProxy = raw(env, 'FILES_REST_TRUST_PROXY') === undefined ? [] : list(env, 'FILES_REST_TRUST_PROXY', []);
  for (const p of trustProxy) {
    const [addr, bits, more] = p.split('/');
    const family = isIP(addr ?? '');
    const bitsOk = bits === undefined || (/^\d{1,3}$/.test(bits) && Number(bits) <= (family === 6 ? 128 : 32));
    if (!PROXY_NAMES.has(p) && (family === 0 || !bitsOk || more !== undefined)) {
      throw new ConfigError('FILES_REST_TRUST_PROXY', `not an address, CIDR or loopback/linklocal/uniquelocal: ${JSON.stringify(p)}`);
    }
  }
  return {
    xsendfilePrefix,
    webhookUrl,
    webhookSecret,
    webhookEvents: events as (typeof WEBHOOK_EVENTS)[number][],
    rateLimit: integer(env, 'FILES_REST_RATE_LIMIT', null, { min: 1 }),
    corsOrigins,
    trustProxy,
  };
}

export function loadConfig(env: Env = process.env): Config {
  for (const name of Object.keys(env)) {
    if (name.startsWith('FILES_REST_') && !KNOWN.has(name)) {
      throw new ConfigError(name, 'unknown setting (check the spelling; the README lists every setting)');
    }
  }
  const port = requiredInteger(env, 'PORT', 8080, { min: 0, max: 65535 });
  let urlPrefix = raw(env, 'FILES_REST_URL_PREFIX') ?? '';
  if (urlPrefix) {
    if (!urlPrefix.startsWith('/') || /[?#\s]/.test(urlPrefix)) {
      throw new ConfigError('FILES_REST_URL_PREFIX', `must be a path starting with '/', got ${JSON.stringify(urlPrefix)}`);
    }
    urlPrefix = urlPrefix.replace(/\/+$/, '');
  }
  let baseUrl = raw(env, 'FILES_REST_BASE_URL') ?? null;
  if (baseUrl !== null) {
    let u: URL;
    try {
      u = new URL(baseUrl);
    } catch {
      throw new ConfigError('FILES_REST_BASE_URL', `not an absolute URL: ${JSON.stringify(baseUrl)}`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError('FILES_REST_BASE_URL', 'must be an http or https URL');
    baseUrl = baseUrl.replace(/\/+$/, '');
  }
  const databaseUrl = raw(env, 'DATABASE_URL') ?? 'sqlite:./var/files-rest.db';
  if (!/^sqlite:.+/.test(databaseUrl) && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must start with sqlite: or postgres://');
  }
  const permissionFactory = raw(env, 'FILES_REST_PERMISSION_FACTORY') ?? 'token';
  if (!['allow-all', 'token'].includes(permissionFactory) && !/[./]/.test(permissionFactory)) {
    throw new ConfigError('FILES_REST_PERMISSION_FACTORY', `unknown factory ${JSON.stringify(permissionFactory)} (allow-all, token, or a path to a JS module)`);
  }
  const storageFactory = raw(env, 'FILES_REST_STORAGE_FACTORY') ?? 'fs';
  if (!['fs', 's3'].includes(storageFactory) && !/[./]/.test(storageFactory)) {
    throw new ConfigError('FILES_REST_STORAGE_FACTORY', `unknown backend ${JSON.stringify(storageFactory)} (fs, s3, or a path to a JS module)`);
  }
  const chunkMin = requiredInteger(env, 'FILES_REST_MULTIPART_CHUNKSIZE_MIN', 5 * 1024 * 1024, { min: 1 });
  const chunkMax = requiredInteger(env, 'FILES_REST_MULTIPART_CHUNKSIZE_MAX', 5 * 1024 * 1024 * 1024, { min: 1 });
  if (chunkMax < chunkMin) {
    throw new ConfigError('FILES_REST_MULTIPART_CHUNKSIZE_MAX', `must not be below FILES_REST_MULTIPART_CHUNKSIZE_MIN (${chunkMin})`);
  }
  const split = requiredInteger(env, 'FILES_REST_STORAGE_PATH_SPLIT_LENGTH', 2, { min: 1 });
  const dims = requiredInteger(env, 'FILES_REST_STORAGE_PATH_DIMENSIONS', 2, { min: 0 });
  if (split * dims >= 32) {
    throw new ConfigError('FILES_REST_STORAGE_PATH_DIMENSIONS', 'split length × dimensions must be below 32 (the hex digits of a file id)');
  }
  const logLevel = raw(env, 'LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `unknown level ${JSON.stringify(logLevel)}`);
  }
  const tagsHeader = raw(env, 'FILES_REST_FILE_TAGS_HEADER') ?? 'X-Invenio-File-Tags';
  if (!/^[A-Za-z0-9-]+$/.test(tagsHeader)) throw new ConfigError('FILES_REST_FILE_TAGS_HEADER', 'not a valid header name');
  const security = securitySettings(env);
  const s3Endpoint = raw(env, 'FILES_REST_S3_ENDPOINT') ?? null;
  if (s3Endpoint !== null) {
    let u: URL;
    try {
      u = new URL(s3Endpoint);
    } catch {
      throw new ConfigError('FILES_REST_S3_ENDPOINT', `not an absolute URL: ${JSON.stringify(s3Endpoint)}`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError('FILES_REST_S3_ENDPOINT', 'must be an http or https URL');
  }
  const s3Region = raw(env, 'FILES_REST_S3_REGION') ?? 'us-east-1';
  if (!/^[a-z0-9-]+$/.test(s3Region)) throw new ConfigError('FILES_REST_S3_REGION', `not a region name: ${JSON.stringify(s3Region)}`);
  const s3AccessKeyId = raw(env, 'FILES_REST_S3_ACCESS_KEY_ID') ?? null;
  const s3SecretAccessKey = raw(env, 'FILES_REST_S3_SECRET_ACCESS_KEY') ?? null;
  if (s3AccessKeyId !== null && s3SecretAccessKey === null) {
    throw new ConfigError('FILES_REST_S3_SECRET_ACCESS_KEY', 'required when FILES_REST_S3_ACCESS_KEY_ID is set');
  }
  if (s3SecretAccessKey !== null && s3AccessKeyId === null) {
    throw new ConfigError('FILES_REST_S3_ACCESS_KEY_ID', 'required when FILES_REST_S3_SECRET_ACCESS_KEY is set');
  }
  const s3PortText = raw(env, 'FILES_REST_S3_PORT') ?? '9000';
  let s3Port: number | 'auto' | null;
  if (s3PortText === 'off' || s3PortText === '0') s3Port = null;
  else if (s3PortText === 'auto') s3Port = 'auto';
  else if (/^\d{1,5}$/.test(s3PortText) && Number(s3PortText) <= 65535) s3Port = Number(s3PortText);
  else throw new ConfigError('FILES_REST_S3_PORT', `expected a port (1-65535), 'auto' or 'off', got ${JSON.stringify(s3PortText)}`);
  const signedUrlMaxExpires = requiredInteger(env, 'FILES_REST_SIGNED_URL_MAX_EXPIRES', 604800, { min: 1 });
  const serverKey = raw(env, 'FILES_REST_SERVER_KEY') ?? null;
  if (serverKey !== null && !isServerKey(serverKey)) throw new ConfigError('FILES_REST_SERVER_KEY', 'expected base64 of 32 bytes (openssl rand -base64 32)');
  const serverKeyPrevious = list(env, 'FILES_REST_SERVER_KEY_PREVIOUS', []);
  for (const k of serverKeyPrevious) {
    if (!isServerKey(k)) throw new ConfigError('FILES_REST_SERVER_KEY_PREVIOUS', 'expected base64 of 32 bytes per key, comma-separated');
  }

  return Object.freeze({
    host: raw(env, 'HOST') ?? '127.0.0.1',
    port,
    urlPrefix,
    baseUrl,
    databaseUrl,
    dataDir: raw(env, 'FILES_REST_DATA_DIR') ?? './var/data',
    autoLocation: flag(env, 'FILES_REST_AUTO_LOCATION', true),
    worker: flag(env, 'FILES_REST_WORKER', true),
    processes: processCount(env),
    heapGrowthPercent: requiredInteger(env, 'FILES_REST_HEAP_GROWTH_PERCENT', 100, { min: 0, max: 1000 }),
    console: flag(env, 'FILES_REST_CONSOLE', true),
    permissionFactory,
    defaultMaxFileSize: integer(env, 'FILES_REST_DEFAULT_MAX_FILE_SIZE', null),
    defaultQuotaSize: integer(env, 'FILES_REST_DEFAULT_QUOTA_SIZE', null),
    objectKeyMaxLen: requiredInteger(env, 'FILES_REST_OBJECT_KEY_MAX_LEN', 255, { min: 1 }),
    multipartMaxParts: requiredInteger(env, 'FILES_REST_MULTIPART_MAX_PARTS', 10000, { min: 1 }),
    multipartChunkSizeMin: chunkMin,
    multipartChunkSizeMax: chunkMax,
    multipartExpires: decimal(env, 'FILES_REST_MULTIPART_EXPIRES', 4, { positive: true }),
    multipartAbortOnPartFailure: flag(env, 'FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE', true),
    tusExpires: decimal(env, 'FILES_REST_TUS_EXPIRES', 1, { positive: true }),
    s3MultipartMinPartSize: requiredInteger(env, 'FILES_REST_S3_MULTIPART_MIN_PART_SIZE', 5 * 1024 * 1024, { min: 1 }),
    s3MultipartLayoutWait: requiredInteger(env, 'FILES_REST_S3_MULTIPART_LAYOUT_WAIT', 2000, { min: 0 }),
    s3KeyCacheSeconds: requiredInteger(env, 'FILES_REST_S3_KEY_CACHE_SECONDS', 5, { min: 0, max: 3600 }),
    s3SigV2: flag(env, 'FILES_REST_S3_SIGV2', true),
    maxContentLength: integer(env, 'MAX_CONTENT_LENGTH', null),
    xsendfileEnabled: flag(env, 'FILES_REST_XSENDFILE_ENABLED', false),
    ...security,
    storageFactory,
    storagePathSplitLength: split,
    storagePathDimensions: dims,
    allowRangeRequests: flag(env, 'FILES_REST_ALLOW_RANGE_REQUESTS', true),
    shutdownGrace: decimal(env, 'FILES_REST_SHUTDOWN_GRACE', 30),
    bodyIdleTimeout: decimal(env, 'FILES_REST_BODY_IDLE_TIMEOUT', 30),
    dbPoolSize: requiredInteger(env, 'FILES_REST_DB_POOL_SIZE', 10, { min: 1, max: 1000 }),
    dbStatementTimeout: requiredInteger(env, 'FILES_REST_DB_STATEMENT_TIMEOUT', 30_000, { min: 0 }),
    dbPreparedStatements: flag(env, 'FILES_REST_DB_PREPARED_STATEMENTS', true),
    dbConnectTimeout: requiredInteger(env, 'FILES_REST_DB_CONNECT_TIMEOUT', 5_000, { min: 1 }),
    sqliteMmapSize: requiredInteger(env, 'FILES_REST_SQLITE_MMAP_SIZE', 1024 ** 3, { min: 0 }),
    inlineMaxSize: requiredInteger(env, 'FILES_REST_INLINE_MAX_SIZE', DEFAULT_INLINE_MAX_SIZE, { min: 0, max: 1024 * 1024 }),
    sqliteDriver: sqliteDriverSetting(env),
    sqliteReadThreads: requiredInteger(env, 'FILES_REST_SQLITE_READ_THREADS', 1, { min: 0, max: 64 }),
    metrics: flag(env, 'FILES_REST_METRICS', true),
    logLevel,
    taskPollInterval: requiredInteger(env, 'FILES_REST_TASK_POLL_INTERVAL', 1000, { min: 10 }),
    taskLease: requiredInteger(env, 'FILES_REST_TASK_LEASE', 60, { min: 1 }),
    migrationBytesPerSecond: integer(env, 'FILES_REST_MIGRATION_BYTES_PER_SECOND', null, { min: 1 }),
    migrationGrace: decimal(env, 'FILES_REST_MIGRATION_GRACE', 60),
    checksumVerifyPeriod: decimal(env, 'FILES_REST_CHECKSUM_VERIFY_PERIOD', 30, { positive: true }),
    checksumVerifyInterval: requiredInteger(env, 'FILES_REST_CHECKSUM_VERIFY_INTERVAL', 3600, { min: 1 }),
    checksumVerifyMaxFiles: requiredInteger(env, 'FILES_REST_CHECKSUM_VERIFY_MAX_FILES', 1000, { min: 1 }),
    checksumVerifyMaxBytes: requiredInteger(env, 'FILES_REST_CHECKSUM_VERIFY_MAX_BYTES', 10 * 1024 * 1024 * 1024, { min: 1 }),
    serveCorruptedFiles: flag(env, 'FILES_REST_SERVE_CORRUPTED_FILES', true),
    defaultCopies: requiredInteger(env, 'FILES_REST_DEFAULT_COPIES', 1, { min: 1, max: 10 }),
    replicaLocations: raw(env, 'FILES_REST_REPLICA_LOCATIONS') === undefined ? [] : list(env, 'FILES_REST_REPLICA_LOCATIONS', []),
    uploadWaitCopies: requiredInteger(env, 'FILES_REST_UPLOAD_WAIT_COPIES', 1, { min: 1, max: 10 }),
    checkDownloads: checkDownloadsSetting(env),
    fixityHistoryDays: decimal(env, 'FILES_REST_FIXITY_HISTORY_DAYS', 365, { positive: true }),
    uploadFactories: list(env, 'FILES_REST_UPLOAD_FACTORIES', ['raw', 'ng-file-upload']),
    multipartPartFactories: list(env, 'FILES_REST_MULTIPART_PART_FACTORIES', ['raw', 'ng-file-upload']),
    fileTagsHeader: tagsHeader,
    s3Endpoint,
    s3Region,
    s3AccessKeyId,
    s3SecretAccessKey,
    s3ForcePathStyle: flag(env, 'FILES_REST_S3_FORCE_PATH_STYLE', s3Endpoint !== null),
    // SigV4 presigned URLs are valid for at most seven days.
    s3PresignExpires: requiredInteger(env, 'FILES_REST_S3_PRESIGN_EXPIRES', 300, { min: 1, max: 604800 }),
    s3Port,
    serverKey,
    serverKeyPrevious,
    signedUrlMaxExpires,
    signedUrlExpires: Math.min(requiredInteger(env, 'FILES_REST_SIGNED_URL_EXPIRES', 3600, { min: 1 }), signedUrlMaxExpires),
  });
}

/** Base64 of exactly 32 bytes. */
function isServerKey(text: string): boolean {
  return /^[A-Za-z0-9+/]{43}=$/.test(text) && Buffer.from(text, 'base64').length === 32;
}
