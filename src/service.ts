import pino, { type Logger } from 'pino';
import type { FastifyInstance } from 'fastify';
import type { Config } from './config.js';
import { isConnectionError, openDatabase, startupWritesDone, type DatabaseHandle } from './db/database.js';
import { DatabaseConnectError, DatabaseMissingError, describeDatabaseUrl, hasSchema } from './db/presence.js';
import { migrateToLatest, pendingMigrations } from './db/migrations.js';
import { createStorage } from './storage/registry.js';
import type { DomainContext } from './domain/context.js';
import { Signals } from './domain/signals.js';
import { Outbox } from './domain/outbox.js';
import { TaskQueue } from './tasks/queue.js';
import { Worker, type AnyTaskDefinition } from './tasks/worker.js';
import { builtinTasks } from './tasks/handlers.js';
import { multipartTasks } from './tasks/multipart-tasks.js';
import { storageTasks } from './tasks/storage-tasks.js';
import { connectWebhooks, webhookTask } from './tasks/webhooks.js';
import { loadPermissionPolicy, type PermissionPolicy } from './auth/permissions.js';
import { buildHttpApp } from './http/app.js';
import { ensureDefaultLocation, listLocations } from './domain/locations.js';
import { adoptLocations } from './domain/location-owner.js';
import { countTokens, createToken } from './auth/tokens.js';
import { UploadHasher } from './domain/upload-hasher.js';
import { logSerializers } from './util/redact.js';
import { S3Door } from './s3/door.js';

export function createLogger(config: Config, name = 'files-rest'): Logger {
  return pino({
    name,
    level: config.logLevel,
    redact: { paths: ['req.headers.authorization', 'headers.authorization', 'token'], censor: '[redacted]' },
    serializers: logSerializers,
  });
}

/** Opens and migrates the database; errors name DATABASE_URL and where it points. */
async function openDatabaseFor(config: Config, create: boolean, serving: boolean): Promise<DatabaseHandle> {
  const url = config.databaseUrl;
  let database: DatabaseHandle;
  try {
    database = await openDatabase(url, {
      poolSize: config.dbPoolSize,
      statementTimeout: config.dbStatementTimeout,
      connectTimeout: config.dbConnectTimeout,
      namedStatements: config.dbPreparedStatements,
      sqliteMmapSize: config.sqliteMmapSize,
      sqliteDriver: config.sqliteDriver,
      sqliteReadThreads: config.sqliteReadThreads,
      // Released once `serve` has started (startupWritesDone): other commands read one at a time.
      sqliteReadThreadsHeld: true,
      // A server's start-up writes start no checkpoint thread; other commands (the worker) checkpoint as they write.
      sqliteCheckpointsHeld: serving,
      mustExist: !create,
    });
  } catch (e) {
    if (e instanceof DatabaseMissingError) throw e;
    throw new Error(`cannot open the database at ${describeDatabaseUrl(url)} (DATABASE_URL): ${(e as Error)?.message ?? e}`, { cause: e });
  }
  try {
    if (!create && !(await hasSchema(database.db, database.dialect))) {
      const where = describeDatabaseUrl(url);
      throw new DatabaseMissingError(url, database.dialect === 'sqlite' ? `no files-rest database in ${where}` : `the PostgreSQL database ${where} has no files-rest schema`);
    }
    await migrateToLatest(database.db, database.dialect);
  } catch (e) {
    await database.close().catch(() => {});
    // 3D000: the PostgreSQL database named in the URL does not exist.
    if (isConnectionError(e) || (e as { code?: string })?.code === '3D000') throw new DatabaseConnectError(url, e);
    throw e;
  }
  return database;
}

/** The pieces every entry point (server, worker, admin command) shares. */
export interface Core {
  config: Config;
  log: Logger;
  database: DatabaseHandle;
  ctx: DomainContext;
  /** The task queue behind `ctx.queue`, with what workers and admin commands need besides enqueueing. */
  queue: TaskQueue;
  close(): Promise<void>;
}

export interface OpenCoreOptions {
  /**
   * Create the database (and its schema) when there is none: true for `serve`, `worker`, `init` and
   * embedding applications. Admin commands pass false and fail with DatabaseMissingError instead.
   */
  create?: boolean;
  /** For `createServer`: the start-up's writes start no SQLite checkpoint thread; startServer releases it (startupWritesDone). */
  serving?: boolean;
}

/** Opens the database (migrating it), the storage backends, the queue and the signals. */
export async function openCore(config: Config, log: Logger = createLogger(config), sender: unknown = null, opts: OpenCoreOptions = {}): Promise<Core> {
  const database = await openDatabaseFor(config, opts.create !== false, opts.serving === true);
  const storage = await createStorage(config, database.db);
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
    queue,
    close: async () => {
      // Uploads cut at shutdown: their clean-up runs before the process goes.
      await storage.close();
      await hasher.close();
      await database.close();
    },
  };
}

/**
 * What `serve`, `worker` and `init` do with locations at start: create the default one on a first
 * start (FILES_REST_AUTO_LOCATION), then adopt every location whose storage has no owner marker yet
 * (a location owned by another database stops the start: LOCATION_OWNED_ELSEWHERE).
 */
export async function prepareLocations(ctx: DomainContext, opts: { autoLocation?: boolean } = {}): Promise<void> {
  if (opts.autoLocation ?? ctx.config.autoLocation) await ensureDefaultLocation(ctx);
  await adoptLocations(ctx, await listLocations(ctx.db));
}

export function taskDefinitions(core: Core): AnyTaskDefinition[] {
  const { ctx, queue } = core;
  return [...builtinTasks(ctx, queue), ...multipartTasks(ctx), ...storageTasks(ctx), webhookTask()];
}

export function createWorker(core: Core, opts: { concurrency?: number } = {}): Worker {
  const { ctx } = core;
  return new Worker(core.queue, taskDefinitions(core), ctx.log.child({ component: 'worker' }), {
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
  /** The S3-compatible door (FILES_REST_S3_PORT), or null when off. */
  s3: S3Door | null;
  /** The S3 door's address once started ('' when off). */
  s3Url: string;
  stop(): Promise<void>;
}

/**
 * Builds the whole service from a config: database, storage, HTTP app and (unless
 * FILES_REST_WORKER=0) an in-process worker. Embedding applications use this and its `signals`.
 */
export async function createServer(config: Config, opts: { log?: Logger } = {}): Promise<Server> {
  const log = opts.log ?? createLogger(config);
  const server = {} as Server;
  const core = await openCore(config, log, server, { serving: true });
  const { ctx } = core;
  try {
    await prepareLocations(ctx);
  } catch (e) {
    await core.close().catch(() => {});
    throw e;
  }
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
  let s3: S3Door | null = null;
  if (config.s3Port !== null) {
    try {
      s3 = new S3Door({ ctx, policy, log: log.child({ component: 's3' }) });
    } catch (e) {
      await core.close().catch(() => {});
      throw e;
    }
  }
  const worker = config.worker ? createWorker(core) : null;
  let stopped = false;
  const sweeping = new AbortController();
  Object.assign(server, {
    app,
    core,
    worker,
    policy,
    signals: ctx.signals,
    url: '',
    s3,
    s3Url: '',
    async stop() {
      if (stopped) return;
      stopped = true;
      sweeping.abort();
      const graceMs = config.shutdownGrace * 1000;
      const s3Closing = s3?.close(graceMs);
      const closing = app.close();
      const timer = setTimeout(() => app.server.closeAllConnections?.(), graceMs);
      timer.unref();
      await closing;
      await s3Closing;
      clearTimeout(timer);
      await worker?.stop(graceMs);
      await sweeps.get(server);
      await core.close();
    },
  });
  sweepSignals.set(server, sweeping.signal);
  return server;
}

const sweepSignals = new WeakMap<Server, AbortSignal>();
const sweeps = new WeakMap<Server, Promise<void>>();

/**
 * Removes the temporary files that interrupted uploads left in every location, when they can be
 * proven abandoned (a process of this host that is gone, or a day old): another API process may be
 * writing into the same directory. Runs in the background after the start.
 */
async function removeAbandonedTemporaries(ctx: DomainContext, signal: AbortSignal): Promise<void> {
  for (const loc of await listLocations(ctx.db)) {
    if (signal.aborted) return;
    const backend = ctx.storage.forUri(loc.uri);
    if (!backend.removeAbandonedTemporaries) continue;
    const removed = await backend.removeAbandonedTemporaries(loc.uri, { signal });
    if (removed.length) ctx.log.warn({ location: loc.name, removed: removed.length, files: removed.slice(0, 20) }, 'removed temporary files of interrupted uploads');
  }
}

/** Starts listening (and the worker); logs `listening on http://HOST:PORT`. */
export async function startServer(server: Server): Promise<string> {
  const { config } = server.core;
  try {
    await server.app.listen({ host: config.host, port: config.port, listenTextResolver: (a) => `listening on ${a}` });
  } catch (e) {
    await server.stop().catch(() => {});
    throw listenError(e, config.host, config.port);
  }
  const addr = server.app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : config.port;
  server.url = `http://${config.host}:${port}`;
  if (server.s3 && config.s3Port !== null) {
    const s3Port = config.s3Port === 'auto' ? 0 : config.s3Port;
    try {
      server.s3Url = await server.s3.listen(config.host, s3Port);
    } catch (e) {
      await server.stop().catch(() => {});
      throw listenError(e, config.host, s3Port, 'FILES_REST_S3_PORT');
    }
    server.core.log.info(`S3 API listening on ${server.s3Url}`);
    if (!server.core.log.isLevelEnabled('info')) process.stderr.write(`files-rest: S3 API listening on ${server.s3Url}\n`);
  }
  // A new database's migrations, first location and token start no checkpoint thread (checkpointer.ts),
  // and the start-up's reads no read thread (read-threads.ts).
  startupWritesDone(server.core.database.db);
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
  const signal = sweepSignals.get(server);
  if (signal && !sweeps.has(server)) {
    const log = server.core.log;
    sweeps.set(server, removeAbandonedTemporaries(server.core.ctx, signal).catch((err) => log.error({ err }, 'could not remove the temporary files of interrupted uploads')));
  }
  return server.url;
}

/** A failed listen, said in terms of the settings to change (HOST, PORT). */
function listenError(e: unknown, host: string, port: number, setting = 'PORT'): Error {
  const code = (e as NodeJS.ErrnoException)?.code;
  const at = `${host}:${port}`;
  if (code === 'EADDRINUSE') return new Error(`cannot listen on ${at}: the address is already in use (another process listens there); set ${setting} (or HOST) to a free one`, { cause: e });
  if (code === 'EADDRNOTAVAIL') return new Error(`cannot listen on ${at}: HOST ${host} is not an address of this machine; set HOST`, { cause: e });
  if (code === 'EACCES') return new Error(`cannot listen on ${at}: permission denied (ports below 1024 need privileges); set ${setting}`, { cause: e });
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new Error(`cannot listen on ${at}: HOST ${host} does not resolve; set HOST`, { cause: e });
  return e as Error;
}

/** The first API token of a server, until startServer has shown it. */
const firstTokens = new WeakMap<Server, { id: string; token: string }>();
