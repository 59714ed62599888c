import { PassThrough, type Readable } from 'node:stream';
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

const malformed = (e: Error) => new AppError('INVALID_UPLOAD_REQUEST', { reason: e.message.replace(/\.$/, '') });

/**
 * Streams a multipart/form-data body until its `file` part begins, collecting the fields sent before
 * it (ng-file-upload sends its fields first). The file part is returned as a stream, never buffered.
 *
 * Every emitter here has an error handler: a form cut short (or a client gone) rejects the promise
 * before the file part starts, and afterwards fails the returned stream with a 400 refusal
 * (INVALID_UPLOAD_REQUEST, CLIENT_DISCONNECTED) that the upload passes on; nothing is left to throw.
 */
function formFile(req: FastifyRequest): Promise<FormFile> {
  return new Promise((resolve, reject) => {
    let bb: ReturnType<typeof makeBusboy>;
    try {
      bb = makeBusboy(req);
    } catch (e) {
      reject(malformed(e as Error));
      return;
    }
    const fields: Record<string, string> = {};
    // The file part as handed out: busboy's own stream errors are turned into refusals here.
    const out = new PassThrough();
    // The consumer may attach its handlers later (after a database round trip): never emit unheard.
    out.on('error', () => {});
    let found = false;
    let failed = false;
    const fail = (err: AppError) => {
      if (!found) return reject(err);
      if (failed || out.writableFinished || out.destroyed) return;
      failed = true;
      // An error emitted before anyone reads would be missed by a consumer that pipes the stream
      // afterwards (its pipe would then wait forever): deliver it once reading starts.
      if (out.readableFlowing) return void out.destroy(err);
      const deliver = () => out.destroy(err);
      out.once('resume', deliver);
      out.on('newListener', (event) => {
        if (event === 'readable') process.nextTick(deliver);
      });
    };
    bb.on('field', (name: string, value: string) => {
      fields[name] = value;
    });
    bb.on('file', (name: string, stream: Readable, _filename: string, _enc: string, mimeType: string) => {
      stream.on('error', (e: Error) => fail(malformed(e)));
      if (name !== 'file' || found) {
        stream.resume();
        return;
      }
      found = true;
      // The file ends only once the whole form has been parsed: a form cut short after its file part
      // (no closing delimiter) is refused too, and no byte of it is stored.
      stream.pipe(out, { end: false });
      stream.once('end', () => {
        fileEnded = true;
        if (formEnded && !failed) out.end();
      });
      resolve({ fields, stream: out, mimeType });
    });
    let fileEnded = false;
    let formEnded = false;
    bb.on('error', (e: Error) => fail(malformed(e)));
    bb.on('finish', () => {
      formEnded = true;
      if (!found) reject(new AppError('INVALID_UPLOAD_REQUEST', { reason: "the form has no 'file' part" }));
      else if (fileEnded && !failed) out.end();
    });
    const raw = req.raw;
    const onClose = () => {
      if (!raw.complete) fail(new AppError('CLIENT_DISCONNECTED'));
      raw.unpipe(bb);
    };
    raw.once('close', onClose);
    raw.on('error', () => fail(new AppError('CLIENT_DISCONNECTED')));
    raw.pipe(bb);
  });
}

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
