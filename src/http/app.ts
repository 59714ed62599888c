import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { AppError, ERRORS } from '../errors.js';
import { isConnectionError } from '../db/database.js';
import type { DomainContext } from '../domain/context.js';
import type { PermissionPolicy } from '../auth/permissions.js';
import { Authorizer } from './auth.js';
import { bucketRoutes } from './routes/buckets.js';
import { objectRoutes } from './routes/objects.js';
import { multipartHandlers, type MultipartHandlers } from './routes/multipart.js';
import { rawUploadAdapter, type UploadAdapter } from './upload.js';
import { rawPartAdapter, type PartAdapter } from './part-adapters.js';
import { ngFileUploadAdapter, ngFileUploadPartAdapter } from './ng-file-upload.js';
import { healthRoutes, type Readiness } from './routes/health.js';
import { registerProtection } from './protection.js';
import { registerMetrics } from './metrics.js';
import { registerOpenApi } from './openapi.js';
import { clientErrorHandler } from './client-errors.js';

export interface HttpDeps {
  ctx: DomainContext;
  auth: Authorizer;
  prefix: string;
  uploadAdapters: readonly UploadAdapter[];
  partAdapters: readonly PartAdapter[];
  multipart: MultipartHandlers;
  listUploads: MultipartHandlers['listUploads'];
}

const UPLOAD_ADAPTERS: Record<string, UploadAdapter> = { raw: rawUploadAdapter, 'ng-file-upload': ngFileUploadAdapter };
const PART_ADAPTERS: Record<string, PartAdapter> = { raw: rawPartAdapter, 'ng-file-upload': ngFileUploadPartAdapter };

function pick<T>(names: readonly string[], table: Record<string, T>, setting: string): T[] {
  return names.map((n) => {
    const a = table[n];
    if (!a) throw new Error(`${setting}: unknown adapter ${JSON.stringify(n)} (known: ${Object.keys(table).join(', ')})`);
    return a;
  });
}

const STOCK_MESSAGES: Record<number, string> = {
  400: 'The browser (or proxy) sent a request that this server could not understand.',
  404: ERRORS.NOT_FOUND.message,
  405: ERRORS.METHOD_NOT_ALLOWED.message,
  413: 'The request body is too large.',
  415: 'Unsupported media type.',
};

/** Builds the HTTP application: parsing, authorisation and serialisation around the domain. */
export function buildHttpApp(ctx: DomainContext, policy: PermissionPolicy, log: Logger, readiness: Readiness): FastifyInstance {
  const app = Fastify({
    loggerInstance: log as unknown as FastifyBaseLogger,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
    },
    // Bodies are streamed by the handlers themselves; nothing is buffered by the framework.
    bodyLimit: 1024 * 1024,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { ignoreDuplicateSlashes: false, maxParamLength: 2000 },
    // FILES_REST_TRUST_PROXY: believe X-Forwarded-For (client address, rate limits) only from these.
    trustProxy: ctx.config.trustProxy.length > 0 ? [...ctx.config.trustProxy] : false,
    // Requests Node's parser refuses (headers too large, a malformed request line) get our JSON shape too.
    clientErrorHandler,
    // Errors Fastify raises before routing (a malformed URL, a bad Content-Type) get our JSON shape too.
    frameworkErrors: (err: FastifyError, _req, reply: FastifyReply) => {
      const status = typeof err.statusCode === 'number' && err.statusCode < 500 ? err.statusCode : 400;
      const message = err.code === 'FST_ERR_BAD_URL' ? 'Invalid object key: malformed percent-encoding in the URL.' : (STOCK_MESSAGES[status] ?? err.message);
      reply.code(status).header('connection', 'close').type('application/json').send(JSON.stringify({ status, message }));
    },
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));

  const max = ctx.config.maxContentLength;
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    reply.header('x-content-type-options', 'nosniff');
    if (max !== null) {
      const cl = req.headers['content-length'];
      if (cl !== undefined && /^\d+$/.test(cl) && Number(cl) > max) {
        throw new AppError('REQUEST_TOO_LARGE', { limit: max });
      }
    }
  });

  app.setErrorHandler((err: FastifyError | AppError, req, reply) => {
    let status: number;
    let body: Record<string, unknown>;
    if (err instanceof AppError) {
      status = err.status;
      body = { status, message: err.message };
      if (err.errors) body.errors = err.errors;
      if (err.headers) reply.headers(err.headers);
      if (status >= 500) req.log.error({ err, cause: (err as Error).cause }, err.message);
    } else if (isConnectionError(err)) {
      status = 503;
      body = { status, message: ERRORS.DATABASE_UNAVAILABLE.message };
      reply.header('retry-after', '5');
      req.log.error({ err }, 'database unavailable');
    } else if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      status = err.statusCode;
      body = { status, message: STOCK_MESSAGES[status] ?? err.message };
    } else {
      status = 500;
      body = { status, message: ERRORS.INTERNAL.message };
      req.log.error({ err }, 'unhandled error');
    }
    // A refusal sent before the body was read: close the connection instead of draining gigabytes.
    if (!req.raw.complete && req.raw.readableEnded === false) reply.header('connection', 'close');
    if (reply.sent || reply.raw.headersSent) {
      reply.raw.destroy();
      return;
    }
    reply.code(status).type('application/json').send(JSON.stringify(body));
  });

  app.setNotFoundHandler((req, reply) => {
    reply.code(404).type('application/json').send(JSON.stringify({ status: 404, message: ERRORS.NOT_FOUND.message }));
  });

  const prefix = ctx.config.urlPrefix;
  const auth = new Authorizer(policy);
  const partial = { ctx, auth, prefix };
  const multipart = multipartHandlers(partial as HttpDeps);
  const deps: HttpDeps = {
    ...partial,
    uploadAdapters: pick(ctx.config.uploadFactories, UPLOAD_ADAPTERS, 'FILES_REST_UPLOAD_FACTORIES'),
    partAdapters: pick(ctx.config.multipartPartFactories, PART_ADAPTERS, 'FILES_REST_MULTIPART_PART_FACTORIES'),
    multipart,
    listUploads: multipart.listUploads,
  };
  Object.assign(partial, deps);
  // Operator endpoints at the server root: /metrics (request hooks on every route), /openapi.json.
  registerMetrics(app, ctx);
  registerOpenApi(app, ctx.config);
  healthRoutes(app, readiness);
  registerProtection(app, ctx.config, auth);
  // The API routes live in a child context registered after the protection plugins (CORS, rate
  // limit), so that those plugins' hooks apply to them.
  app.register(async (api) => {
    bucketRoutes(api, deps);
    objectRoutes(api, deps);
  });
  return app;
}
