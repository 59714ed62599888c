import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { ERRORS } from '../errors.js';

/**
 * The OpenAPI 3 document of the REST API, served at GET /openapi.json (server root, outside
 * FILES_REST_URL_PREFIX, no credential). The API routes are catch-all handlers that pick an
 * operation by method and query (`?uploads`, `?uploadId`, `?versions`…), so the document is built
 * from the declarative table OPERATIONS below: one entry per operation variant. Variants sharing a
 * path and method become one OpenAPI operation (OpenAPI has no query-selected operations) whose
 * description lists them. test/openapi.test.ts checks the table against a running server.
 */

type Schema = Record<string, unknown>;
const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });

interface Param {
  name: string;
  in: 'query' | 'header';
  description: string;
  schema?: Schema;
  required?: boolean;
}

interface Variant {
  /** '' for the paths' three resources below; the prefix is added. */
  path: 'collection' | 'bucket' | 'object' | '/healthz' | '/readyz' | '/metrics' | '/openapi.json';
  method: 'get' | 'head' | 'put' | 'post' | 'delete';
  /** The query marker that selects this variant, for the description. */
  selector?: string;
  summary: string;
  /** Authorisation actions checked (token permission factory). */
  actions?: string[];
  params?: Param[];
  body?: { contentType: string; schema: Schema; description: string; required?: boolean }[];
  /** status → description and optional JSON schema. */
  responses: Record<string, { description: string; schema?: Schema; contentType?: string; headers?: Record<string, string> }>;
}

const flagParam = (name: string, description: string): Param => ({ name, in: 'query', description, schema: { type: 'string', allowEmptyValue: true } });
const uuidQuery = (name: string, description: string, required = false): Param => ({
  name, in: 'query', description, required, schema: { type: 'string', format: 'uuid' },
});
const intQuery = (name: string, description: string): Param => ({ name, in: 'query', description, schema: { type: 'integer', minimum: 0 } });

const err = (description: string) => ({ description, schema: ref('Error') });
const NO_BUCKET = err(`${ERRORS.BUCKET_NOT_FOUND.message} (or not visible to the credential)`);
const AUTH = { '401': err(ERRORS.UNAUTHORIZED.message), '403': err(ERRORS.FORBIDDEN.message) };
const UNAVAILABLE = { '503': err(`${ERRORS.DATABASE_UNAVAILABLE.message} (Retry-After: 5), or storage offline`) };

const OPERATIONS: Variant[] = [
  // Buckets
  {
    path: 'collection', method: 'post', summary: 'Create a bucket in the default location', actions: ['location-update'],
    responses: { '200': { description: 'The new bucket', schema: ref('Bucket') }, ...AUTH, '503': err(ERRORS.NO_DEFAULT_LOCATION.message) },
  },
  {
    path: 'bucket', method: 'head', summary: 'Does the bucket exist?', actions: ['bucket-read'],
    responses: { '200': { description: 'It exists' }, '404': { description: 'It does not (no body)' }, ...AUTH },
  },
  {
    path: 'bucket', method: 'get', summary: 'List the latest version of every object (paged)', actions: ['bucket-read'],
    params: [
      intQuery('limit', 'Page size, 1–10000 (default 1000)'),
      { name: 'prefix', in: 'query', description: 'Only keys starting with this', schema: { type: 'string' } },
      { name: 'after', in: 'query', description: 'Keyset cursor from links.next', schema: { type: 'string' } },
    ],
    responses: { '200': { description: 'The bucket and its objects', schema: ref('BucketListing') }, '404': NO_BUCKET, ...AUTH },
  },
  {
    path: 'bucket', method: 'get', selector: 'versions', summary: 'List every version, delete markers included (paged)',
    actions: ['bucket-read', 'bucket-read-versions'],
    params: [flagParam('versions', 'List every version')],
    responses: { '200': { description: 'The bucket and every version', schema: ref('BucketListing') } },
  },
  {
    path: 'bucket', method: 'get', selector: 'uploads', summary: 'List multipart uploads in progress', actions: ['bucket-listmultiparts'],
    params: [flagParam('uploads', 'List multipart uploads')],
    responses: { '200': { description: 'Uploads in progress (a bare array)', schema: { type: 'array', items: ref('MultipartUpload') } } },
  },
  // Objects
  {
    path: 'object', method: 'put', summary: 'Upload: store the body as the new head version', actions: ['bucket-update'],
    params: [
      { name: 'Content-Length', in: 'header', required: true, description: 'Size of the file in bytes (0 is fine)', schema: { type: 'integer', minimum: 0 } },
      { name: 'Content-MD5', in: 'header', description: 'Base64 MD5 of the body (RFC 1864; hex accepted), verified', schema: { type: 'string' } },
      { name: 'Content-Digest', in: 'header', description: 'RFC 9530 md5 or sha-256 of the body, verified (Repr-Digest too)', schema: { type: 'string' } },
      { name: 'X-Invenio-File-Tags', in: 'header', description: 'Tags, a=1&b=two (FILES_REST_FILE_TAGS_HEADER)', schema: { type: 'string' } },
    ],
    body: [
      { contentType: 'application/octet-stream', schema: { type: 'string', format: 'binary' }, description: 'The file', required: true },
      { contentType: 'multipart/form-data', schema: { type: 'object', properties: { file: { type: 'string', format: 'binary' }, _totalSize: { type: 'integer' } } }, description: 'ng-file-upload shape' },
    ],
    responses: {
      '200': { description: 'The new version', schema: ref('ObjectVersion'), headers: { ETag: '"md5:<hex>"' } },
      '400': { description: 'Invalid key, missing Content-Length, checksum mismatch, quota or size exceeded', schema: ref('Error') },
      '403': err(ERRORS.BUCKET_LOCKED.message), '404': NO_BUCKET, '413': err('The request body is too large.'),
    },
  },
  {
    path: 'object', method: 'put', selector: 'uploadId', summary: 'Multipart: upload one part', actions: ['bucket-update'],
    params: [
      uuidQuery('uploadId', 'The multipart upload'),
      intQuery('partNumber', 'Part number, from 0 (`part` works too)'),
    ],
    body: [{ contentType: 'application/octet-stream', schema: { type: 'string', format: 'binary' }, description: 'The part' }],
    responses: {
      '200': { description: 'The part', schema: ref('Part') },
      '404': err(ERRORS.UPLOAD_NOT_FOUND.message), '410': err(ERRORS.MULTIPART_EXPIRED.message),
    },
  },
  {
    path: 'object', method: 'get', summary: "Download the latest version's content", actions: ['object-read'],
    params: [
      flagParam('download', 'Content-Disposition: attachment (download=0: inline)'),
      uuidQuery('versionId', 'That version instead of the latest (object-read-version)'),
      { name: 'Range', in: 'header', description: 'bytes=a-b, one range', schema: { type: 'string' } },
      { name: 'If-None-Match', in: 'header', description: 'Conditional GET', schema: { type: 'string' } },
    ],
    responses: {
      '200': { description: 'The content', contentType: '*/*', schema: { type: 'string', format: 'binary' }, headers: { ETag: '"md5:<hex>"', 'Content-MD5': 'base64', 'Repr-Digest': 'md5=:<base64>:' } },
      '206': { description: 'A range of the content', contentType: '*/*', schema: { type: 'string', format: 'binary' } },
      '304': { description: 'Not modified' },
      '404': err(ERRORS.OBJECT_NOT_FOUND.message), '412': err('Precondition failed'), '416': err('Range not satisfiable'),
    },
  },
  {
    path: 'object', method: 'get', selector: 'uploadId', summary: 'Multipart: the upload and the parts received', actions: ['multipart-read'],
    params: [uuidQuery('uploadId', 'The multipart upload')],
    responses: { '200': { description: 'The upload with its parts', schema: ref('MultipartWithParts') } },
  },
  {
    path: 'object', method: 'head', summary: 'The headers of GET, no body', actions: ['object-read'],
    params: [uuidQuery('versionId', 'That version instead of the latest')],
    responses: { '200': { description: 'Headers only' }, '404': { description: 'No such object (no body)' } },
  },
  {
    path: 'object', method: 'post', selector: 'uploads', summary: 'Multipart: initiate an upload', actions: ['bucket-update'],
    params: [
      flagParam('uploads', 'Initiate'),
      intQuery('size', 'Total size in bytes (or in the JSON body)'),
      intQuery('partSize', 'Size of every part but the last (or in the JSON body)'),
    ],
    body: [{ contentType: 'application/json', schema: { type: 'object', properties: { size: { type: 'integer' }, partSize: { type: 'integer' } } }, description: 'size and partSize' }],
    responses: {
      '200': { description: 'The new upload', schema: ref('MultipartUpload') },
      '400': { description: 'Missing subresource, invalid sizes, quota or size exceeded', schema: ref('Error') },
      '422': { description: 'Malformed query arguments', schema: ref('ValidationError') },
    },
  },
  {
    path: 'object', method: 'post', selector: 'uploadId', summary: 'Multipart: complete the upload (waits for the merge)', actions: ['bucket-update'],
    params: [
      uuidQuery('uploadId', 'The multipart upload'),
      { name: 'Prefer', in: 'header', description: 'respond-async: answer 202 at once', schema: { type: 'string' } },
    ],
    responses: {
      '200': { description: 'Completed: links.object_version is the new version', schema: ref('MultipartUpload') },
      '202': { description: 'Accepted (Prefer: respond-async)', schema: ref('MultipartUpload') },
    },
  },
  {
    path: 'object', method: 'delete', summary: 'Soft delete: a delete marker becomes the head', actions: ['object-delete'],
    responses: { '204': { description: 'Deleted', headers: { 'X-Version-Id': 'the delete marker' } }, '404': err(ERRORS.OBJECT_NOT_FOUND.message) },
  },
  {
    path: 'object', method: 'delete', selector: 'versionId', summary: 'Hard delete of one version and its file', actions: ['object-delete-version'],
    params: [uuidQuery('versionId', 'The version to remove')],
    responses: { '204': { description: 'Removed' }, '409': err('The file is shared with another version (snapshots)') },
  },
  {
    path: 'object', method: 'delete', selector: 'uploadId', summary: 'Multipart: abort the upload', actions: ['multipart-delete'],
    params: [uuidQuery('uploadId', 'The multipart upload')],
    responses: { '204': { description: 'Aborted' } },
  },
  // Operator endpoints, at the server root
  {
    path: '/healthz', method: 'get', summary: 'Liveness: the process is alive',
    responses: { '200': { description: 'Alive', schema: { type: 'object', properties: { status: { type: 'string', enum: ['ok'] } } } } },
  },
  {
    path: '/readyz', method: 'get', summary: 'Readiness: database and storage reachable, migrations current',
    responses: {
      '200': { description: 'Ready', schema: { type: 'object', properties: { status: { type: 'string', enum: ['ready'] } } } },
      '503': err('Not ready, and why'),
    },
  },
  {
    path: '/metrics', method: 'get', summary: 'Prometheus metrics of this process (FILES_REST_METRICS=0 turns it off)',
    responses: { '200': { description: 'Prometheus text exposition format', contentType: 'text/plain', schema: { type: 'string' } } },
  },
  {
    path: '/openapi.json', method: 'get', summary: 'This document',
    responses: { '200': { description: 'OpenAPI 3 document', schema: { type: 'object' } } },
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
    required: ['id', 'size', 'quota_size', 'max_file_size', 'locked', 'created', 'updated', 'links'],
    properties: {
      id: { type: 'string', format: 'uuid' },
      size: { type: 'integer', description: 'Sum of the sizes of the stored versions that have a file' },
      quota_size: { type: 'integer', nullable: true },
      max_file_size: { type: 'integer', nullable: true },
      locked: { type: 'boolean' },
      created: { type: 'string', format: 'date-time' },
      updated: { type: 'string', format: 'date-time' },
      links: {
        type: 'object',
        properties: { self: { type: 'string' }, versions: { type: 'string' }, uploads: { type: 'string' }, next: { type: 'string', description: 'Next page, when more remain' } },
      },
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
      tags: { type: 'object', additionalProperties: { type: 'string' } },
      created: { type: 'string', format: 'date-time' },
      updated: { type: 'string', format: 'date-time' },
      links: { type: 'object', properties: { self: { type: 'string' }, version: { type: 'string' }, uploads: { type: 'string' } } },
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

const PATH_PARAMS: Record<string, Schema[]> = {
  bucket: [{ name: 'bucket_id', in: 'path', required: true, description: 'Bucket id', schema: { type: 'string', format: 'uuid' } }],
  object: [
    { name: 'bucket_id', in: 'path', required: true, description: 'Bucket id', schema: { type: 'string', format: 'uuid' } },
    { name: 'key', in: 'path', required: true, description: 'Object key; may contain `/` and any Unicode, percent-encoded', schema: { type: 'string' } },
  ],
};

/** The document's path for a table entry (the REST paths carry FILES_REST_URL_PREFIX). */
function pathOf(v: Variant, prefix: string): string {
  switch (v.path) {
    case 'collection':
      return `${prefix}/files`;
    case 'bucket':
      return `${prefix}/files/{bucket_id}`;
    case 'object':
      return `${prefix}/files/{bucket_id}/{key}`;
    default:
      return v.path;
  }
}

function responseObject(r: Variant['responses'][string]): Schema {
  const out: Schema = { description: r.description };
  if (r.schema) out.content = { [r.contentType ?? 'application/json']: { schema: r.schema } };
  if (r.headers) out.headers = Object.fromEntries(Object.entries(r.headers).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }]));
  return out;
}

/** Builds the OpenAPI 3.0 document for this configuration (URL prefix, server URL). */
export function buildOpenApi(config: Config, version = '0.1.0'): Record<string, unknown> {
  const prefix = config.urlPrefix;
  const paths: Record<string, Record<string, unknown>> = {};
  const groups = new Map<string, Variant[]>();
  for (const v of OPERATIONS) {
    if (v.path === '/metrics' && !config.metrics) continue;
    const key = `${pathOf(v, prefix)} ${v.method}`;
    groups.set(key, [...(groups.get(key) ?? []), v]);
  }
  for (const [key, variants] of groups) {
    const [path, method] = key.split(' ') as [string, string];
    const plain = variants.find((v) => !v.selector) ?? variants[0]!;
    const rest = variants.filter((v) => v !== plain);
    const params = new Map<string, Schema>();
    for (const v of variants) for (const p of v.params ?? []) if (!params.has(`${p.in}:${p.name}`)) params.set(`${p.in}:${p.name}`, { ...p });
    // A parameter that selects a variant is never required for the operation as a whole.
    if (variants.length > 1) for (const p of params.values()) if (p.in === 'query') p.required = false;
    const responses: Record<string, Schema> = {};
    for (const v of variants) {
      for (const [status, r] of Object.entries(v.responses)) {
        const prev = responses[status];
        if (!prev) {
          responses[status] = responseObject(r);
          continue;
        }
        // Same status from two variants: the JSON bodies are alternatives.
        const a = (prev.content as Record<string, { schema: Schema }> | undefined)?.['application/json']?.schema;
        if (a && r.schema && (r.contentType ?? 'application/json') === 'application/json' && JSON.stringify(a) !== JSON.stringify(r.schema)) {
          const alts = (a.oneOf as Schema[] | undefined) ?? [a];
          prev.content = { 'application/json': { schema: { oneOf: [...alts, r.schema] } } };
        }
        prev.description = `${prev.description as string}; ${r.description}`;
      }
    }
    const rest4xx: Variant['responses'] = variants.some((v) => v.actions?.length) ? { ...AUTH, ...UNAVAILABLE } : {};
    for (const [status, r] of Object.entries(rest4xx)) if (!responses[status]) responses[status] = responseObject(r);
    if (variants.some((v) => v.path === 'bucket' || v.path === 'object') && !responses['404']) responses['404'] = responseObject(NO_BUCKET);
    const body = variants.flatMap((v) => v.body ?? []);
    const op: Record<string, unknown> = {
      operationId: `${method}${path.replace(/[{}]/g, '').split(/[^A-Za-z0-9]+/).filter(Boolean).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}`,
      summary: plain.summary,
      tags: [plain.path.startsWith('/') ? 'operations' : plain.path === 'object' ? 'objects' : 'buckets'],
      parameters: [...(PATH_PARAMS[plain.path] ?? []), ...params.values()],
      responses,
    };
    const lines: string[] = [];
    if (rest.length) {
      lines.push('The query selects the operation:', '');
      for (const v of variants) lines.push(`- ${v.selector ? `\`?${v.selector}\`` : 'no selector'}: ${v.summary}${v.actions ? ` (actions: ${v.actions.join(', ')})` : ''}`);
    } else if (plain.actions) {
      lines.push(`Actions: ${plain.actions.join(', ')}.`);
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
