import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.js';
import { parseUuid } from '../util/ids.js';
import { objectAddress } from './address.js';
import type { HttpDeps } from './deps.js';
import { selectOperation } from './operations.js';
import { has, query } from './query.js';
import { adoptSignedUrl } from './signed-url.js';

const ALL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'];

/**
 * The REST routes: the bucket collection, a bucket, and the catch-all object route. Each takes every
 * method and lets the operation table (operations.ts) pick the handler, so what is routed is what
 * /openapi.json says.
 */
export function restRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const { auth, prefix } = deps;

  for (const url of [`${prefix}/files`, `${prefix}/files/`]) {
    app.route({
      method: ALL_METHODS,
      url,
      preHandler: auth.gate,
      handler: async (req, reply) => selectOperation('collection', req.method, query(req)).handler(deps, req, reply, undefined),
    });
  }

  app.route<{ Params: { bucketId: string } }>({
    method: ALL_METHODS,
    url: `${prefix}/files/:bucketId`,
    preHandler: auth.gate,
    handler: async (req, reply) => {
      const op = selectOperation('bucket', req.method, query(req));
      const id = parseUuid(req.params.bucketId);
      if (!id) throw new AppError('BUCKET_NOT_FOUND');
      return op.handler(deps, req, reply, id);
    },
  });

  app.route({
    method: ALL_METHODS,
    url: `${prefix}/files/:bucketId/*`,
    // A signed URL is verified and adopted first; an anonymous download passes the gate when the
    // bucket is publicly readable (the handlers' checks then decide, through the same policy).
    preHandler: async (req) => {
      const q = query(req);
      if (has(q, 'signature')) {
        await adoptSignedUrl(deps, req, objectAddress(req, prefix), selectOperation('object', req.method, q).selector === undefined);
      }
      const read = req.method === 'GET' || req.method === 'HEAD';
      await auth.gateFor(req, read ? parseUuid((req.params as { bucketId: string }).bucketId) : null);
    },
    handler: async (req, reply) => {
      // The address first: a bad bucket id or key is refused whatever the method.
      const addr = objectAddress(req, prefix);
      return selectOperation('object', req.method, query(req)).handler(deps, req, reply, addr);
    },
  });
}
