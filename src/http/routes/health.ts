import type { FastifyInstance } from 'fastify';

export interface Readiness {
  /** Resolves when the database and storage answer and migrations are current; rejects with why not. */
  check(): Promise<void>;
}

/** /healthz: the process is alive. /readyz: it can serve (database, storage, schema). Both outside the URL prefix. */
export function healthRoutes(app: FastifyInstance, readiness: Readiness): void {
  app.get('/healthz', async (_req, reply) => reply.type('application/json').send('{"status":"ok"}'));
  app.get('/readyz', async (req, reply) => {
    try {
      await readiness.check();
      return reply.type('application/json').send('{"status":"ready"}');
    } catch (e) {
      req.log.warn({ err: e }, 'not ready');
      return reply.code(503).type('application/json').send(JSON.stringify({ status: 503, message: `Not ready: ${(e as Error).message}` }));
    }
  });
}
