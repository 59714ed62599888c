import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { formFile as readForm, type FormFile } from './form-file.js';
import type { UploadAdapter } from './upload.js';
import type { PartAdapter } from './part-adapters.js';

/** ng-file-upload's form: its fields (few and short) before a `file` part. */
const formFile = (req: FastifyRequest) => readForm(req.raw, { fields: 50, fieldSize: 1024 });

function intField(fields: Record<string, string>, name: string): number {
  const v = fields[name];
  if (v === undefined || !/^\d+$/.test(v)) throw new AppError('INVALID_UPLOAD_REQUEST', { reason: `form field ${name} is missing or not a number` });
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new AppError('INVALID_UPLOAD_REQUEST', { reason: `form field ${name} is too large` });
  return n;
}

/** Reads what the fields say; a refusal discards the file part (it is never read). */
function withFile<T>(f: FormFile, read: (fields: Record<string, string>) => T): T {
  try {
    return read(f.fields);
  } catch (e) {
    f.stream.destroy();
    throw e;
  }
}

const isForm = (req: FastifyRequest) => /^multipart\/form-data/i.test(req.headers['content-type'] ?? '');

/** ng-file-upload plain upload: form fields `_totalSize` and a `file` part. */
export const ngFileUploadAdapter: UploadAdapter = {
  name: 'ng-file-upload',
  async parse(req) {
    if (!isForm(req)) return null;
    const f = await formFile(req);
    const size = withFile(f, (fields) => intField(fields, '_totalSize'));
    return { stream: f.stream, size, contentType: f.mimeType };
  },
};

/** ng-file-upload chunk: form fields `_chunkNumber` (zero-based part) and `_currentChunkSize`, and a `file` part. */
export const ngFileUploadPartAdapter: PartAdapter = {
  name: 'ng-file-upload',
  async parse(req) {
    if (!isForm(req)) return null;
    const f = await formFile(req);
    return withFile(f, (fields) => {
      if (fields._chunkNumber === undefined) throw new AppError('NO_PART_DETECTED');
      return { partNumber: intField(fields, '_chunkNumber'), stream: f.stream, size: intField(fields, '_currentChunkSize'), contentType: f.mimeType };
    });
  },
};
