import type { ServerResponse } from 'node:http';
import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { readExactly, type ByteRange, type FileReader } from '../storage/backend.js';
import { ChecksumMismatchOnRead } from '../domain/reads.js';

/** Bytes per read: 1 MiB streams about three times faster than Node's 64 KiB default. */
export const PUMP_CHUNK = 1024 * 1024;

function write(res: ServerResponse, chunk: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    // The callback comes once the socket has handed the bytes to the kernel (or failed): from then on
    // the buffer is ours again.
    res.write(chunk, (e) => (e ? reject(e) : resolve()));
  });
}

/**
 * Streams `range` of a file into a response whose head is already set, through two buffers that take
 * turns: one is read into while the other is being written, and a buffer is refilled only after its
 * write has completed. A 1 GiB download allocates 2 MiB, not a thousand buffers for the garbage
 * collector, and the reads keep pace with the socket (a read waits for the previous write).
 * Rejects when the file ends early, a read fails or the client goes away; the caller destroys the
 * response then, so the client sees a truncated body and never a complete-looking one.
 */
export async function pumpFile(reader: FileReader, res: ServerResponse, range: ByteRange, chunkSize = PUMP_CHUNK, checksum: string | null = null): Promise<void> {
  // With `checksum` (a whole file, FILES_REST_CHECK_DOWNLOADS=all) every byte is hashed before it is
  // written, and the last chunk is written only once the digest matches: a corrupt copy's body is
  // broken off short, never complete-looking.
  const hash = checksum ? createHash('md5') : null;
  const length = range.end - range.start + 1;
  const size = Math.min(chunkSize, length);
  const buffers = [Buffer.allocUnsafe(size), length > size ? Buffer.allocUnsafe(size) : null];
  let position = range.start;
  let left = length;
  let turn = 0;
  let writing: Promise<void> | null = null;
  // A write whose callback never comes (a socket torn down mid-write) must not hold the download open.
  const gone = new Promise<never>((_, reject) => res.once('close', () => reject(new Error('the client went away'))));
  gone.catch(() => {});
  while (left > 0) {
    const buffer = buffers[turn]!;
    const count = Math.min(size, left);
    await readExactly(reader, buffer, count, position);
    if (hash) {
      hash.update(count === buffer.length ? buffer : buffer.subarray(0, count));
      if (count === left) {
        const found = `md5:${hash.digest('hex')}`;
        if (found !== checksum) {
          if (writing) await writing.catch(() => {});
          throw new ChecksumMismatchOnRead(found);
        }
      }
    }
    if (writing) await writing;
    if (res.destroyed) throw new Error('the client went away');
    writing = Promise.race([write(res, count === buffer.length ? buffer : buffer.subarray(0, count)), gone]);
    // It may fail while the next read runs, before anything awaits it: that is not unhandled.
    writing.catch(() => {});
    position += count;
    left -= count;
    turn ^= 1;
  }
  if (writing) await writing;
  res.end();
}

/**
 * A stream stage that hashes a whole file as it passes and holds its last chunk back until the end:
 * the last chunk goes out only when the MD5 matches `checksum`; otherwise the stream fails (and the
 * response is destroyed short of its Content-Length) after `onMismatch` has run.
 */
export class VerifyingStream extends Transform {
  readonly #hash = createHash('md5');
  #held: Buffer | null = null;
  constructor(private readonly checksum: string, private readonly onMismatch: (e: ChecksumMismatchOnRead) => Promise<void>) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#hash.update(chunk);
    const out = this.#held;
    this.#held = chunk;
    cb(null, out ?? undefined);
  }
  override _flush(cb: TransformCallback): void {
    const found = `md5:${this.#hash.digest('hex')}`;
    if (found === this.checksum) {
      cb(null, this.#held ?? undefined);
      return;
    }
    const e = new ChecksumMismatchOnRead(found);
    this.onMismatch(e).then(() => cb(e), () => cb(e));
  }
}
