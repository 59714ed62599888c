/**
 * SigV4 signing keys: HMAC chains derived from a secret, a date and a region, kept in a small LRU
 * cache (a key is good for a whole day, and deriving one costs four HMACs per request otherwise),
 * each prepared for signing (util/hmac.ts: a request's signature, then each chunk's, is one HMAC).
 */
import { HmacSha256Key } from '../util/hmac.js';

/** HMAC-SHA256 of `data` under `key` (a key used once: the derivation's steps). */
export function hmacSha256(key: Uint8Array | string, data: string): Buffer {
  return new HmacSha256Key(key).sign(data);
}

const MAX_KEYS = 64;
const cache = new Map<string, HmacSha256Key>();

/**
 * The SigV4 signing key for a secret on a day (`YYYYMMDD`) in a region, for service `s3`:
 * `HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), "s3"), "aws4_request")`.
 * Cached per (secret, date, region), the least recently used of 64 dropped first.
 */
export function signingKey(secret: string, shortDate: string, region: string): HmacSha256Key {
  // The key of the previous request first: a client signs many requests with one key in a day.
  if (last.key && last.secret === secret && last.shortDate === shortDate && last.region === region) return last.key;
  const key = cachedSigningKey(secret, shortDate, region);
  last = { secret, shortDate, region, key };
  return key;
}

let last: { secret: string; shortDate: string; region: string; key: HmacSha256Key | null } = { secret: '', shortDate: '', region: '', key: null };

function cachedSigningKey(secret: string, shortDate: string, region: string): HmacSha256Key {
  const id = `${shortDate}\n${region}\n${secret}`;
  const hit = cache.get(id);
  if (hit) {
    cache.delete(id);
    cache.set(id, hit);
    return hit;
  }
  let key = hmacSha256(`AWS4${secret}`, shortDate);
  key = hmacSha256(key, region);
  key = hmacSha256(key, 's3');
  const prepared = new HmacSha256Key(hmacSha256(key, 'aws4_request'));
  cache.set(id, prepared);
  if (cache.size > MAX_KEYS) cache.delete(cache.keys().next().value!);
  return prepared;
}

/** How many signing keys the cache holds (for tests). */
export function signingKeyCacheSize(): number {
  return cache.size;
}
