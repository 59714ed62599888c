import { ERRORS } from '../errors.js';

/**
 * The pieces of an operation's OpenAPI description: what an entry of the operation table
 * (operations.ts) says about itself, and the helpers the table and openapi.ts share.
 */

export type Schema = Record<string, unknown>;
export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });

export interface Param {
  name: string;
  in: 'query' | 'header';
  description: string;
  schema?: Schema;
  required?: boolean;
  /** A query flag sent without a value (`?uploads`): a property of the parameter, never of its schema. */
  allowEmptyValue?: boolean;
}

export interface ResponseDoc {
  description: string;
  schema?: Schema;
  contentType?: string;
  headers?: Record<string, string>;
}

/** What the document says about one operation variant. */
export interface OperationDoc {
  summary: string;
  /** Authorisation actions checked (token permission factory). */
  actions?: string[];
  params?: Param[];
  body?: { contentType: string; schema: Schema; description: string; required?: boolean }[];
  /** status → description and optional schema (JSON unless `contentType` says otherwise). */
  responses: Record<string, ResponseDoc>;
  /** The variant only refuses (a 4xx naming the right method or query): listed, never the operation's summary. */
  refusal?: boolean;
}

export type HttpMethod = 'get' | 'head' | 'put' | 'post' | 'delete';
/** The admin endpoints (routes/admin.ts), under FILES_REST_URL_PREFIX. */
export type AdminDocPath =
  | 'admin'
  | 'admin/locations'
  | 'admin/migrations'
  | 'admin/tasks'
  | 'admin/tasks/failed/retry'
  | 'admin/tasks/{task_id}'
  | 'admin/tasks/{task_id}/retry';
/** The three REST resources and the admin endpoints (under FILES_REST_URL_PREFIX), or an operator path at the server root. */
export type DocPath = 'collection' | 'bucket' | 'object' | AdminDocPath | '/healthz' | '/readyz' | '/metrics' | '/openapi.json';

/** One entry of the document: a path, a method, the query marker that selects the variant, and its description. */
export interface DocEntry {
  path: DocPath;
  method: HttpMethod;
  /** The query parameter whose presence selects this variant (`uploads` for `?uploads`). */
  selector?: string;
  doc: OperationDoc;
}

export const flagParam = (name: string, description: string): Param => ({ name, in: 'query', description, allowEmptyValue: true, schema: { type: 'string' } });
export const uuidQuery = (name: string, description: string, required = false): Param => ({
  name, in: 'query', description, required, schema: { type: 'string', format: 'uuid' },
});
export const intQuery = (name: string, description: string): Param => ({ name, in: 'query', description, schema: { type: 'integer', minimum: 0 } });

export const err = (description: string): ResponseDoc => ({ description, schema: ref('Error') });
/** If-Match / If-None-Match on a write (PUT, multipart initiation and completion). */
export const WRITE_CONDITIONS: Param[] = [
  { name: 'If-None-Match', in: 'header', description: '`*`: only if the key has no current version (create-if-absent); or ETags it must not have', schema: { type: 'string' } },
  { name: 'If-Match', in: 'header', description: '`*` or the ETags (`"md5:<hex>"`) the current version must have (optimistic concurrency)', schema: { type: 'string' } },
];
export const WRITE_REFUSED = { '412': err('Precondition failed: the If-Match / If-None-Match condition does not hold; nothing is written') };
export const NO_BUCKET = err(`${ERRORS.BUCKET_NOT_FOUND.message} (or not visible to the credential)`);
export const AUTH = { '401': err(ERRORS.UNAUTHORIZED.message), '403': err(ERRORS.FORBIDDEN.message) };
export const UNAVAILABLE = { '503': err(`${ERRORS.DATABASE_UNAVAILABLE.message} (Retry-After: 5), or storage offline`) };
