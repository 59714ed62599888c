/**
 * Signed URLs: a URL that allows one action on one object until an expiry, without a credential.
 * The signature is HMAC-SHA256, under a signing key derived from the server key (HKDF-SHA256 with its
 * own label, so the key that encrypts S3 secrets is never used raw), over the method, the bucket,
 * the key, the version, the expiry and, for an upload, a nonce. FILES_REST_SERVER_KEY_PREVIOUS keys
 * still verify; dropping a key from it revokes every URL signed with it.
 */
import { hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { HmacSha256Key } from '../util/hmac.js';
import type { ServerKeys } from './server-key.js';

/** What a signed URL allows: a download (GET, HEAD too) of the head or of one version, or one upload (PUT). */
export interface SignedGrant {
  method: 'GET' | 'PUT';
  bucketId: string;
  key: string;
  /** The version a download is for; null: the head at the time of the download. Always null for PUT. */
  versionId: string | null;
  /** Expiry, seconds since the epoch. */
  expires: number;
  /** An upload's single-use id (signed_url_uses); null for downloads. */
  nonce: string | null;
}

/** The query parameters of a signed URL (besides `versionId`). */
export const SIGNED_PARAMS = { expires: 'expires', nonce: 'nonce', signature: 'signature' } as const;

const LABEL = 'files-rest signed URL v1';
const derived = new WeakMap<Buffer, HmacSha256Key>();

/** The signing key of a server key: HKDF-SHA256, empty salt, info = LABEL, 32 bytes; prepared for HMAC. */
export function urlSigningKey(serverKey: Buffer): HmacSha256Key {
  let k = derived.get(serverKey);
  if (!k) {
    k = new HmacSha256Key(Buffer.from(hkdfSync('sha256', serverKey, Buffer.alloc(0), LABEL, 32)));
    derived.set(serverKey, k);
  }
  return k;
}

/** The string signed: a JSON array, so no field can bleed into the next. */
function canonical(g: SignedGrant): string {
  return JSON.stringify(['v1', g.method, g.bucketId, g.key, g.versionId ?? '', g.expires, g.nonce ?? '']);
}

function mac(serverKey: Buffer, g: SignedGrant): Buffer {
  return urlSigningKey(serverKey).sign(canonical(g));
}

/** A fresh nonce for a single-use upload URL. */
export function newNonce(): string {
  return randomBytes(16).toString('base64url');
}

/** The signature of a grant under the current server key (base64url). */
export function signGrant(keys: ServerKeys, g: SignedGrant): string {
  return mac(keys.current, g).toString('base64url');
}

/**
 * Checks a signature against the current key, then the previous ones (constant time), and then the
 * expiry: 'invalid' for a signature no key gives (altered, another method, a dropped key), 'expired'
 * for a genuine one past its expiry. `nowSeconds`: the current time.
 */
export function verifyGrant(keys: ServerKeys | null, g: SignedGrant, signature: string, nowSeconds: number): 'ok' | 'invalid' | 'expired' {
  if (keys === null || !/^[A-Za-z0-9_-]{43}$/.test(signature)) return 'invalid';
  const given = Buffer.from(signature, 'base64url');
  const genuine = [keys.current, ...keys.previous].some((k) => timingSafeEqual(mac(k, g), given));
  if (!genuine) return 'invalid';
  return g.expires < nowSeconds ? 'expired' : 'ok';
}

/** The query string of a signed URL for a grant: versionId, expires, nonce, signature. */
export function signedQuery(keys: ServerKeys, g: SignedGrant): string {
  const params = new URLSearchParams();
  if (g.versionId !== null) params.set('versionId', g.versionId);
  params.set(SIGNED_PARAMS.expires, String(g.expires));
  if (g.nonce !== null) params.set(SIGNED_PARAMS.nonce, g.nonce);
  params.set(SIGNED_PARAMS.signature, signGrant(keys, g));
  return params.toString();
}

/** A grant for an action on an object, expiring `expiresIn` seconds from now. */
export function newGrant(action: 'download' | 'upload', o: { bucketId: string; key: string; versionId: string | null; expiresIn: number }): SignedGrant {
  return {
    method: action === 'upload' ? 'PUT' : 'GET',
    bucketId: o.bucketId,
    key: o.key,
    versionId: action === 'upload' ? null : o.versionId,
    expires: Math.floor(Date.now() / 1000) + o.expiresIn,
    nonce: action === 'upload' ? newNonce() : null,
  };
}
