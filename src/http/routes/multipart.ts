import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  completionNews,
  abortUpload, completionStatus, getUpload, initiateUpload, listParts, listUploads, requestCompletion, uploadPart,
  type MultipartUpload, type Part,
} from '../../domain/multipart.js';
import type { Bucket } from '../../domain/models.js';
import { AppError, validationError } from '../../errors.js';
import { isoMicros } from '../../util/time.js';
import { Links } from '../links.js';
import { intParam, query, uuidParam } from '../query.js';
import { assertAcceptsJson, sendJson } from '../reply.js';
import type { HttpDeps } from '../app.js';
import type { ObjectAddress } from './objects.js';
import { parsePart } from '../part-adapters.js';

export function multipartJson(u: MultipartUpload, links: Links) {
  const object = links.object(u.bucketId, u.key);
  const out = {
    id: u.id,
    bucket: u.bucketId,
    key: u.key,
    size: u.size,
    part_size: u.partSize,
    last_part_number: u.lastPartNumber,
    last_part_size: u.lastPartSize,
    completed: u.state === 'completing',
    created: isoMicros(u.created),
    updated: isoMicros(u.updated),
    links: { self: `${object}?uploadId=${u.id}`, object, bucket: links.bucket(u.bucketId) } as Record<string, string>,
  };
  if (u.versionId) out.links.object_version = `${object}?versionId=${u.versionId}`;
  return out;
}

export function partJson(p: Part) {
  return {
    part_number: p.partNumber,
    start_byte: p.startByte,
    end_byte: p.endByte,
    checksum: p.checksum,
    created: isoMicros(p.created),
    updated: isoMicros(p.updated),
  };
}

/** Reads a small JSON body (multipart init may carry size and partSize there). */
async function readJsonBody(req: FastifyRequest): Promise<Record<string, unknown>> {
  if (!/^application\/json/i.test(req.headers['content-type'] ?? '')) return {};
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req.raw as AsyncIterable<Buffer>) {
    n += c.length;
    if (n > 64 * 1024) throw new AppError('INVALID_JSON_BODY');
    chunks.push(c);
  }
  if (n === 0) return {};
  try {
    const v = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    throw new AppError('INVALID_JSON_BODY');
  }
}

function sizeArg(q: ReturnType<typeof query>, body: Record<string, unknown>, name: string): number {
  const fromQuery = intParam(q, name);
  if (fromQuery !== null) return fromQuery;
  const v = body[name];
  if (v === undefined || v === null || v === '') throw new AppError('MISSING_QUERY_ARG', { name });
  const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < 0) throw validationError(name, 'Not a valid integer.');
  return n;
}


export function multipartHandlers(deps: HttpDeps) {
  const { ctx, auth } = deps;

  async function load(req: FastifyRequest, addr: ObjectAddress): Promise<MultipartUpload> {
    const id = uuidParam(query(req), 'uploadId');
    if (!id) throw validationError('uploadId', 'Not a valid UUID.');
    return getUpload(ctx.db, addr.bucketId, addr.key, id);
  }

  return {
    async listUploads(req: FastifyRequest, reply: FastifyReply, bucket: Bucket, links: Links) {
      const limit = intParam(query(req), 'limit', { min: 1, max: 10000 }) ?? 1000;
      const uploads = await listUploads(ctx.db, bucket.id, limit);
      return sendJson(req, reply, 200, uploads.map((u) => multipartJson(u, links)));
    },

    async initiate(req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
      assertAcceptsJson(req);
      await auth.require(req, 'bucket-update', { type: 'bucket', bucketId: addr.bucketId });
      const q = query(req);
      const body = await readJsonBody(req);
      const size = sizeArg(q, body, 'size');
      const partSize = sizeArg(q, body, 'partSize');
      const u = await initiateUpload(ctx, { bucketId: addr.bucketId, key: addr.key, size, partSize });
      return sendJson(req, reply, 200, multipartJson(u, new Links(ctx.config, req)));
    },

    async uploadPart(req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
      assertAcceptsJson(req);
      await auth.require(req, 'bucket-update', { type: 'bucket', bucketId: addr.bucketId });
      const u = await load(req, addr);
      const part = await parsePart(req, deps.partAdapters);
      const abort = new AbortController();
      const onClose = () => {
        if (!req.raw.complete) abort.abort();
      };
      req.raw.once('close', onClose);
      try {
        const p = await uploadPart(ctx, u, { partNumber: part.partNumber, source: part.stream, declaredSize: part.size, signal: abort.signal });
        reply.header('etag', `"${p.checksum}"`);
        return sendJson(req, reply, 200, partJson(p));
      } finally {
        req.raw.off('close', onClose);
      }
    },

    async listParts(req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
      assertAcceptsJson(req);
      const u = await load(req, addr);
      await auth.require(req, 'multipart-read', { type: 'multipart', bucketId: addr.bucketId, id: u.id });
      const parts = await listParts(ctx.db, u);
      return sendJson(req, reply, 200, { ...multipartJson(u, new Links(ctx.config, req)), parts: parts.map(partJson) });
    },

    /**
     * Completion. The merge runs in the worker; the response waits for it. For the first seconds
     * nothing is sent, so the status line can still tell the truth (200, or the error's status).
     * After that, 200 is sent and a space every 2 s keeps proxies from timing out, as the reference
     * does; only then can a late failure appear in the body. `Prefer: respond-async` → 202 at once.
     */
    async complete(req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
      assertAcceptsJson(req);
      await auth.require(req, 'bucket-update', { type: 'bucket', bucketId: addr.bucketId });
      const u = await requestCompletion(ctx, await load(req, addr));
      const links = new Links(ctx.config, req);
      if (/respond-async/i.test(String(req.headers.prefer ?? ''))) {
        return sendJson(req, reply, 202, multipartJson(u, links));
      }
      const deadline = Date.now() + 600_000;
      const quietUntil = Date.now() + 5_000;
      let streaming = false;
      let lastSpace = 0;
      let delay = 20;
      for (;;) {
        const st = await completionStatus(ctx.db, u);
        if (st.state === 'completed' || st.state === 'failed' || st.state === 'gone') {
          const ok = st.state === 'completed';
          const message = st.state === 'failed' ? `Multipart completion failed: ${st.error}.` : 'Multipart upload was removed before it completed.';
          const body = ok ? multipartJson(u, links) : { status: 500, message };
          if (!streaming) {
            if (!ok) throw new AppError('INTERNAL', {}, { cause: new Error(message) });
            return sendJson(req, reply, 200, body);
          }
          reply.raw.end(JSON.stringify(body));
          return reply;
        }
        if (Date.now() > deadline) {
          if (!streaming) return sendJson(req, reply, 202, multipartJson(u, links));
          reply.raw.end(JSON.stringify({ status: 504, message: 'Completion is still running; poll GET ?uploadId or the object.' }));
          return reply;
        }
        if (!streaming && Date.now() > quietUntil) {
          streaming = true;
          reply.hijack();
          reply.raw.writeHead(200, { 'content-type': 'application/json', 'x-request-id': String(req.id) });
        }
        if (streaming && Date.now() - lastSpace >= 2000) {
          reply.raw.write(' ');
          lastSpace = Date.now();
        }
        await completionNews(u.id, delay);
        delay = Math.min(delay * 2, 250);
      }
    },

    async abort(req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
      const u = await load(req, addr);
      await auth.require(req, 'multipart-delete', { type: 'multipart', bucketId: addr.bucketId, id: u.id });
      await abortUpload(ctx, u.id, { checkLock: true });
      return reply.code(204).send();
    },
  };
}

export type MultipartHandlers = ReturnType<typeof multipartHandlers>;

