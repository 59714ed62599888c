import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ERRORS, validationError } from '../../errors.js';
import { locationReports } from '../../domain/locations.js';
import { migrationStatus, migrationTargets } from '../../domain/migration.js';
import { getTask, listTasks, retryFailedTasks, retryTask, TASK_STATES, type TaskState } from '../../domain/tasks.js';
import { err, intQuery, ref, type AdminDocPath, type DocEntry, type HttpMethod } from '../api-doc.js';
import type { HttpDeps } from '../deps.js';
import { Links } from '../links.js';
import { intParam, one, query } from '../query.js';
import { assertAcceptsJson, sendJson } from '../reply.js';
import { adminTaskJson, locationJson } from '../serializers.js';

/**
 * The operator's endpoints over REST, under `{base}/admin`: locations, migrations in progress, the
 * task queue and the retry of a failed task. They do what the admin commands do (locations, `file
 * migrate --status`, `task list --failed`, `task retry`), through the same domain functions, for a
 * credential allowed `location-update` (the reference's administrative action: creating buckets in
 * a location); any other is refused with 403. Like the operation table of /files, this table drives
 * both the routes and /openapi.json.
 */

type AdminHandler = (deps: HttpDeps, req: FastifyRequest, reply: FastifyReply, params: { taskId?: string }) => Promise<unknown>;

export interface AdminOperation extends DocEntry {
  path: AdminDocPath;
  handler: AdminHandler;
}

const TASK_ID = /^[1-9]\d{0,14}$/;

/** A task id of the URL: a positive integer, else the task does not exist (404). */
function taskId(raw: string | undefined): number {
  if (raw === undefined || !TASK_ID.test(raw)) throw new AppError('TASK_NOT_FOUND', { id: raw ?? '' });
  return Number(raw);
}

/** Every admin endpoint starts here: JSON only, and only for a credential that may administer. */
async function admit({ auth, ctx }: HttpDeps, req: FastifyRequest): Promise<Links> {
  assertAcceptsJson(req);
  await auth.require(req, 'location-update', null);
  return new Links(ctx.config, req);
}

const ADMIN_AUTH = {
  '401': err(ERRORS.UNAUTHORIZED.message),
  '403': err(`${ERRORS.FORBIDDEN.message.replace('{action}', 'location-update')}`),
};
const TASK_404 = err(ERRORS.TASK_NOT_FOUND.message.replace('{id}', '<id>'));

export const ADMIN_OPERATIONS: readonly AdminOperation[] = [
  {
    path: 'admin', method: 'get',
    doc: {
      summary: 'May this credential administer? The links of the admin endpoints (200), else 403', actions: ['location-update'],
      responses: { '200': { description: 'Links to locations, migrations and tasks', schema: ref('AdminIndex') }, ...ADMIN_AUTH },
    },
    handler: async (deps, req, reply) => {
      const links = await admit(deps, req);
      return sendJson(req, reply, 200, {
        links: {
          self: links.admin, locations: `${links.admin}/locations`, migrations: `${links.admin}/migrations`,
          tasks: `${links.admin}/tasks`, failed_tasks: `${links.admin}/tasks?state=failed`,
        },
      });
    },
  },
  {
    path: 'admin/locations', method: 'get',
    doc: {
      summary: 'Storage locations: URI, kind, default, files and bytes held, migrations towards each', actions: ['location-update'],
      responses: { '200': { description: 'Every location, by name', schema: ref('LocationList') }, ...ADMIN_AUTH },
    },
    handler: async (deps, req, reply) => {
      await admit(deps, req);
      const [locations, targets] = await Promise.all([locationReports(deps.ctx), migrationTargets(deps.ctx)]);
      const byTarget = new Map(targets.map((t) => [t.location, t]));
      return sendJson(req, reply, 200, { contents: locations.map((l) => locationJson(l, byTarget.get(l.name) ?? null)) });
    },
  },
  {
    path: 'admin/migrations', method: 'get',
    doc: {
      summary: 'Migrations: migrate-file tasks by state, overall and per target location, and what each location holds', actions: ['location-update'],
      responses: { '200': { description: 'The migration status', schema: ref('MigrationStatus') }, ...ADMIN_AUTH },
    },
    handler: async (deps, req, reply) => {
      await admit(deps, req);
      const st = await migrationStatus(deps.ctx);
      return sendJson(req, reply, 200, {
        queued: st.queued, running: st.running, done: st.done, failed: st.failed,
        targets: st.targets.map((t) => ({ ...t, left: t.queued + t.running })),
        locations: st.locations,
      });
    },
  },
  {
    path: 'admin/tasks', method: 'get',
    doc: {
      summary: 'Background tasks, newest first (paged); `state=failed` for the failed ones', actions: ['location-update'],
      params: [
        { name: 'state', in: 'query', description: 'Only tasks in this state', schema: { type: 'string', enum: [...TASK_STATES] } },
        intQuery('limit', 'Page size, 1–1000 (default 100)'),
        intQuery('before', 'Keyset cursor from links.next: tasks with a smaller id'),
      ],
      responses: {
        '200': { description: 'A page of tasks: contents and links (self, next)', schema: ref('TaskPage') },
        ...ADMIN_AUTH,
        '422': { description: 'Malformed query arguments (an unknown state)', schema: ref('ValidationError') },
      },
    },
    handler: async (deps, req, reply) => {
      const links = await admit(deps, req);
      const q = query(req);
      const s = one(q, 'state');
      if (s !== undefined && !(TASK_STATES as readonly string[]).includes(s)) throw validationError('state', `One of ${TASK_STATES.join(', ')}.`);
      const state = s as TaskState | undefined;
      const limit = intParam(q, 'limit', { min: 1, max: 1000 }) ?? 100;
      const before = intParam(q, 'before', { min: 1 }) ?? undefined;
      const rows = await listTasks(deps.ctx.db, { state, limit: limit + 1, before });
      const page = rows.slice(0, limit);
      const self = `${links.admin}/tasks`;
      const out: Record<string, string> = { self };
      if (rows.length > limit) {
        const p = new URLSearchParams();
        if (state) p.set('state', state);
        if (limit !== 100) p.set('limit', String(limit));
        p.set('before', String(page[page.length - 1]!.id));
        out.next = `${self}?${p}`;
      }
      return sendJson(req, reply, 200, { contents: page.map((t) => adminTaskJson(t, links)), links: out });
    },
  },
  {
    path: 'admin/tasks/failed/retry', method: 'post',
    doc: {
      summary: 'Queue every failed task again, each with a fresh set of attempts', actions: ['location-update'],
      responses: { '200': { description: 'How many were queued', schema: { type: 'object', required: ['queued'], properties: { queued: { type: 'integer' } } } }, ...ADMIN_AUTH },
    },
    handler: async (deps, req, reply) => {
      await admit(deps, req);
      return sendJson(req, reply, 200, { queued: await retryFailedTasks(deps.ctx) });
    },
  },
  {
    path: 'admin/tasks/{task_id}', method: 'get',
    doc: {
      summary: 'One task', actions: ['location-update'],
      responses: { '200': { description: 'The task', schema: ref('Task') }, ...ADMIN_AUTH, '404': TASK_404 },
    },
    handler: async (deps, req, reply, params) => {
      const links = await admit(deps, req);
      return sendJson(req, reply, 200, adminTaskJson(await getTask(deps.ctx.db, taskId(params.taskId)), links));
    },
  },
  {
    path: 'admin/tasks/{task_id}/retry', method: 'post',
    doc: {
      summary: 'Queue a failed task again with a fresh set of attempts', actions: ['location-update'],
      responses: {
        '200': { description: 'The task, queued again', schema: ref('Task') },
        ...ADMIN_AUTH,
        '404': TASK_404,
        '409': err(ERRORS.TASK_NOT_FAILED.message.replace('{id}', '<id>')),
      },
    },
    handler: async (deps, req, reply, params) => {
      const links = await admit(deps, req);
      return sendJson(req, reply, 200, adminTaskJson(await retryTask(deps.ctx, taskId(params.taskId)), links));
    },
  },
];

/** The URL of an admin path for Fastify (`{task_id}` → `:taskId`). */
function routeUrl(prefix: string, path: AdminDocPath): string {
  return `${prefix}/${path.replace('{task_id}', ':taskId')}`;
}

const METHODS: readonly HttpMethod[] = ['get', 'head', 'put', 'post', 'delete'];

/**
 * Registers the admin endpoints. Each path answers its documented method; another method is a 405
 * naming the allowed one, in the JSON error shape.
 */
export function adminRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const byUrl = new Map<string, AdminOperation[]>();
  for (const op of ADMIN_OPERATIONS) byUrl.set(op.path, [...(byUrl.get(op.path) ?? []), op]);
  for (const [path, ops] of byUrl) {
    const allow = METHODS.filter((m) => ops.some((o) => o.method === m)).map((m) => m.toUpperCase()).join(', ');
    app.route<{ Params: { taskId?: string } }>({
      method: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH'],
      url: routeUrl(deps.prefix, path as AdminDocPath),
      preHandler: deps.auth.gate,
      handler: async (req, reply) => {
        const op = ops.find((o) => o.method === req.method.toLowerCase());
        if (!op) throw new AppError('METHOD_NOT_ALLOWED', {}, { headers: { allow } });
        return op.handler(deps, req, reply, req.params);
      },
    });
  }
}
