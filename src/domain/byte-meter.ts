import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { AppError } from '../errors.js';
import { OffThreadDigest } from '../util/digest-thread.js';

/**
 * A digest Node's crypto computes (`md5`, `sha1`, `sha256`, …). The set is open: a door asks for what
 * it must check; MD5 is always computed (it is the stored checksum).
 */
export type DigestAlgorithm = 'md5' | 'sha1' | 'sha256' | (string & {});

/** Anything else fed every byte as it passes (a door's own checksum, e.g. an S3 CRC32C). */
export interface ByteObserver {
  update(data: Uint8Array): void;
}

export interface MeterOptions {
  /** Most bytes allowed, or null. */
  limit: number | null;
  /** The refusal when the limit is passed. */
  limitError: () => Error;
  /** Exact size announced by the client (Content-Length), or null when unknown. */
  expected: number | null;
  /** Digests to compute besides MD5. */
  extraDigests?: readonly DigestAlgorithm[];
  /** Fed every byte too. */
  observers?: readonly ByteObserver[];
  /** MD5 on the digest thread even when no other digest is asked for (the caller calls `settle`). */
  md5OffThread?: boolean;
}

/** Bodies announced at most this size are hashed on the thread that receives them (see ByteMeter). */
export const HASH_HERE_MAX = 64 * 1024;

/**
 * The receiving pipeline's middle piece: counts bytes, enforces the size limit and the announced size
 * as they pass (refusing with the catalogue's errors), and hashes them. MD5 is computed here unless
 * the caller asks for it off the thread (`md5OffThread`, as every receipt does) or a door asks for
 * more (a signed S3 payload's SHA-256); then MD5 runs on one digest thread and the others on a
 * second, side by side, and the HTTP thread hashes nothing of a body past 1 MiB (`settle` collects
 * them once every byte has passed). A body announced at most HASH_HERE_MAX bytes is hashed here
 * whatever is asked: the digest threads are for bodies whose hashing would hold the HTTP thread.
 */
export class ByteMeter extends Transform {
  bytes = 0;
  /** MD5 (and the others) here, when nothing goes to the digest threads. */
  readonly #here: Map<DigestAlgorithm, Hash> | null = null;
  /** Otherwise MD5 and the others on the digest threads, MD5 on its own (they run side by side). */
  readonly #off: OffThreadDigest[] = [];
  #digests: Map<DigestAlgorithm, Buffer> | null = null;

  constructor(private readonly opts: MeterOptions) {
    super({ highWaterMark: 1024 * 1024 });
    const extra = [...new Set(opts.extraDigests ?? [])].filter((a) => a !== 'md5');
    // A body announced at most HASH_HERE_MAX bytes is hashed here: a few microseconds of hashing,
    // where a digest thread's round trip (two messages, a promise) costs more than the bytes.
    const small = opts.expected !== null && opts.expected <= HASH_HERE_MAX;
    if (!small && (extra.length > 0 || opts.md5OffThread)) {
      this.#off.push(new OffThreadDigest('md5'));
      if (extra.length > 0) this.#off.push(new OffThreadDigest(extra[0]!, ...extra.slice(1)));
    } else this.#here = new Map(['md5', ...extra].map((a) => [a, createHash(a)]));
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.opts.limit !== null && this.bytes > this.opts.limit) return cb(this.opts.limitError());
    if (this.opts.expected !== null && this.bytes > this.opts.expected) return cb(new AppError('FILE_LARGER_THAN_EXPECTED'));
    for (const o of this.opts.observers ?? []) o.update(chunk);
    if (this.#here) for (const h of this.#here.values()) h.update(chunk);
    else {
      for (const d of this.#off) d.update(chunk);
      // A digest thread that has fallen behind holds the next bytes back (bounded memory).
      for (const d of this.#off) {
        const wait = d.behind();
        if (wait) {
          void wait.then(() => cb(null, chunk));
          return;
        }
      }
    }
    cb(null, chunk);
  }

  override _flush(cb: TransformCallback): void {
    if (this.opts.expected !== null && this.bytes < this.opts.expected) return cb(new AppError('FILE_SMALLER_THAN_EXPECTED'));
    cb();
  }

  override _destroy(err: Error | null, cb: (error?: Error | null) => void): void {
    // Torn down mid-body: the digests will never be asked for. (After a clean end they still are.)
    if (err) this.dropDigests();
    cb(err);
  }

  /** Lets go of the digests still being computed (a receipt that failed). */
  dropDigests(): void {
    for (const d of this.#off) d.dispose();
  }

  /** Collects every digest once every byte has passed (the digest thread's included). */
  async settle(): Promise<void> {
    if (this.#digests) return;
    if (this.#here) this.#digests = this.#hereDigests();
    else {
      const digests = new Map<DigestAlgorithm, Buffer>();
      const values = await Promise.all(this.#off.map((d) => d.digests()));
      this.#off.forEach((d, i) => d.algorithms.forEach((a, j) => digests.set(a, values[i]![j]!)));
      this.#digests = digests;
    }
  }

  /** Digest of everything that passed: MD5 at any time once every byte has (unless it is off the thread), the others after `settle`. */
  digest(algorithm: DigestAlgorithm): Buffer {
    if (!this.#digests) {
      if (!this.#here) throw new Error('ByteMeter: settle() before digest()');
      this.#digests = this.#hereDigests();
    }
    const d = this.#digests.get(algorithm);
    if (!d) throw new Error(`digest ${algorithm} was not computed`);
    return d;
  }

  #hereDigests(): Map<DigestAlgorithm, Buffer> {
    return new Map([...this.#here!].map(([a, h]) => [a, h.digest()]));
  }

  /** The stored checksum form, `md5:<hex>`. */
  checksum(): string {
    return `md5:${this.digest('md5').toString('hex')}`;
  }
}
