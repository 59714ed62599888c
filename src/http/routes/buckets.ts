import type { FastifyReply, FastifyRequest } from 'fastify';
import { createBucket, getLiveBucket, listBuckets } from '../../domain/buckets.js';
import { listLatest, listVersions } from '../../domain/objects.js';
import { Links } from '../links.js';
import { flag, intParam, keyFilterParam, query, uuidParam } from '../query.js';
import { assertAcceptsJson, sendJson } from '../reply.js';
import { bucketJson, versionJson } from '../serializers.js';
import type { HttpDeps } from '../deps.js';

/** POST /files (or /files/): a bucket in the default location. */
export async function createBucketHandler({ ctx, auth }: HttpDeps, req: FastifyRequest, reply: FastifyReply) {
  assertAcceptsJson(req);
  await auth.require(req, 'location-update', null);
  const bucket = await createBucket(ctx);
  return sendJson(req, reply, 200, bucketJson(bucket, new Links(ctx.config, req)));
}

/**
 * GET /files: a page of the buckets the credential may read (`bucket-read`): every bucket for a
 * token of every bucket, its one bucket for a token scoped to one. In id order; `links.next` while
 * there are more (a page may hold fewer than `limit` under a factory that refuses some).
 */
export async function listBucketsHandler({ ctx, auth }: HttpDeps, req: FastifyRequest, reply: FastifyReply) {
  assertAcceptsJson(req);
  const q = query(req);
  const limit = intParam(q, 'limit', { min: 1, max: 1000 }) ?? 100;
  const after = uuidParam(q, 'after');
  const identity = await auth.identity(req);
  const page = await listBuckets(ctx.db, { limit, after, only: identity?.bucket ?? null });
  const links = new Links(ctx.config, req);
  const contents = [];
  for (const b of page.items) if (await auth.allows(req, 'bucket-read', { type: 'bucket', bucketId: b.id })) contents.push(bucketJson(b, links));
  const out: Record<string, string> = { self: links.root };
  if (page.next) out.next = `${links.root}?${limit !== 100 ? `limit=${limit}&` : ''}after=${page.next}`;
  return sendJson(req, reply, 200, { contents, links: out });
}

/** HEAD /files/<bucket>: 200 or 404, no body. */
export async function headBucketHandler({ ctx, auth }: HttpDeps, req: FastifyRequest, reply: FastifyReply, bucketId: string) {
  await auth.require(req, 'bucket-read', { type: 'bucket', bucketId });
  await getLiveBucket(ctx.db, bucketId);
  return reply.code(200).send();
}

/** GET /files/<bucket> (`?versions`): the bucket and a page of its latest versions, or of every version. */
export async function listBucketHandler({ ctx, auth }: HttpDeps, req: FastifyRequest, reply: FastifyReply, id: string) {
  const q = query(req);
  const resource = { type: 'bucket' as const, bucketId: id };
  assertAcceptsJson(req);
  const links = new Links(ctx.config, req);
  await auth.require(req, 'bucket-read', resource);
  const versions = flag(q, 'versions');
  if (versions) await auth.require(req, 'bucket-read-versions', resource);
  const bucket = await getLiveBucket(ctx.db, id);
  const limit = intParam(q, 'limit', { min: 1, max: 10000 }) ?? 1000;
  const opts = { limit, prefix: keyFilterParam(q, 'prefix'), after: keyFilterParam(q, 'after') };
  const page = versions ? await listVersions(ctx.db, id, opts) : await listLatest(ctx.db, id, opts);
  const body = bucketJson(bucket, links);
  const self = links.bucket(id);
  const nextLinks: Record<string, string> = {};
  if (page.next) {
    const p = new URLSearchParams();
    if (versions) p.set('versions', '');
    if (opts.prefix) p.set('prefix', opts.prefix);
    if (limit !== 1000) p.set('limit', String(limit));
    p.set('after', page.next);
    nextLinks.next = `${self}?${p.toString().replace(/^versions=&/, 'versions&')}`;
  }
  return sendJson(req, reply, 200, {
    ...body,
    links: { ...body.links, ...nextLinks },
    contents: page.items.map((v) => versionJson(v, links)),
  });
}
