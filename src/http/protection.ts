import type { FastifyInstance, FastifyRequest } from 'fastify';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import type { Authorizer } from './auth.js';
import { TUS_EXPOSED_HEADERS } from './tus/headers.js';

/** Response headers a browser script may read across origins (CORS), beyond the safelisted ones. */
export const EXPOSED_HEADERS = [
  'ETag', 'Content-Range', 'Content-Disposition', 'Content-Length', 'Content-MD5', 'Repr-Digest', 'Accept-Ranges',
  'Last-Modified', 'X-Version-Id', 'X-Request-Id', 'Retry-After', 'WWW-Authenticate',
  'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset',
  // tus (src/http/tus): a browser client reads the offset, the upload's URL and its expiry.
  ...TUS_EXPOSED_HEADERS,
];

/**
 * Optional request protections, both off by default: CORS for the configured origins
 * (FILES_REST_CORS_ORIGINS) and a request rate limit per token or client address
 * (FILES_REST_RATE_LIMIT). Register before the API routes so their hooks apply to them.
 */
export function registerProtection(app: FastifyInstance, config: Config, auth: Authorizer): void {
  const apis = [`${config.urlPrefix}/files`, `${config.urlPrefix}/tus`];
  const isApi = (req: FastifyRequest) => {
    const path = (req.raw.url ?? '').split('?', 1)[0]!;
    return apis.some((api) => path === api || path.startsWith(`${api}/`));
  };

  if (config.corsOrigins.length > 0) {
    app.register(cors, {
      origin: config.corsOrigins.includes('*') ? '*' : [...config.corsOrigins],
      // PATCH: tus appends. Request headers are not listed: the preflight's Access-Control-Request-Headers
      // are allowed as asked (Authorization, the tus headers, Upload-Checksum …).
      methods: ['GET', 'HEAD', 'PUT', 'POST', 'DELETE', 'PATCH'],
      exposedHeaders: EXPOSED_HEADERS,
      // Tokens travel in the Authorization header, never in cookies: no credentialed CORS.
      credentials: false,
      maxAge: 600,
      // Any OPTIONS is answered as a preflight (no 400 text/plain for a bare OPTIONS).
      strictPreflight: false,
    });
  }

  if (config.rateLimit !== null) {
    app.register(rateLimit, {
      max: config.rateLimit,
      timeWindow: 60_000,
      hook: 'onRequest',
      keyGenerator: auth.rateLimitKey,
      // /healthz and /readyz stay outside the limit: orchestrators poll them.
      allowList: (req) => !isApi(req),
      errorResponseBuilder: (_req, context) => new AppError('RATE_LIMITED', { after: context.after }),
    });
  }
}
