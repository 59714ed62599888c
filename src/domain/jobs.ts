import type { Executor } from '../db/schema.js';
import type { SignalName } from './signals.js';
import type { Precondition } from './preconditions.js';

/**
 * The catalogue of background jobs: every job the service queues, with its payload, declared once.
 * The queue's `enqueue` and the worker's handlers are typed by it, so a misspelt name or a payload
 * of the wrong shape is a compile error, not a failed task in another process days later.
 * Payloads are stored as JSON: plain values only.
 */
export interface JobPayloads {
  /** Deletes the bytes of a file instance whose row is already gone (idempotent). */
  'remove-file-data': { uri: string; initialized?: boolean; multipartRef?: string };
  /** Merges a multipart upload whose completion was requested into one object version (with the
   *  client's If-Match / If-None-Match, checked again when the new version becomes the head). */
  'complete-multipart': { uploadId: string; precondition?: Precondition };
  /** Copies one file instance to another location and repoints its row. */
  'migrate-file': { fileId: string; location: string };
  /** Makes the copies a file instance lacks under its buckets' replication policy (domain/replicas.ts). */
  'replicate-file': { fileId: string };
  /** Replaces the copy of a file instance in one location from a copy that passes its check. */
  'repair-copy': { fileId: string; locationId: string };
  /** Checks one file instance (every copy) against its stored checksum. */
  'verify-checksum': { fileId: string };
  /** Sends one webhook delivery (the exact bytes and signature, the same on every attempt). */
  'deliver-webhook': WebhookDelivery;
  // Periodic jobs: scheduled by the worker, no payload.
  'prune-tasks': PeriodicPayload;
  'expire-uploads': PeriodicPayload;
  /** Removes tus uploads past their expiry (FILES_REST_TUS_EXPIRES after their last PATCH). */
  'expire-resumable-uploads': PeriodicPayload;
  'verify-checksums': PeriodicPayload;
  'sweep-storage': PeriodicPayload;
  /** Queues the copies files below their replication policy lack (a location back, a policy raised). */
  'replicate-below-policy': PeriodicPayload;
  /** Summarises fixity events older than FILES_REST_FIXITY_HISTORY_DAYS. */
  'summarise-fixity': PeriodicPayload;
}

export type PeriodicPayload = Record<string, never>;

/**
 * How many times a job is tried before it ends as `failed`, where it is not the queue's default (8).
 * Retries back off 2 s, 4 s, 8 s … up to 10 minutes (src/tasks/queue.ts), so 10 attempts span about
 * 17 minutes: a storage outage of that length (a gateway restarting, a network cut) delays copies
 * and checks, it does not fail them. A caller's `maxAttempts` wins.
 */
export const JOB_ATTEMPTS: Partial<Record<JobName, number>> = {
  'complete-multipart': 5,
  'migrate-file': 5,
  'replicate-file': 10,
  'repair-copy': 10,
  'verify-checksum': 10,
  'deliver-webhook': 10,
};

/** A job name of a catalogue (the service's by default). */
export type JobName<M extends object = JobPayloads> = keyof M & string;

/** One webhook delivery, as stored in the task queue. */
export interface WebhookDelivery {
  url: string;
  /** Delivery id, also in the body and the X-Files-Rest-Delivery header: receivers use it to drop duplicates. */
  delivery: string;
  event: SignalName;
  body: string;
  signature: string;
}

export interface EnqueueOptions {
  /** Earliest start, microseconds since the epoch. */
  runAt?: number;
  maxAttempts?: number;
}

/**
 * What the domain needs of the queue: add a job inside the caller's transaction (the
 * transactional outbox: the job commits with the change or not at all), and wake idle workers
 * after the commit. The task queue (src/tasks/queue.ts) implements it.
 */
export interface JobQueue<M extends object = JobPayloads> {
  enqueue<N extends JobName<M>>(tx: Executor, name: N, payload: M[N], opts?: EnqueueOptions): Promise<number>;
  wake(): void;
}
