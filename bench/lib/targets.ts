/**
 * Where a workload's requests go. A target is one server, the client to it, and how a request to it
 * is authenticated and checked; the W1–W4 and W8 loops below take a target, so files-rest's REST
 * door, its S3 door, the ceiling server and the peer (s3rver) are measured by the same code.
 */
import { HttpClient, closedLoop, type JsonResponse, type LoopResult } from './client.js';
import type { ManagedProcess } from './proc.js';
import { signHeaders, UNSIGNED, type S3Credentials } from './sigv4.js';

export interface Target {
  /** Its name in the log and in error messages. */
  name: string;
  proc: ManagedProcess;
  http: HttpClient;
  /** Whether PostgreSQL's backends work for it (their CPU is then counted next to its own). */
  db: boolean;
  /**
   * The headers of one request, made when it is sent: SigV4 on an S3 target, none otherwise.
   * `query` is the canonical query string (see signHeaders).
   */
  sign(method: string, path: string, payloadSha256?: string, query?: string): () => Record<string, string>;
  /** The MD5 (hex) an upload's answer reports, or null when it reports none. */
  putMd5(r: JsonResponse): string | null;
  /** The MD5 (hex) a download's headers report, or null when they report none. */
  getMd5(headers: JsonResponse['headers']): string | null;
}

/** A target that stores objects in buckets: files-rest's doors and the peer. */
export interface StoreTarget extends Target {
  /** The request path of `key` in `bucket`. */
  objectPath(bucket: string, key: string): string;
  /** Makes a bucket and answers its name (the REST door names it itself; S3 targets take `name`). */
  createBucket(name: string): Promise<string>;
  /** Reads the first page of `bucket`'s listing, of at most `keys` keys; answers how many it held. */
  listPage(bucket: string, keys: number): Promise<number>;
}

const noHeaders = () => ({});
const unquote = (v: unknown): string | null => (typeof v === 'string' ? v.replace(/^"|"$/g, '') : null);
const md5Checksum = (v: unknown): string | null => (typeof v === 'string' && v.startsWith('md5:') ? v.slice(4) : null);

/** The bare ceiling server: no authentication; hash+write answers `{ checksum: "md5:…" }`. */
export function ceilingTarget(proc: ManagedProcess, http: HttpClient): Target {
  return {
    name: 'ceiling',
    proc,
    http,
    db: false,
    sign: () => noHeaders,
    putMd5: (r) => md5Checksum(r.json?.checksum),
    getMd5: () => null,
  };
}

/** files-rest's REST door (`/files/…`), anonymous under allow-all. */
export function restTarget(name: string, proc: ManagedProcess, http: HttpClient): StoreTarget {
  return {
    name,
    proc,
    http,
    db: true,
    sign: () => noHeaders,
    putMd5: (r) => md5Checksum(r.json?.checksum),
    getMd5: (h) => md5Checksum(unquote(h.etag)),
    objectPath: (bucket, key) => `/files/${bucket}/${key}`,
    async createBucket() {
      const r = await http.ok('POST', '/files');
      const id = r.json?.id;
      if (typeof id !== 'string') throw new Error(`${name}: bucket creation answered no id: ${r.text.slice(0, 200)}`);
      return id;
    },
    async listPage(bucket, keys) {
      const r = await http.ok('GET', `/files/${bucket}?limit=${keys}`);
      const contents = r.json?.contents;
      if (!Array.isArray(contents)) throw new Error(`${name}: listing of ${bucket} answered no contents: ${r.text.slice(0, 200)}`);
      return contents.length;
    },
  };
}

/**
 * An S3 server (files-rest's S3 door, or the peer), path-style, every request signed with SigV4
 * (header-signed). `db`: whether PostgreSQL works for it.
 */
export function s3Target(name: string, proc: ManagedProcess, http: HttpClient, creds: S3Credentials, db: boolean): StoreTarget {
  const host = new URL(http.origin).host;
  const sign = (method: string, path: string, payload = UNSIGNED, query = '') => () => signHeaders(creds, host, method, path, payload, query);
  return {
    name,
    proc,
    http,
    db,
    sign,
    putMd5: (r) => unquote(r.headers.etag),
    getMd5: (h) => unquote(h.etag),
    objectPath: (bucket, key) => `/${bucket}/${key}`,
    async createBucket(bucket) {
      await http.ok('PUT', `/${bucket}`, { headers: sign('PUT', `/${bucket}`)() });
      return bucket;
    },
    async listPage(bucket, keys) {
      // ListObjectsV2; the canonical query string has its parameters sorted by name.
      const query = `list-type=2&max-keys=${keys}`;
      const r = await http.ok('GET', `/${bucket}?${query}`, { headers: sign('GET', `/${bucket}`, UNSIGNED, query)() });
      if (!r.text.includes('<ListBucketResult')) throw new Error(`${name}: ListObjectsV2 of ${bucket} answered ${r.text.slice(0, 200)}`);
      return r.text.match(/<Key>/g)?.length ?? 0;
    },
  };
}

/** A time-boxed closed loop's shape (see closedLoop). */
export interface LoopShape {
  concurrency: number;
  durationMs: number;
  maxOps: number;
  warmupMs: number;
}

/**
 * W1's upload: `size` bytes of the repeating pattern in one PUT to `path`, timed from the first byte
 * sent to the answer, whose MD5 must be `md5`. Answers the seconds it took.
 */
export async function putBig(t: Target, path: string, pattern: Buffer, size: number, md5: string, payloadSha256 = UNSIGNED): Promise<number> {
  const r = await t.http.putPattern(path, pattern, 0, size, 'PUT', t.sign('PUT', path, payloadSha256));
  const got = t.putMd5(r);
  if (got !== md5) throw new Error(`${t.name} PUT ${path}: answered MD5 ${got ?? 'none'}, expected ${md5}: ${r.text.slice(0, 200)}`);
  return r.seconds;
}

/**
 * W2's download: GET `path` until its last byte (`size` bytes) has arrived; its ETag must give `md5`
 * (null: the target reports none, as the ceiling). Answers the seconds it took.
 */
export async function getBig(t: Target, path: string, size: number, md5: string | null): Promise<number> {
  const r = await t.http.getCount(path, size, t.sign('GET', path));
  if (md5 !== null) {
    const got = t.getMd5(r.headers);
    if (got !== md5) throw new Error(`${t.name} GET ${path}: ETag ${String(r.headers.etag)}, expected MD5 ${md5}`);
  }
  return r.seconds;
}

/** W3: PUTs of `body` to new paths (`path` names each request's target), in a closed loop. */
export function putSmallLoop(t: Target, shape: LoopShape, body: Buffer, path: (worker: number, seq: number) => string, payloadSha256 = UNSIGNED): () => Promise<LoopResult> {
  return () =>
    closedLoop({
      ...shape,
      op: async (w, seq) => {
        const at = path(w, seq);
        await t.http.ok('PUT', at, { body, headers: t.sign('PUT', at, payloadSha256)() });
      },
    });
}

/** W4: GETs of `size`-byte objects (`path` picks each request's object), in a closed loop. */
export function getSmallLoop(t: Target, shape: LoopShape, size: number, path: () => string): () => Promise<LoopResult> {
  return () =>
    closedLoop({
      ...shape,
      op: async () => {
        const at = path();
        const r = await t.http.pool.request({ method: 'GET', path: at, headers: t.sign('GET', at)() });
        const b = await r.body.arrayBuffer();
        if (r.statusCode !== 200 || b.byteLength !== size) throw new Error(`${t.name} GET ${at}: HTTP ${r.statusCode}, ${b.byteLength} bytes`);
      },
    });
}
