import { Transform, type TransformCallback } from 'node:stream';

/** Passes bytes on no faster than `bytesPerSecond` (a migration must not starve live traffic). */
export class Throttle extends Transform {
  readonly #start = Date.now();
  #sent = 0;
  constructor(private readonly bytesPerSecond: number) {
    super({ highWaterMark: 1024 * 1024 });
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.#sent += chunk.length;
    const due = this.#start + (this.#sent / this.bytesPerSecond) * 1000;
    const wait = due - Date.now();
    if (wait > 0) setTimeout(() => cb(null, chunk), wait);
    else cb(null, chunk);
  }
}
