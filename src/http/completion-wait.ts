import type { FastifyReply, FastifyRequest } from 'fastify';
import type { DomainContext } from '../domain/context.js';
import { completionNews, completionOutcome, type CompletionStatus, type MultipartUpload } from '../domain/multipart.js';
import { AppError, isAppError } from '../errors.js';
import type { Links } from './links.js';
import { sendJson } from './reply.js';
import { multipartJson } from './serializers.js';

/**
 * Waits for a requested completion and answers it. The merge runs in the worker; the response waits
 * for it. For the first seconds nothing is sent, so the status line can still tell the truth (200, or
 * the error's status). After that, 200 is sent and a space every 2 s keeps proxies from timing out, as
 * the reference does; only then can a late failure appear in the body.
 */
export async function answerCompletion(ctx: DomainContext, req: FastifyRequest, reply: FastifyReply, u: MultipartUpload, links: Links): Promise<FastifyReply> {
  const deadline = Date.now() + 600_000;
  const quietUntil = Date.now() + 5_000;
  let streaming = false;
  let lastSpace = 0;
  let delay = 20;
  for (;;) {
    let st: CompletionStatus;
    try {
      st = await completionOutcome(ctx, u);
    } catch (e) {
      // The version exists but the copies this server waits for could not be made (COPIES_NOT_MADE).
      if (!streaming || !isAppError(e)) throw e;
      reply.raw.end(JSON.stringify({ status: e.status, message: e.message }));
      return reply;
    }
    if (st.state === 'refused') {
      // The precondition failed at the merge: another write made the head first.
      if (!streaming) throw st.refusal;
      reply.raw.end(JSON.stringify({ status: st.refusal.status, message: st.refusal.message }));
      return reply;
    }
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
}
