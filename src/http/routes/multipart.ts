import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  abortUpload, getUploadInLiveBucket, initiateUpload, listParts, listUploads, requestCompletion, uploadPart,
  type MultipartUpload,
} from '../../domain/multipart.js';
import { getLiveBucket } from '../../domain/buckets.js';
import { AppError, validationError } from '../../errors.js';
import { Links } from '../links.js';
import { intParam, one, query, uuidParam } from '../query.js';
import { assertAcceptsJson, sendJson } from '../reply.js';
import type { HttpDeps } from '../deps.js';
import type { ObjectAddress } from '../address.js';
import { parsePart } from '../part-adapters.js';
import { watchUpload } from '../upload.js';
import { writePrecondition } from '../preconditions.js';
import { multipartJson, partJson } from '../serializers.js';
import { answerCompletion } from '../completion-wait.js';

/** Reads a small JSON body (multipart init may carry size and partSize there). */
async function readJsonBody(req: FastifyRequest): Promise<Record<string, unknown>> {
  if (!/^application\/json/i.test(req.headers['content-type'] ?? '')) return {};
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req.raw as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > 64 * 1024) throw new AppError('INVALID_JSON_BODY');
    chunks.push(c);
  }
  if (n === 0) return {};
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    throw new AppError('INVALID_JSON_BODY');
  }
}

/**
 * `size` or `partSize` from the query string, else the JSON body. Not an integer: 422 (as the
 * reference); a negative integer is passed on, and the domain refuses it with the valid range
 * (400 `Invalid file size` / `Invalid part size`), as the reference does.
 */
function sizeArg(q: ReturnType<typeof query>, body: Record<string, unknown>, name: string): number {
  const fromQuery = one(q, name);
  const v = fromQuery !== undefined && fromQuery !== '' ? fromQuery : body[name];
  if (v === undefined || v === null || v === '') throw new AppError('MISSING_QUERY_ARG', { name });
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n)) throw validationError(name, 'Not a valid integer.');
  return n;
}

/** The upload a request names; a missing or logically deleted bucket answers 404 first, as everywhere. */
async function load(deps: HttpDeps, req: FastifyRequest, addr: ObjectAddress): Promise<MultipartUpload> {
  const id = uuidParam(query(req), 'uploadId');
  if (!id) throw validationError('uploadId', 'Not a valid UUID.');
  return getUploadInLiveBucket(deps.ctx.db, addr.bucketId, addr.key, id);
}

/** GET /files/<bucket>?uploads */
export async function listUploadsHandler({ ctx, auth }: HttpDeps, req: FastifyRequest, reply: FastifyReply, bucketId: string) {
  assertAcceptsJson(req);
  await auth.require(req, 'bucket-listmultiparts', { type: 'bucket', bucketId });
  const bucket = await getLiveBucket(ctx.db, bucketId);
  const links = new Links(ctx.config, req);
  const limit = intParam(query(req), 'limit', { min: 1, max: 10000 }) ?? 1000;
  const uploads = await listUploads(ctx.db, bucket.id, limit);
  return sendJson(req, reply, 200, uploads.map((u) => multipartJson(u, links)));
}

/** POST …/<key>?uploads */
export async function initiateHandler({ ctx, auth }: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
  assertAcceptsJson(req);
  await getLiveBucket(ctx.db, addr.bucketId);
  await auth.require(req, 'bucket-update', { type: 'bucket', bucketId: addr.bucketId });
  const q = query(req);
  const body = await readJsonBody(req);
  const size = sizeArg(q, body, 'size');
  const partSize = sizeArg(q, body, 'partSize');
  const u = await initiateUpload(ctx, { bucketId: addr.bucketId, key: addr.key, size, partSize, precondition: writePrecondition(req) });
  return sendJson(req, reply, 200, multipartJson(u, new Links(ctx.config, req)));
}

/** PUT …/<key>?uploadId=U&partNumber=n */
export async function uploadPartHandler(deps: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
  const { ctx, auth } = deps;
  assertAcceptsJson(req);
  await auth.require(req, 'bucket-update', { type: 'bucket', bucketId: addr.bucketId });
  const u = await load(deps, req, addr);
  const watch = watchUpload(req, ctx.config.bodyIdleTimeout);
  try {
    const part = await watch.until(parsePart(req, deps.partAdapters));
    const p = await uploadPart(ctx, u, { partNumber: part.partNumber, source: part.stream, declaredSize: part.size, signal: watch.signal });
    reply.header('etag', `"${p.checksum}"`);
    return sendJson(req, reply, 200, partJson(p));
  } finally {
    watch.done();
  }
}

/** GET …/<key>?uploadId=U: the upload with its parts. */
export async function listPartsHandler(deps: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
  const { ctx, auth } = deps;
  assertAcceptsJson(req);
  const u = await load(deps, req, addr);
  await auth.require(req, 'multipart-read', { type: 'multipart', bucketId: addr.bucketId, id: u.id });
  const parts = await listParts(ctx.db, u);
  return sendJson(req, reply, 200, { ...multipartJson(u, new Links(ctx.config, req)), parts: parts.map(partJson) });
}

/** POST …/<key>?uploadId=U: completion; waits for the merge (completion-wait.ts), or 202 with `Prefer: respond-async`. */
export async function completeHandler(deps: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
  const { ctx, auth } = deps;
  assertAcceptsJson(req);
  await auth.require(req, 'bucket-update', { type: 'bucket', bucketId: addr.bucketId });
  const u = await requestCompletion(ctx, await load(deps, req, addr), writePrecondition(req));
  const links = new Links(ctx.config, req);
  if (/respond-async/i.test(String(req.headers.prefer ?? ''))) {
    return sendJson(req, reply, 202, multipartJson(u, links));
  }
  return answerCompletion(ctx, req, reply, u, links);
}

/** DELETE …/<key>?uploadId=U */
export async function abortHandler(deps: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
  const { ctx, auth } = deps;
  const u = await load(deps, req, addr);
  await auth.require(req, 'multipart-delete', { type: 'multipart', bucketId: addr.bucketId, id: u.id });
  await abortUpload(ctx, u.id, { checkLock: true });
  return reply.code(204).send();
}
