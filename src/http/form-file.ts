/**
 * A multipart/form-data upload read as browsers and form-posting clients send it: the fields before
 * the `file` part, then the file part as a stream, never buffered. Used by the REST door's
 * ng-file-upload adapters and the S3 door's PostObject.
 */
import type { IncomingMessage } from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { Busboy } from '@fastify/busboy';
import { AppError } from '../errors.js';

export interface FormFile {
  /** The fields sent before the file part, by name as sent (a repeated one: its last value). */
  fields: Record<string, string>;
  stream: Readable;
  /** The file part's own Content-Type and file name, when it gave them. */
  mimeType: string | undefined;
  filename: string | undefined;
}

export interface FormLimits {
  /** Most fields before the file. */
  fields: number;
  /** Longest field value, bytes: a longer one is refused (INVALID_UPLOAD_REQUEST), never cut. */
  fieldSize: number;
  /**
   * Whether the part named `file` is the file whatever its headers say (S3's PostObject), rather than
   * any part with a file name (busboy's default, as ng-file-upload sends it).
   */
  fileByName?: boolean;
}

const malformed = (e: Error) => new AppError('INVALID_UPLOAD_REQUEST', { reason: e.message.replace(/\.$/, '') });

/**
 * Streams a multipart/form-data body until its `file` part begins, collecting the fields sent before
 * it. The file part is returned as a stream; fields after it are not read.
 *
 * Every emitter here has an error handler: a form cut short (or a client gone) rejects the promise
 * before the file part starts, and afterwards fails the returned stream with a 400 refusal
 * (INVALID_UPLOAD_REQUEST, CLIENT_DISCONNECTED) that the upload passes on; nothing is left to throw.
 */
export function formFile(raw: IncomingMessage, limits: FormLimits): Promise<FormFile> {
  return new Promise((resolve, reject) => {
    let bb: ReturnType<typeof Busboy>;
    try {
      bb = Busboy({
        headers: raw.headers as { 'content-type': string },
        limits: { fields: limits.fields, fieldSize: limits.fieldSize, files: 1 },
        ...(limits.fileByName ? { isPartAFile: (name: string | undefined) => name === 'file' } : {}),
      });
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
    bb.on('field', (name: string, value: string, nameTruncated: boolean, valueTruncated: boolean) => {
      if (found) return;
      if (nameTruncated || valueTruncated) return fail(new AppError('INVALID_UPLOAD_REQUEST', { reason: `form field ${name.slice(0, 100)} is longer than ${limits.fieldSize} bytes` }));
      fields[name] = value;
    });
    bb.on('fieldsLimit', () => fail(new AppError('INVALID_UPLOAD_REQUEST', { reason: `the form has more than ${limits.fields} fields` })));
    bb.on('file', (name: string, stream: Readable, filename: string | undefined, _enc: string, mimeType: string | undefined) => {
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
      resolve({ fields: { ...fields }, stream: out, mimeType: mimeType || undefined, filename: filename || undefined });
    });
    let fileEnded = false;
    let formEnded = false;
    bb.on('error', (e: Error) => fail(malformed(e)));
    bb.on('finish', () => {
      formEnded = true;
      if (!found) reject(new AppError('INVALID_UPLOAD_REQUEST', { reason: "the form has no 'file' part" }));
      else if (fileEnded && !failed) out.end();
    });
    const onClose = () => {
      if (!raw.complete) fail(new AppError('CLIENT_DISCONNECTED'));
      raw.unpipe(bb);
    };
    raw.once('close', onClose);
    raw.on('error', () => fail(new AppError('CLIENT_DISCONNECTED')));
    raw.pipe(bb);
  });
}
