import type { Readable } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { Busboy } from '@fastify/busboy';
import { AppError } from '../errors.js';
import type { UploadAdapter } from './upload.js';
import type { PartAdapter } from './part-adapters.js';

function makeBusboy(req: FastifyRequest) {
  return Busboy({ headers: req.headers as { 'content-type': string }, limits: { fields: 50, fieldSize: 1024, files: 1 } });
}

interface FormFile {
  fields: Record<string, string>;
  stream: Readable;
  mimeType: string | undefined;
}

/**
 * Streams a multipart/form-data body until its `file` part begins, collecting the fields sent before
 * it (ng-file-upload sends its fields first). The file part is returned as a stream, never buffered.
 */
function formFile(req: FastifyRequest): Promise<FormFile> {
  return new Promise((resolve, reject) => {
    let bb: ReturnType<typeof makeBusboy>;
    try {
      bb = makeBusboy(req);
    } catch (e) {
      reject(new AppError('INVALID_UPLOAD_REQUEST', { reason: (e as Error).message }));
      return;
    }
    const fields: Record<string, string> = {};
    let found = false;
    bb.on('field', (name: string, value: string) => {
      fields[name] = value;
    });
    bb.on('file', (name: string, stream: Readable, _filename: string, _enc: string, mimeType: string) => {
      if (name !== 'file' || found) {
        stream.resume();
        return;
      }
      found = true;
      resolve({ fields, stream, mimeType });
    });
    bb.on('error', (e: Error) => (found ? undefined : reject(new AppError('INVALID_UPLOAD_REQUEST', { reason: e.message }))));
    bb.on('finish', () => {
      if (!found) reject(new AppError('INVALID_UPLOAD_REQUEST', { reason: "the form has no 'file' part" }));
    });
    req.raw.pipe(bb);
  });
}

function intField(fields: Record<string, string>, name: string): number {
  const v = fields[name];
  if (v === undefined || !/^\d+$/.test(v)) throw new AppError('INVALID_UPLOAD_REQUEST', { reason: `form field ${name} is missing or not a number` });
  return Number(v);
}

const isForm = (req: FastifyRequest) => /^multipart\/form-data/i.test(req.headers['content-type'] ?? '');

/** ng-file-upload plain upload: form fields `_totalSize` and a `file` part. */
export const ngFileUploadAdapter: UploadAdapter = {
  name: 'ng-file-upload',
  async parse(req) {
    if (!isForm(req)) return null;
    const f = await formFile(req);
    return { stream: f.stream, size: intField(f.fields, '_totalSize'), contentType: f.mimeType };
  },
};

/** ng-file-upload chunk: form fields `_chunkNumber` (zero-based part) and `_currentChunkSize`, and a `file` part. */
export const ngFileUploadPartAdapter: PartAdapter = {
  name: 'ng-file-upload',
  async parse(req) {
    if (!isForm(req)) return null;
    const f = await formFile(req);
    if (f.fields._chunkNumber === undefined) throw new AppError('NO_PART_DETECTED');
    return { partNumber: intField(f.fields, '_chunkNumber'), stream: f.stream, size: intField(f.fields, '_currentChunkSize'), contentType: f.mimeType };
  },
};
