import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { Action } from '../auth/actions.js';
import type { Identity, PermissionPolicy, Resource } from '../auth/permissions.js';

const identities = new WeakMap<FastifyRequest, Identity | null>();

function unauthorized(error?: string): AppError {
  return new AppError('UNAUTHORIZED', {}, { headers: { 'www-authenticate': error ? `Bearer error="${error}"` : 'Bearer' } });
}

/**
 * Checks an action through the permission factory and turns a refusal into the right status:
 * no or a bad credential → 401; a credential that may not see the bucket → 404 (its existence
 * stays hidden); one that may see it but not do the action → 403.
 */
export class Authorizer {
  constructor(private readonly policy: PermissionPolicy) {}

  async identity(req: FastifyRequest): Promise<Identity | null> {
    if (identities.has(req)) return identities.get(req)!;
    const header = req.headers.authorization;
    let id: Identity | null = null;
    if (header !== undefined) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
      if (!m) throw unauthorized('invalid_request');
      id = await this.policy.authenticate(m[1]!);
      if (!id) throw unauthorized('invalid_token');
    }
    identities.set(req, id);
    return id;
  }

  /**
   * Route hook run before any lookup: a bad credential is refused (401) whatever the policy, and
   * under a policy that needs one a missing credential is too, so an anonymous caller learns
   * nothing (not even whether a bucket exists) before authenticating.
   */
  readonly gate = async (req: FastifyRequest): Promise<void> => {
    if (this.policy.name === 'allow-all') return;
    const identity = await this.identity(req);
    if (!identity && this.policy.requiresCredential) throw unauthorized();
  };

  /** Rate-limit key: the verified token, else the client address (a bad credential counts as anonymous). */
  readonly rateLimitKey = async (req: FastifyRequest): Promise<string> => {
    let identity: Identity | null = null;
    try {
      identity = await this.identity(req);
    } catch {
      identity = null;
    }
    return identity ? `id:${identity.id}` : `ip:${req.ip}`;
  };

  async require(req: FastifyRequest, action: Action, resource: Resource | null): Promise<void> {
    if (this.policy.name === 'allow-all') return;
    const identity = await this.identity(req);
    if (!identity && this.policy.requiresCredential) throw unauthorized();
    const permission = this.policy.factory({
      action,
      resource,
      identity,
      request: { method: req.method, url: req.url, ip: req.ip, headers: req.headers },
    });
    if (await permission.can()) return;
    if (!identity) throw unauthorized();
    if (resource && identity.bucket !== null && identity.bucket !== resource.bucketId) throw new AppError('BUCKET_NOT_FOUND');
    throw new AppError('FORBIDDEN');
  }
}
