/**
 * URI encoding as SigV4 defines it: every byte except the unreserved `A-Z a-z 0-9 - . _ ~` becomes
 * `%XX` (upper-case hex) of its UTF-8 encoding; and the inverse, percent-decoding to bytes.
 */

const HEX = '0123456789ABCDEF';
const UNRESERVED = new Uint8Array(256);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~') UNRESERVED[c.charCodeAt(0)] = 1;

/** SigV4's URI encoding of raw bytes (`/` is encoded too). */
export function uriEncodeBytes(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += UNRESERVED[b] ? String.fromCharCode(b) : `%${HEX[b >> 4]}${HEX[b & 15]}`;
  return out;
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 65 && c <= 70) return c - 55;
  if (c >= 97 && c <= 102) return c - 87;
  return -1;
}

/**
 * Percent-decodes to bytes: `%XX` becomes its byte, everything else its UTF-8 bytes; `+` stays a
 * plus. A `%` not followed by two hex digits stays a literal `%`. Never throws (invalid UTF-8
 * sequences are kept as bytes, unlike `decodeURIComponent`).
 */
export function percentDecodeBytes(text: string): Buffer {
  if (!text.includes('%')) return Buffer.from(text, 'utf8');
  const src = Buffer.from(text, 'utf8');
  const out = Buffer.allocUnsafe(src.length);
  let n = 0;
  for (let i = 0; i < src.length; i++) {
    const c = src[i]!;
    if (c === 37 && i + 2 < src.length) {
      const hi = hexValue(src[i + 1]!);
      const lo = hexValue(src[i + 2]!);
      if (hi >= 0 && lo >= 0) {
        out[n++] = (hi << 4) | lo;
        i += 2;
        continue;
      }
    }
    out[n++] = c;
  }
  return out.subarray(0, n);
}

/** Decodes then encodes once: the canonical SigV4 form of an already-encoded URI component. */
export function canonicalizeComponent(encoded: string): string {
  // Only unreserved characters: already canonical (the common case of a path segment).
  if (ALL_UNRESERVED.test(encoded)) return encoded;
  return uriEncodeBytes(percentDecodeBytes(encoded));
}

const ALL_UNRESERVED = /^[A-Za-z0-9._~-]*$/;
