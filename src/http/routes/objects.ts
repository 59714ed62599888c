import type { FastifyReply, FastifyRequest } from 'fastify';
import { getLiveBucket } from '../../domain/buckets.js';
import { getVersionForRead, hardDeleteVersion, putObject, softDeleteObject } from '../../domain/objects.js';
import { resolveRead } from '../../domain/reads.js';
import { fileStatus, fixityHistory } from '../../domain/replicas.js';
import { isoMicros } from '../../util/time.js';
import { AppError } from '../../errors.js';
import { sendDownload } from '../download.js';
import { Links } from '../links.js';
import { flag, query, uuidParam } from '../query.js';
import { assertAcceptsJson, sendJson } from '../reply.js';
import { versionJson } from '../serializers.js';
import { expectedDigests, parseTags, parseUpload, watchUpload } from '../upload.js';
import { writePrecondition } from '../preconditions.js';
import type { HttpDeps } from '../deps.js';
import type { ObjectAddress } from '../address.js';

/** GET and HEAD …/<key> (`?versionId=`, `?download`): the content of the head or of one version. */
export async function downloadHandler({ ctx, auth }: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
  const q = query(req);
  const versionId = uuidParam(q, 'versionId');
  const resource = { type: 'object' as const, bucketId: addr.bucketId, key: addr.key };
  const version = await resolveRead(
    ctx,
    { bucketId: addr.bucketId, key: addr.key, versionId },
    {
      object: () => auth.require(req, 'object-read', resource),
      version: (id) => auth.require(req, 'object-read-version', { ...resource, id }),
    },
    { bytes: req.method === 'GET' },
  );
  return sendDownload(ctx, req, reply, version, { attachment: flag(q, 'download') });
}

/**
 * GET …/<key>?fixity (`&versionId=`): the version's file, its copies and their last check, and the
 * fixity history, for whoever may read that version.
 */
export async function fixityHandler({ ctx, auth }: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
  const q = query(req);
  const versionId = uuidParam(q, 'versionId');
  const resource = { type: 'object' as const, bucketId: addr.bucketId, key: addr.key };
  const version = await resolveRead(ctx, { ...addr, versionId }, {
    object: () => auth.require(req, 'object-read', resource),
    version: (id) => auth.require(req, 'object-read-version', { ...resource, id }),
  });
  if (!version.fileId) throw new AppError('VERSION_IS_DELETE_MARKER');
  const status = await fileStatus(ctx, version.fileId);
  const history = await fixityHistory(ctx, version.fileId);
  return sendJson(req, reply, 200, {
    version_id: version.versionId,
    ...status,
    // Storage URIs are the operator's business, not a reader's.
    copies: status.copies.map(({ uri: _uri, ...c }) => ({ ...c, last_check_at: c.last_check_at === null ? null : isoMicros(c.last_check_at) })),
    events: history.events.map((e) => ({ ...e, at: isoMicros(e.at) })),
    summary: history.summary.map((x) => ({ ...x, first_at: isoMicros(x.first_at), last_at: isoMicros(x.last_at) })),
  });
}

/** PUT …/<key>: the body becomes the new head version. */
export async function putHandler(deps: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
  const { ctx, auth } = deps;
  assertAcceptsJson(req);
  const bucket = await getLiveBucket(ctx.db, addr.bucketId);
  await auth.require(req, 'bucket-update', { type: 'bucket', bucketId: addr.bucketId });
  const precondition = writePrecondition(req);
  const watch = watchUpload(req, ctx.config.bodyIdleTimeout);
  try {
    const body = await watch.until(parseUpload(req, deps.uploadAdapters));
    const version = await putObject(ctx, {
      bucketId: addr.bucketId,
      bucket,
      key: addr.key,
      source: body.stream,
      declaredSize: body.size,
      contentType: body.contentType,
      tags: parseTags(req.headers[ctx.config.fileTagsHeader.toLowerCase()]),
      expectedDigests: expectedDigests(req),
      signal: watch.signal,
      precondition,
    });
    reply.header('etag', `"${version.file!.checksum}"`);
    return sendJson(req, reply, 200, versionJson(version, new Links(ctx.config, req)));
  } finally {
    watch.done();
  }
}

/** DELETE …/<key>: soft delete; with `?versionId=`, hard delete of that version. */
export async function deleteHandler({ ctx, auth }: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
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
