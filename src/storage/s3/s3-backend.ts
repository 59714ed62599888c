import { Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  S3Client,
  UploadPartCommand,
  UploadPartCopyCommand,
  type CompletedPart,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Config } from '../../config.js';
import { AppError } from '../../errors.js';
import {
  StorageError,
  type ByteRange,
  type PartWrite,
  type ProxyTarget,
  type StorageBackend,
  type StoredObjectInfo,
  type StoredPart,
  type WriteOptions,
} from '../backend.js';
import { isCompletionInProgress, isNoSuchKey, isNoSuchUpload, toStorageError } from './errors.js';
import { copySource, fileKey, formatS3Uri, isS3Uri, locationPrefix, parseS3Uri, type S3Address } from './uri.js';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** Limits of the S3 protocol itself (AWS; S3-compatible servers mostly follow them). */
export const S3_LIMITS = Object.freeze({
  /** Every part but the last of a multipart upload must be at least this large (else EntityTooSmall at completion). */
  minPartSize: 5 * MiB,
  maxPartSize: 5 * GiB,
  maxParts: 10_000,
  /** Largest object CopyObject copies in one request; larger ones need a multipart copy. */
  maxCopySize: 5 * GiB,
  maxObjectSize: 5 * 1024 * GiB,
});

export interface S3BackendOptions {
  client: S3Client;
  /** Same layout settings as the file-system backend (FILES_REST_STORAGE_PATH_*). */
  splitLength: number;
  dimensions: number;
  /** Seconds a `sendFile` URL stays valid (FILES_REST_S3_PRESIGN_EXPIRES). Default 300. */
  presignExpires?: number;
  /**
   * Smallest part size `initialize` accepts for an upload of several parts. Default 5 MiB, the S3
   * minimum: a smaller one would be refused only at completion, after every byte was sent.
   */
  minPartSize?: number;
  /** Part size of the multipart upload `save` switches to for bodies larger than this. Default 8 MiB. */
  saveChunkSize?: number;
  /** Parts of one `save` sent at once. Memory held per `save` is about (this + 1) × saveChunkSize. Default 2. */
  saveConcurrency?: number;
  /** Objects larger than this are copied part by part (UploadPartCopy). Default and maximum 5 GiB. */
  copyThreshold?: number;
  /** Part size of a multipart copy. Default 512 MiB. */
  copyPartSize?: number;
  /** Keys per ListObjectsV2 page. Default 1000 (the S3 maximum). */
  listPageSize?: number;
}

/**
 * Counts the bytes passing through; with `exactly`, fails when the stream turns out longer or shorter
 * (an S3 request announcing a Content-Length must carry exactly that many bytes).
 */
class ByteCounter extends Transform {
  bytes = 0;
  constructor(private readonly exactly: number | null = null) {
    super({ highWaterMark: MiB });
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.exactly !== null && this.bytes > this.exactly) return cb(new Error(`part is longer than its declared ${this.exactly} bytes`));
    cb(null, chunk);
  }
  override _flush(cb: TransformCallback): void {
    if (this.exactly !== null && this.bytes < this.exactly) return cb(new Error(`part is shorter than its declared ${this.exactly} bytes`));
    cb();
  }
}

/**
 * Streams `source` through a byte counter that the S3 request reads. Any error of the source (or of
 * `signal`) is remembered as `streamError` and cancels the request through `abort`: a request body
 * that errors is otherwise never noticed by the SDK's HTTP handler, which would wait for the rest.
 */
function feed(source: Readable, signal: AbortSignal | undefined, exactly: number | null = null) {
  const counter = new ByteCounter(exactly);
  const controller = new AbortController();
  const state = { streamError: null as unknown };
  counter.once('error', (e) => {
    state.streamError ??= e;
    controller.abort(e);
  });
  const done = pipeline(source, counter, signal ? { signal } : {}).catch(() => {});
  const requestSignal = signal ? AbortSignal.any([signal, controller.signal]) : controller.signal;
  return {
    counter,
    requestSignal,
    /** The stream's own failure, to rethrow as is (the domain maps it to the client's fault). */
    get streamError(): unknown {
      return state.streamError ?? (signal?.aborted ? (signal.reason ?? abortError()) : null);
    },
    /** Stops reading (and so the source) once the request is over; waits for the pipeline to settle. */
    async close(): Promise<void> {
      if (!counter.destroyed && !counter.readableEnded) counter.destroy();
      await done;
    },
  };
}

function abortError(): Error {
  const e = new Error('the operation was aborted');
  e.name = 'AbortError';
  return e;
}

/** The SDK logs to the console by default (e.g. on a failed streaming request); failures reach us as errors anyway. */
const quietLogger = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

/**
 * Builds the S3 client from the FILES_REST_S3_* settings. Checksums are computed only where S3
 * requires them: since 2025 the SDK adds CRC32 trailers to uploads by default, which many
 * S3-compatible servers reject; integrity is checked by the service's own MD5 anyway.
 */
export function createS3Client(config: Config): S3Client {
  return new S3Client({
    region: config.s3Region,
    ...(config.s3Endpoint ? { endpoint: config.s3Endpoint } : {}),
    forcePathStyle: config.s3ForcePathStyle,
    ...(config.s3AccessKeyId && config.s3SecretAccessKey
      ? { credentials: { accessKeyId: config.s3AccessKeyId, secretAccessKey: config.s3SecretAccessKey } }
      : {}),
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    logger: quietLogger,
    requestHandler: {
      // Downloads hold a socket while the client reads; the SDK's default pool of 50 is soon full.
      httpAgent: { keepAlive: true, maxSockets: 512 },
      httpsAgent: { keepAlive: true, maxSockets: 512 },
      connectionTimeout: 10_000,
    },
  });
}

/**
 * Files on S3 or an S3-compatible service. A location is `s3://bucket/prefix`; a file instance is the
 * object `prefix/<split>/<split>/…/<rest of the id>/data`. Multipart uploads map onto S3's own:
 * `initialize` creates one, `update` uploads a part, `finalize` completes it.
 */
export class S3Backend implements StorageBackend {
  readonly name = 's3';
  readonly client: S3Client;
  readonly #o: Required<Omit<S3BackendOptions, 'client'>>;

  constructor(opts: S3BackendOptions) {
    this.client = opts.client;
    this.#o = {
      splitLength: opts.splitLength,
      dimensions: opts.dimensions,
      presignExpires: opts.presignExpires ?? 300,
      minPartSize: opts.minPartSize ?? S3_LIMITS.minPartSize,
      saveChunkSize: Math.max(opts.saveChunkSize ?? 8 * MiB, S3_LIMITS.minPartSize),
      saveConcurrency: Math.max(opts.saveConcurrency ?? 2, 1),
      copyThreshold: Math.min(opts.copyThreshold ?? S3_LIMITS.maxCopySize, S3_LIMITS.maxCopySize),
      copyPartSize: Math.min(Math.max(opts.copyPartSize ?? 512 * MiB, S3_LIMITS.minPartSize), S3_LIMITS.maxPartSize),
      listPageSize: Math.min(Math.max(opts.listPageSize ?? 1000, 1), 1000),
    };
  }

  get minPartSize(): number {
    return this.#o.minPartSize;
  }

  handles(uri: string): boolean {
    return isS3Uri(uri);
  }

  normalizeLocationUri(uri: string): string {
    return formatS3Uri(parseS3Uri(uri));
  }

  makeUri(locationUri: string, fileId: string): string {
    const loc = parseS3Uri(locationUri);
    return formatS3Uri({ bucket: loc.bucket, key: fileKey(loc, fileId, this.#o.splitLength, this.#o.dimensions) });
  }

  async initialize(uri: string, size: number, opts: { partSize: number }): Promise<string | null> {
    const { partSize } = opts;
    // Refused now rather than at CompleteMultipartUpload, once the client has sent every byte.
    if (size > S3_LIMITS.maxObjectSize || Math.ceil(size / partSize) > S3_LIMITS.maxParts) {
      throw new AppError('INVALID_FILE_SIZE', { max: Math.min(S3_LIMITS.maxObjectSize, partSize * S3_LIMITS.maxParts) });
    }
    const partSizes = { min: this.#o.minPartSize, max: S3_LIMITS.maxPartSize };
    if (size > partSize && partSize < this.#o.minPartSize) throw new AppError('INVALID_PART_SIZE', partSizes);
    if (Math.min(size, partSize) > S3_LIMITS.maxPartSize) throw new AppError('INVALID_PART_SIZE', partSizes);
    const a = this.#object(uri);
    try {
      const r = await this.client.send(new CreateMultipartUploadCommand({ Bucket: a.bucket, Key: a.key }));
      if (!r.UploadId) throw new Error('CreateMultipartUpload answered without an UploadId');
      return r.UploadId;
    } catch (e) {
      throw toStorageError(e, `cannot start a multipart upload at ${uri}`);
    }
  }

  async open(uri: string, range?: ByteRange): Promise<Readable> {
    const a = this.#object(uri);
    let body: unknown;
    try {
      const r = await this.client.send(
        new GetObjectCommand({ Bucket: a.bucket, Key: a.key, ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }),
      );
      body = r.Body;
    } catch (e) {
      throw toStorageError(e, `cannot read ${uri}`);
    }
    if (!(body instanceof Readable)) throw new StorageError('unavailable', `GetObject of ${uri} answered without a body stream`);
    return body;
  }

  /**
   * Streams the body to S3 without holding more than a few parts in memory: one PutObject when it fits
   * in one chunk, else a multipart upload (lib-storage). S3 makes the object visible only once it is
   * complete; on any error the multipart upload is aborted before this rejects, so nothing remains.
   */
  async save(uri: string, source: Readable, opts: WriteOptions = {}): Promise<{ size: number }> {
    const a = this.#object(uri);
    const f = feed(source, opts.signal);
    const upload = new Upload({
      client: this.client,
      params: { Bucket: a.bucket, Key: a.key, Body: f.counter },
      partSize: this.#o.saveChunkSize,
      queueSize: this.#o.saveConcurrency,
      leavePartsOnError: false,
    });
    try {
      await upload.done();
    } catch (e) {
      await f.close();
      if (f.streamError) throw f.streamError;
      throw toStorageError(e, `cannot store ${uri}`);
    }
    await f.close();
    return { size: f.counter.bytes };
  }

  async update(uri: string, source: Readable, part: PartWrite): Promise<{ size: number; etag: string | null }> {
    const a = this.#object(uri);
    if (!part.ref) throw new Error(`S3 part upload to ${uri} needs the multipart upload id that initialize returned`);
    const f = feed(source, part.signal, part.size);
    let etag: string | undefined;
    try {
      const r = await this.client.send(
        new UploadPartCommand({
          Bucket: a.bucket,
          Key: a.key,
          UploadId: part.ref,
          PartNumber: part.partNumber + 1,
          ContentLength: part.size,
          Body: f.counter,
        }),
        { abortSignal: f.requestSignal },
      );
      etag = r.ETag;
    } catch (e) {
      await f.close();
      if (f.streamError) throw f.streamError;
      if (isNoSuchUpload(e)) throw new StorageError('missing', `no multipart upload ${part.ref} at ${uri}`, { cause: e });
      throw toStorageError(e, `cannot store part ${part.partNumber} of ${uri}`);
    }
    await f.close();
    if (!etag) throw new StorageError('unavailable', `UploadPart of ${uri} answered without an ETag`);
    return { size: f.counter.bytes, etag };
  }

  /** CompleteMultipartUpload. Idempotent: when the upload is gone but the object is there, it was completed before. */
  async finalize(uri: string, ref: string | null, parts: StoredPart[]): Promise<void> {
    const a = this.#object(uri);
    if (!ref) throw new Error(`S3 finalize of ${uri} needs the multipart upload id that initialize returned`);
    const completed: CompletedPart[] = [...parts]
      .sort((x, y) => x.partNumber - y.partNumber)
      .map((p) => {
        if (!p.etag) throw new Error(`part ${p.partNumber} of ${uri} has no ETag`);
        return { PartNumber: p.partNumber + 1, ETag: p.etag };
      });
    try {
      await this.client.send(
        new CompleteMultipartUploadCommand({ Bucket: a.bucket, Key: a.key, UploadId: ref, MultipartUpload: { Parts: completed } }),
      );
    } catch (e) {
      if (isNoSuchUpload(e) || (isCompletionInProgress(e) && (await this.#uploadGone(a, ref)))) {
        if (await this.stat(uri)) return;
        throw new StorageError('missing', `multipart upload ${ref} at ${uri} is gone and no object was made of it`, { cause: e });
      }
      throw toStorageError(e, `cannot complete the multipart upload at ${uri}`);
    }
  }

  async abortInitialized(uri: string, ref: string | null): Promise<void> {
    if (!ref) return;
    const a = this.#object(uri);
    try {
      await this.client.send(new AbortMultipartUploadCommand({ Bucket: a.bucket, Key: a.key, UploadId: ref }));
    } catch (e) {
      if (isNoSuchUpload(e)) return;
      throw toStorageError(e, `cannot abort the multipart upload at ${uri}`);
    }
  }

  async delete(uri: string): Promise<void> {
    const a = this.#object(uri);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: a.bucket, Key: a.key }));
    } catch (e) {
      if (isNoSuchKey(e)) return;
      throw toStorageError(e, `cannot delete ${uri}`);
    }
  }

  /** A presigned GET URL a proxy can fetch the object from (valid FILES_REST_S3_PRESIGN_EXPIRES seconds). */
  async sendFile(uri: string): Promise<ProxyTarget> {
    const a = this.#object(uri);
    try {
      const url = await getSignedUrl(this.client, new GetObjectCommand({ Bucket: a.bucket, Key: a.key }), {
        expiresIn: this.#o.presignExpires,
      });
      return { kind: 'url', url };
    } catch (e) {
      throw toStorageError(e, `cannot presign a URL for ${uri}`);
    }
  }

  /** Server-side copy: CopyObject, or UploadPartCopy in parts above the copy threshold (S3 allows 5 GiB per CopyObject). */
  async copy(srcUri: string, dstUri: string): Promise<void> {
    const src = this.#object(srcUri);
    const dst = this.#object(dstUri);
    const st = await this.stat(srcUri);
    if (!st) throw new StorageError('missing', `no object at ${srcUri}`);
    if (st.size <= this.#o.copyThreshold) {
      try {
        await this.client.send(new CopyObjectCommand({ Bucket: dst.bucket, Key: dst.key, CopySource: copySource(src) }));
      } catch (e) {
        throw toStorageError(e, `cannot copy ${srcUri} to ${dstUri}`);
      }
      return;
    }
    await this.#multipartCopy(src, dst, st.size, `${srcUri} to ${dstUri}`);
  }

  async stat(uri: string): Promise<{ size: number } | null> {
    const a = this.#object(uri);
    try {
      const r = await this.client.send(new HeadObjectCommand({ Bucket: a.bucket, Key: a.key }));
      return { size: r.ContentLength ?? 0 };
    } catch (e) {
      if (isNoSuchKey(e)) return null;
      throw toStorageError(e, `cannot stat ${uri}`);
    }
  }

  async *list(locationUri: string): AsyncIterable<StoredObjectInfo> {
    const loc = parseS3Uri(locationUri);
    const prefix = locationPrefix(loc);
    let token: string | undefined;
    do {
      let page;
      try {
        page = await this.client.send(
          new ListObjectsV2Command({
            Bucket: loc.bucket,
            ...(prefix ? { Prefix: prefix } : {}),
            MaxKeys: this.#o.listPageSize,
            ...(token ? { ContinuationToken: token } : {}),
          }),
        );
      } catch (e) {
        throw toStorageError(e, `cannot list ${locationUri}`);
      }
      for (const o of page.Contents ?? []) {
        if (!o.Key) continue;
        yield { uri: formatS3Uri({ bucket: loc.bucket, key: o.Key }), size: o.Size ?? 0, modified: o.LastModified?.getTime() ?? 0 };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async ping(locationUri: string): Promise<void> {
    const { bucket } = parseS3Uri(locationUri);
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: bucket }));
    } catch (e) {
      const detail = toStorageError(e, `bucket ${bucket} is not reachable`).message;
      throw new StorageError('unavailable', detail, { cause: e });
    }
  }

  /**
   * Whether a multipart upload no longer exists: ListParts answers NoSuchUpload (S3), or NoSuchKey
   * (Ceph RGW 16). For RGW, whose CompleteMultipartUpload of an upload that is gone answers 500 "already
   * in progress" instead of NoSuchUpload.
   */
  async #uploadGone(a: S3Address, ref: string): Promise<boolean> {
    try {
      await this.client.send(new ListPartsCommand({ Bucket: a.bucket, Key: a.key, UploadId: ref, MaxParts: 1 }));
      return false;
    } catch (e) {
      return isNoSuchUpload(e) || isNoSuchKey(e);
    }
  }

  #object(uri: string): S3Address {
    const a = parseS3Uri(uri);
    if (!a.key) throw new Error(`${uri} names a bucket, not an object`);
    return a;
  }

  async #multipartCopy(src: S3Address, dst: S3Address, size: number, what: string): Promise<void> {
    const partSize = Math.max(this.#o.copyPartSize, Math.ceil(size / S3_LIMITS.maxParts));
    const count = Math.ceil(size / partSize);
    let uploadId: string | undefined;
    try {
      const created = await this.client.send(new CreateMultipartUploadCommand({ Bucket: dst.bucket, Key: dst.key }));
      uploadId = created.UploadId;
      if (!uploadId) throw new Error('CreateMultipartUpload answered without an UploadId');
      const id = uploadId;
      const parts: CompletedPart[] = new Array(count);
      let next = 0;
      let failed = false;
      const worker = async () => {
        while (next < count && !failed) {
          const i = next++;
          const start = i * partSize;
          const end = Math.min(start + partSize, size) - 1;
          try {
            const r = await this.client.send(
              new UploadPartCopyCommand({
                Bucket: dst.bucket,
                Key: dst.key,
                UploadId: id,
                PartNumber: i + 1,
                CopySource: copySource(src),
                CopySourceRange: `bytes=${start}-${end}`,
              }),
            );
            const etag = r.CopyPartResult?.ETag;
            if (!etag) throw new Error(`UploadPartCopy of part ${i + 1} answered without an ETag`);
            parts[i] = { PartNumber: i + 1, ETag: etag };
          } catch (e) {
            failed = true;
            throw e;
          }
        }
      };
      // Every worker stops before the abort below, so no part lands after it.
      const settled = await Promise.allSettled(Array.from({ length: Math.min(4, count) }, worker));
      const rejected = settled.find((x): x is PromiseRejectedResult => x.status === 'rejected');
      if (rejected) throw rejected.reason;
      await this.client.send(
        new CompleteMultipartUploadCommand({ Bucket: dst.bucket, Key: dst.key, UploadId: id, MultipartUpload: { Parts: parts } }),
      );
    } catch (e) {
      if (uploadId) {
        await this.client
          .send(new AbortMultipartUploadCommand({ Bucket: dst.bucket, Key: dst.key, UploadId: uploadId }))
          .catch(() => {});
      }
      throw toStorageError(e, `cannot copy ${what}`);
    }
  }
}

/** The backend for FILES_REST_STORAGE_FACTORY=s3, configured from the FILES_REST_S3_* settings. */
export function createS3Backend(config: Config): S3Backend {
  return new S3Backend({
    client: createS3Client(config),
    splitLength: config.storagePathSplitLength,
    dimensions: config.storagePathDimensions,
    presignExpires: config.s3PresignExpires,
  });
}

export default createS3Backend;
