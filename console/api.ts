/**
 * Every call the console makes to the files-rest REST API, and the shapes it assumes. The rest of the
 * console never builds an API URL or calls fetch itself: when the API changes, this is the one file
 * to adapt.
 *
 * The token travels in `Authorization: Bearer <token>` only (never in a URL); it is kept in the tab's
 * sessionStorage (see session.ts), so it survives a reload but not closing the tab.
 *
 * Endpoints used, and what is assumed of them:
 * - `GET  /files?limit=&after=` → BucketPage `{ contents: Bucket[], links: { next? } }`: the buckets
 *   the credential may see, paged like object listings. (An older server answers 405 there;
 *   `checkToken` reads that as "token accepted, no bucket list".)
 * - `POST /files` → Bucket (create a bucket in the default location; needs `location-update`).
 * - `GET  /files/<b>?prefix=&limit=` (and `?versions`) → Bucket + `contents: Version[]`, paged by
 *   following `links.next` verbatim (a keyset cursor `?after=`).
 * - `GET  /files/<b>/<key>` (`?versionId=`) → the bytes (downloaded with the token, then saved).
 * - `DELETE /files/<b>/<key>` → 204 soft delete (a delete marker becomes the head).
 * - `DELETE /files/<b>/<key>?versionId=<id>` → 204 hard delete of that version; of a delete marker:
 *   restore (the newest remaining version becomes head again).
 * - `POST /files/<b>/<key>?sign&action=download&expiresIn=S` → `{ url, expires, … }`: a signed link
 *   anyone may GET without a credential until `expires`.
 * - tus 1.0 at `/tus/<b>/` (beside `/files`): creation with `Upload-Metadata` carrying `key` (the
 *   object key; `filename` too) and `filetype`; resumable with HEAD/PATCH at the `Location` the
 *   creation answers. See `tusEndpoint`.
 * - `public_read` on bucket JSON: shown; `last_check_at` and `last_check` ("ok" / "failed" / null)
 *   on version JSON: a file's integrity state (absent on an older server: shown as unknown).
 * - Admin endpoints at `{prefix}/admin` (beside `/files`), for a token allowed `location-update`:
 *   `GET /admin` → 200 with links (the token may administer) or 403 (it may not; 404 on an older
 *   server: no admin pages); `GET /admin/locations` → `{ contents: StorageLocation[] }`;
 *   `GET /admin/migrations` → MigrationStatus; `GET /admin/tasks?state=failed&limit=` → TaskPage,
 *   paged by `links.next`; `POST /admin/tasks/<id>/retry` → the task, queued again;
 *   `POST /admin/tasks/failed/retry` → `{ queued }`.
 *
 * Not in the REST API (so not in the console): a bucket's location.
 */

/** Bucket JSON as `POST /files` and `GET /files/<id>` return it. */
export interface Bucket {
  id: string;
  name?: string;
  size: number;
  quota_size: number | null;
  max_file_size: number | null;
  locked: boolean;
  created: string;
  updated: string;
  /** Anyone may read the bucket's objects without a credential (admin CLI: bucket set --public-read). */
  public_read?: boolean;
  links: { self: string; versions: string; uploads: string; next?: string };
}

/** Object version JSON; a delete marker has no size and no checksum. */
export interface Version {
  key: string;
  version_id: string;
  is_head: boolean;
  delete_marker: boolean;
  size?: number;
  mimetype: string | null;
  checksum?: string | null;
  tags: Record<string, string>;
  created: string;
  updated: string;
  /** The file's last integrity check (null: never; absent: a delete marker, or an older server). */
  last_check_at?: string | null;
  /** Its result: "ok", "failed", or null (never checked). */
  last_check?: 'ok' | 'failed' | null;
  links: { self: string; version: string; uploads?: string };
}

/** The migrate-file tasks towards one location, by state (`left`: queued + running). */
export interface MigrationCounts {
  left: number;
  queued: number;
  running: number;
  done: number;
  failed: number;
}

/** `GET /admin/locations`: one storage location. */
export interface StorageLocation {
  name: string;
  uri: string;
  kind: string | null;
  default: boolean;
  files: number;
  bytes: number;
  migration: MigrationCounts | null;
  created: string;
  updated: string;
}

/** `GET /admin/migrations`. */
export interface MigrationStatus {
  queued: number;
  running: number;
  done: number;
  failed: number;
  targets: (MigrationCounts & { location: string })[];
  locations: { name: string; files: number; bytes: number }[];
}

/** A background task as `GET /admin/tasks` lists it. */
export interface Task {
  id: number;
  name: string;
  state: 'queued' | 'running' | 'done' | 'failed';
  summary: string;
  attempts: number;
  max_attempts: number;
  last_error: string | null;
  run_at: string;
  created: string;
  updated: string;
  links: { self: string; retry?: string };
}

export interface TaskPage {
  contents: Task[];
  links: { self: string; next?: string };
}

export interface Listing extends Bucket {
  contents: Version[];
}

/** `GET /files`: a page of buckets. */
export interface BucketPage {
  contents: Bucket[];
  links: { next?: string };
}

/** `POST …?sign`: the link and when it stops working. */
export interface SignedLink {
  url: string;
  expires?: string;
}

/** A refusal of the API: its status and the `{"status","message"}` body's message. */
export class ApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = 'ApiError';
  }
}

/** `{prefix}/files`, from the console's own URL (`{prefix}/console/`). */
export function apiBase(loc: Location = window.location): string {
  const at = loc.pathname.lastIndexOf('/console');
  const prefix = at >= 0 ? loc.pathname.slice(0, at) : '';
  return `${loc.origin}${prefix}/files`;
}

/** Percent-encodes a key for a URL path, keeping its `/`. */
export function keyPath(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

export class Api {
  constructor(readonly token: string | null, readonly base: string = apiBase()) {}

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { accept: 'application/json', ...extra };
    if (this.token) h.authorization = `Bearer ${this.token}`;
    return h;
  }

  private async call(url: string, init: RequestInit = {}): Promise<Response> {
    const res = await fetch(url, { ...init, headers: this.headers((init.headers as Record<string, string>) ?? {}), credentials: 'omit', cache: 'no-store' });
    if (!res.ok) {
      let message = `${res.status} ${res.statusText}`;
      try {
        const body = (await res.json()) as { message?: string };
        if (body.message) message = body.message;
      } catch {
        /* not JSON */
      }
      throw new ApiError(res.status, message);
    }
    return res;
  }

  private async json<T>(url: string, init: RequestInit = {}): Promise<T> {
    return (await (await this.call(url, init)).json()) as T;
  }

  /**
   * Is the token accepted? Asks for one bucket of the bucket list: 401 → refused (throws). Returns
   * whether the server lists buckets (`GET /files` answers 200); before that endpoint exists the
   * collection answers 405 to a GET, after authentication: the token was accepted all the same.
   */
  async checkToken(): Promise<{ canListBuckets: boolean; canAdminister: boolean }> {
    let canListBuckets = true;
    try {
      await this.call(`${this.base}?limit=1`);
    } catch (e) {
      if (e instanceof ApiError && (e.status === 405 || e.status === 404)) canListBuckets = false;
      else throw e;
    }
    return { canListBuckets, canAdminister: await this.canAdminister() };
  }

  /** `{prefix}/admin`, beside `/files`. */
  get adminBase(): string {
    return this.base.replace(/\/files$/, '/admin');
  }

  /** May the token administer? The server says: 200 yes; 403 no; 404 (an older server, no admin endpoints) no. */
  async canAdminister(): Promise<boolean> {
    try {
      await this.call(this.adminBase);
      return true;
    } catch (e) {
      if (e instanceof ApiError && [403, 404, 405].includes(e.status)) return false;
      throw e;
    }
  }

  locations(): Promise<{ contents: StorageLocation[] }> {
    return this.json<{ contents: StorageLocation[] }>(`${this.adminBase}/locations`);
  }

  migrations(): Promise<MigrationStatus> {
    return this.json<MigrationStatus>(`${this.adminBase}/migrations`);
  }

  /** A page of the tasks in `state`, newest first; `next` from `links.next`. */
  tasks(state: Task['state'], next?: string, limit = 50): Promise<TaskPage> {
    return this.json<TaskPage>(next ?? `${this.adminBase}/tasks?state=${state}&limit=${limit}`);
  }

  /** Queues a failed task again; answers the task as it is now. */
  retryTask(id: number): Promise<Task> {
    return this.json<Task>(`${this.adminBase}/tasks/${id}/retry`, { method: 'POST' });
  }

  /** Queues every failed task again; answers how many. */
  retryFailedTasks(): Promise<{ queued: number }> {
    return this.json<{ queued: number }>(`${this.adminBase}/tasks/failed/retry`, { method: 'POST' });
  }

  /** One page of the buckets the credential may see; `next` is the URL `links.next` gave. */
  listBuckets(next?: string, limit = 100): Promise<BucketPage> {
    return this.json<BucketPage>(next ?? `${this.base}?limit=${limit}`);
  }

  createBucket(): Promise<Bucket> {
    return this.json<Bucket>(this.base, { method: 'POST' });
  }

  /** The bucket and its objects (latest versions) under `prefix`, one page; `next` from `links.next`. */
  listObjects(bucket: string, prefix: string, next?: string, limit = 1000): Promise<Listing> {
    if (next) return this.json<Listing>(next);
    const q = new URLSearchParams({ limit: String(limit) });
    if (prefix) q.set('prefix', prefix);
    return this.json<Listing>(`${this.base}/${encodeURIComponent(bucket)}?${q}`);
  }

  /** Every version and delete marker of exactly `key`, newest first (all pages). */
  async listVersions(bucket: string, key: string): Promise<{ bucket: Bucket; versions: Version[] }> {
    const q = new URLSearchParams({ prefix: key, limit: '1000' });
    let url: string | undefined = `${this.base}/${encodeURIComponent(bucket)}?versions&${q}`;
    const versions: Version[] = [];
    let bucketJson: Bucket | undefined;
    while (url) {
      const page: Listing = await this.json<Listing>(url);
      bucketJson ??= page;
      const mine = page.contents.filter((v) => v.key === key);
      versions.push(...mine);
      // Keys sort after their prefix: once another key follows ours, ours is done.
      url = page.contents.some((v) => v.key > key) ? undefined : page.links.next;
    }
    return { bucket: bucketJson!, versions };
  }

  objectUrl(bucket: string, key: string, versionId?: string): string {
    const u = `${this.base}/${encodeURIComponent(bucket)}/${keyPath(key)}`;
    return versionId ? `${u}?versionId=${encodeURIComponent(versionId)}` : u;
  }

  /** The bytes of a version, fetched with the token (a plain link could not carry it). */
  async download(bucket: string, key: string, versionId?: string): Promise<Blob> {
    return (await this.call(this.objectUrl(bucket, key, versionId), { headers: { accept: '*/*' } })).blob();
  }

  /** Soft delete: a delete marker becomes the head. */
  async softDelete(bucket: string, key: string): Promise<void> {
    await this.call(this.objectUrl(bucket, key), { method: 'DELETE' });
  }

  /** Hard delete of one version; of a delete marker, a restore. */
  async hardDelete(bucket: string, key: string, versionId: string): Promise<void> {
    await this.call(this.objectUrl(bucket, key, versionId), { method: 'DELETE' });
  }

  /** A signed link to the latest version (`?sign`), valid `expiresIn` seconds. */
  sign(bucket: string, key: string, expiresIn = 3600): Promise<SignedLink> {
    return this.json<SignedLink>(`${this.objectUrl(bucket, key)}?sign&action=download&expiresIn=${expiresIn}`, { method: 'POST' });
  }

  /** The tus creation endpoint of a bucket. */
  tusEndpoint(bucket: string): string {
    // `{prefix}/tus/<bucket>/` beside `{prefix}/files` (not under it: keys may begin with `tus/`).
    return `${this.base.replace(/\/files$/, '')}/tus/${encodeURIComponent(bucket)}/`;
  }

  /** Headers every tus request carries. */
  tusHeaders(): Record<string, string> {
    return this.token ? { authorization: `Bearer ${this.token}` } : {};
  }

  /** tus `Upload-Metadata` of a file stored at `key`. */
  static tusMetadata(key: string, type: string | undefined): Record<string, string> {
    return { key, filename: key, filetype: type || 'application/octet-stream' };
  }
}
