import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { AppError } from '../errors.js';

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
}

/**
 * The receiving pipeline's middle piece: counts bytes, enforces the size limit and the announced size
 * as they pass (refusing with the catalogue's errors), and hashes them.
 */
export class ByteMeter extends Transform {
  bytes = 0;
  readonly #hashes = new Map<DigestAlgorithm, Hash>();
  #digests: Map<DigestAlgorithm, Buffer> | null = null;

  constructor(private readonly opts: MeterOptions) {
    super({ highWaterMark: 1024 * 1024 });
    this.#hashes.set('md5', createHash('md5'));
    for (const a of opts.extraDigests ?? []) if (!this.#hashes.has(a)) this.#hashes.set(a, createHash(a));
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.opts.limit !== null && this.bytes > this.opts.limit) return cb(this.opts.limitError());
    if (this.opts.expected !== null && this.bytes > this.opts.expected) return cb(new AppError('FILE_LARGER_THAN_EXPECTED'));
    for (const h of this.#hashes.values()) h.update(chunk);
    for (const o of this.opts.observers ?? []) o.update(chunk);
    cb(null, chunk);
  }

  override _flush(cb: TransformCallback): void {
    if (this.opts.expected !== null && this.bytes < this.opts.expected) return cb(new AppError('FILE_SMALLER_THAN_EXPECTED'));
    cb();
  }

  /** Digest of everything that passed; call once every byte has. */
  digest(algorithm: DigestAlgorithm): Buffer {
    if (!this.#digests) {
      this.#digests = new Map();
      for (const [a, h] of this.#hashes) this.#digests.set(a, h.digest());
    }
    const d = this.#digests.get(algorithm);
    if (!d) throw new Error(`digest ${algorithm} was not computed`);
    return d;
  }

  /** The stored checksum form, `md5:<hex>`. */
  checksum(): string {
    return `md5:${this.digest('md5').toString('hex')}`;
  }
}
