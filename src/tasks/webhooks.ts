import { createHmac, randomUUID } from 'node:crypto';
import type { DomainContext } from '../domain/context.js';
import type { ObjectVersion } from '../domain/models.js';
import type { SignalDetailsMap, SignalName } from '../domain/signals.js';
import type { OutboxEvent } from '../domain/outbox.js';
import { isoMicros } from '../util/time.js';
import type { TaskDefinition } from './worker.js';
import type { WebhookDelivery } from '../domain/jobs.js';

export const WEBHOOK_TASK = 'deliver-webhook' as const;
/** Header carrying `sha256=<hex HMAC-SHA256 of the raw body, keyed with FILES_REST_WEBHOOK_SECRET>`. */
export const SIGNATURE_HEADER = 'x-files-rest-signature';
const TIMEOUT_MS = 10_000;

/** One delivery, as stored in the task queue: the exact bytes and signature sent on every attempt. */
export type { WebhookDelivery } from '../domain/jobs.js';

/** The JSON body of a delivery. */
export interface WebhookBody {
  id: string;
  event: SignalName;
  /** When the signal fired (ISO 8601, UTC). */
  created: string;
  object: {
    bucket_id: string;
    key: string;
    version_id: string;
    file_id: string | null;
    is_head: boolean;
    delete_marker: boolean;
    size: number | null;
    checksum: string | null;
    mimetype: string | null;
    created: string;
    updated: string;
  };
  /** file-deleted: 'soft' or 'hard'. */
  kind?: 'soft' | 'hard';
  /** file-downloaded: bytes served. */
  bytes?: number;
}

export function signBody(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

function objectJson(v: ObjectVersion): WebhookBody['object'] {
  return {
    bucket_id: v.bucketId,
    key: v.key,
    version_id: v.versionId,
    file_id: v.fileId,
    is_head: v.isHead,
    delete_marker: v.fileId === null,
    size: v.file ? v.file.size : null,
    checksum: v.file ? v.file.checksum : null,
    mimetype: v.mimetype,
    created: isoMicros(v.created),
    updated: isoMicros(v.updated),
  };
}

export function webhookBody<N extends SignalName>(event: N, details: SignalDetailsMap[N], now = Date.now()): WebhookBody {
  const body: WebhookBody = { id: randomUUID(), event, created: new Date(now).toISOString(), object: objectJson(details.obj) };
  if (details.kind !== undefined) body.kind = details.kind;
  if (typeof details.bytes === 'number') body.bytes = details.bytes;
  return body;
}

/**
 * Turns the events chosen by FILES_REST_WEBHOOK_EVENTS into delivery tasks in the durable queue,
 * so a service in another process hears of them even if it is down for a while. Uploads and
 * deletes are queued through the outbox, inside the transaction that makes the change: the
 * delivery commits with it or not at all. A download changes nothing, so its delivery is queued
 * when its signal fires. Does nothing when FILES_REST_WEBHOOK_URL is unset. Returns a function
 * that disconnects.
 */
export function connectWebhooks(ctx: DomainContext): () => void {
  const { webhookUrl: url, webhookSecret: secret, webhookEvents } = ctx.config;
  if (url === null || secret === null) return () => {};
  const delivery = <N extends SignalName>(event: N, details: SignalDetailsMap[N]): WebhookDelivery => {
    const body = webhookBody(event, details);
    const json = JSON.stringify(body);
    return { url, delivery: body.id, event, body: json, signature: signBody(secret, json) };
  };
  const off: Array<() => void> = [];
  if (ctx.outbox) {
    const changes = webhookEvents.filter((e): e is OutboxEvent => e !== 'file-downloaded');
    off.push(
      ctx.outbox.add(async (tx, event, details) => {
        if (!changes.includes(event)) return;
        await ctx.queue.enqueue(tx, WEBHOOK_TASK, delivery(event, details));
      }),
    );
    // Deliveries committed with their change: wake the worker once the change is committed.
    for (const event of changes) off.push(ctx.signals.connect(event, () => ctx.queue.wake()));
  }
  if (webhookEvents.includes('file-downloaded')) {
    off.push(
      ctx.signals.connect('file-downloaded', async (_name, _sender, details) => {
        await ctx.queue.enqueue(ctx.db, WEBHOOK_TASK, delivery('file-downloaded', details));
        ctx.queue.wake();
      }),
    );
  }
  return () => off.forEach((f) => f());
}

/**
 * Delivers one webhook: POST of the stored body with its signature. Any answer but 2xx (redirects
 * included), a timeout or a connection error fails the attempt, and the worker retries it with
 * backoff (2 s, 4 s, 8 s, … up to 10 minutes; 10 attempts in all).
 */
export function webhookTask(): TaskDefinition<typeof WEBHOOK_TASK> {
  return {
    name: WEBHOOK_TASK,
    leaseSeconds: 60,
    async run(d, { signal, log, task }) {
      const res = await fetch(d.url, {
        method: 'POST',
        redirect: 'manual',
        signal: AbortSignal.any([signal, AbortSignal.timeout(TIMEOUT_MS)]),
        headers: {
          'content-type': 'application/json',
          'user-agent': 'files-rest-webhook',
          'x-files-rest-event': d.event,
          'x-files-rest-delivery': d.delivery,
          'x-files-rest-attempt': String(task.attempts),
          [SIGNATURE_HEADER]: d.signature,
        },
        body: d.body,
      });
      await res.body?.cancel().catch(() => {});
      if (res.status < 200 || res.status > 299) throw new Error(`webhook ${d.url} answered ${res.status}`);
      log.debug({ delivery: d.delivery, event: d.event }, 'webhook delivered');
    },
  };
}
