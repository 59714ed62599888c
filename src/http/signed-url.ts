import type { FastifyReply, FastifyRequest } from 'fastify';
import { newGrant, signedQuery, verifyGrant, type SignedGrant } from '../auth/signed-urls.js';
import { consumeNonce } from '../auth/signed-url-uses.js';
import { getLiveBucket } from '../domain/buckets.js';
import { AppError, validationError } from '../errors.js';
import type { ObjectAddress } from './address.js';
import type { HttpDeps } from './deps.js';
import { Links } from './links.js';
import { has, intParam, one, query, uuidParam } from './query.js';
import { assertAcceptsJson, sendJson } from './reply.js';

/**
 * Signed URLs over REST (auth/signed-urls.ts does the cryptography): `POST …/<key>?sign` hands one
 * out, and a request carrying `signature=` is verified before the credential gate and given an
 * identity limited to that one action on that one object (`adopt`), so the permission policy and
 * the handlers are the ones every download and upload goes through.
 */

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** POST …/<key>?sign&action=download|upload[&versionId=V][&expiresIn=S]: a signed URL for one action. */
export async function signHandler({ ctx, auth, serverKeys }: HttpDeps, req: FastifyRequest, reply: FastifyReply, addr: ObjectAddress) {
  assertAcceptsJson(req);
  const q = query(req);
  const action = one(q, 'action') ?? 'download';
  if (action !== 'download' && action !== 'upload') throw validationError('action', 'Must be download or upload.');
  const versionId = uuidParam(q, 'versionId');
  if (action === 'upload' && versionId !== null) throw validationError('versionId', 'An upload URL is for the object, not a version.');
  const expiresIn = intParam(q, 'expiresIn', { min: 1, max: ctx.config.signedUrlMaxExpires }) ?? ctx.config.signedUrlExpires;
  // The caller must itself hold the action the URL will allow.
  const object = { type: 'object' as const, bucketId: addr.bucketId, key: addr.key };
  if (action === 'download') {
    await auth.require(req, 'object-read', object);
    if (versionId !== null) await auth.require(req, 'object-read-version', { ...object, id: versionId });
  } else {
    await auth.require(req, 'bucket-update', { type: 'bucket', bucketId: addr.bucketId });
  }
  await getLiveBucket(ctx.db, addr.bucketId);
  if (serverKeys === null) throw new AppError('SERVER_KEY_REQUIRED');
  const grant = newGrant(action, { bucketId: addr.bucketId, key: addr.key, versionId, expiresIn });
  return sendJson(req, reply, 200, {
    url: `${new Links(ctx.config, req).object(addr.bucketId, addr.key)}?${signedQuery(serverKeys, grant)}`,
    method: grant.method,
    action,
    bucket: addr.bucketId,
    key: addr.key,
    version_id: versionId,
    expires: new Date(grant.expires * 1000).toISOString(),
    single_use: grant.nonce !== null,
  });
}

/**
 * When the request carries `signature=`: checks it (SIGNED_URL_INVALID, SIGNED_URL_EXPIRED), that
 * it selects the plain download or upload (no other operation: SIGNED_URL_INVALID), that an upload
 * URL was not used before (SIGNED_URL_USED), and adopts the identity the URL grants. Runs before the
 * credential gate; a request without `signature=` is left to it. `plain`: the operation table
 * selected the variant without a selector (dispatch.ts).
 */
export async function adoptSignedUrl({ ctx, auth, serverKeys }: HttpDeps, req: FastifyRequest, addr: ObjectAddress, plain: boolean): Promise<void> {
  const q = query(req);
  if (!has(q, 'signature')) return;
  const method = req.method === 'HEAD' ? 'GET' : req.method;
  const signature = one(q, 'signature') ?? '';
  const expires = one(q, 'expires') ?? '';
  if ((method !== 'GET' && method !== 'PUT') || !/^\d{1,12}$/.test(expires)) throw new AppError('SIGNED_URL_INVALID');
  const grant: SignedGrant = {
    method,
    bucketId: addr.bucketId,
    key: addr.key,
    versionId: method === 'GET' ? (one(q, 'versionId') ?? null) : null,
    expires: Number(expires),
    nonce: method === 'PUT' ? (one(q, 'nonce') ?? null) : null,
  };
  if (method === 'PUT' && (grant.nonce === null || has(q, 'versionId'))) throw new AppError('SIGNED_URL_INVALID');
  const verdict = verifyGrant(serverKeys, grant, signature, nowSeconds());
  if (verdict === 'invalid') throw new AppError('SIGNED_URL_INVALID');
  if (verdict === 'expired') throw new AppError('SIGNED_URL_EXPIRED');
  // Only the plain download or upload: not ?uploadId, ?uploads, ?sign… on the same object.
  if (!plain) throw new AppError('SIGNED_URL_INVALID');
  if (grant.nonce !== null && !(await consumeNonce(ctx.db, grant.nonce, grant.expires * 1_000_000))) throw new AppError('SIGNED_URL_USED');
  auth.adopt(req, {
    id: `signed-url:${signature.slice(0, 12)}`,
    bucket: addr.bucketId,
    actions: method === 'PUT' ? ['bucket-update'] : grant.versionId !== null ? ['object-read', 'object-read-version'] : ['object-read'],
    object: { key: addr.key, versionId: grant.versionId },
  });
}
