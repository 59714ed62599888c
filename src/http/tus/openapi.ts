import { ERRORS } from '../../errors.js';
import { TUS_EXTENSIONS, TUS_VERSION } from './headers.js';

type Schema = Record<string, unknown>;

const header = (name: string, description: string, required = false): Schema => ({ name, in: 'header', description, required, schema: { type: 'string' } });
const error = (description: string): Schema => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } });
const headers = (names: Record<string, string>): Schema => Object.fromEntries(Object.entries(names).map(([h, d]) => [h, { description: d, schema: { type: 'string' } }]));

const TUS_RESUMABLE = header('Tus-Resumable', `Always ${TUS_VERSION}`, true);
const BUCKET = { name: 'bucket_id', in: 'path', required: true, description: 'Bucket id', schema: { type: 'string', format: 'uuid' } };
const UPLOAD = { name: 'upload_id', in: 'path', required: true, description: 'Upload id (from Location)', schema: { type: 'string', format: 'uuid' } };
const COMMON = {
  '401': error(ERRORS.UNAUTHORIZED.message),
  '403': error(`${ERRORS.FORBIDDEN.message} Or ${ERRORS.BUCKET_LOCKED.message}`),
  '404': error(`${ERRORS.BUCKET_NOT_FOUND.message} Or the upload is unknown (finished, terminated, swept).`),
  '412': error(ERRORS.TUS_VERSION_UNSUPPORTED.message),
};
const STATE = headers({ 'Upload-Offset': 'Bytes received and durable', 'Upload-Length': 'The length, when known', 'Upload-Expires': 'When the upload expires (HTTP date)' });

/** The tus door's paths for /openapi.json (tag `tus`): hand-written, the door has its own routes. */
export function tusPaths(prefix: string): Record<string, Record<string, unknown>> {
  const discovery = {
    operationId: 'optionsTus', summary: 'tus discovery', tags: ['tus'], security: [], parameters: [BUCKET],
    responses: { '204': { description: 'Capabilities', headers: headers({ 'Tus-Version': TUS_VERSION, 'Tus-Extension': TUS_EXTENSIONS.join(','), 'Tus-Checksum-Algorithm': 'md5,sha1,sha256', 'Tus-Max-Size': "The bucket's maximum file size, when set" }) } },
  };
  return {
    [`${prefix}/tus/{bucket_id}/`]: {
      options: discovery,
      post: {
        operationId: 'postTusBucket', summary: 'Create a resumable upload (tus creation, creation-with-upload, creation-defer-length)', tags: ['tus'],
        description: 'Actions: bucket-update. The object key is Upload-Metadata `key` (else `filename`, `name`).',
        parameters: [BUCKET, TUS_RESUMABLE, header('Upload-Length', 'Total bytes'), header('Upload-Defer-Length', '1: the length comes later'), header('Upload-Metadata', 'key, contentType … (base64 values)', true)],
        requestBody: { required: false, description: 'The first bytes (creation-with-upload)', content: { 'application/offset+octet-stream': { schema: { type: 'string', format: 'binary' } } } },
        responses: { '201': { description: 'Created', headers: headers({ Location: 'The upload URL', 'Upload-Offset': 'Bytes received', 'Upload-Expires': 'Expiry (HTTP date)' }) }, '400': error('Invalid header, key, quota or maximum file size'), ...COMMON, '501': error(ERRORS.RESUMABLE_LOCATION_UNSUPPORTED.message) },
      },
    },
    [`${prefix}/tus/{bucket_id}/{upload_id}`]: {
      options: { ...discovery, operationId: 'optionsTusUpload', parameters: [BUCKET, UPLOAD] },
      head: {
        operationId: 'headTusUpload', summary: 'The offset of an upload', tags: ['tus'], description: 'Actions: bucket-update.', parameters: [BUCKET, UPLOAD, TUS_RESUMABLE],
        responses: { '200': { description: 'The state (no body)', headers: STATE }, ...COMMON, '410': error(ERRORS.RESUMABLE_EXPIRED.message) },
      },
      patch: {
        operationId: 'patchTusUpload', summary: 'Append bytes at the offset; the last append creates the object version', tags: ['tus'], description: 'Actions: bucket-update.',
        parameters: [BUCKET, UPLOAD, TUS_RESUMABLE, header('Upload-Offset', 'Where these bytes go: the current offset', true), header('Upload-Checksum', '<md5|sha1|sha256> <base64 digest> of this body'), header('Upload-Length', 'The deferred length')],
        requestBody: { required: true, description: 'The bytes', content: { 'application/offset+octet-stream': { schema: { type: 'string', format: 'binary' } } } },
        responses: {
          '204': { description: 'Stored and durable', headers: { ...STATE, ...headers({ 'X-Version-Id': 'The new version, on the last append' }) } }, ...COMMON,
          '409': error(ERRORS.UPLOAD_OFFSET_MISMATCH.message), '410': error(ERRORS.RESUMABLE_EXPIRED.message), '413': error(ERRORS.UPLOAD_LENGTH_EXCEEDED.message),
          '415': error(ERRORS.TUS_CONTENT_TYPE.message), '423': error(ERRORS.RESUMABLE_BUSY.message), '460': error(ERRORS.TUS_CHECKSUM_MISMATCH.message),
        },
      },
      delete: {
        operationId: 'deleteTusUpload', summary: 'Terminate an upload (its file and reservation go)', tags: ['tus'], description: 'Actions: bucket-update.', parameters: [BUCKET, UPLOAD, TUS_RESUMABLE],
        responses: { '204': { description: 'Terminated' }, ...COMMON },
      },
    },
  };
}
