import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { getLiveBucket } from '../../domain/buckets.js';
import {
  appendResumable, CHECKSUM_ALGORITHMS, createResumable, getResumable, terminateResumable, type AppendResult, type ResumableUpload,
} from '../../domain/resumable.js';
import { parseUuid } from '../../util/ids.js';
import type { HttpDeps } from '../deps.js';
import { watchUpload } from '../upload.js';
import {
  checkTusResumable, contentTypeFromMetadata, httpDate, keyFromMetadata, parseChecksum, parseMetadata, sizeHeader,
  TUS_CONTENT_TYPE, TUS_EXTENSIONS, TUS_VERSION,
} from './headers.js';

type BucketParams = { bucketId: string };
type UploadParams = { bucketId: string; uploadId: string };

function bucketIdOf(params: BucketParams): string {
  const id = parseUuid(params.bucketId);
  if (!id) throw new AppError('BUCKET_NOT_FOUND');
  return id;
}

function uploadIdOf(params: UploadParams): string {
  const id = parseUuid(params.uploadId);
  if (!id) throw new AppError('UPLOAD_NOT_FOUND');
  return id;
}

function isOctetStream(req: FastifyRequest): boolean {
  const ct = req.headers['content-type'];
  return typeof ct === 'string' && ct.split(';', 1)[0]!.trim().toLowerCase() === TUS_CONTENT_TYPE;
}

function contentLength(req: FastifyRequest): number | null {
  const cl = req.headers['content-length'];
  return cl !== undefined && /^\d+$/.test(cl) ? Number(cl) : null;
}

function hasBody(req: FastifyRequest): boolean {
  const cl = contentLength(req);
  return cl !== null ? cl > 0 : req.headers['transfer-encoding'] !== undefined;
}

/** The offset, length and expiry of an upload, as HEAD and PATCH answer them. */
function uploadHeaders(reply: FastifyReply, u: ResumableUpload): void {
  reply.header('upload-offset', String(u.offset));
  if (u.length !== null) reply.header('upload-length', String(u.length));
  else reply.header('upload-defer-length', '1');
  reply.header('upload-expires', httpDate(u.expires));
}

/**
 * The tus 1.0 door: resumable uploads at `<prefix>/tus/<bucket>/` (creation) and
 * `<prefix>/tus/<bucket>/<upload>` (HEAD, PATCH, DELETE), beside the REST API's `/files` tree so
 * no object key is shadowed. Extensions: creation, creation-with-upload, creation-defer-length,
 * termination, expiration, checksum (md5, sha1, sha256). The same permission as a PUT
 * (bucket-update) for every request but OPTIONS; refusals are the catalogue's JSON.
 */
export function tusRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const { ctx, auth } = deps;
  const base = `${deps.prefix}/tus/:bucketId`;
  const location = (req: FastifyRequest, bucketId: string, id: string) =>
    `${ctx.config.baseUrl ?? `${req.protocol}://${req.host}`}${deps.prefix}/tus/${bucketId}/${id}`;

  app.register(async (tus) => {
    tus.addHook('onSend', async (req, reply, payload) => {
      reply.header('tus-resumable', TUS_VERSION);
      // Preflights answered by the CORS plugin reach here too: they carry the discovery headers.
      if (req.method === 'OPTIONS') {
        reply.header('tus-version', TUS_VERSION);
        reply.header('tus-extension', TUS_EXTENSIONS.join(','));
        reply.header('tus-checksum-algorithm', CHECKSUM_ALGORITHMS.join(','));
      }
      return payload;
    });

    const options = async (req: FastifyRequest<{ Params: BucketParams }>, reply: FastifyReply) => {
      // Tus-Max-Size: the bucket's maximum file size, told only to who may upload there.
      try {
        const bucketId = parseUuid(req.params.bucketId);
        if (bucketId) {
          await auth.require(req, 'bucket-update', { type: 'bucket', bucketId });
          const b = await getLiveBucket(ctx.db, bucketId);
          if (b.maxFileSize !== null) reply.header('tus-max-size', String(b.maxFileSize));
        }
      } catch {
        /* discovery stays anonymous */
      }
      return reply.code(204).send();
    };
    tus.options<{ Params: BucketParams }>(`${base}`, options);
    tus.options<{ Params: BucketParams }>(`${base}/`, options);
    tus.options<{ Params: UploadParams }>(`${base}/:uploadId`, options);

    const create = async (req: FastifyRequest<{ Params: BucketParams }>, reply: FastifyReply) => {
      checkTusResumable(req.headers);
      const bucketId = bucketIdOf(req.params);
      await auth.require(req, 'bucket-update', { type: 'bucket', bucketId });
      const length = sizeHeader(req.headers, 'Upload-Length');
      const defer = req.headers['upload-defer-length'];
      if (defer !== undefined && defer !== '1') throw new AppError('INVALID_HEADER', { header: 'Upload-Defer-Length', reason: 'its only value is 1' });
      if ((length === null) === (defer === undefined)) {
        throw new AppError('INVALID_HEADER', { header: 'Upload-Length', reason: 'send either Upload-Length or Upload-Defer-Length: 1' });
      }
      const meta = parseMetadata(req.headers);
      const withUpload = hasBody(req);
      if (withUpload && !isOctetStream(req)) throw new AppError('TUS_CONTENT_TYPE');
      const checksum = withUpload ? parseChecksum(req.headers) : null;
      let u = await createResumable(ctx, {
        bucketId,
        key: keyFromMetadata(meta),
        length,
        contentType: contentTypeFromMetadata(meta),
        metadata: typeof req.headers['upload-metadata'] === 'string' ? req.headers['upload-metadata'] : null,
      });
      reply.header('location', location(req, bucketId, u.id));
      if (withUpload || (length === 0)) {
        // creation-with-upload (or an empty file, complete at once); a failure leaves no upload behind.
        try {
          const r = await append(req, u, 0, null, checksum);
          u = r.upload;
          if (r.version) reply.header('x-version-id', r.version.versionId);
        } catch (e) {
          await terminateResumable(ctx, u).catch(() => {});
          throw e;
        }
      }
      uploadHeaders(reply, u);
      return reply.code(201).send();
    };
    tus.post<{ Params: BucketParams }>(`${base}`, create);
    tus.post<{ Params: BucketParams }>(`${base}/`, create);

    const append = async (req: FastifyRequest, u: ResumableUpload, offset: number, length: number | null, checksum: ReturnType<typeof parseChecksum>): Promise<AppendResult> => {
      const watch = watchUpload(req, ctx.config.bodyIdleTimeout);
      try {
        return await appendResumable(ctx, u, { offset, source: req.raw, declaredSize: contentLength(req), length, checksum, signal: watch.signal });
      } finally {
        watch.done();
      }
    };

    const load = async (req: FastifyRequest<{ Params: UploadParams }>) => {
      checkTusResumable(req.headers);
      const bucketId = bucketIdOf(req.params);
      const id = uploadIdOf(req.params);
      await auth.require(req, 'bucket-update', { type: 'bucket', bucketId, id });
      return getResumable(ctx, bucketId, id);
    };

    tus.head<{ Params: UploadParams }>(`${base}/:uploadId`, async (req, reply) => {
      const u = await load(req);
      uploadHeaders(reply, u);
      if (u.metadata) reply.header('upload-metadata', u.metadata);
      reply.header('cache-control', 'no-store');
      return reply.code(200).send();
    });

    const patch = async (req: FastifyRequest<{ Params: UploadParams }>, reply: FastifyReply) => {
      checkTusResumable(req.headers);
      if (!isOctetStream(req)) throw new AppError('TUS_CONTENT_TYPE');
      const offset = sizeHeader(req.headers, 'Upload-Offset');
      if (offset === null) throw new AppError('INVALID_HEADER', { header: 'Upload-Offset', reason: 'a PATCH must carry one' });
      const length = sizeHeader(req.headers, 'Upload-Length');
      const checksum = parseChecksum(req.headers);
      const u = await load(req);
      const r = await append(req, u, offset, length, checksum);
      uploadHeaders(reply, r.upload);
      if (r.version) reply.header('x-version-id', r.version.versionId);
      return reply.code(204).send();
    };
    tus.patch<{ Params: UploadParams }>(`${base}/:uploadId`, patch);
    // X-HTTP-Method-Override (tus-js-client's overridePatchMethod, for proxies that drop PATCH).
    tus.post<{ Params: UploadParams }>(`${base}/:uploadId`, async (req, reply) => {
      const m = req.headers['x-http-method-override'];
      if (typeof m === 'string' && m.toUpperCase() === 'PATCH') return patch(req, reply);
      if (typeof m === 'string' && m.toUpperCase() === 'DELETE') return terminate(req, reply);
      throw new AppError('METHOD_NOT_ALLOWED', {}, { headers: { allow: 'HEAD, PATCH, DELETE, OPTIONS' } });
    });

    const terminate = async (req: FastifyRequest<{ Params: UploadParams }>, reply: FastifyReply) => {
      const u = await load(req);
      await terminateResumable(ctx, u);
      return reply.code(204).send();
    };
    tus.delete<{ Params: UploadParams }>(`${base}/:uploadId`, terminate);
  });
}
