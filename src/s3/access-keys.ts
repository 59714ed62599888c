/**
 * S3 access key pairs (`files-rest key create|list|revoke|rewrap`). A key carries the same bucket
 * scope and actions as an API token and turns into the same {@link Identity}, so the permission
 * factory decides for both doors. The secret is stored encrypted under the server key
 * (server-key.ts), never hashed: SigV4 needs it as an HMAC key.
 */
import { randomBytes } from 'node:crypto';
import { ACTIONS, isAction, type Action } from '../auth/actions.js';
import type { Identity } from '../auth/permissions.js';
import type { Db } from '../db/schema.js';
import { AppError } from '../errors.js';
import { newId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';
import { decryptSecret, encryptSecret, type ServerKeys } from '../auth/server-key.js';

export interface AccessKeyInfo {
  id: string;
  accessKeyId: string;
  bucket: string | null;
  actions: Action[];
  /** Microseconds since the epoch, or null. */
  expires: number | null;
  revoked: boolean;
  created: number;
}

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** `FR` and 18 characters of A-Z2-7: 20 characters, as AWS's own key ids. */
function newAccessKeyId(): string {
  const bytes = randomBytes(18);
  let id = 'FR';
  for (const b of bytes) id += ID_ALPHABET[b & 31];
  return id;
}

function validActions(bucket: string | null, given: readonly string[] | null | undefined): Action[] {
  if (!given || given.length === 0) return ACTIONS.filter((a) => !(bucket && a === 'location-update'));
  const unknown = given.filter((a) => !isAction(a));
  if (unknown.length) {
    throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'actions', message: `Unknown action(s): ${unknown.join(', ')}. Known: ${ACTIONS.join(', ')}.` }] });
  }
  const actions = [...new Set(given as Action[])];
  if (bucket && actions.includes('location-update')) {
    throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'actions', message: 'A key scoped to one bucket cannot have location-update.' }] });
  }
  return actions;
}

/** Creates a key pair; the secret is returned once. */
export async function createAccessKey(
  db: Db,
  keys: ServerKeys,
  opts: { bucket?: string | null; actions?: readonly string[] | null; expiresInDays?: number | null } = {},
): Promise<{ info: AccessKeyInfo; secret: string }> {
  const bucket = opts.bucket ?? null;
  if (bucket) {
    const b = await db.selectFrom('buckets').select('id').where('id', '=', bucket).executeTakeFirst();
    if (!b) throw new AppError('BUCKET_NOT_FOUND');
  }
  const actions = validActions(bucket, opts.actions);
  const secret = randomBytes(30).toString('base64').replace(/\+/g, 'A').replace(/\//g, 'B');
  const now = nowMicros();
  const info: AccessKeyInfo = {
    id: newId(),
    accessKeyId: newAccessKeyId(),
    bucket,
    actions,
    expires: opts.expiresInDays ? now + Math.round(opts.expiresInDays * 86_400_000_000) : null,
    revoked: false,
    created: now,
  };
  await db
    .insertInto('access_keys')
    .values({
      id: info.id,
      access_key_id: info.accessKeyId,
      secret_encrypted: encryptSecret(keys.current, secret),
      bucket_id: bucket,
      actions: actions.join(','),
      expires: info.expires,
      revoked: 0,
      created: now,
    })
    .execute();
  return { info, secret };
}

type Row = { id: string; access_key_id: string; bucket_id: string | null; actions: string; expires: number | null; revoked: number; created: number };

function toInfo(r: Row): AccessKeyInfo {
  return {
    id: r.id,
    accessKeyId: r.access_key_id,
    bucket: r.bucket_id,
    actions: r.actions.split(',').filter(isAction),
    expires: r.expires === null ? null : Number(r.expires),
    revoked: r.revoked === 1,
    created: Number(r.created),
  };
}

export async function listAccessKeys(db: Db): Promise<AccessKeyInfo[]> {
  const rows = await db
    .selectFrom('access_keys')
    .select(['id', 'access_key_id', 'bucket_id', 'actions', 'expires', 'revoked', 'created'])
    .orderBy('created')
    .execute();
  return rows.map(toInfo);
}

/** Revokes a key by its id or its access key id. */
export async function revokeAccessKey(db: Db, idOrAccessKeyId: string): Promise<void> {
  const r = await db
    .updateTable('access_keys')
    .set({ revoked: 1 })
    .where((eb) => eb.or([eb('id', '=', idOrAccessKeyId), eb('access_key_id', '=', idOrAccessKeyId)]))
    .executeTakeFirst();
  if (Number(r.numUpdatedRows) !== 1) throw new AppError('ACCESS_KEY_NOT_FOUND', { id: idOrAccessKeyId });
  forgetAccessKey(idOrAccessKeyId);
}

/**
 * Re-encrypts every secret under the current server key (after a rotation: the old key in
 * FILES_REST_SERVER_KEY_PREVIOUS). Answers how many were re-encrypted and how many no key opens.
 */
export async function rewrapAccessKeys(db: Db, keys: ServerKeys): Promise<{ rewrapped: number; unreadable: string[] }> {
  const rows = await db.selectFrom('access_keys').select(['id', 'access_key_id', 'secret_encrypted']).execute();
  let rewrapped = 0;
  const unreadable: string[] = [];
  for (const r of rows) {
    const d = decryptSecret(keys, r.secret_encrypted);
    if (!d) {
      unreadable.push(r.access_key_id);
      continue;
    }
    if (d.current) continue;
    await db.updateTable('access_keys').set({ secret_encrypted: encryptSecret(keys.current, d.secret) }).where('id', '=', r.id).execute();
    rewrapped++;
  }
  return { rewrapped, unreadable };
}

/** A usable key: the secret its requests are signed with, who it acts as, and until when. */
export interface UsableAccessKey {
  /** The key's own id (not the access key id). */
  id: string;
  secret: string;
  identity: Identity;
  /** Microseconds since the epoch, or null. */
  expires: number | null;
}

/**
 * The secret and identity of a usable key (not revoked, not expired, decryptable), or null. The
 * identity is the one an API token with the same scope would have.
 */
export async function lookupAccessKey(db: Db, keys: ServerKeys | null, accessKeyId: string): Promise<UsableAccessKey | null> {
  if (!keys || !/^[\x21-\x7e]{1,128}$/.test(accessKeyId)) return null;
  const r = await db.selectFrom('access_keys').selectAll().where('access_key_id', '=', accessKeyId).executeTakeFirst();
  if (!r || r.revoked === 1 || (r.expires !== null && Number(r.expires) < nowMicros())) return null;
  const d = decryptSecret(keys, r.secret_encrypted);
  if (!d) return null;
  const info = toInfo(r);
  return { id: info.id, secret: d.secret, identity: { id: `key:${info.id}`, bucket: info.bucket, actions: info.actions }, expires: info.expires };
}

// ---------------------------------------------------------------------------------------------
// The cache of verified keys

/**
 * The most keys the cache holds; past it the one cached longest ago goes first. A cached key costs
 * a few hundred bytes.
 */
export const ACCESS_KEY_CACHE_MAX = 1000;

interface CachedKey {
  /** The database and server keys it was read with: another service in the same process misses. */
  readonly db: Db;
  readonly keys: ServerKeys;
  readonly key: UsableAccessKey;
  /** Date.now() after which the database is asked again. */
  readonly until: number;
}

/**
 * Access key id → a key that signed a request correctly, for FILES_REST_S3_KEY_CACHE_SECONDS.
 * Without it every S3 request read its key from the database and decrypted its secret (AES-GCM)
 * before checking the signature: the larger part of what an S3 request cost more than a REST one.
 * Only the key is cached, never a verdict: each request's signature is checked against the cached
 * secret, and its expiry against the cached expiry. A key revoked through this process
 * ({@link revokeAccessKey}) is forgotten at once; one revoked by another process (`files-rest key
 * revoke` runs in its own) is still accepted here until its entry's time is up.
 */
const cache = new Map<string, CachedKey>();

/**
 * The cached key of an access key id, when it was cached with the same database and server keys,
 * its time is not up and the key has not expired at `nowMs`; otherwise null (ask the database).
 */
export function cachedAccessKey(db: Db, keys: ServerKeys | null, accessKeyId: string, nowMs: number = Date.now()): UsableAccessKey | null {
  const e = cache.get(accessKeyId);
  if (!e || e.db !== db || e.keys !== keys) return null;
  if (nowMs >= e.until || (e.key.expires !== null && e.key.expires < nowMs * 1000)) {
    cache.delete(accessKeyId);
    return null;
  }
  return e.key;
}

/**
 * Caches a key for `ttlMs` from `nowMs` (nothing when `ttlMs` is 0). Call it only once a request's
 * signature has been verified with the key.
 */
export function rememberAccessKey(db: Db, keys: ServerKeys, accessKeyId: string, key: UsableAccessKey, ttlMs: number, nowMs: number = Date.now()): void {
  if (ttlMs <= 0) return;
  cache.delete(accessKeyId);
  cache.set(accessKeyId, { db, keys, key, until: nowMs + ttlMs });
  while (cache.size > ACCESS_KEY_CACHE_MAX) cache.delete(cache.keys().next().value!);
}

/** Drops a key from the cache, by its id or its access key id. */
export function forgetAccessKey(idOrAccessKeyId: string): void {
  cache.delete(idOrAccessKeyId);
  for (const [accessKeyId, e] of cache) if (e.key.id === idOrAccessKeyId) cache.delete(accessKeyId);
}

/** How many keys the cache holds. */
export function accessKeyCacheSize(): number {
  return cache.size;
}
