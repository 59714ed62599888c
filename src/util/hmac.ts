/**
 * HMAC-SHA256 with a key prepared once (RFC 2104): the SHA-256 states after the inner and the outer
 * padded key are kept, and each message is signed from copies of them, `H(K^opad ‖ H(K^ipad ‖ m))`.
 * The same value as `createHmac`, for a fraction of the cost of a fresh HMAC per message: Node's
 * `createHmac` fetches OpenSSL's MAC anew each time, 7.5 µs per 100-byte message on Node.js 20 and
 * 35 µs on Node.js 24 (OpenSSL 3.5) on this machine, against 6.2 and 8.8 µs here. Every SigV4
 * request, every chunk of a signed streaming upload and every signed URL is one message.
 */
import { createHash, type Hash } from 'node:crypto';

const BLOCK = 64;

export class HmacSha256Key {
  /** The key's bytes (a key longer than a block is its SHA-256, as RFC 2104 says). */
  readonly bytes: Buffer;
  readonly #inner: Hash;
  readonly #outer: Hash;

  constructor(key: Uint8Array | string) {
    let k = typeof key === 'string' ? Buffer.from(key, 'utf8') : Buffer.from(key);
    this.bytes = Buffer.from(k);
    if (k.length > BLOCK) k = createHash('sha256').update(k).digest();
    const ipad = Buffer.alloc(BLOCK, 0x36);
    const opad = Buffer.alloc(BLOCK, 0x5c);
    for (let i = 0; i < k.length; i++) {
      ipad[i]! ^= k[i]!;
      opad[i]! ^= k[i]!;
    }
    this.#inner = createHash('sha256').update(ipad);
    this.#outer = createHash('sha256').update(opad);
  }

  /** HMAC-SHA256 of `data` (a string is UTF-8). */
  sign(data: string | Uint8Array): Buffer {
    const inner = typeof data === 'string' ? this.#inner.copy().update(data, 'utf8').digest() : this.#inner.copy().update(data).digest();
    return this.#outer.copy().update(inner).digest();
  }
}
