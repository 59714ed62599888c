/**
 * Node layer of the files-rest client: upload from a file path (parts read at their offsets),
 * download to a file with resume (Range + If-Range into `<dest>.part`), MD5 with node:crypto.
 *
 *   import { NodeFilesClient } from 'files-rest/client/node';
 *   const client = new NodeFilesClient({ url: 'http://127.0.0.1:8080' });
 *   await client.upload(bucketId, 'backup.tar', '/data/backup.tar', { parallel: 4 });
 *   await client.download(bucketId, 'backup.tar', '/tmp/backup.tar');
 */
import { createHash } from 'node:crypto';
import { createReadStream, openAsBlob } from 'node:fs';
import { open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { FilesClient, type FilesClientOptions } from './client.js';
import { ChecksumMismatchError, FilesError, isAbortError, isRetryable } from './errors.js';
import { expectedMd5, type Md5Factory } from './md5.js';
import { readChunks, sleep } from './streams.js';
import type { DownloadOptions, DownloadResult, UploadOptions, UploadResult } from './types.js';
import type { RandomAccessSource, UploadSource } from './upload.js';

export * from './index.js';

/** MD5 with node:crypto (native, faster than WebAssembly). */
export const nodeMd5: Md5Factory = async () => {
  const h = createHash('md5');
  return { update: (d) => void h.update(d), digest: () => h.digest('hex') };
};

/** MD5 of a file (or of bytes [start, end) of it), hex. */
export async function fileMd5(path: string, range?: { start: number; end: number }): Promise<string> {
  const h = createHash('md5');
  if (range && range.end <= range.start) return h.digest('hex');
  const rs = createReadStream(path, { highWaterMark: 1024 * 1024, ...(range ? { start: range.start, end: range.end - 1 } : {}) });
  for await (const chunk of rs as AsyncIterable<Buffer>) h.update(chunk);
  return h.digest('hex');
}

/** A file as an upload source: parts are slices read at their offsets, hashing reads it in order. */
export async function fileSource(path: string): Promise<RandomAccessSource & { path: string }> {
  const st = await stat(path);
  if (!st.isFile()) throw new Error(`${path} is not a regular file`);
  const blob = await openAsBlob(path);
  return {
    path,
    size: blob.size,
    slice: (start, end) => blob.slice(start, end),
    read: () => createReadStream(path, { highWaterMark: 1024 * 1024 }) as AsyncIterable<Uint8Array>,
  };
}

export interface DownloadEvent {
  type: 'resume' | 'retry' | 'restart';
  key: string;
  message: string;
}

export interface FileDownloadOptions extends DownloadOptions {
  /** Attempts after a failed transfer (each resumes with Range); default 5. */
  retries?: number;
  /** First backoff delay in ms, doubled each retry; default 500. */
  retryDelay?: number;
  /** Continue from `<dest>.part` when it belongs to the same object version; default true. */
  resume?: boolean;
  onEvent?: (e: DownloadEvent) => void;
}

interface PartMeta {
  target: string;
  etag: string;
}

async function readMeta(path: string): Promise<PartMeta | null> {
  try {
    const m = JSON.parse(await readFile(path, 'utf8')) as Partial<PartMeta>;
    return typeof m.target === 'string' && typeof m.etag === 'string' ? (m as PartMeta) : null;
  } catch {
    return null;
  }
}

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch {
    return 0;
  }
}

/** A FilesClient that also reads and writes files. */
export class NodeFilesClient extends FilesClient {
  constructor(opts: FilesClientOptions) {
    super({ md5: nodeMd5, ...opts });
  }

  /** As FilesClient.upload; a string source is a file path. */
  override async upload(bucketId: string, key: string, source: UploadSource | string, opts: UploadOptions = {}): Promise<UploadResult> {
    const src = typeof source === 'string' ? await fileSource(source) : source;
    return super.upload(bucketId, key, src, opts);
  }

  /**
   * Downloads an object into a file: bytes go to `<dest>.part` (with `<dest>.part.json` naming the
   * version's ETag); an interrupted transfer, in this call or an earlier one, continues with
   * `Range`/`If-Range`. The whole file's MD5 is checked against the server's before `<dest>` is
   * put in place; on a mismatch the partial file is removed and ChecksumMismatchError thrown.
   * A WritableStream destination behaves as in FilesClient.
   */
  override async download(
    bucketId: string,
    key: string,
    dest: string | WritableStream<Uint8Array>,
    opts: FileDownloadOptions = {},
  ): Promise<DownloadResult> {
    if (typeof dest !== 'string') return super.download(bucketId, key, dest, opts);
    const partPath = `${dest}.part`;
    const metaPath = `${dest}.part.json`;
    // What the partial file holds: bucket, key and version (not the URL: a proxy in between may change).
    const target = `${bucketId}/${key}${opts.versionId ? `?versionId=${opts.versionId}` : ''}`;
    const retries = opts.retries ?? 5;
    const signal = opts.signal;
    const getOpts = { ...(opts.versionId ? { versionId: opts.versionId } : {}), ...(signal ? { signal } : {}) };

    let meta = opts.resume === false ? null : await readMeta(metaPath);
    let offset = meta && meta.target === target ? await sizeOf(partPath) : 0;
    if (offset === 0) meta = null;
    const resumedFrom = offset;
    if (offset > 0) opts.onEvent?.({ type: 'resume', key, message: `resuming the download of ${key} at byte ${offset}` });
    let transferred = 0;
    let expected: string | null = null;
    let total = 0;

    for (let attempt = 0; ; attempt++) {
      if (signal?.aborted) throw signal.reason;
      const headers: Record<string, string> = {};
      if (offset > 0 && meta) {
        headers.range = `bytes=${offset}-`;
        headers['if-range'] = meta.etag;
      }
      let res: Response;
      try {
        res = await this.getObject(bucketId, key, { ...getOpts, headers });
      } catch (e) {
        if (e instanceof FilesError && e.status === 416 && meta) {
          // The partial file is as long as the object (or longer): check it as it is, or start over.
          const head = await this.headObject(bucketId, key, getOpts);
          if (head.etag === meta.etag && head.size === offset) {
            expected = head.md5;
            total = head.size;
            break;
          }
          offset = 0;
          meta = null;
          opts.onEvent?.({ type: 'restart', key, message: `the partial download of ${key} does not fit the object: starting over` });
          continue;
        }
        if (isAbortError(e) || !isRetryable(e) || attempt >= retries) throw e;
        await this.pause(e, key, attempt, opts);
        continue;
      }
      let append = false;
      if (res.status === 206) {
        const cr = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(res.headers.get('content-range') ?? '');
        if (cr && Number(cr[1]) === offset) {
          append = true;
          total = Number(cr[3]);
        } else {
          await res.body?.cancel().catch(() => undefined);
          offset = 0;
          meta = null;
          continue;
        }
      } else {
        if (offset > 0) opts.onEvent?.({ type: 'restart', key, message: `the object ${key} changed since the partial download: starting over` });
        offset = 0;
        total = Number(res.headers.get('content-length') ?? 0);
      }
      expected = expectedMd5(res.headers);
      const etag = res.headers.get('etag');
      if (!append) {
        meta = etag ? { target, etag } : null;
        if (meta) await writeFile(metaPath, JSON.stringify(meta));
        else await rm(metaPath, { force: true });
      }
      const fh = await open(partPath, append ? 'a' : 'w');
      try {
        if (res.body) {
          for await (const chunk of readChunks(res.body)) {
            await fh.write(chunk);
            offset += chunk.byteLength;
            transferred += chunk.byteLength;
            opts.onProgress?.({ key, loaded: offset, total });
          }
        }
      } catch (e) {
        await fh.close();
        if (isAbortError(e) || signal?.aborted || attempt >= retries) throw signal?.aborted ? signal.reason : e;
        await this.pause(e, key, attempt, opts);
        continue;
      }
      await fh.close();
      if (offset === total) break;
      if (attempt >= retries) throw new Error(`download of ${key} stopped at byte ${offset} of ${total}`);
      await this.pause(new Error(`transfer ended at byte ${offset} of ${total}`), key, attempt, opts);
    }

    const actual = await fileMd5(partPath);
    if (expected && expected !== actual) {
      await rm(partPath, { force: true });
      await rm(metaPath, { force: true });
      throw new ChecksumMismatchError(
        `Downloaded ${key} does not match the server's checksum (md5:${expected}, got md5:${actual}); the partial file was removed`,
        `md5:${expected}`,
        `md5:${actual}`,
      );
    }
    await rename(partPath, dest);
    await rm(metaPath, { force: true });
    return { size: offset, md5: actual, transferred, resumedFrom };
  }

  private async pause(e: unknown, key: string, attempt: number, opts: FileDownloadOptions): Promise<void> {
    const delay = Math.round(Math.min(15_000, (opts.retryDelay ?? 500) * 2 ** attempt) * (0.75 + Math.random() * 0.5));
    const why = e instanceof Error ? e.message : String(e);
    opts.onEvent?.({ type: 'retry', key, message: `download of ${key} interrupted (${why}); resuming in ${(delay / 1000).toFixed(1)} s` });
    await sleep(delay, opts.signal);
  }
}
