/**
 * files-rest client for browsers and Node 20+ (fetch-based; no Node-only imports here).
 *
 *   import { FilesClient } from 'files-rest/client';
 *   const client = new FilesClient({ url: 'http://127.0.0.1:8080', token });
 *   const bucket = await client.createBucket();
 *   await client.upload(bucket.id, 'photo.jpg', file, { onProgress: (p) => console.log(p.loaded, p.total) });
 *
 * For files on disk (upload from a path, download to a path with resume) use 'files-rest/client/node'.
 */
export { FilesClient, encodeKey, filesUrlOf, type FilesClientOptions, type ObjectHead } from './client.js';
export { FilesError, ChecksumMismatchError, ConnectionError, UploadRestartError, UploadStoppedError, isAbortError, isRetryable } from './errors.js';
export { wasmMd5, expectedMd5, hexToBase64, base64ToHex, type Md5Factory, type Md5Hasher } from './md5.js';
export { choosePartSize, DEFAULT_PARALLEL, type RandomAccessSource, type UploadSource } from './upload.js';
export type {
  Bucket, CallOptions, DownloadOptions, DownloadProgress, DownloadResult, GetOptions, ListOptions, ListPage, MultipartUpload,
  MultipartUploadWithParts, ObjectVersion, Part, UploadEvent, UploadOptions, UploadProgress, UploadResult,
  BucketPage, SignedUrl, SignOptions,
} from './types.js';
