import type { FastifyInstance } from 'fastify';
import { createBucket, getLiveBucket } from '../../domain/buckets.js';
import { listLatest, listVersions } from '../../domain/objects.js';
import { AppError } from '../../errors.js';
import { parseUuid } from '../../util/ids.js';
import { Links } from '../links.js';
import { flag, has, intParam, one, query } from '../query.js';
import { assertAcceptsJson, sendJson } from '../reply.js';
import { bucketJson, versionJson } from '../serializers.js';
import type { HttpDeps } from '../app.js';

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

function methodNotAllowed(allow: string): never {
  throw new AppError('METHOD_NOT_ALLOWED', {}, { headers: { allow } });
}

export function bucketRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const { ctx, auth, prefix } = deps;

  // POST /files and /files/: create a bucket in the default location.
  for (const url of [`${prefix}/files`, `${prefix}/files/`]) {
    app.route({
      method: [...ALL_METHODS],
      url,
      preHandler: auth.gate,
      handler: async (req, reply) => {
        if (req.method !== 'POST') methodNotAllowed('POST');
        assertAcceptsJson(req);
        await auth.require(req, 'location-update', null);
        const bucket = await createBucket(ctx);
        return sendJson(req, reply, 200, bucketJson(bucket, new Links(ctx.config, req)));
      },
    });
  }

  app.route<{ Params: { bucketId: string } }>({
    method: [...ALL_METHODS],
    url: `${prefix}/files/:bucketId`,
    preHandler: auth.gate,
    handler: async (req, reply) => {
      if (req.method !== 'GET' && req.method !== 'HEAD') methodNotAllowed('GET, HEAD');
      const id = parseUuid(req.params.bucketId);
      if (!id) throw new AppError('BUCKET_NOT_FOUND');
      const q = query(req);
      const resource = { type: 'bucket' as const, bucketId: id };
      if (req.method === 'HEAD') {
        await auth.require(req, 'bucket-read', resource);
        await getLiveBucket(ctx.db, id);
        return reply.code(200).send();
      }
      assertAcceptsJson(req);
      const links = new Links(ctx.config, req);
      if (has(q, 'uploads')) {
        await auth.require(req, 'bucket-listmultiparts', resource);
        const bucket = await getLiveBucket(ctx.db, id);
        return deps.listUploads(req, reply, bucket, links);
      }
      await auth.require(req, 'bucket-read', resource);
      const versions = flag(q, 'versions');
      if (versions) await auth.require(req, 'bucket-read-versions', resource);
      const bucket = await getLiveBucket(ctx.db, id);
      const limit = intParam(q, 'limit', { min: 1, max: 10000 }) ?? 1000;
      const opts = { limit, prefix: one(q, 'prefix') ?? null, after: one(q, 'after') ?? null };
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
    },
  });
}
