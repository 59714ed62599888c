/** JSON shapes of the files-rest REST API, as the client sees them. */

export interface Bucket {
  id: string;
  size: number;
  quota_size: number | null;
  max_file_size: number | null;
  locked: boolean;
  /** Anyone may download its objects without a credential (servers before 0005_public_buckets omit it). */
  public_read?: boolean;
  created: string;
  updated: string;
  links: { self: string; versions: string; uploads: string; next?: string };
}

/** A page of `GET /files`: the buckets the credential may read. */
export interface BucketPage {
  contents: Bucket[];
  /** The `after` cursor of the next page, or null on the last. */
  next: string | null;
}

/** What `POST …?sign` answers: a URL allowing one download or one upload, without a credential. */
export interface SignedUrl {
  url: string;
  method: 'GET' | 'PUT';
  action: 'download' | 'upload';
  bucket: string;
  key: string;
  version_id: string | null;
  /** ISO 8601. */
  expires: string;
  /** An upload URL works for one PUT. */
  single_use: boolean;
}

export interface SignOptions {
  /** download (default) or upload. */
  action?: 'download' | 'upload';
  /** A download of this version instead of the head. */
  versionId?: string;
  /** Seconds the URL is valid (the server's default when omitted; at most its maximum). */
  expiresIn?: number;
  signal?: AbortSignal;
}

/** An object version (also a delete marker, which has no size and no checksum). */
export interface ObjectVersion {
  key: string;
  version_id: string;
  is_head: boolean;
  delete_marker: boolean;
  size?: number;
  mimetype: string;
  /** `md5:<hex>` */
  checksum?: string;
  tags: Record<string, string>;
  created: string;
  updated: string;
  links: { self: string; version: string; uploads?: string };
}

export interface MultipartUpload {
  id: string;
  bucket: string;
  key: string;
  size: number;
  part_size: number;
  last_part_number: number;
  last_part_size: number;
  completed: boolean;
  created: string;
  updated: string;
  links: { self: string; object: string; bucket: string; object_version?: string };
}

export interface Part {
  part_number: number;
  start_byte: number;
  end_byte: number;
  /** `md5:<hex>` of the part's bytes */
  checksum: string;
  created: string;
  updated: string;
}

export interface MultipartUploadWithParts extends MultipartUpload {
  parts: Part[];
}

/** One page of a bucket listing. `next` is the `after` cursor of the following page, or null. */
export interface ListPage {
  bucket: Bucket;
  contents: ObjectVersion[];
  next: string | null;
}

/** Options every call accepts. */
export interface CallOptions {
  signal?: AbortSignal;
}

export interface ListOptions extends CallOptions {
  /** Only keys that start with this. */
  prefix?: string;
  /** All versions, delete markers included (`?versions`). */
  versions?: boolean;
  /** Page size (1–10000; the server's default is 1000). */
  limit?: number;
  /** Cursor from a previous page's `next`. */
  after?: string;
}

export interface GetOptions extends CallOptions {
  versionId?: string;
  /** Extra request headers (Range, If-Range, If-None-Match, …). */
  headers?: Record<string, string>;
}

export interface UploadProgress {
  key: string;
  /** Bytes the server holds or is receiving (parts it already had count too). */
  loaded: number;
  total: number;
  /** Parts done (sent or found on the server) out of `partsTotal`; 1/1 for a single PUT. */
  partsDone: number;
  partsTotal: number;
}

/** Things worth telling a person while an upload runs. */
export type UploadEvent =
  | { type: 'start'; key: string; size: number; multipart: boolean; partSize: number; parts: number }
  | { type: 'resume'; key: string; uploadId: string; partsOnServer: number; message: string }
  | { type: 'retry'; key: string; part: number | null; attempt: number; delayMs: number; error: unknown; message: string }
  | { type: 'restart'; key: string; uploadId: string; message: string }
  | { type: 'complete'; key: string; message: string };

export interface UploadOptions extends CallOptions {
  /** Part size in bytes; default max(8 MiB, ceil(size / 9000)) rounded up to a MiB. */
  partSize?: number;
  /** Parts sent at once; default 4. */
  parallel?: number;
  /** Attempts per part (and per single PUT) after the first; default 5. */
  retries?: number;
  /** First backoff delay in ms, doubled on each retry (with jitter, capped at 15 s); default 500. */
  retryDelay?: number;
  /** Times a multipart upload the server dropped is started again from scratch; default 2. */
  maxRestarts?: number;
  /** Continue an in-progress upload of the same key, size and part size the server still has; default true. */
  resume?: boolean;
  /** Size of a ReadableStream source (required when it is larger than one part). */
  size?: number;
  /** Content-Type of a single PUT. */
  contentType?: string;
  /**
   * A gentler stop than `signal`: once it aborts, no new part starts, the parts in flight finish,
   * and the upload rejects with UploadStoppedError (saying how many parts the server holds) unless
   * the last parts were already on their way. A later upload() resumes. A single PUT in flight finishes.
   */
  stopSignal?: AbortSignal;
  onProgress?: (p: UploadProgress) => void;
  onEvent?: (e: UploadEvent) => void;
}

export interface UploadResult {
  object: ObjectVersion;
  /** Hex MD5 computed locally, equal to the server's checksum. */
  md5: string;
  multipart: boolean;
  uploadId: string | null;
  partSize: number;
  partsTotal: number;
  /** Parts sent in this call (retries not counted twice). */
  partsSent: number;
  /** Parts the server already had (resumed uploads). */
  partsSkipped: number;
  /** Part (or PUT) attempts that failed and were retried. */
  retries: number;
  /** Times the upload was started again from scratch because the server dropped it. */
  restarts: number;
  resumed: boolean;
}

export interface DownloadProgress {
  key: string;
  loaded: number;
  total: number;
}

export interface DownloadOptions extends GetOptions {
  onProgress?: (p: DownloadProgress) => void;
}

export interface DownloadResult {
  size: number;
  /** hex MD5 of the content, checked against the server's Content-MD5 / ETag */
  md5: string;
  /** Bytes fetched over the network in this call (less than `size` after a resume). */
  transferred: number;
  /** Offset the download resumed from (0 when it started fresh). */
  resumedFrom: number;
}
