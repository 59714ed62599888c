import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { has, query } from './query.js';

/** Refuses (406) a request whose Accept header rules out JSON. No Accept header is fine. */
export function assertAcceptsJson(req: FastifyRequest): void {
  const accept = req.headers.accept;
  if (!accept) return;
  const ok = accept.split(',').some((part) => {
    const [type, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q && Number(q.slice(2)) === 0) return false;
    return type === 'application/json' || type === '*/*' || type === 'application/*' || type?.endsWith('+json');
  });
  if (!ok) throw new AppError('NOT_ACCEPTABLE');
}

/** Sends JSON; `?prettyprint=1` indents it by two spaces. */
export function sendJson(req: FastifyRequest, reply: FastifyReply, status: number, body: unknown): FastifyReply {
  const q = query(req);
  const pretty = has(q, 'prettyprint') && q.prettyprint !== '' && q.prettyprint !== '0';
  return reply
    .code(status)
    .type('application/json')
    .send(JSON.stringify(body, null, pretty ? 2 : undefined));
}
