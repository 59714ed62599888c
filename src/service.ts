import pino, { type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import { openDatabase, type DatabaseHandle } from './db/database.js';
import { migrateToLatest, pendingMigrations } from './db/migrations.js';
import { createStorage } from './storage/registry.js';
import type { DomainContext } from './domain/context.js';
import { Signals } from './domain/signals.js';
import { Outbox } from './domain/outbox.js';
import { TaskQueue } from './tasks/queue.js';
import { Worker, type TaskDefinition } from './tasks/worker.js';
import { builtinTasks } from './tasks/handlers.js';
import { multipartTasks } from './tasks/multipart-tasks.js';
import { storageTasks } from './tasks/storage-tasks.js';
import { connectWebhooks, webhookTask } from './tasks/webhooks.js';
import { loadPermissionPolicy, type PermissionPolicy } from './auth/permissions.js';
import { buildHttpApp } from './http/app.js';
import { ensureDefaultLocation, listLocations } from './domain/locations.js';
import { countTokens, createToken } from './auth/tokens.js';
import { UploadHasher } from './domain/upload-hasher.js';

export function createLogger(config: Config, name = 'files-rest'): Logger {
  return pino({
    name,
    level: config.logLevel,
    redact: { paths: ['req.headers.authorization', 'headers.authorization', 'token'], censor: '[redacted]' },
  });
}

/** The pieces every entry point (server, worker, admin command) shares. */
export interface Core {
  config: Config;
  log: Logger;
  database: DatabaseHandle;
  ctx: DomainContext;
  close(): Promise<void>;
}

/** Opens the database (migrating it), the storage backends, the queue and the signals. */
export async function openCore(config: Config, log: Logger = createLogger(config), sender: unknown = null): Promise<Core> {
  const database = await openDatabase(config.databaseUrl, {
    poolSize: config.dbPoolSize,
    statementTimeout: config.dbStatementTimeout,
    connectTimeout: config.dbConnectTimeout,
    sqliteMmapSize: config.sqliteMmapSize,
  });
  try {
    await migrateToLatest(database.db, database.dialect);
  } catch (e) {
    await database.close();
    throw e;
  }
  const storage = await createStorage(config);
  const queue = new TaskQueue(database.db, database.dialect);
  const signals = new Signals(sender, log);
  const hasher = new UploadHasher(database.db, log);
  const outbox = new Outbox();
  const ctx: DomainContext = { config, db: database.db, dialect: database.dialect, storage, signals, outbox, queue, log, hasher };
  // Webhooks (FILES_REST_WEBHOOK_URL): uploads and deletes queue their deliveries in their own
  // transaction (the outbox); downloads when their signal fires.
  connectWebhooks(ctx);
  return {
    config,
    log,
    database,
    ctx,
    close: async () => {
      await hasher.close();
      await database.close();
    },
  };
}

export function taskDefinitions(ctx: DomainContext): TaskDefinition<never>[] {
  return [...builtinTasks(ctx), ...multipartTasks(ctx), ...storageTasks(ctx), webhookTask() as TaskDefinition<never>];
}

export function createWorker(ctx: DomainContext, opts: { concurrency?: number } = {}): Worker {
  return new Worker(ctx.queue, taskDefinitions(ctx), ctx.log.child({ component: 'worker' }), {
    concurrency: opts.concurrency ?? 2,
    pollIntervalMs: ctx.config.taskPollInterval,
    leaseSeconds: ctx.config.taskLease,
  });
}

export interface Server {
  app: FastifyInstance;
  core: Core;
  worker: Worker | null;
  policy: PermissionPolicy;
  /** In-process signals (file-downloaded, file-uploaded, file-deleted); handlers get this Server as sender. */
  signals: Signals;
  /** Listening address, once started. */
  url: string;
  stop(): Promise<void>;
}

/**
 * Builds the whole service from a config: database, storage, HTTP app and (unless
 * FILES_REST_WORKER=0) an in-process worker. Embedding applications use this and its `signals`.
 */
export async function createServer(config: Config, opts: { log?: Logger } = {}): Promise<Server> {
  const log = opts.log ?? createLogger(config);
  const server = {} as Server;
  const core = await openCore(config, log, server);
  const { ctx } = core;
  if (config.autoLocation) await ensureDefaultLocation(ctx);
  const policy = await loadPermissionPolicy(config.permissionFactory, ctx.db);
  if (policy.name === 'token' && (await countTokens(ctx.db)) === 0) {
    const { token, info } = await createToken(ctx.db);
    // Shown by startServer once the real address is known (PORT=0 picks one).
    firstTokens.set(server, { id: info.id, token });
  }
  const readiness = {
    async check() {
      const pending = await pendingMigrations(ctx.db, ctx.dialect);
      if (pending.length) throw new Error(`migrations pending: ${pending.join(', ')}`);
      for (const loc of await listLocations(ctx.db)) {
        const b = ctx.storage.forUri(loc.uri);
        if (b.ping) await b.ping(loc.uri);
      }
    },
  };
  const app = buildHttpApp(ctx, policy, log, readiness);
  const worker = config.worker ? createWorker(ctx) : null;
  let stopped = false;
  Object.assign(server, {
    app,
    core,
    worker,
    policy,
    signals: ctx.signals,
    url: '',
    async stop() {
      if (stopped) return;
      stopped = true;
      const graceMs = config.shutdownGrace * 1000;
      const closing = app.close();
      const timer = setTimeout(() => app.server.closeAllConnections?.(), graceMs);
      timer.unref();
      await closing;
      clearTimeout(timer);
      await worker?.stop(graceMs);
      await core.close();
    },
  });
  return server;
}

/** Starts listening (and the worker); logs `listening on http://HOST:PORT`. */
export async function startServer(server: Server): Promise<string> {
  const { config } = server.core;
  await server.app.listen({ host: config.host, port: config.port, listenTextResolver: (a) => `listening on ${a}` });
  const addr = server.app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  server.url = `http://${config.host}:${port}`;
  // Operators and scripts wait for this line (CONTRACT.md); it is printed even when the log level hides info.
  if (!server.core.log.isLevelEnabled('info')) process.stderr.write(`files-rest: listening on ${server.url}\n`);
  const first = firstTokens.get(server);
  if (first) {
    firstTokens.delete(server);
    // Printed once, to the console and not to the log stream: the log may be shipped elsewhere.
    process.stderr.write(
      `\nfiles-rest: created the first API token (id ${first.id}), allowed every action on every bucket.\n` +
        `It is shown only now; keep it somewhere safe:\n\n  ${first.token}\n\n` +
        `Use it as:  curl -H "Authorization: Bearer ${first.token}" -X POST ${server.url}${config.urlPrefix}/files\n` +
        `More tokens: files-rest token create [--bucket ID] [--actions A,B]\n\n`,
    );
  }
  server.worker?.start();
  return server.url;
}

/** The first API token of a server, until startServer has shown it. */
const firstTokens = new WeakMap<Server, { id: string; token: string }>();
