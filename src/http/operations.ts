import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError, ERRORS, type ErrorCode } from '../errors.js';
import type { ObjectAddress } from './address.js';
import type { HttpDeps } from './deps.js';
import { has, type Query } from './query.js';
import {
  AUTH, err, flagParam, intQuery, NO_BUCKET, ref, uuidQuery, WRITE_CONDITIONS, WRITE_REFUSED,
  type DocEntry, type HttpMethod,
} from './api-doc.js';
import { createBucketHandler, headBucketHandler, listBucketHandler, listBucketsHandler } from './routes/buckets.js';
import { signHandler } from './signed-url.js';
import { deleteHandler, downloadHandler, fixityHandler, putHandler } from './routes/objects.js';
import { abortHandler, completeHandler, initiateHandler, listPartsHandler, listUploadsHandler, uploadPartHandler } from './routes/multipart.js';

/**
 * The operation table of the REST API: one entry per operation variant (resource, method, the query
 * flag that selects it, handler, OpenAPI description). The catch-all routes dispatch through it
 * (dispatch.ts) and /openapi.json is built from it (openapi.ts), so the document lists exactly what
 * the routes do. Selection: the first entry of the method whose selector is in the query, in table
 * order, else the entry without one; a method with no entry is a 405 naming those that have one.
 */

/** What a handler of each resource is given besides the request: nothing, the bucket id, the object address. */
export interface Targets {
  collection: undefined;
  bucket: string;
  object: ObjectAddress;
}
export type Resource = keyof Targets;

export type Handler<T> = (deps: HttpDeps, req: FastifyRequest, reply: FastifyReply, target: T) => Promise<unknown>;

export interface Operation<R extends Resource = Resource> extends DocEntry {
  path: R;
  handler: Handler<Targets[R]>;
}

type AnyOperation = { [R in Resource]: Operation<R> }[Resource];

/** A variant that only refuses: the client asked with the wrong method or without a selector. */
function refuse(code: ErrorCode, allow?: string): Handler<unknown> {
  return async () => {
    throw new AppError(code, {}, allow ? { headers: { allow } } : {});
  };
}

export const OPERATIONS: readonly AnyOperation[] = [
  // Buckets
  {
    path: 'collection', method: 'get', handler: listBucketsHandler,
    doc: {
      summary: 'List the buckets the credential may read (paged)', actions: ['bucket-read'],
      params: [
        intQuery('limit', 'Page size, 1–1000 (default 100)'),
        uuidQuery('after', 'Keyset cursor from links.next'),
      ],
      responses: { '200': { description: 'A page of buckets: contents and links (self, next)', schema: ref('BucketPage') }, ...AUTH },
    },
  },
  {
    path: 'collection', method: 'post', handler: createBucketHandler,
    doc: {
      summary: 'Create a bucket in the default location', actions: ['location-update'],
      responses: { '200': { description: 'The new bucket', schema: ref('Bucket') }, ...AUTH, '503': err(ERRORS.NO_DEFAULT_LOCATION.message) },
    },
  },
  {
    path: 'bucket', method: 'head', handler: headBucketHandler,
    doc: {
      summary: 'Does the bucket exist?', actions: ['bucket-read'],
      responses: { '200': { description: 'It exists' }, '404': { description: 'It does not (no body)' }, ...AUTH },
    },
  },
  {
    path: 'bucket', method: 'get', handler: listBucketHandler,
    doc: {
      summary: 'List the latest version of every object (paged)', actions: ['bucket-read'],
      params: [
        intQuery('limit', 'Page size, 1–10000 (default 1000)'),
        { name: 'prefix', in: 'query', description: 'Only keys starting with this', schema: { type: 'string' } },
        { name: 'after', in: 'query', description: 'Keyset cursor from links.next', schema: { type: 'string' } },
      ],
      responses: { '200': { description: 'The bucket and its objects', schema: ref('BucketListing') }, '404': NO_BUCKET, ...AUTH },
    },
  },
  {
    path: 'bucket', method: 'get', selector: 'uploads', handler: listUploadsHandler,
    doc: {
      summary: 'List multipart uploads in progress', actions: ['bucket-listmultiparts'],
      params: [flagParam('uploads', 'List multipart uploads')],
      responses: { '200': { description: 'Uploads in progress (a bare array)', schema: { type: 'array', items: ref('MultipartUpload') } } },
    },
  },
  {
    // `?versions=0` lists the latest versions only: the handler reads the flag's value.
    path: 'bucket', method: 'get', selector: 'versions', handler: listBucketHandler,
    doc: {
      summary: 'List every version, delete markers included (paged)', actions: ['bucket-read', 'bucket-read-versions'],
      params: [flagParam('versions', 'List every version')],
      responses: { '200': { description: 'The bucket and every version', schema: ref('BucketListing') } },
    },
  },
  // Objects
  {
    path: 'object', method: 'put', handler: putHandler,
    doc: {
      summary: 'Upload: store the body as the new head version', actions: ['bucket-update'],
      params: [
        { name: 'Content-Length', in: 'header', required: true, description: 'Size of the file in bytes (0 is fine)', schema: { type: 'integer', minimum: 0 } },
        { name: 'Content-MD5', in: 'header', description: 'Base64 MD5 of the body (RFC 1864; hex accepted), verified', schema: { type: 'string' } },
        { name: 'Content-Digest', in: 'header', description: 'RFC 9530 md5 or sha-256 of the body, verified (Repr-Digest too)', schema: { type: 'string' } },
        { name: 'X-Invenio-File-Tags', in: 'header', description: 'Tags, a=1&b=two (FILES_REST_FILE_TAGS_HEADER)', schema: { type: 'string' } },
        ...WRITE_CONDITIONS,
      ],
      body: [
        { contentType: 'application/octet-stream', schema: { type: 'string', format: 'binary' }, description: 'The file', required: true },
        { contentType: 'multipart/form-data', schema: { type: 'object', properties: { file: { type: 'string', format: 'binary' }, _totalSize: { type: 'integer' } } }, description: 'ng-file-upload shape' },
      ],
      responses: {
        '200': { description: 'The new version', schema: ref('ObjectVersion'), headers: { ETag: '"md5:<hex>"' } },
        '400': { description: 'Invalid key, missing Content-Length, checksum mismatch, quota or size exceeded', schema: ref('Error') },
        '403': err(ERRORS.BUCKET_LOCKED.message), '404': NO_BUCKET, ...WRITE_REFUSED, '413': err('The request body is too large.'),
      },
    },
  },
  {
    path: 'object', method: 'put', selector: 'uploadId', handler: uploadPartHandler,
    doc: {
      summary: 'Multipart: upload one part', actions: ['bucket-update'],
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
  },
  {
    path: 'object', method: 'get', handler: downloadHandler,
    doc: {
      summary: "Download the latest version's content", actions: ['object-read'],
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
        '404': err(ERRORS.OBJECT_NOT_FOUND.message), '412': err('If-Match / If-Unmodified-Since failed'), '416': err('Range not satisfiable'),
      },
    },
  },
  {
    path: 'object', method: 'get', selector: 'uploads', handler: refuse('METHOD_NOT_ALLOWED', 'POST'),
    doc: { summary: 'Refused: `?uploads` initiates, with POST', refusal: true, responses: { '405': err(`${ERRORS.METHOD_NOT_ALLOWED.message} (Allow: POST)`) } },
  },
  {
    path: 'object', method: 'get', selector: 'uploadId', handler: listPartsHandler,
    doc: {
      summary: 'Multipart: the upload and the parts received', actions: ['multipart-read'],
      params: [uuidQuery('uploadId', 'The multipart upload')],
      responses: { '200': { description: 'The upload with its parts', schema: ref('MultipartWithParts') } },
    },
  },
  {
    path: 'object', method: 'head', handler: downloadHandler,
    doc: {
      summary: 'The headers of GET, no body', actions: ['object-read'],
      params: [uuidQuery('versionId', 'That version instead of the latest')],
      responses: { '200': { description: 'Headers only' }, '404': { description: 'No such object (no body)' } },
    },
  },
  {
    path: 'object', method: 'post', selector: 'sign', handler: signHandler,
    doc: {
      summary: 'A signed URL allowing one download (GET or HEAD) or one upload (PUT) of this object until it expires, without a credential',
      actions: ['object-read', 'object-read-version', 'bucket-update'],
      params: [
        flagParam('sign', 'Sign a URL'),
        { name: 'action', in: 'query', description: 'download (default: object-read, with versionId object-read-version too) or upload (bucket-update; single use)', schema: { type: 'string', enum: ['download', 'upload'] } },
        uuidQuery('versionId', 'A download of that version instead of the head'),
        intQuery('expiresIn', 'Seconds the URL is valid, at most FILES_REST_SIGNED_URL_MAX_EXPIRES (default FILES_REST_SIGNED_URL_EXPIRES)'),
      ],
      responses: {
        '200': { description: 'The signed URL and what it allows', schema: ref('SignedUrl') },
        '404': NO_BUCKET,
        '422': { description: 'Malformed query arguments (expiresIn above the maximum)', schema: ref('ValidationError') },
        '503': err(ERRORS.SERVER_KEY_REQUIRED.message),
      },
    },
  },
  {
    path: 'object', method: 'post', selector: 'uploads', handler: initiateHandler,
    doc: {
      summary: 'Multipart: initiate an upload', actions: ['bucket-update'],
      params: [
        flagParam('uploads', 'Initiate'),
        intQuery('size', 'Total size in bytes (or in the JSON body)'),
        intQuery('partSize', 'Size of every part but the last (or in the JSON body)'),
        ...WRITE_CONDITIONS,
      ],
      body: [{ contentType: 'application/json', schema: { type: 'object', properties: { size: { type: 'integer' }, partSize: { type: 'integer' } } }, description: 'size and partSize' }],
      responses: {
        '200': { description: 'The new upload', schema: ref('MultipartUpload') },
        '400': { description: 'Missing subresource, invalid sizes, quota or size exceeded', schema: ref('Error') },
        ...WRITE_REFUSED,
        '422': { description: 'Malformed query arguments', schema: ref('ValidationError') },
      },
    },
  },
  {
    path: 'object', method: 'post', selector: 'uploadId', handler: completeHandler,
    doc: {
      summary: 'Multipart: complete the upload (waits for the merge)', actions: ['bucket-update'],
      params: [
        uuidQuery('uploadId', 'The multipart upload'),
        { name: 'Prefer', in: 'header', description: 'respond-async: answer 202 at once', schema: { type: 'string' } },
        ...WRITE_CONDITIONS,
      ],
      responses: {
        '200': { description: 'Completed: links.object_version is the new version', schema: ref('MultipartUpload') },
        '202': { description: 'Accepted (Prefer: respond-async)', schema: ref('MultipartUpload') },
        '412': err('completion: refused when asked (the upload stays open) or at the merge, when another write won (the upload is discarded)'),
      },
    },
  },
  {
    path: 'object', method: 'post', handler: refuse('MISSING_SUBRESOURCE'),
    doc: { summary: 'Refused: POST needs `?uploads`, `?uploadId` or `?sign`', refusal: true, responses: { '400': err(ERRORS.MISSING_SUBRESOURCE.message) } },
  },
  {
    path: 'object', method: 'delete', handler: deleteHandler,
    doc: {
      summary: 'Soft delete: a delete marker becomes the head', actions: ['object-delete'],
      responses: { '204': { description: 'Deleted', headers: { 'X-Version-Id': 'the delete marker' } }, '404': err(ERRORS.OBJECT_NOT_FOUND.message) },
    },
  },
  {
    path: 'object', method: 'delete', selector: 'uploads', handler: refuse('METHOD_NOT_ALLOWED', 'POST'),
    doc: { summary: 'Refused: `?uploads` initiates, with POST', refusal: true, responses: { '405': err(`${ERRORS.METHOD_NOT_ALLOWED.message} (Allow: POST)`) } },
  },
  {
    path: 'object', method: 'delete', selector: 'uploadId', handler: abortHandler,
    doc: {
      summary: 'Multipart: abort the upload', actions: ['multipart-delete'],
      params: [uuidQuery('uploadId', 'The multipart upload')],
      responses: { '204': { description: 'Aborted' } },
    },
  },
  {
    path: 'object', method: 'delete', selector: 'versionId', handler: deleteHandler,
    doc: {
      summary: 'Hard delete of one version and its file', actions: ['object-delete-version'],
      params: [uuidQuery('versionId', 'The version to remove')],
      responses: { '204': { description: 'Removed' }, '409': err('The file is shared with another version (snapshots)') },
    },
  },
  {
    path: 'object', method: 'get', selector: 'fixity', handler: fixityHandler,
    doc: {
      summary: "A version's file: its copies, their last check, and its fixity history (every check, failure, repair and replication of each copy)",
      actions: ['object-read'],
      params: [uuidQuery('versionId', 'A version other than the head (needs object-read-version)')],
      responses: { '200': { description: '{file_id, version_id, required_copies, good_copies, copies, events, summary}' }, '404': err(ERRORS.OBJECT_NOT_FOUND.message) },
    },
  },
];

const METHOD_ORDER: readonly HttpMethod[] = ['get', 'head', 'put', 'post', 'delete'];

/**
 * The operation a request selects on a resource: by method, then by the first selector present in
 * the query (table order), else the variant without one. No variant for the method: 405 with Allow.
 */
export function selectOperation<R extends Resource>(resource: R, method: string, q: Query): Operation<R> {
  const ofResource = OPERATIONS.filter((o) => o.path === resource) as unknown as Operation<R>[];
  const m = method.toLowerCase();
  const candidates = ofResource.filter((o) => o.method === m);
  if (candidates.length === 0) {
    const allow = METHOD_ORDER.filter((x) => ofResource.some((o) => o.method === x)).map((x) => x.toUpperCase()).join(', ');
    throw new AppError('METHOD_NOT_ALLOWED', {}, { headers: { allow } });
  }
  const selected = candidates.find((o) => o.selector !== undefined && has(q, o.selector)) ?? candidates.find((o) => o.selector === undefined);
  if (!selected) throw new AppError('MISSING_SUBRESOURCE');
  return selected;
}
