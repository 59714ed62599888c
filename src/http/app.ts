import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from 'pino';
import { AppError, ERRORS } from '../errors.js';
import { isConnectionError } from '../db/database.js';
import type { DomainContext } from '../domain/context.js';
import type { PermissionPolicy } from '../auth/permissions.js';
import { Authorizer, bearerOrAccessToken, bearerToken } from './auth.js';
import { loadServerKeys } from '../auth/server-key.js';
import { httpDeps } from './deps.js';
import { restRoutes } from './dispatch.js';
import { tusRoutes } from './tus/routes.js';
import { healthRoutes, type Readiness } from './routes/health.js';
import { adminRoutes } from './routes/admin.js';
import { registerProtection } from './protection.js';
import { registerMetrics } from './metrics.js';
import { registerOpenApi } from './openapi.js';
import { registerConsole } from './console.js';
import { answerNodeRefusals, clientErrorHandler } from './client-errors.js';
import { logSerializers } from '../util/redact.js';

const STOCK_MESSAGES: Record<number, string> = {
  400: ERRORS.MALFORMED_REQUEST.message,
  404: ERRORS.NOT_FOUND.message,
  405: ERRORS.METHOD_NOT_ALLOWED.message,
  413: 'The request body is too large.',
  415: 'Unsupported media type.',
};

/** Builds the HTTP application: parsing, authorisation and serialisation around the domain. */
export function buildHttpApp(ctx: DomainContext, policy: PermissionPolicy, log: Logger, readiness: Readiness): FastifyInstance {
  const app = Fastify({
    // Whatever logger the service was given, requests and errors are logged through the redacting
    // serializers (no credential from a URL in the log).
    loggerInstance: log.child({}, { serializers: logSerializers }) as unknown as FastifyBaseLogger,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.:-]{1,128}$/.test(given) ? given : randomUUID();
    },
    // Bodies are streamed by the handlers themselves; nothing is buffered by the framework.
    bodyLimit: 1024 * 1024,
    // Requests arriving while the server closes get SHUTTING_DOWN (below), in the catalogue's shape.
    return503OnClosing: false,
    // A request without Host is refused by the onRequest hook below, with a JSON body (Node's own
    // refusal has none).
    http: { requireHostHeader: false },
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

  answerNodeRefusals(app.server);
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));

  const max = ctx.config.maxContentLength;
  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    reply.header('x-content-type-options', 'nosniff');
    if (closing) {
      reply.header('connection', 'close');
      throw new AppError('SHUTTING_DOWN', {}, { headers: { 'retry-after': '1' } });
    }
    if (req.headers.host === undefined && req.raw.httpVersion !== '1.0') {
      throw new AppError('INVALID_HEADER', { header: 'Host', reason: 'an HTTP/1.1 request must have one' });
    }
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

  // `?access_token=` (invenio and Zenodo scripts) is read under the token factory only.
  const auth = new Authorizer(policy, policy.name === 'token' ? bearerOrAccessToken : bearerToken);
  // Signed URLs are signed with a key derived from the server key (made beside a SQLite database when unset).
  const deps = httpDeps(ctx, auth, loadServerKeys(ctx.config, log, { create: true }));
  // Operator endpoints at the server root: /metrics (request hooks on every route), /openapi.json.
  registerMetrics(app, ctx);
  registerOpenApi(app, ctx.config);
  healthRoutes(app, readiness);
  // The web console's static files at {prefix}/console/ (FILES_REST_CONSOLE).
  registerConsole(app, ctx.config.urlPrefix, ctx.config.console);
  registerProtection(app, ctx.config, auth);
  // The API routes live in a child context registered after the protection plugins (CORS, rate
  // limit), so that those plugins' hooks apply to them.
  app.register(async (api) => {
    restRoutes(api, deps);
    tusRoutes(api, deps);
    adminRoutes(api, deps);
  });
  return app;
}
