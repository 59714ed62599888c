import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { poolStats } from '../db/database.js';
import { queueDepth as countTasksByState } from '../tasks/queue.js';
import type { DomainContext } from '../domain/context.js';
import { replicationLag } from '../domain/replicas.js';

/**
 * Prometheus metrics at GET /metrics (server root, outside FILES_REST_URL_PREFIX, no credential;
 * FILES_REST_METRICS=0 turns it off). Each API process has its own registry: scrape every node.
 *
 * Per process: requests by route pattern and status, latency, bytes uploaded and downloaded,
 * uploads and downloads in flight, database pool use, Node's process metrics. Read from the
 * database at each scrape (the same on every node of one deployment): task queue depth by state,
 * failed tasks by task name, integrity check results of files.
 */

/** Route label: the route's pattern (never the raw URL, whose keys would explode the series). */
function routeOf(req: FastifyRequest): string {
  return req.routeOptions?.url ?? 'unmatched';
}

function contentLength(v: string | number | string[] | undefined): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : 0;
  return Number.isSafeInteger(n) ? n : 0;
}

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800];

export interface Metrics {
  registry: Registry;
}

/** One answered request of a door with its own listener (the S3 door), as the metrics count it. */
export interface DoorRequest {
  /** The door: `s3`. */
  door: string;
  /** The door's name for the operation (`PutObject`, `ListObjectsV2`, … or `Unknown`). */
  operation: string;
  status: number;
  seconds: number;
  /** Request body bytes received (a successful upload's Content-Length as sent). */
  received: number;
  /** Response body bytes sent (the answer's Content-Length). */
  sent: number;
}

/** Where a door reports its requests; the registry is the main port's /metrics. */
export interface DoorMetrics {
  record(r: DoorRequest): void;
}

const doorMetricsOf = new WeakMap<DomainContext, DoorMetrics>();

/** The door metrics of a service (null when FILES_REST_METRICS=0). */
export function doorMetrics(ctx: DomainContext): DoorMetrics | null {
  return doorMetricsOf.get(ctx) ?? null;
}

export function registerMetrics(app: FastifyInstance, ctx: DomainContext): Metrics | null {
  if (!ctx.config.metrics) return null;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const requests = new Counter({
    name: 'files_rest_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'files_rest_http_request_duration_seconds',
    help: 'Time from the request to the end of the response (uploads and downloads included), by method and route pattern.',
    labelNames: ['method', 'route'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const uploaded = new Counter({
    name: 'files_rest_uploaded_bytes_total',
    help: 'Bytes received in successful uploads (PUT of an object or a multipart part).',
    registers: [registry],
  });
  const downloaded = new Counter({
    name: 'files_rest_downloaded_bytes_total',
    help: 'Bytes of object content sent (GET answered 200 or 206; an X-Accel-Redirect counts 0).',
    registers: [registry],
  });
  const uploadsInFlight = new Gauge({
    name: 'files_rest_uploads_in_flight',
    help: 'Uploads (PUT requests) being received now.',
    registers: [registry],
  });
  const downloadsInFlight = new Gauge({
    name: 'files_rest_downloads_in_flight',
    help: 'Object downloads (GET of an object\'s content) being answered now.',
    registers: [registry],
  });
  const queueDepth = new Gauge({
    name: 'files_rest_task_queue_depth',
    help: 'Background tasks by state (queued, running, done, failed), read from the database.',
    labelNames: ['state'] as const,
    registers: [registry],
  });
  const tasksFailed = new Gauge({
    name: 'files_rest_tasks_failed',
    help: 'Background tasks that failed for good (attempts exhausted), by task name, read from the database.',
    labelNames: ['task'] as const,
    registers: [registry],
  });
  const integrity = new Gauge({
    name: 'files_rest_integrity_checks',
    help: 'Files by the result of their last integrity check: ok, failed, or unchecked.',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const belowPolicy = new Gauge({
    name: 'files_rest_replication_lag',
    help: 'Files below their replication policy (fewer good copies than their bucket requires), and their bytes, read from the database.',
    labelNames: ['unit'] as const,
    registers: [registry],
  });
  const noGoodCopy = new Gauge({
    name: 'files_rest_files_without_good_copy',
    help: 'Files of which no copy passes its integrity check: only a backup can restore them.',
    registers: [registry],
  });
  const dbUp = new Gauge({
    name: 'files_rest_database_up',
    help: '1 when the database answered the queries of this scrape, 0 when it did not.',
    registers: [registry],
  });
  const pool = new Gauge({
    name: 'files_rest_db_pool_connections',
    help: 'PostgreSQL connection pool of this process: max, total (open), idle, and waiting (requests waiting for a connection).',
    labelNames: ['state'] as const,
    registers: [registry],
  });

  const storageFull = new Counter({
    name: 'files_rest_storage_full_total',
    help: 'Uploads refused with 507 STORAGE_FULL: the file storage had no space left (ENOSPC, EDQUOT, or the object store\'s equivalent).',
    registers: [registry],
  });

  const doorRequests = new Counter({
    name: 'files_rest_door_requests_total',
    help: 'Requests answered by a door with its own listener (door="s3"), by operation and status code.',
    labelNames: ['door', 'operation', 'status'] as const,
    registers: [registry],
  });
  const doorDuration = new Histogram({
    name: 'files_rest_door_request_duration_seconds',
    help: 'Time from the request to the end of the response of a door with its own listener, by door and operation.',
    labelNames: ['door', 'operation'] as const,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  const doorReceived = new Counter({
    name: 'files_rest_door_received_bytes_total',
    help: 'Request body bytes of successful uploads through a door with its own listener (as sent: aws-chunked framing included).',
    labelNames: ['door'] as const,
    registers: [registry],
  });
  const doorSent = new Counter({
    name: 'files_rest_door_sent_bytes_total',
    help: 'Response body bytes sent by a door with its own listener (object content, listings and error documents).',
    labelNames: ['door'] as const,
    registers: [registry],
  });
  doorMetricsOf.set(ctx, {
    record(r) {
      doorRequests.inc({ door: r.door, operation: r.operation, status: String(r.status) });
      doorDuration.observe({ door: r.door, operation: r.operation }, r.seconds);
      if (r.received > 0) doorReceived.inc({ door: r.door }, r.received);
      if (r.sent > 0) doorSent.inc({ door: r.door }, r.sent);
    },
  });

  const objectRoute = `${ctx.config.urlPrefix}/files/:bucketId/*`;
  const started = new WeakMap<FastifyRequest, bigint>();
  // A GET of an object's content: not a listing, a part listing (?uploadId) or this endpoint's scrape.
  const isObjectDownload = (req: FastifyRequest): boolean => {
    if (req.method !== 'GET' || routeOf(req) !== objectRoute) return false;
    const q = (req.query ?? {}) as Record<string, unknown>;
    return q.uploadId === undefined && q.uploads === undefined;
  };
  app.addHook('onRequest', async (req, reply) => {
    started.set(req, process.hrtime.bigint());
    const gauge = req.method === 'PUT' ? uploadsInFlight : isObjectDownload(req) ? downloadsInFlight : null;
    if (gauge) {
      gauge.inc();
      // 'close' comes exactly once, whether the response finished or the client went away.
      reply.raw.once('close', () => gauge.dec());
    }
  });
  app.addHook('onResponse', async (req: FastifyRequest, reply: FastifyReply) => {
    const route = routeOf(req);
    const status = reply.statusCode;
    requests.inc({ method: req.method, route, status: String(status) });
    const t0 = started.get(req);
    if (t0 !== undefined) duration.observe({ method: req.method, route }, Number(process.hrtime.bigint() - t0) / 1e9);
    if (req.method === 'PUT' && status >= 200 && status < 300) uploaded.inc(contentLength(req.headers['content-length']));
    if (status === 507) storageFull.inc();
    // Object content only: not bucket listings, part listings or this endpoint (API JSON; stored
    // JSON files are served as text/plain, so a JSON answer is never object content).
    if (req.method === 'GET' && (status === 200 || status === 206) && route === objectRoute) {
      const type = String(reply.getHeader('content-type') ?? '');
      if (!type.startsWith('application/json')) downloaded.inc(contentLength(reply.getHeader('content-length')));
    }
  });

  /** Values read from the database; on failure the previous ones are dropped and database_up is 0. */
  async function refreshFromDatabase(): Promise<void> {
    const stats = poolStats(ctx.db);
    pool.reset();
    if (stats) {
      pool.set({ state: 'max' }, stats.max);
      pool.set({ state: 'total' }, stats.total);
      pool.set({ state: 'idle' }, stats.idle);
      pool.set({ state: 'waiting' }, stats.waiting);
    }
    try {
      const [depth, failed, checks, lag] = await Promise.all([
        countTasksByState(ctx.db),
        ctx.db
          .selectFrom('tasks')
          .select(['name', (eb) => eb.fn.countAll<number>().as('n')])
          .where('state', '=', 'failed')
          .groupBy('name')
          .execute(),
        ctx.db
          .selectFrom('files')
          .select(['last_check', (eb) => eb.fn.countAll<number>().as('n')])
          .groupBy('last_check')
          .execute(),
        replicationLag(ctx),
      ]);
      belowPolicy.set({ unit: 'files' }, lag.files);
      belowPolicy.set({ unit: 'bytes' }, lag.bytes);
      noGoodCopy.set(lag.noGoodCopy);
      queueDepth.reset();
      for (const state of ['queued', 'running', 'done', 'failed']) queueDepth.set({ state }, depth[state] ?? 0);
      tasksFailed.reset();
      for (const r of failed) tasksFailed.set({ task: r.name }, Number(r.n));
      integrity.reset();
      const byResult: Record<string, number> = { ok: 0, failed: 0, unchecked: 0 };
      for (const r of checks) {
        const key = r.last_check === null ? 'unchecked' : Number(r.last_check) === 1 ? 'ok' : 'failed';
        byResult[key] = (byResult[key] ?? 0) + Number(r.n);
      }
      for (const [result, n] of Object.entries(byResult)) integrity.set({ result }, n);
      dbUp.set(1);
    } catch (err) {
      ctx.log.warn({ err }, 'metrics: could not read the database');
      queueDepth.reset();
      tasksFailed.reset();
      integrity.reset();
      belowPolicy.reset();
      noGoodCopy.reset();
      dbUp.set(0);
    }
  }

  app.get('/metrics', async (_req, reply) => {
    await refreshFromDatabase();
    const body = await registry.metrics();
    return reply.type(registry.contentType).send(body);
  });
  return { registry };
}
