import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { AppError } from '../errors.js';
import type { Db } from '../db/schema.js';
import { newId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';
import { ACTIONS, isAction, type Action } from './actions.js';

export interface TokenInfo {
  id: string;
  bucket: string | null;
  actions: Action[];
  /** Expiry, microseconds since the epoch, or null. */
  expires: number | null;
}

const PREFIX = 'frt_';

function hash(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/**
 * Creates an API token. The secret is returned once and stored only as a SHA-256 hash. A token
 * scoped to one bucket never has `location-update` (it could create buckets outside its scope).
 */
export async function createToken(
  db: Db,
  opts: { bucket?: string | null; actions?: string[] | null; expiresInDays?: number | null } = {},
): Promise<{ info: TokenInfo; token: string }> {
  const bucket = opts.bucket ?? null;
  if (bucket) {
    const b = await db.selectFrom('buckets').select('id').where('id', '=', bucket).executeTakeFirst();
    if (!b) throw new AppError('BUCKET_NOT_FOUND');
  }
  let actions: Action[];
  if (opts.actions && opts.actions.length > 0) {
    const unknown = opts.actions.filter((a) => !isAction(a));
    if (unknown.length) {
      throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'actions', message: `Unknown action(s): ${unknown.join(', ')}. Known: ${ACTIONS.join(', ')}.` }] });
    }
    actions = [...new Set(opts.actions as Action[])];
    if (bucket && actions.includes('location-update')) {
      throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'actions', message: 'A token scoped to one bucket cannot have location-update.' }] });
    }
  } else {
    actions = ACTIONS.filter((a) => !(bucket && a === 'location-update'));
  }
  const id = newId();
  const secret = randomBytes(32).toString('base64url');
  const expires = opts.expiresInDays ? nowMicros() + Math.round(opts.expiresInDays * 86_400_000_000) : null;
  await db
    .insertInto('tokens')
    .values({ id, secret_hash: hash(secret), bucket_id: bucket, actions: actions.join(','), expires, revoked: 0, created: nowMicros() })
    .execute();
  return { info: { id, bucket, actions, expires }, token: `${PREFIX}${id.replaceAll('-', '')}_${secret}` };
}

export async function revokeToken(db: Db, id: string): Promise<void> {
  const r = await db.updateTable('tokens').set({ revoked: 1 }).where('id', '=', id).executeTakeFirst();
  if (Number(r.numUpdatedRows) !== 1) throw new AppError('TOKEN_NOT_FOUND', { id });
}

export async function countTokens(db: Db): Promise<number> {
  const r = await db.selectFrom('tokens').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(r.n);
}

const TOKEN_RE = /^frt_([0-9a-f]{32})_([A-Za-z0-9_-]{43})$/;

/**
 * The token a bearer string names: its info when usable; `{ refused }` when the secret is right but
 * the token was revoked or has expired (only a holder of the secret learns that); null otherwise.
 * Secrets compare in constant time.
 */
export async function checkToken(db: Db, bearer: string): Promise<TokenInfo | { refused: 'expired' | 'revoked' } | null> {
  const m = TOKEN_RE.exec(bearer);
  if (!m) return null;
  const hex = m[1]!;
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  const r = await db.selectFrom('tokens').selectAll().where('id', '=', id).executeTakeFirst();
  if (!r) return null;
  const ok = timingSafeEqual(Buffer.from(hash(m[2]!), 'hex'), Buffer.from(r.secret_hash, 'hex'));
  if (!ok) return null;
  if (r.revoked === 1) return { refused: 'revoked' };
  if (r.expires !== null && r.expires < nowMicros()) return { refused: 'expired' };
  return { id: r.id, bucket: r.bucket_id, actions: r.actions.split(',').filter(isAction), expires: r.expires };
}

/** The valid, unrevoked, unexpired token a bearer string names, or null. */
export async function verifyToken(db: Db, bearer: string): Promise<TokenInfo | null> {
  const t = await checkToken(db, bearer);
  return t && !('refused' in t) ? t : null;
}
