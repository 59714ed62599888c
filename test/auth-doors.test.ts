// The authoriser is shared by the doors: the REST door reads `Authorization: Bearer`, another door
// gives its own credential reader, or verifies the request itself and hands the principal over
// (`adopt`); the same permission policy then decides. No server: a request object is enough.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyRequest } from 'fastify';
import { Authorizer } from '../src/http/auth.js';
import { tokenFactory, type Identity, type PermissionPolicy } from '../src/auth/permissions.js';
import { isAppError } from '../src/errors.js';

const BUCKET = '11111111-1111-4111-8111-111111111111';
const reader: Identity = { id: 'reader', bucket: BUCKET, actions: ['object-read'] };
const policy: PermissionPolicy = {
  name: 'token',
  factory: tokenFactory,
  authenticate: async (token) => (token === 'good' ? reader : null),
  requiresCredential: true,
};
const object = { type: 'object' as const, bucketId: BUCKET, key: 'k' };

function request(headers: Record<string, string> = {}): FastifyRequest {
  return { headers, method: 'GET', url: '/x', ip: '127.0.0.1' } as unknown as FastifyRequest;
}

describe('Authorizer across doors', () => {
  it('the REST door: a Bearer token; another scheme is a 401', async () => {
    const auth = new Authorizer(policy);
    await auth.require(request({ authorization: 'Bearer good' }), 'object-read', object);
    await assert.rejects(auth.require(request({ authorization: 'Bearer good' }), 'object-delete', object), (e: unknown) => isAppError(e, 'FORBIDDEN'));
    await assert.rejects(auth.require(request({ authorization: 'AWS4-HMAC-SHA256 Credential=good' }), 'object-read', object), (e: unknown) => isAppError(e, 'UNAUTHORIZED'));
  });

  it("another door's credential reader goes through the same policy", async () => {
    const auth = new Authorizer(policy, (req) => (req.headers['x-door-key'] as string | undefined) ?? null);
    await auth.require(request({ 'x-door-key': 'good' }), 'object-read', object);
    await assert.rejects(auth.require(request({ 'x-door-key': 'bad' }), 'object-read', object), (e: unknown) => isAppError(e, 'UNAUTHORIZED'));
    await assert.rejects(auth.require(request({}), 'object-read', object), (e: unknown) => isAppError(e, 'UNAUTHORIZED'));
  });

  it('a principal adopted by a door that verified the request itself is what require checks', async () => {
    const auth = new Authorizer(policy, () => {
      throw new Error('not read: the door adopted the principal');
    });
    const req = request({ authorization: 'AWS4-HMAC-SHA256 Credential=…' });
    auth.adopt(req, reader);
    assert.equal(await auth.identity(req), reader);
    await auth.require(req, 'object-read', object);
    await assert.rejects(auth.require(req, 'object-read', { ...object, bucketId: '22222222-2222-4222-8222-222222222222' }), (e: unknown) => isAppError(e, 'BUCKET_NOT_FOUND'));
    const anonymous = request();
    auth.adopt(anonymous, null);
    await assert.rejects(auth.require(anonymous, 'object-read', object), (e: unknown) => isAppError(e, 'UNAUTHORIZED'));
  });
});
