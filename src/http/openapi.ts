import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { AUTH, err, NO_BUCKET, ref, UNAVAILABLE, type DocEntry, type ResponseDoc, type Schema } from './api-doc.js';
import { OPERATIONS } from './operations.js';
import { ADMIN_OPERATIONS } from './routes/admin.js';
import { tusPaths } from './tus/openapi.js';

/**
 * The OpenAPI 3 document of the REST API, served at GET /openapi.json (server root, outside
 * FILES_REST_URL_PREFIX, no credential). The API routes are catch-all handlers that pick an
 * operation by method and query (`?uploads`, `?uploadId`, `?versions`…) from the operation table
 * (operations.ts), and the document is built from the same table: one entry per operation variant.
 * Variants sharing a path and method become one OpenAPI operation (OpenAPI has no query-selected
 * operations) whose description lists them. test/openapi.test.ts checks it against a running server.
 */

/** The operator endpoints at the server root (their own routes: health.ts, metrics.ts, below). */
const OPERATOR_ENDPOINTS: DocEntry[] = [
  {
    path: '/healthz', method: 'get',
    doc: { summary: 'Liveness: the process is alive', responses: { '200': { description: 'Alive', schema: { type: 'object', properties: { status: { type: 'string', enum: ['ok'] } } } } } },
  },
  {
    path: '/readyz', method: 'get',
    doc: {
      summary: 'Readiness: database and storage reachable, migrations current',
      responses: {
        '200': { description: 'Ready', schema: { type: 'object', properties: { status: { type: 'string', enum: ['ready'] } } } },
        '503': err('Not ready, and why'),
      },
    },
  },
  {
    path: '/metrics', method: 'get',
    doc: {
      summary: 'Prometheus metrics of this process (FILES_REST_METRICS=0 turns it off)',
      responses: { '200': { description: 'Prometheus text exposition format', contentType: 'text/plain', schema: { type: 'string' } } },
    },
  },
  {
    path: '/openapi.json', method: 'get',
    doc: { summary: 'This document', responses: { '200': { description: 'OpenAPI 3 document', schema: { type: 'object' } } } },
  },
];

const SCHEMAS: Record<string, Schema> = {
  Error: {
    type: 'object',
    required: ['status', 'message'],
    properties: { status: { type: 'integer' }, message: { type: 'string' } },
  },
  ValidationError: {
    type: 'object',
    required: ['status', 'message', 'errors'],
    properties: {
      status: { type: 'integer' },
      message: { type: 'string' },
      errors: { type: 'array', items: { type: 'object', properties: { field: { type: 'string' }, message: { type: 'string' } } } },
    },
  },
  Bucket: {
    type: 'object',
    required: ['id', 'size', 'quota_size', 'max_file_size', 'locked', 'public_read', 'created', 'updated', 'links'],
    properties: {
      id: { type: 'string', format: 'uuid' },
      size: { type: 'integer', description: 'Sum of the sizes of the stored versions that have a file' },
      quota_size: { type: 'integer', nullable: true },
      max_file_size: { type: 'integer', nullable: true },
      locked: { type: 'boolean' },
      public_read: { type: 'boolean', description: 'Anyone may download its objects without a credential (not list them)' },
      created: { type: 'string', format: 'date-time' },
      updated: { type: 'string', format: 'date-time' },
      links: {
        type: 'object',
        properties: { self: { type: 'string' }, versions: { type: 'string' }, uploads: { type: 'string' }, next: { type: 'string', description: 'Next page, when more remain' } },
      },
    },
  },
  BucketPage: {
    type: 'object',
    required: ['contents', 'links'],
    properties: {
      contents: { type: 'array', items: ref('Bucket') },
      links: { type: 'object', properties: { self: { type: 'string' }, next: { type: 'string', description: 'Next page, when more remain' } } },
    },
  },
  SignedUrl: {
    type: 'object',
    required: ['url', 'method', 'action', 'bucket', 'key', 'version_id', 'expires', 'single_use'],
    properties: {
      url: { type: 'string', description: 'The URL; its query carries expires, signature (and nonce for an upload)' },
      method: { type: 'string', enum: ['GET', 'PUT'], description: 'GET (HEAD too) for a download, PUT for an upload' },
      action: { type: 'string', enum: ['download', 'upload'] },
      bucket: { type: 'string', format: 'uuid' },
      key: { type: 'string' },
      version_id: { type: 'string', format: 'uuid', nullable: true },
      expires: { type: 'string', format: 'date-time' },
      single_use: { type: 'boolean', description: 'An upload URL works for one PUT' },
    },
  },
  BucketListing: {
    allOf: [ref('Bucket'), { type: 'object', required: ['contents'], properties: { contents: { type: 'array', items: ref('ObjectVersion') } } }],
  },
  ObjectVersion: {
    type: 'object',
    required: ['key', 'version_id', 'is_head', 'delete_marker', 'mimetype', 'tags', 'created', 'updated', 'links'],
    properties: {
      key: { type: 'string' },
      version_id: { type: 'string', format: 'uuid' },
      is_head: { type: 'boolean' },
      delete_marker: { type: 'boolean' },
      size: { type: 'integer', description: 'Absent for a delete marker' },
      mimetype: { type: 'string', nullable: true },
      checksum: { type: 'string', description: 'md5:<hex>; absent for a delete marker' },
      last_check_at: { type: 'string', format: 'date-time', nullable: true, description: "The file's last integrity check (null: never); absent for a delete marker" },
      last_check: { type: 'string', enum: ['ok', 'failed'], nullable: true, description: 'Its result (null: never checked); absent for a delete marker' },
      tags: { type: 'object', additionalProperties: { type: 'string' } },
      created: { type: 'string', format: 'date-time' },
      updated: { type: 'string', format: 'date-time' },
      links: { type: 'object', properties: { self: { type: 'string' }, version: { type: 'string' }, uploads: { type: 'string' } } },
    },
  },
  AdminIndex: {
    type: 'object',
    required: ['links'],
    properties: {
      links: {
        type: 'object',
        properties: { self: { type: 'string' }, locations: { type: 'string' }, migrations: { type: 'string' }, tasks: { type: 'string' }, failed_tasks: { type: 'string' } },
      },
    },
  },
  Location: {
    type: 'object',
    required: ['name', 'uri', 'kind', 'default', 'files', 'bytes', 'migration', 'created', 'updated'],
    properties: {
      name: { type: 'string' },
      uri: { type: 'string' },
      kind: { type: 'string', nullable: true, description: 'The storage backend handling the URI (fs, s3…); null when none configured does' },
      default: { type: 'boolean' },
      files: { type: 'integer', description: 'File instances stored there' },
      bytes: { type: 'integer', description: 'Their total size' },
      migration: { allOf: [ref('MigrationTarget')], nullable: true, description: 'migrate-file tasks towards this location (null: none recorded)' },
      created: { type: 'string', format: 'date-time' },
      updated: { type: 'string', format: 'date-time' },
    },
  },
  LocationList: { type: 'object', required: ['contents'], properties: { contents: { type: 'array', items: ref('Location') } } },
  MigrationTarget: {
    type: 'object',
    required: ['left', 'queued', 'running', 'done', 'failed'],
    properties: {
      location: { type: 'string', description: 'The target location (in the migrations document)' },
      left: { type: 'integer', description: 'Files still to move: queued + running' },
      queued: { type: 'integer' },
      running: { type: 'integer' },
      done: { type: 'integer', description: 'Moved (done tasks are forgotten after a week)' },
      failed: { type: 'integer', description: 'Copies that failed for good (retry them as tasks)' },
    },
  },
  MigrationStatus: {
    type: 'object',
    required: ['queued', 'running', 'done', 'failed', 'targets', 'locations'],
    properties: {
      queued: { type: 'integer' },
      running: { type: 'integer' },
      done: { type: 'integer' },
      failed: { type: 'integer' },
      targets: { type: 'array', items: ref('MigrationTarget') },
      locations: {
        type: 'array',
        items: { type: 'object', properties: { name: { type: 'string' }, files: { type: 'integer' }, bytes: { type: 'integer' } } },
      },
    },
  },
  Task: {
    type: 'object',
    required: ['id', 'name', 'state', 'summary', 'attempts', 'max_attempts', 'last_error', 'run_at', 'created', 'updated', 'links'],
    properties: {
      id: { type: 'integer' },
      name: { type: 'string', description: 'The job (migrate-file, verify-checksum, remove-file-data, complete-multipart, deliver-webhook, …)' },
      state: { type: 'string', enum: ['queued', 'running', 'done', 'failed'] },
      summary: { type: 'string', description: 'What the payload is about, in one line' },
      attempts: { type: 'integer' },
      max_attempts: { type: 'integer' },
      last_error: { type: 'string', nullable: true },
      run_at: { type: 'string', format: 'date-time' },
      created: { type: 'string', format: 'date-time' },
      updated: { type: 'string', format: 'date-time', description: 'Last change (for a failed task: when it failed)' },
      links: { type: 'object', properties: { self: { type: 'string' }, retry: { type: 'string', description: 'POST here to retry (failed tasks)' } } },
    },
  },
  TaskPage: {
    type: 'object',
    required: ['contents', 'links'],
    properties: {
      contents: { type: 'array', items: ref('Task') },
      links: { type: 'object', properties: { self: { type: 'string' }, next: { type: 'string', description: 'Next page, when more remain' } } },
    },
  },
  MultipartUpload: {
    type: 'object',
    required: ['id', 'bucket', 'key', 'size', 'part_size', 'last_part_number', 'last_part_size', 'completed', 'created', 'updated', 'links'],
    properties: {
      id: { type: 'string', format: 'uuid' },
      bucket: { type: 'string', format: 'uuid' },
      key: { type: 'string' },
      size: { type: 'integer' },
      part_size: { type: 'integer' },
      last_part_number: { type: 'integer' },
      last_part_size: { type: 'integer' },
      completed: { type: 'boolean' },
      created: { type: 'string', format: 'date-time' },
      updated: { type: 'string', format: 'date-time' },
      links: {
        type: 'object',
        properties: { self: { type: 'string' }, object: { type: 'string' }, bucket: { type: 'string' }, object_version: { type: 'string' } },
      },
    },
  },
  MultipartWithParts: {
    allOf: [ref('MultipartUpload'), { type: 'object', required: ['parts'], properties: { parts: { type: 'array', items: ref('Part') } } }],
  },
  Part: {
    type: 'object',
    required: ['part_number', 'start_byte', 'end_byte', 'checksum', 'created', 'updated'],
    properties: {
      part_number: { type: 'integer' },
      start_byte: { type: 'integer' },
      end_byte: { type: 'integer' },
      checksum: { type: 'string' },
      created: { type: 'string', format: 'date-time' },
      updated: { type: 'string', format: 'date-time' },
    },
  },
};

const TASK_ID: Schema = { name: 'task_id', in: 'path', required: true, description: 'Task id', schema: { type: 'integer', minimum: 1 } };
const PATH_PARAMS: Record<string, Schema[]> = {
  'admin/tasks/{task_id}': [TASK_ID],
  'admin/tasks/{task_id}/retry': [TASK_ID],
  bucket: [{ name: 'bucket_id', in: 'path', required: true, description: 'Bucket id', schema: { type: 'string', format: 'uuid' } }],
  object: [
    { name: 'bucket_id', in: 'path', required: true, description: 'Bucket id', schema: { type: 'string', format: 'uuid' } },
    { name: 'key', in: 'path', required: true, description: 'Object key; may contain `/` and any Unicode, percent-encoded', schema: { type: 'string' } },
  ],
};

/** The document's path for a table entry (the REST paths carry FILES_REST_URL_PREFIX). */
function pathOf(v: DocEntry, prefix: string): string {
  switch (v.path) {
    case 'collection':
      return `${prefix}/files`;
    case 'bucket':
      return `${prefix}/files/{bucket_id}`;
    case 'object':
      return `${prefix}/files/{bucket_id}/{key}`;
    default:
      return v.path.startsWith('admin') ? `${prefix}/${v.path}` : v.path;
  }
}

function responseObject(r: ResponseDoc): Schema {
  const out: Schema = { description: r.description };
  if (r.schema) out.content = { [r.contentType ?? 'application/json']: { schema: r.schema } };
  if (r.headers) out.headers = Object.fromEntries(Object.entries(r.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }]));
  return out;
}

/** Builds the OpenAPI 3.0 document for this configuration (URL prefix, server URL). */
export function buildOpenApi(config: Config, version = '0.1.0'): Record<string, unknown> {
  const prefix = config.urlPrefix;
  const paths: Record<string, Record<string, unknown>> = {};
  const groups = new Map<string, DocEntry[]>();
  for (const v of [...OPERATIONS, ...ADMIN_OPERATIONS, ...OPERATOR_ENDPOINTS]) {
    if (v.path === '/metrics' && !config.metrics) continue;
    const key = `${pathOf(v, prefix)} ${v.method}`;
    groups.set(key, [...(groups.get(key) ?? []), v]);
  }
  for (const [key, variants] of groups) {
    const [path, method] = key.split(' ') as [string, string];
    // The operation's summary: its variant without a selector, unless that one only refuses.
    const served = variants.filter((v) => !v.doc.refusal);
    const plain = served.find((v) => !v.selector) ?? served[0] ?? variants[0]!;
    const rest = variants.filter((v) => v !== plain);
    const params = new Map<string, Schema>();
    for (const v of variants) for (const p of v.doc.params ?? []) if (!params.has(`${p.in}:${p.name}`)) params.set(`${p.in}:${p.name}`, { ...p });
    // A parameter that selects a variant is never required for the operation as a whole.
    if (variants.length > 1) for (const p of params.values()) if (p.in === 'query') p.required = false;
    const responses: Record<string, Schema> = {};
    for (const v of variants) {
      for (const [status, r] of Object.entries(v.doc.responses)) {
        const prev = responses[status];
        if (!prev) {
          responses[status] = responseObject(r);
          continue;
        }
        prev.description = `${prev.description as string}; ${v.selector ? `\`?${v.selector}\`: ` : ''}${r.description}`;
        if (!r.schema) continue;
        // Same status from two variants: each media type keeps its own schema (the content of a
        // download and the JSON of list-parts); two JSON bodies are alternatives.
        const type = r.contentType ?? 'application/json';
        const content = (prev.content ?? {}) as Record<string, { schema: Schema }>;
        const a = content[type]?.schema;
        if (!a) content[type] = { schema: r.schema };
        else if (JSON.stringify(a) !== JSON.stringify(r.schema)) {
          const alts = (a.oneOf as Schema[] | undefined) ?? [a];
          content[type] = { schema: { oneOf: [...alts, r.schema] } };
        }
        prev.content = content;
      }
    }
    const rest4xx: Record<string, ResponseDoc> = variants.some((v) => v.doc.actions?.length) ? { ...AUTH, ...UNAVAILABLE } : {};
    for (const [status, r] of Object.entries(rest4xx)) if (!responses[status]) responses[status] = responseObject(r);
    if (variants.some((v) => v.path === 'bucket' || v.path === 'object') && !responses['404']) responses['404'] = responseObject(NO_BUCKET);
    const body = variants.flatMap((v) => v.doc.body ?? []);
    const op: Record<string, unknown> = {
      operationId: `${method}${path.replace(/[{}]/g, '').split(/[^A-Za-z0-9]+/).filter(Boolean).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}`,
      summary: plain.doc.summary,
      tags: [plain.path.startsWith('/') ? 'operations' : plain.path.startsWith('admin') ? 'admin' : plain.path === 'object' ? 'objects' : 'buckets'],
      parameters: [...(PATH_PARAMS[plain.path] ?? []), ...params.values()],
      responses,
    };
    const lines: string[] = [];
    if (rest.length) {
      lines.push('The query selects the operation:', '');
      for (const v of variants) lines.push(`- ${v.selector ? `\`?${v.selector}\`` : 'no selector'}: ${v.doc.summary}${v.doc.actions ? ` (actions: ${v.doc.actions.join(', ')})` : ''}`);
    } else if (plain.doc.actions) {
      lines.push(`Actions: ${plain.doc.actions.join(', ')}.`);
    }
    if (lines.length) op.description = lines.join('\n');
    if (body.length) {
      const content: Record<string, unknown> = {};
      for (const b of body) if (!content[b.contentType]) content[b.contentType] = { schema: b.schema };
      op.requestBody = { required: body.some((b) => b.required), description: [...new Set(body.map((b) => b.description))].join('; '), content };
    }
    if (plain.path.startsWith('/')) op.security = [];
    paths[path] = { ...(paths[path] ?? {}), [method]: op };
  }
  Object.assign(paths, tusPaths(prefix));
  const servers = config.baseUrl ? [{ url: config.baseUrl }] : [{ url: '/' }];
  return {
    openapi: '3.0.3',
    info: {
      title: 'files-rest',
      version,
      description:
        'Buckets of versioned objects over REST, with checksums, multipart uploads and pluggable storage. ' +
        'Credentials: `Authorization: Bearer <token>` (none with FILES_REST_PERMISSION_FACTORY=allow-all). ' +
        'Every refusal is JSON {status, message}.',
    },
    servers,
    tags: [
      { name: 'buckets', description: 'Bucket collection and buckets' },
      { name: 'objects', description: 'Objects, versions and multipart uploads' },
      { name: 'tus', description: 'Resumable uploads (tus 1.0), beside the REST paths' },
      { name: 'admin', description: 'Locations, migrations and background tasks (a credential with location-update)' },
      { name: 'operations', description: 'Health, readiness, metrics and this document (server root, no credential)' },
    ],
    paths,
    components: {
      schemas: SCHEMAS,
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'An API token (files-rest token create)' } },
    },
    security: [{ bearer: [] }],
  };
}

/** GET /openapi.json at the server root. */
export function registerOpenApi(app: FastifyInstance, config: Config): void {
  const doc = JSON.stringify(buildOpenApi(config));
  app.get('/openapi.json', async (_req, reply) => reply.type('application/json').send(doc));
}
