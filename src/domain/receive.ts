import type { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AppError, isAppError } from '../errors.js';
import { isStorageError, isStorageFull } from '../storage/backend.js';
import { ByteMeter, type ByteObserver, type DigestAlgorithm } from './byte-meter.js';
import { feed } from '../util/feed.js';

/** A digest the sender announced, checked once every byte has arrived. */
export interface ExpectedDigest {
  algorithm: DigestAlgorithm;
  value: Buffer;
  /** The header it came from, for the error message. */
  header: string;
}

export interface ReceiveInput<T> {
  source: Readable;
  /**
   * Where the bytes come from: a client (its failures are disconnects, and the stream is never
   * destroyed: an HTTP request must still carry the answer) or another storage (a migration's copy).
   */
  origin?: 'client' | 'storage';
  /** Writes the measured bytes to storage (a backend's `save` or `update`), leaving nothing readable on failure. */
  store(body: Readable, signal: AbortSignal | undefined): Promise<T>;
  /**
   * What must not stay behind when the receipt fails, in flight or at the verification: `stored` is
   * null when `store` itself failed. Called once; its own failure is reported, not thrown.
   */
  discard?(stored: T | null): Promise<void>;
  /** The tightest size limit: passing it fails the transfer at once with `error()`. */
  limit?: { bytes: number; error: () => Error } | null;
  /** Exact size announced, or null. */
  expected: number | null;
  /** Digests to compute besides MD5 (a door asks for what it checks), and other observers of every byte. */
  extraDigests?: readonly DigestAlgorithm[];
  observers?: readonly ByteObserver[];
  /** Digests to compare once every byte arrived (CHECKSUM_MISMATCH). */
  expectedDigests?: readonly ExpectedDigest[];
  /** The door's own check, after every byte arrived and before anything is committed; throws to refuse. */
  verify?(meter: ByteMeter): void | Promise<void>;
  /** Ends the transfer: the client left, its body stalled (the reason is the refusal), a claim was lost. */
  signal?: AbortSignal;
  /** Stages between the source and the meter (a migration's throttle). */
  through?: NodeJS.ReadWriteStream[];
  /** Told when `discard` fails. */
  onDiscardError?(err: unknown): void;
}

export interface Received<T> {
  stored: T;
  meter: ByteMeter;
  bytes: number;
  /** `md5:<hex>`, the stored checksum form. */
  checksum: string;
}

/**
 * Receives a stream into storage: the one way bytes arrive (a PUT, a multipart part, a migration's
 * copy; every door). The source flows through the byte meter (limits, announced size, digests) into
 * `store` (see `flow`), ended by the signal; then the announced digests and the door's
 * `verify` run. Any failure is decided by `receiveFailure` (one refusal per cause), `discard` removes
 * what was left, and nothing is committed: the caller commits only what this returns.
 */
export async function receive<T>(input: ReceiveInput<T>): Promise<Received<T>> {
  const meter = new ByteMeter({
    limit: input.limit?.bytes ?? null,
    limitError: input.limit?.error ?? (() => new Error('no limit')),
    expected: input.expected,
    extraDigests: [...(input.extraDigests ?? []), ...(input.expectedDigests ?? []).map((d) => d.algorithm)],
    observers: input.observers,
    md5OffThread: true,
  });
  const origin = input.origin ?? 'client';
  const feeding = flow(input.source, [...(input.through ?? []), meter], origin, input.signal);
  // Both settle before an answer: a failed write has cleaned up after itself by then.
  const [fed, stored] = await Promise.allSettled([feeding, input.store(meter, input.signal)]);
  if (fed.status === 'rejected' || stored.status === 'rejected') {
    const errors = [stored.status === 'rejected' ? stored.reason : undefined, fed.status === 'rejected' ? fed.reason : undefined];
    const failure = receiveFailure({ errors, source: input.source, meter, signal: input.signal, origin });
    meter.dropDigests();
    await discard(input, stored.status === 'fulfilled' ? stored.value : null);
    throw failure;
  }
  try {
    await meter.settle();
    for (const d of input.expectedDigests ?? []) {
      if (!meter.digest(d.algorithm).equals(d.value)) throw new AppError('CHECKSUM_MISMATCH', { header: d.header, algorithm: d.algorithm });
    }
    await input.verify?.(meter);
  } catch (e) {
    await discard(input, stored.value);
    throw e;
  }
  return { stored: stored.value, meter, bytes: meter.bytes, checksum: meter.checksum() };
}

async function discard<T>(input: ReceiveInput<T>, stored: T | null): Promise<void> {
  if (!input.discard) return;
  try {
    await input.discard(stored);
  } catch (e) {
    input.onDiscardError?.(e);
  }
}

const DISCONNECT_CODES = new Set(['ECONNRESET', 'ABORT_ERR', 'ERR_STREAM_PREMATURE_CLOSE', 'EPIPE']);

function isDisconnectSign(e: unknown): boolean {
  const err = e as NodeJS.ErrnoException | undefined;
  return DISCONNECT_CODES.has(err?.code ?? '') || err?.name === 'AbortError';
}

/**
 * The one decision of what a failed receipt tells its sender. In order:
 * 1. a refusal already made (the meter's limits, a door's check passed through the write): as is;
 * 2. no space in the storage: STORAGE_FULL (507). Before the disconnect test: a write that fails for
 *    lack of space tears the pipeline down, which must not read as a client that went away;
 * 3. a signal aborted with a refusal (the body idle timeout's UPLOAD_TIMEOUT, a lost part claim): it;
 * 4. from a client, any sign that it left (its stream failed or closed before the end, ECONNRESET,
 *    an abort, a premature close): CLIENT_DISCONNECTED, the same for every door;
 * 5. another storage failure: STORAGE_UNAVAILABLE;
 * 6. anything else as it is (a bug shows as one).
 * `errors`: the write's failure first, then the pipeline's.
 */
export function receiveFailure(f: {
  errors: readonly unknown[];
  source: Readable;
  meter?: ByteMeter;
  signal?: AbortSignal;
  origin?: 'client' | 'storage';
}): unknown {
  const errors = f.errors.filter((e) => e !== undefined && e !== null);
  const refusal = errors.find((e) => isAppError(e));
  if (refusal) return refusal;
  const full = errors.find(isStorageFull);
  if (full) return new AppError('STORAGE_FULL', {}, { cause: full });
  if (f.signal?.aborted && isAppError(f.signal.reason)) return f.signal.reason;
  if (f.meter?.errored && isAppError(f.meter.errored)) return f.meter.errored;
  const first = errors[0];
  if ((f.origin ?? 'client') === 'client') {
    const left = f.source.errored !== null || (f.source.destroyed && !f.source.readableEnded) || f.signal?.aborted === true || errors.some(isDisconnectSign);
    if (left) return new AppError('CLIENT_DISCONNECTED', {}, { cause: first });
  }
  const storage = errors.find((e) => isStorageError(e));
  if (storage) return new AppError('STORAGE_UNAVAILABLE', {}, { cause: storage });
  return first;
}

/**
 * Runs the bytes from `source` through `stages` (the last one the meter). A client's stream is fed in
 * (util/feed.ts): never destroyed, let go of on a failure, so the refusal can still be sent on its
 * socket; the stages after the first, owned here, go under `stream.pipeline`. Another storage's stream
 * is owned too: one pipeline for all. Settles when both parts have; the first failure is reported,
 * the chain's first (it saw the fed failure too, or its own came first).
 */
async function flow(source: Readable, stages: NodeJS.ReadWriteStream[], origin: 'client' | 'storage', signal: AbortSignal | undefined): Promise<void> {
  const run = pipeline as unknown as (...args: unknown[]) => Promise<void>;
  const options = signal ? { signal } : {};
  if (origin === 'storage') return run(source, ...stages, options);
  const head = stages[0] as unknown as Writable;
  if (stages.length === 1) return feed(source, head, signal);
  const [fed, chained] = await Promise.allSettled([feed(source, head, signal), run(...stages, options)]);
  if (chained.status === 'rejected') throw chained.reason;
  if (fed.status === 'rejected') throw fed.reason;
}
