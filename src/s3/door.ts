/**
 * The S3-compatible door: its own listener (FILES_REST_S3_PORT) in the `serve` process, path-style
 * addressing (`/<bucket>/<key>`), SigV4 authentication, and a small router over the same domain
 * the REST door uses. Plain node:http: bodies are streamed to storage as they come (aws-chunked
 * decoded on the way), with no framework parsing anything, and the wire path is what is signed.
 */
import { randomFillSync } from 'node:crypto';
import { createServer as createHttpServer, STATUS_CODES, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { handleClientError, type SocketRefusal } from '../http/client-errors.js';
import type { Logger } from 'pino';
import type { PermissionPolicy } from '../auth/permissions.js';
import type { DomainContext } from '../domain/context.js';
import type { Bucket } from '../domain/models.js';
import { cachedAccessKey, lookupAccessKey, rememberAccessKey, type UsableAccessKey } from './access-keys.js';
import { isFormUpload, postObjectOp } from './post-object.js';
import { createBucketOp, deleteBucketOp, getBucketLocationOp, getBucketVersioningOp, headBucketOp, listBucketsOp, putBucketVersioningOp } from './buckets.js';
import { isS3Error, S3Error } from './errors.js';
import { toS3Error } from './error-map.js';
import { isBucketId, resolveBucket } from './names.js';
import { findLiveBucketWithHead } from '../domain/objects.js';
import { getObjectOp, headersOf, putObjectOp } from './objects.js';
import { deleteObjectOp } from './delete-object.js';
import { getObjectAttributesOp } from './attributes.js';
import { authorize, header, sendError, type S3Request } from './request.js';
import { loadServerKeys, type ServerKeys } from '../auth/server-key.js';
import { headersFromRaw, parseSigV4, verifySigV4, type RequestHeaders } from './sigv4.js';
import { parseSigV2, verifySigV2 } from './sigv2.js';
import { percentDecodeBytes } from './uri.js';
import { listingOp } from './listing-op.js';
import { DEFAULT_S3_OWNER } from './listings.js';
import { copyObjectOp } from './copy.js';
import { deleteObjectsOp } from './delete-objects.js';
import { deleteBucketTaggingOp, deleteObjectTaggingOp, getBucketTaggingOp, getObjectTaggingOp, putBucketTaggingOp, putObjectTaggingOp } from './tagging.js';
import { doorMetrics, type DoorMetrics } from '../http/metrics.js';
import { s3OperationName } from './operation-name.js';
import { carriesCannedAcl, unsupportedHeaderError } from './unsupported-headers.js';
import { restoreObjectOp } from './restore.js';
import { getBucketAclOp, getObjectAclOp, putBucketAclOp, putObjectAclOp } from './acl.js';
import { answerPreflight, applyCors, deleteBucketCorsOp, getBucketCorsOp, putBucketCorsOp } from './cors.js';
import { abortMultipartUploadOp, completeMultipartUploadOp, createMultipartUploadOp, listMultipartUploadsOp, listPartsOp, uploadPartOp } from './multipart.js';

/** The listings (ListObjects, ListObjectsV2, ListObjectVersions), built in listings.ts. */
export type ListingOperation = 'ListObjects' | 'ListObjectsV2' | 'ListObjectVersions';

/**
 * Query subresources of S3 operations files-rest does not offer: answered NotImplemented.
 * (`versions`, `location`, `versioning`, `cors`, `acl`, `list-type`, `delete`, `uploads`, `uploadId` and an
 * object's `tagging` and `attributes` are handled.)
 */
const UNSUPPORTED = new Set([
  'policy', 'policyStatus', 'lifecycle', 'encryption', 'website', 'object-lock',
  'replication', 'logging', 'notification', 'accelerate', 'requestPayment', 'ownershipControls', 'publicAccessBlock',
  'intelligent-tiering', 'inventory', 'metrics', 'analytics', 'legal-hold', 'retention', 'torrent', 'select',
  'session', 'renameObject',
]);

export interface S3DoorOptions {
  ctx: DomainContext;
  policy: PermissionPolicy;
  log: Logger;
}

/** Random bytes for request ids, drawn 4 KiB at a time: one small randomBytes() per request cost 11 µs. */
const idPool = Buffer.alloc(4096);
let idOffset = idPool.length;

/** An S3 request id: 16 random hex digits, upper case, as S3's. */
function newRequestId(): string {
  if (idOffset + 8 > idPool.length) {
    randomFillSync(idPool);
    idOffset = 0;
  }
  idOffset += 8;
  return idPool.toString('hex', idOffset - 8, idOffset).toUpperCase();
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });
const NEEDS_DECODING = /[^\x21-\x24\x26-\x7e]/;

/** Splits a wire path into the bucket name and the key, both decoded (UTF-8). */
function splitPath(rawPath: string): { bucketName: string; key: string } {
  const path = rawPath.slice(1);
  const slash = path.indexOf('/');
  const bucketPart = slash === -1 ? path : path.slice(0, slash);
  const keyPart = slash === -1 ? '' : path.slice(slash + 1);
  const decode = (s: string) => {
    // Printable ASCII without a `%` decodes to itself.
    if (!NEEDS_DECODING.test(s)) return s;
    const bytes = percentDecodeBytes(s);
    try {
      return UTF8.decode(bytes);
    } catch {
      throw new S3Error('InvalidArgument', 'The path is not valid UTF-8 after percent-decoding.');
    }
  };
  return { bucketName: decode(bucketPart), key: decode(keyPart) };
}

/**
 * `x-amz-expected-bucket-owner` (and `x-amz-source-expected-bucket-owner` for a copy's source): every
 * bucket is owned by the one owner the listings show; a request expecting another is AccessDenied,
 * as S3 refuses a bucket owned by another account, rather than served regardless.
 */
function checkExpectedOwner(r: S3Request): void {
  for (const name of ['x-amz-expected-bucket-owner', 'x-amz-source-expected-bucket-owner']) {
    const expected = header(r, name);
    if (expected !== undefined && expected.trim() !== DEFAULT_S3_OWNER.id) {
      throw new S3Error('AccessDenied', `The bucket is not owned by ${expected.trim()} (${name}): every bucket of this files-rest is owned by ${DEFAULT_S3_OWNER.id}.`);
    }
  }
}

/** A complete S3 XML error written straight onto a socket, which then closes (`head`: no body, for a HEAD). */
function writeSocketError(socket: Duplex, status: number, code: string, message: string, head: boolean): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const requestId = newRequestId();
  const body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${message}</Message><RequestId>${requestId}</RequestId></Error>`;
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/xml\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      `x-amz-request-id: ${requestId}\r\nConnection: close\r\n\r\n${head ? '' : body}`,
  );
}

const refuseOnSocket: SocketRefusal = (socket, kind, head) => {
  if (kind === 'headers-too-large') writeSocketError(socket, 431, 'RequestHeaderSectionTooLarge', 'Your request header section exceeds the maximum allowed size.', head);
  else if (kind === 'timeout') writeSocketError(socket, 400, 'RequestTimeout', 'Your socket connection to the server was not read from or written to within the timeout period.', head);
  else writeSocketError(socket, 400, 'InvalidRequest', 'The request could not be parsed.', head);
};

export class S3Door {
  readonly server: HttpServer;
  private readonly keys: ServerKeys | null;
  private readonly sockets = new Set<Socket>();
  private readonly metrics: DoorMetrics | null;
  url = '';

  constructor(private readonly opts: S3DoorOptions) {
    this.keys = loadServerKeys(opts.ctx.config, opts.log, { create: true });
    this.metrics = doorMetrics(opts.ctx);
    this.server = createHttpServer({ requireHostHeader: false }, (req, res) => {
      void this.handle(req, res);
    });
    // A request with Expect: 100-continue gets its 100 only once it is authenticated and its body is
    // about to be read (continueBody, request.ts); a refusal comes without one, as S3 answers.
    this.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
      void this.handle(req, res);
    });
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
    // Bytes Node's parser refuses: S3's XML, after the answer to a complete request still being
    // answered on the connection (a body longer than its Content-Length: the surplus is parsed as
    // the next request, and closed the connection before the request was answered).
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => handleClientError(err, socket, refuseOnSocket));
    // An Expect other than 100-continue: S3 ignores it and serves the request (Node would answer 417).
    this.server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
      void this.handle(req, res);
    });
    // CONNECT: not an S3 request (Node would drop the connection without a word).
    this.server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
      socket.on('error', () => {});
      writeSocketError(socket, 405, 'MethodNotAllowed', 'The specified method is not allowed against this resource.', false);
    });
  }

  async listen(host: string, port: number): Promise<string> {
    await new Promise<void>((resolve, reject) => {
      const onError = (e: Error) => reject(e);
      this.server.once('error', onError);
      this.server.listen(port, host, () => {
        this.server.off('error', onError);
        resolve();
      });
    });
    const addr = this.server.address();
    const actual = typeof addr === 'object' && addr ? addr.port : port;
    this.url = `http://${host}:${actual}`;
    return this.url;
  }

  /** Stops accepting, lets requests in flight finish for `graceMs`, then cuts what is left. */
  async close(graceMs: number): Promise<void> {
    if (!this.server.listening) return;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const timer = setTimeout(() => {
      for (const s of this.sockets) s.destroy();
    }, graceMs);
    timer.unref();
    await closed;
    clearTimeout(timer);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = newRequestId();
    res.setHeader('x-amz-request-id', requestId);
    res.setHeader('x-amz-id-2', requestId);
    res.setHeader('server', 'files-rest');
    req.on('error', () => {});
    res.on('error', () => {});
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const rawPath = q === -1 ? url : url.slice(0, q);
    const rawQuery = q === -1 ? '' : url.slice(q + 1);
    let resource = rawPath;
    let operation = 'Unknown';
    const headers = headersFromRaw(req.rawHeaders);
    if (this.metrics) this.count(req, res, headers, () => operation);
    try {
      if (!rawPath.startsWith('/')) throw new S3Error('InvalidRequest', 'The request path must start with /.');
      const { bucketName, key } = splitPath(rawPath);
      const query = new URLSearchParams(rawQuery);
      operation = s3OperationName(req.method ?? 'GET', bucketName, key, query, UNSUPPORTED);
      resource = bucketName === '' ? '/' : `/${bucketName}${key ? `/${key}` : ''}`;
      // A browser's preflight is never signed: answered from the bucket's CORS rules alone.
      if (req.method === 'OPTIONS') return await answerPreflight(this.opts.ctx.db, this.opts.ctx.config, res, headers, query, bucketName);
      // A request from a web page: the Access-Control-* headers its bucket's rules give, on any answer.
      if (headers.has('origin')) await applyCors(this.opts.ctx.db, this.opts.ctx.config, req, res, headers, query, bucketName);
      const r = await this.authenticate(req, res, headers, requestId, rawPath, rawQuery, query, bucketName, key);
      await this.route(r);
    } catch (e) {
      const err = toS3Error(e);
      // NotImplemented (501) answers a client's request for an operation files-rest does not offer: not a failure.
      if (err.status >= 500 && err.code !== 'NotImplemented') this.opts.log.error({ err: e, requestId }, 'S3 request failed');
      sendError(res, req, err, resource, requestId, headersOf(e));
    }
  }

  /** Counts the request in /metrics once its answer is over (sent, or cut). */
  private count(req: IncomingMessage, res: ServerResponse, headers: RequestHeaders, operation: () => string): void {
    const metrics = this.metrics!;
    const t0 = process.hrtime.bigint();
    res.once('close', () => {
      const length = (v: unknown) => (typeof v === 'string' && /^\d{1,15}$/.test(v) ? Number(v) : typeof v === 'number' ? v : 0);
      const status = res.statusCode;
      metrics.record({
        door: 's3',
        operation: operation(),
        status,
        seconds: Number(process.hrtime.bigint() - t0) / 1e9,
        received: req.method === 'PUT' && status >= 200 && status < 300 ? length(headers.get('content-length')?.[0]) : 0,
        sent: req.method === 'HEAD' || !res.writableFinished ? 0 : length(res.getHeader('content-length')),
      });
    });
  }

  private async authenticate(
    req: IncomingMessage,
    res: ServerResponse,
    headers: RequestHeaders,
    requestId: string,
    rawPath: string,
    rawQuery: string,
    query: URLSearchParams,
    bucketName: string,
    key: string,
  ): Promise<S3Request> {
    const input = { method: req.method ?? 'GET', rawPath, rawQuery, headers };
    // SigV2 turned off (FILES_REST_S3_SIGV2=0): parseSigV4 refuses its credentials as an unsupported mechanism.
    const parsed = (this.opts.ctx.config.s3SigV2 ? parseSigV2(input) : null) ?? parseSigV4(input);
    if (isS3Error(parsed)) throw parsed;
    let auth = null;
    let identity = null;
    if (parsed !== null) {
      const now = Date.now();
      const cached = cachedAccessKey(this.opts.ctx.db, this.keys, parsed.accessKeyId, now);
      const found = cached ?? (await lookupAccessKey(this.opts.ctx.db, this.keys, parsed.accessKeyId));
      if (!found) throw new S3Error('InvalidAccessKeyId', undefined, { AWSAccessKeyId: parsed.accessKeyId });
      const verified = 'version' in parsed ? verifySigV2(parsed, found.secret, new Date(now)) : verifySigV4(parsed, found.secret, new Date(now));
      if (isS3Error(verified)) throw verified;
      // Cached only once it has signed a request correctly.
      if (!cached) this.remember(parsed.accessKeyId, found, now);
      auth = verified;
      identity = found.identity;
    }
    return {
      ctx: this.opts.ctx,
      policy: this.opts.policy,
      req,
      res,
      log: this.opts.log,
      requestId,
      method: req.method ?? 'GET',
      rawPath,
      query,
      bucketName,
      key,
      headers,
      auth,
      identity,
      findAccessKey: (accessKeyId) => this.findAccessKey(accessKeyId),
    };
  }

  private remember(accessKeyId: string, key: UsableAccessKey, now: number): void {
    rememberAccessKey(this.opts.ctx.db, this.keys!, accessKeyId, key, this.opts.ctx.config.s3KeyCacheSeconds * 1000, now);
  }

  /**
   * An access key for a signature carried in the body (PostObject's form): from the cache, else the
   * database. The caller checks the signature; such a key is not added to the cache.
   */
  private async findAccessKey(accessKeyId: string): Promise<UsableAccessKey | null> {
    const now = Date.now();
    const cached = cachedAccessKey(this.opts.ctx.db, this.keys, accessKeyId, now);
    if (cached) return cached;
    return lookupAccessKey(this.opts.ctx.db, this.keys, accessKeyId);
  }

  private async bucketOf(r: S3Request): Promise<Bucket> {
    const b = await resolveBucket(r.ctx.db, r.bucketName);
    if (b) return b;
    // A key scoped to one bucket learns nothing about the others.
    if (r.identity?.bucket && r.policy.name !== 'allow-all') throw new S3Error('AccessDenied');
    throw new S3Error('NoSuchBucket', undefined, { BucketName: r.bucketName });
  }

  private async route(r: S3Request): Promise<void> {
    const m = r.method;
    for (const name of r.query.keys()) {
      if (UNSUPPORTED.has(name)) throw new S3Error('NotImplemented', `The ?${name} subresource (${m}) is not supported by files-rest.`);
    }
    // PutBucketAcl and PutObjectAcl judge their own x-amz-acl and x-amz-grant-* (src/s3/acl.ts).
    // An object's canned ACL is judged against its bucket: every object of a publicly readable bucket is public-read.
    const publicObject = r.key !== '' && carriesCannedAcl(r.headers) && (await resolveBucket(r.ctx.db, r.bucketName))?.publicRead === true;
    const refused = r.query.has('acl') ? null : unsupportedHeaderError(r.headers, publicObject);
    if (refused) throw refused;
    checkExpectedOwner(r);
    if (r.bucketName === '') {
      if (m === 'GET') return listBucketsOp(r);
      throw new S3Error('MethodNotAllowed');
    }
    if (r.key === '') {
      if (m === 'PUT' && !r.query.has('versioning') && !r.query.has('cors') && !r.query.has('acl') && !r.query.has('tagging')) return createBucketOp(r);
      // POST to a bucket is PostObject (an HTML form's upload, signed inside the form), unless it is DeleteObjects.
      if (m === 'POST' && !r.query.has('delete') && !isFormUpload(header(r, 'content-type'))) {
        throw new S3Error('PreconditionFailed', 'Bucket POST must be of the enclosure-type multipart/form-data', { Condition: 'Bucket POST must be of the enclosure-type multipart/form-data' });
      }
      const bucket = await this.bucketOf(r);
      if (r.query.has('acl')) {
        if (m === 'GET') return getBucketAclOp(r, bucket);
        if (m === 'PUT') return putBucketAclOp(r, bucket);
        throw new S3Error('MethodNotAllowed');
      }
      if (r.query.has('tagging')) {
        if (m === 'GET') return getBucketTaggingOp(r, bucket);
        if (m === 'PUT') return putBucketTaggingOp(r, bucket);
        if (m === 'DELETE') return deleteBucketTaggingOp(r, bucket);
        throw new S3Error('MethodNotAllowed');
      }
      if (r.query.has('cors')) {
        if (m === 'GET') return getBucketCorsOp(r, bucket);
        if (m === 'PUT') return putBucketCorsOp(r, bucket);
        if (m === 'DELETE') return deleteBucketCorsOp(r, bucket);
        throw new S3Error('MethodNotAllowed');
      }
      switch (m) {
        case 'HEAD':
          return headBucketOp(r, bucket);
        case 'DELETE':
          return deleteBucketOp(r, bucket);
        case 'PUT':
          return putBucketVersioningOp(r, bucket);
        case 'POST':
          return r.query.has('delete') ? deleteObjectsOp(r, bucket) : postObjectOp(r, bucket);
        case 'GET': {
          if (r.query.has('delete')) throw new S3Error('MethodNotAllowed', 'DeleteObjects (?delete) is a POST.');
          if (r.query.has('uploads')) return listMultipartUploadsOp(r, bucket);
          if (r.query.has('location')) return getBucketLocationOp(r, bucket);
          if (r.query.has('versioning')) return getBucketVersioningOp(r, bucket);
          const op: ListingOperation = r.query.has('versions') ? 'ListObjectVersions' : r.query.get('list-type') === '2' ? 'ListObjectsV2' : 'ListObjects';
          await this.authorizeListing(r, op, bucket);
          return listingOp(r, bucket);
        }
        default:
          throw new S3Error('MethodNotAllowed');
      }
    }
    if ((m === 'GET' || m === 'HEAD') && !r.query.has('uploadId') && !r.query.has('tagging') && !r.query.has('versionId') && !r.query.has('attributes') && !r.query.has('acl')) {
      // GetObject of the head: the bucket and the head in one statement.
      const found = await findLiveBucketWithHead(r.ctx.db, isBucketId(r.bucketName) ? { id: r.bucketName } : { name: r.bucketName }, r.key, m === 'GET');
      if (found) return getObjectOp(r, found.bucket, found.head);
    }
    const bucket = await this.bucketOf(r);
    if (r.query.has('uploadId')) {
      switch (m) {
        case 'PUT':
          return uploadPartOp(r, bucket);
        case 'POST':
          return completeMultipartUploadOp(r, bucket);
        case 'DELETE':
          return abortMultipartUploadOp(r, bucket);
        case 'GET':
          return listPartsOp(r, bucket);
        default:
          throw new S3Error('MethodNotAllowed');
      }
    }
    if (m === 'POST' && r.query.has('uploads')) return createMultipartUploadOp(r, bucket);
    if (r.query.has('tagging')) {
      if (m === 'GET') return getObjectTaggingOp(r, bucket);
      if (m === 'PUT') return putObjectTaggingOp(r, bucket);
      if (m === 'DELETE') return deleteObjectTaggingOp(r, bucket);
      throw new S3Error('MethodNotAllowed');
    }
    if (r.query.has('acl')) {
      if (m === 'GET') return getObjectAclOp(r, bucket);
      if (m === 'PUT') return putObjectAclOp(r, bucket);
      throw new S3Error('MethodNotAllowed');
    }
    if (r.query.has('attributes')) {
      if (m === 'GET') return getObjectAttributesOp(r, bucket);
      throw new S3Error('MethodNotAllowed');
    }
    if (r.query.has('restore')) {
      if (m === 'POST') return restoreObjectOp(r, bucket);
      throw new S3Error('MethodNotAllowed');
    }
    if (m === 'PUT' && r.headers.has('x-amz-copy-source')) return copyObjectOp(r, bucket);
    switch (m) {
      case 'PUT':
        return putObjectOp(r, bucket);
      case 'GET':
      case 'HEAD':
        return getObjectOp(r, bucket);
      case 'DELETE':
        return deleteObjectOp(r, bucket);
      case 'POST':
        throw new S3Error('NotImplemented', 'POST object operations are not supported by files-rest.');
      default:
        throw new S3Error('MethodNotAllowed');
    }
  }

  private async authorizeListing(r: S3Request, op: ListingOperation, bucket: Bucket): Promise<void> {
    await authorize(r, op === 'ListObjectVersions' ? 'bucket-read-versions' : 'bucket-read', { type: 'bucket', bucketId: bucket.id });
  }
}
