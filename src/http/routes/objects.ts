import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { getLiveBucket } from '../../domain/buckets.js';
import { findHeadInLiveBucket, getVersionForRead, hardDeleteVersion, putObject, softDeleteObject } from '../../domain/objects.js';
import { AppError } from '../../errors.js';
import { parseUuid } from '../../util/ids.js';
import { sendDownload } from '../download.js';
import { Links } from '../links.js';
import { flag, has, query, uuidParam } from '../query.js';
import { assertAcceptsJson, sendJson } from '../reply.js';
import { versionJson } from '../serializers.js';
import { expectedDigests, parseTags, parseUpload } from '../upload.js';
import type { HttpDeps } from '../app.js';

export interface ObjectAddress {
  bucketId: string;
  key: string;
}

/**
 * Reads bucket id and key from the raw URL: the key is everything after the bucket id, percent-decoded
 * once, slashes (and empty segments) kept as they are.
 */
export function objectAddress(req: FastifyRequest, prefix: string): ObjectAddress {
  const raw = req.raw.url ?? '';
  const path = raw.split('?', 1)[0]!;
  const base = `${prefix}/files/`;
  const rest = path.slice(base.length);
  const slash = rest.indexOf('/');
  const bucketId = parseUuid(rest.slice(0, slash));
  if (!bucketId) throw new AppError('BUCKET_NOT_FOUND');
  let key: string;
  try {
    key = decodeURIComponent(rest.slice(slash + 1));
  } catch {
    throw new AppError('INVALID_KEY', { reason: 'malformed percent-encoding' });
  }
  return { bucketId, key };
}

export function objectRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const { ctx, auth, prefix } = deps;

  async function download(req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
    const q = query(req);
    const versionId = uuidParam(q, 'versionId');
    const resource = { type: 'object' as const, bucketId: addr.bucketId, key: addr.key };
    if (versionId === null) {
      // The head: bucket and version in one lookup; the same answers in the same order as below.
      const head = await findHeadInLiveBucket(ctx.db, addr.bucketId, addr.key);
      await auth.require(req, 'object-read', resource);
      if (!head || head.fileId === null) throw new AppError('OBJECT_NOT_FOUND');
      return sendDownload(ctx, req, reply, head, { attachment: flag(q, 'download') });
    }
    await getLiveBucket(ctx.db, addr.bucketId);
    await auth.require(req, 'object-read', resource);
    const version = await getVersionForRead(ctx.db, addr.bucketId, addr.key, versionId);
    if (!version.isHead) await auth.require(req, 'object-read-version', { ...resource, id: version.versionId });
    return sendDownload(ctx, req, reply, version, { attachment: flag(q, 'download') });
  }

  async function upload(req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
    assertAcceptsJson(req);
    await getLiveBucket(ctx.db, addr.bucketId);
    await auth.require(req, 'bucket-update', { type: 'bucket', bucketId: addr.bucketId });
    const body = await parseUpload(req, deps.uploadAdapters);
    const abort = new AbortController();
    const onClose = () => {
      if (!req.raw.complete) abort.abort();
    };
    req.raw.once('close', onClose);
    try {
      const version = await putObject(ctx, {
        bucketId: addr.bucketId,
        key: addr.key,
        source: body.stream,
        declaredSize: body.size,
        contentType: body.contentType,
        tags: parseTags(req.headers[ctx.config.fileTagsHeader.toLowerCase()]),
        expectedDigests: expectedDigests(req),
        signal: abort.signal,
      });
      reply.header('etag', `"${version.file!.checksum}"`);
      return sendJson(req, reply, 200, versionJson(version, new Links(ctx.config, req)));
    } finally {
      req.raw.off('close', onClose);
    }
  }

  async function remove(req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
    const q = query(req);
    const versionId = uuidParam(q, 'versionId');
    await getLiveBucket(ctx.db, addr.bucketId);
    const resource = { type: 'object' as const, bucketId: addr.bucketId, key: addr.key };
    await auth.require(req, 'object-read', resource);
    if (versionId === null) {
      await auth.require(req, 'object-delete', resource);
      const { marker } = await softDeleteObject(ctx, addr.bucketId, addr.key);
      return reply.code(204).header('x-version-id', marker.versionId).send();
    }
    const version = await getVersionForRead(ctx.db, addr.bucketId, addr.key, versionId);
    if (!version.isHead) await auth.require(req, 'object-read-version', { ...resource, id: versionId });
    await auth.require(req, 'object-delete', { ...resource, id: versionId });
    await auth.require(req, 'object-delete-version', { type: 'bucket', bucketId: addr.bucketId });
    await hardDeleteVersion(ctx, addr.bucketId, addr.key, versionId);
    return reply.code(204).send();
  }

  app.route({
    method: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'],
    url: `${prefix}/files/:bucketId/*`,
    preHandler: auth.gate,
    handler: async (req, reply) => {
      const addr = objectAddress(req, prefix);
      const q = query(req);
      const mp = deps.multipart;
      switch (req.method) {
        case 'GET':
          if (has(q, 'uploads')) throw new AppError('METHOD_NOT_ALLOWED', {}, { headers: { allow: 'POST' } });
          if (has(q, 'uploadId')) return mp.listParts(req, reply, addr);
          return download(req, reply, addr);
        case 'HEAD':
          return download(req, reply, addr);
        case 'PUT':
          if (has(q, 'uploadId')) return mp.uploadPart(req, reply, addr);
          return upload(req, reply, addr);
        case 'POST':
          if (has(q, 'uploads')) return mp.initiate(req, reply, addr);
          if (has(q, 'uploadId')) return mp.complete(req, reply, addr);
          throw new AppError('MISSING_SUBRESOURCE');
        case 'DELETE':
          if (has(q, 'uploads')) throw new AppError('METHOD_NOT_ALLOWED', {}, { headers: { allow: 'POST' } });
          if (has(q, 'uploadId')) return mp.abort(req, reply, addr);
          return remove(req, reply, addr);
        default:
          throw new AppError('METHOD_NOT_ALLOWED', {}, { headers: { allow: 'GET, HEAD, PUT, POST, DELETE' } });
      }
    },
  });
}
