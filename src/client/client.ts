/**
 * FilesClient: a typed client of the files-rest REST API over fetch. Browser-safe: no Node-only
 * imports here (the Node layer is ./node.ts).
 */
import { ChecksumMismatchError, ConnectionError, FilesError, isAbortError } from './errors.js';
import { expectedMd5, hexToBase64, wasmMd5, type Md5Factory } from './md5.js';
import { readChunks, sleep } from './streams.js';
import type {
  Bucket, BucketPage, CallOptions, DownloadOptions, DownloadResult, GetOptions, ListOptions, ListPage, MultipartUpload,
  MultipartUploadWithParts, ObjectVersion, Part, SignedUrl, SignOptions, UploadOptions, UploadResult,
} from './types.js';
import { runUpload, type UploadSource } from './upload.js';

export interface FilesClientOptions {
  /**
   * Where the server is: its root (`http://127.0.0.1:8080`), its URL prefix (`https://h/api`) or
   * the bucket collection itself (`…/files`).
   */
  url: string;
  /** API token, sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Headers added to every request. */
  headers?: Record<string, string>;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
  /** MD5 implementation (default: WebAssembly, works everywhere; the Node layer uses node:crypto). */
  md5?: Md5Factory;
  /**
   * Count upload bytes as they are handed to the connection instead of once per part. Needs a fetch
   * that takes a stream body with a Content-Length (Node's); browsers do not, so the default is on
   * in Node only.
   */
  streamUploads?: boolean;
}

/** What a HEAD on an object tells. */
export interface ObjectHead {
  size: number;
  etag: string | null;
  /** hex MD5 the server announces, when it does */
  md5: string | null;
  contentType: string | null;
  headers: Headers;
}

type Body = Blob | Uint8Array | ArrayBuffer | string;

interface RequestOptions extends CallOptions {
  body?: BodyInit | null;
  headers?: Record<string, string>;
  /** Statuses that are returned instead of thrown. */
  accept?: number[];
}

function isNode(): boolean {
  const p = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return typeof p?.versions?.node === 'string';
}

/** Percent-encodes a key for the URL path; slashes stay unless a segment is `.` or `..`. */
export function encodeKey(key: string): string {
  const segs = key.split('/');
  if (segs.some((s) => s === '.' || s === '..')) return encodeURIComponent(key);
  return segs.map(encodeURIComponent).join('/');
}

/** Normalises a server URL to the bucket collection URL (`…/files`, no trailing slash). */
export function filesUrlOf(url: string): string {
  const u = new URL(url);
  u.search = '';
  u.hash = '';
  let path = u.pathname.replace(/\/+$/, '');
  if (!/\/files$/.test(path)) path = `${path}/files`;
  u.pathname = path;
  return u.toString();
}

async function errorFrom(res: Response): Promise<FilesError> {
  let text = '';
  try {
    text = await res.text();
  } catch {
    // body unreadable: fall back on the status line
  }
  let body: unknown = undefined;
  try {
    body = text.trim() ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  const b = body as { message?: unknown; errors?: unknown } | undefined;
  const message = typeof b?.message === 'string' ? b.message : `${res.status} ${res.statusText || 'error'}`.trim();
  const errors = Array.isArray(b?.errors) ? (b.errors as { field: string; message: string }[]) : undefined;
  return new FilesError(res.status, message, errors, body ?? (text || undefined));
}

function toBodyInit(body: Body): BodyInit {
  if (typeof body === 'string') return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body) as unknown as BodyInit;
  return body as unknown as BodyInit;
}

function bodySize(body: Body): number {
  if (typeof body === 'string') return new TextEncoder().encode(body).byteLength;
  if (body instanceof ArrayBuffer) return body.byteLength;
  if (body instanceof Uint8Array) return body.byteLength;
  return body.size;
}

export class FilesClient {
  /** URL of the bucket collection (`…/files`). */
  readonly filesUrl: string;
  readonly md5Factory: Md5Factory;
  readonly streamUploads: boolean;
  protected readonly token: string | undefined;
  protected readonly extraHeaders: Record<string, string>;
  protected readonly fetchImpl: typeof fetch;

  constructor(opts: FilesClientOptions) {
    this.filesUrl = filesUrlOf(opts.url);
    this.token = opts.token || undefined;
    this.extraHeaders = { ...(opts.headers ?? {}) };
    this.fetchImpl = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.md5Factory = opts.md5 ?? wasmMd5;
    this.streamUploads = opts.streamUploads ?? isNode();
  }

  // ---- URLs ----------------------------------------------------------------------------------

  bucketUrl(bucketId: string, query = ''): string {
    return `${this.filesUrl}/${encodeURIComponent(bucketId)}${query}`;
  }

  objectUrl(bucketId: string, key: string, query = ''): string {
    return `${this.filesUrl}/${encodeURIComponent(bucketId)}/${encodeKey(key)}${query}`;
  }

  // ---- plumbing ------------------------------------------------------------------------------

  /** Sends a request; a non-2xx answer (not listed in `accept`) becomes a FilesError. */
  async request(method: string, url: string, opts: RequestOptions = {}): Promise<Response> {
    const headers: Record<string, string> = { ...this.extraHeaders, ...(opts.headers ?? {}) };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    const init: RequestInit & { duplex?: 'half' } = { method, headers, signal: opts.signal ?? null };
    if (opts.body !== undefined && opts.body !== null) {
      init.body = opts.body;
      if (typeof ReadableStream !== 'undefined' && opts.body instanceof ReadableStream) init.duplex = 'half';
    }
    // GET and HEAD without a body are sent again after a network failure (a connection the server
    // closed as it was reused, say): twice at most, after a short pause.
    const idempotent = (method === 'GET' || method === 'HEAD') && init.body === undefined;
    let res: Response;
    for (let attempt = 0; ; attempt++) {
      try {
        res = await this.fetchImpl(url, init);
        break;
      } catch (e) {
        if (opts.signal?.aborted || isAbortError(e)) throw e;
        if (!idempotent || attempt >= 2) throw new ConnectionError(method, url, e);
        await sleep(100 * (attempt + 1), opts.signal);
      }
    }
    if (res.ok || opts.accept?.includes(res.status)) return res;
    throw await errorFrom(res);
  }

  protected async json<T>(method: string, url: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.request(method, url, { ...opts, headers: { accept: 'application/json', ...(opts.headers ?? {}) } });
    const text = await res.text();
    return JSON.parse(text) as T;
  }

  // ---- buckets -------------------------------------------------------------------------------

  /** Creates a bucket in the default location. */
  createBucket(opts: CallOptions = {}): Promise<Bucket> {
    return this.json<Bucket>('POST', this.filesUrl, opts);
  }

  /** One page of the buckets the credential may read (`GET /files`), in id order. */
  async listBuckets(opts: CallOptions & { limit?: number; after?: string } = {}): Promise<BucketPage> {
    const q = new URLSearchParams();
    if (opts.limit !== undefined) q.set('limit', String(opts.limit));
    if (opts.after) q.set('after', opts.after);
    const qs = q.toString();
    const body = await this.json<{ contents: Bucket[]; links: { next?: string } }>('GET', `${this.filesUrl}${qs ? `?${qs}` : ''}`, opts);
    return { contents: body.contents, next: body.links.next ? new URL(body.links.next).searchParams.get('after') : null };
  }

  /**
   * A signed URL allowing one download of the object (or of one version), or with
   * `action: 'upload'` one PUT, until it expires; the caller's token must hold that action.
   */
  sign(bucketId: string, key: string, opts: SignOptions = {}): Promise<SignedUrl> {
    const q = new URLSearchParams({ action: opts.action ?? 'download' });
    if (opts.versionId) q.set('versionId', opts.versionId);
    if (opts.expiresIn !== undefined) q.set('expiresIn', String(opts.expiresIn));
    return this.json<SignedUrl>('POST', this.objectUrl(bucketId, key, `?sign&${q}`), opts.signal ? { signal: opts.signal } : {});
  }

  /** True when the bucket exists (HEAD: 200), false on 404. */
  async bucketExists(bucketId: string, opts: CallOptions = {}): Promise<boolean> {
    const res = await this.request('HEAD', this.bucketUrl(bucketId), { ...opts, accept: [404] });
    return res.status === 200;
  }

  /** The bucket's fields. */
  async getBucket(bucketId: string, opts: CallOptions = {}): Promise<Bucket> {
    const page = await this.listObjects(bucketId, { ...opts, limit: 1 });
    return page.bucket;
  }

  /** One page of the bucket's latest objects (or, with `versions`, of all versions and delete markers). */
  async listObjects(bucketId: string, opts: ListOptions = {}): Promise<ListPage> {
    const q = new URLSearchParams();
    if (opts.prefix) q.set('prefix', opts.prefix);
    if (opts.limit !== undefined) q.set('limit', String(opts.limit));
    if (opts.after) q.set('after', opts.after);
    let qs = q.toString();
    if (opts.versions) qs = qs ? `versions&${qs}` : 'versions';
    const body = await this.json<Bucket & { contents: ObjectVersion[] }>('GET', this.bucketUrl(bucketId, qs ? `?${qs}` : ''), opts);
    const { contents, ...bucket } = body;
    let next: string | null = null;
    if (bucket.links.next) next = new URL(bucket.links.next).searchParams.get('after');
    return { bucket, contents, next };
  }

  /** Every object (or version) of the bucket, page after page. */
  async *objects(bucketId: string, opts: Omit<ListOptions, 'after'> = {}): AsyncGenerator<ObjectVersion, void, undefined> {
    let after: string | undefined;
    // Bounded by the listing itself: each page moves the cursor forward; a repeated cursor stops.
    for (;;) {
      const page = await this.listObjects(bucketId, { ...opts, ...(after ? { after } : {}) });
      yield* page.contents;
      if (!page.next || page.next === after || page.contents.length === 0) return;
      after = page.next;
    }
  }

  /** Multipart uploads in progress in the bucket (`?uploads`). */
  listUploads(bucketId: string, opts: CallOptions & { limit?: number } = {}): Promise<MultipartUpload[]> {
    const q = opts.limit !== undefined ? `?uploads&limit=${opts.limit}` : '?uploads';
    return this.json<MultipartUpload[]>('GET', this.bucketUrl(bucketId, q), opts);
  }

  // ---- objects -------------------------------------------------------------------------------

  /**
   * Stores a body as a new head version in one PUT. With `md5` (hex) the server checks the content
   * against it (Content-MD5). `onBytes` counts bytes as they go out (in Node; once at the end elsewhere).
   */
  async putObject(
    bucketId: string,
    key: string,
    body: Body,
    opts: CallOptions & { contentType?: string; md5?: string; headers?: Record<string, string>; onBytes?: (n: number) => void } = {},
  ): Promise<ObjectVersion> {
    const headers: Record<string, string> = { accept: 'application/json', ...(opts.headers ?? {}) };
    if (opts.contentType) headers['content-type'] = opts.contentType;
    if (opts.md5) headers['content-md5'] = hexToBase64(opts.md5);
    const { init, after } = this.uploadBody(body, headers, opts.onBytes);
    const res = await this.request('PUT', this.objectUrl(bucketId, key), { ...opts, body: init, headers });
    const v = JSON.parse(await res.text()) as ObjectVersion;
    after();
    return v;
  }

  /**
   * A body for a PUT: with streamUploads a Blob goes as a counted stream with its Content-Length;
   * otherwise as it is, and `after()` reports all its bytes once the answer came.
   */
  protected uploadBody(body: Body, headers: Record<string, string>, onBytes?: (n: number) => void): { init: BodyInit; after: () => void } {
    const size = bodySize(body);
    if (!onBytes) return { init: toBodyInit(body), after: () => {} };
    if (this.streamUploads && typeof Blob !== 'undefined' && body instanceof Blob && size > 0) {
      headers['content-length'] = String(size);
      const counted = body.stream().pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, c) {
            onBytes(chunk.byteLength);
            c.enqueue(chunk);
          },
        }),
      );
      return { init: counted as unknown as BodyInit, after: () => {} };
    }
    return { init: toBodyInit(body), after: () => onBytes(size) };
  }

  /** GET of an object's content; the Response is returned for the caller to read (2xx only). */
  getObject(bucketId: string, key: string, opts: GetOptions & { attachment?: boolean } = {}): Promise<Response> {
    const q = new URLSearchParams();
    if (opts.versionId) q.set('versionId', opts.versionId);
    let qs = q.toString();
    if (opts.attachment) qs = qs ? `download&${qs}` : 'download';
    return this.request('GET', this.objectUrl(bucketId, key, qs ? `?${qs}` : ''), opts);
  }

  /** HEAD of an object: size, ETag and the MD5 the server announces. */
  async headObject(bucketId: string, key: string, opts: GetOptions = {}): Promise<ObjectHead> {
    const q = opts.versionId ? `?versionId=${encodeURIComponent(opts.versionId)}` : '';
    const res = await this.request('HEAD', this.objectUrl(bucketId, key, q), opts);
    return {
      size: Number(res.headers.get('content-length') ?? 0),
      etag: res.headers.get('etag'),
      md5: expectedMd5(res.headers),
      contentType: res.headers.get('content-type'),
      headers: res.headers,
    };
  }

  /** Soft delete: adds a delete marker as the new head; returns its version id. */
  async deleteObject(bucketId: string, key: string, opts: CallOptions = {}): Promise<{ versionId: string | null }> {
    const res = await this.request('DELETE', this.objectUrl(bucketId, key), opts);
    await res.arrayBuffer().catch(() => undefined);
    return { versionId: res.headers.get('x-version-id') };
  }

  /** Hard delete of one version (and, later, of its file). */
  async deleteVersion(bucketId: string, key: string, versionId: string, opts: CallOptions = {}): Promise<void> {
    const res = await this.request('DELETE', this.objectUrl(bucketId, key, `?versionId=${encodeURIComponent(versionId)}`), opts);
    await res.arrayBuffer().catch(() => undefined);
  }

  /** Finds one version of a key in the bucket's version listing; null when it is not there. */
  async findVersion(bucketId: string, key: string, versionId: string, opts: CallOptions = {}): Promise<ObjectVersion | null> {
    for await (const v of this.objects(bucketId, { ...opts, versions: true, prefix: key })) {
      if (v.key === key && v.version_id === versionId) return v;
    }
    return null;
  }

  // ---- multipart primitives ------------------------------------------------------------------

  initiateMultipart(bucketId: string, key: string, size: number, partSize: number, opts: CallOptions = {}): Promise<MultipartUpload> {
    return this.json<MultipartUpload>('POST', this.objectUrl(bucketId, key, `?uploads&size=${size}&partSize=${partSize}`), opts);
  }

  /** Sends one part (zero-based number); it must be exactly part_size bytes, except the last. */
  async uploadPart(
    bucketId: string,
    key: string,
    uploadId: string,
    partNumber: number,
    body: Blob | Uint8Array | ArrayBuffer,
    opts: CallOptions & { onBytes?: (n: number) => void } = {},
  ): Promise<Part> {
    const headers: Record<string, string> = { accept: 'application/json' };
    const { init, after } = this.uploadBody(body, headers, opts.onBytes);
    const url = this.objectUrl(bucketId, key, `?uploadId=${encodeURIComponent(uploadId)}&partNumber=${partNumber}`);
    const res = await this.request('PUT', url, { ...opts, body: init, headers });
    const p = JSON.parse(await res.text()) as Part;
    after();
    return p;
  }

  /** The upload and the parts the server holds. */
  listParts(bucketId: string, key: string, uploadId: string, opts: CallOptions = {}): Promise<MultipartUploadWithParts> {
    return this.json<MultipartUploadWithParts>('GET', this.objectUrl(bucketId, key, `?uploadId=${encodeURIComponent(uploadId)}`), opts);
  }

  /**
   * Completes an upload. The server answers once the object exists (200); a late failure can only
   * show in the body, which is checked. With `async`, the server answers 202 at once and this
   * returns without waiting; otherwise a 202 (very long merges) is followed by polling.
   */
  async completeMultipart(
    bucketId: string,
    key: string,
    uploadId: string,
    opts: CallOptions & { async?: boolean; pollIntervalMs?: number; timeoutMs?: number } = {},
  ): Promise<MultipartUpload> {
    const url = this.objectUrl(bucketId, key, `?uploadId=${encodeURIComponent(uploadId)}`);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.async) headers.prefer = 'respond-async';
    const res = await this.request('POST', url, { ...opts, headers });
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new FilesError(502, `Completion answered ${res.status} with a body that is not JSON.`, undefined, text);
    }
    const b = body as Partial<MultipartUpload> & { status?: number; message?: string };
    if (typeof b.id !== 'string') {
      throw new FilesError(typeof b.status === 'number' ? b.status : 500, typeof b.message === 'string' ? b.message : 'Completion failed.', undefined, body);
    }
    const upload = b as MultipartUpload;
    if (res.status === 202 && !opts.async) await this.waitForCompletion(bucketId, key, upload, opts);
    return upload;
  }

  /** Polls until a completing upload is gone and its version exists (bounded by timeoutMs, default 30 min). */
  protected async waitForCompletion(
    bucketId: string,
    key: string,
    upload: MultipartUpload,
    opts: CallOptions & { pollIntervalMs?: number; timeoutMs?: number },
  ): Promise<void> {
    const versionId = upload.links.object_version ? new URL(upload.links.object_version).searchParams.get('versionId') : null;
    const deadline = Date.now() + (opts.timeoutMs ?? 30 * 60_000);
    while (Date.now() < deadline) {
      const res = await this.request('GET', this.objectUrl(bucketId, key, `?uploadId=${encodeURIComponent(upload.id)}`), { ...opts, accept: [404] });
      await res.arrayBuffer().catch(() => undefined);
      if (res.status === 404) {
        if (!versionId || (await this.findVersion(bucketId, key, versionId, opts))) return;
        throw new FilesError(500, 'Multipart upload was removed before it completed.');
      }
      await sleep(opts.pollIntervalMs ?? 1000, opts.signal);
    }
    throw new FilesError(504, 'Completion is still running; poll the upload or the object later.');
  }

  /** Aborts an upload and deletes its parts. */
  async abortMultipart(bucketId: string, key: string, uploadId: string, opts: CallOptions = {}): Promise<void> {
    const res = await this.request('DELETE', this.objectUrl(bucketId, key, `?uploadId=${encodeURIComponent(uploadId)}`), opts);
    await res.arrayBuffer().catch(() => undefined);
  }

  // ---- high level ----------------------------------------------------------------------------

  /**
   * Uploads a Blob, ArrayBuffer, typed array or ReadableStream (give `size` for a stream larger
   * than one part): one PUT below the part size, otherwise parallel multipart parts with retries,
   * resume of an upload the server still holds and restart of one it dropped. The server's checksum
   * is compared with the locally computed MD5 before this resolves.
   */
  upload(bucketId: string, key: string, source: UploadSource, opts: UploadOptions = {}): Promise<UploadResult> {
    return runUpload(this, bucketId, key, source, opts);
  }

  /**
   * Streams an object into a WritableStream, hashing it; rejects with ChecksumMismatchError when the
   * content does not match the MD5 the server announced (the bytes were written all the same: the
   * Node layer's file download removes them).
   */
  async download(bucketId: string, key: string, dest: WritableStream<Uint8Array>, opts: DownloadOptions = {}): Promise<DownloadResult> {
    const res = await this.getObject(bucketId, key, opts);
    const expected = expectedMd5(res.headers);
    const total = Number(res.headers.get('content-length') ?? 0);
    const hasher = await this.md5Factory();
    const writer = dest.getWriter();
    let loaded = 0;
    try {
      if (res.body) {
        for await (const chunk of readChunks(res.body)) {
          hasher.update(chunk);
          await writer.write(chunk);
          loaded += chunk.byteLength;
          opts.onProgress?.({ key, loaded, total });
        }
      }
      await writer.close();
    } catch (e) {
      await writer.abort(e).catch(() => undefined);
      throw e;
    }
    const actual = hasher.digest();
    if (expected && expected !== actual) {
      throw new ChecksumMismatchError(`Downloaded ${key} does not match the server's checksum (md5:${expected}, got md5:${actual}).`, `md5:${expected}`, `md5:${actual}`);
    }
    return { size: loaded, md5: actual, transferred: loaded, resumedFrom: 0 };
  }

  /** Downloads an object into memory as a Blob, checking its MD5. */
  async downloadBlob(bucketId: string, key: string, opts: DownloadOptions = {}): Promise<{ blob: Blob; md5: string }> {
    const chunks: Uint8Array[] = [];
    const sink = new WritableStream<Uint8Array>({ write: (c) => void chunks.push(c) });
    const r = await this.download(bucketId, key, sink, opts);
    return { blob: new Blob(chunks as unknown as BlobPart[]), md5: r.md5 };
  }
}

