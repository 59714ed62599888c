import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { Action } from '../auth/actions.js';
import { anonymousMayProceed, CredentialRefused, decide, type Identity, type PermissionPolicy, type Resource } from '../auth/permissions.js';

const identities = new WeakMap<FastifyRequest, Identity | null>();

function unauthorized(error?: string, code: 'UNAUTHORIZED' | 'TOKEN_EXPIRED' | 'TOKEN_REVOKED' = 'UNAUTHORIZED'): AppError {
  const challenge = error ? `Bearer error="${error}"` : 'Bearer';
  const description = code === 'TOKEN_EXPIRED' ? ', error_description="The token has expired"' : code === 'TOKEN_REVOKED' ? ', error_description="The token has been revoked"' : '';
  return new AppError(code, {}, { headers: { 'www-authenticate': challenge + description } });
}

/**
 * How a door reads the credential of a request: the token, or null when the request carries none;
 * throws (the door's own refusal) when it carries a malformed one. The REST door's is `bearerToken`.
 */
export type CredentialReader = (req: FastifyRequest) => string | null;

/** `Authorization: Bearer <token>`; another scheme or a malformed header is a 401 `invalid_request`. */
export const bearerToken: CredentialReader = (req) => {
  const header = req.headers.authorization;
  if (header === undefined) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw unauthorized('invalid_request');
  return m[1]!;
};

/**
 * The REST door's reader under the token factory: `Authorization: Bearer`, else `?access_token=`
 * (as invenio and Zenodo clients send it; the URL is redacted from files-rest's logs, not from a
 * proxy's). An empty or repeated parameter is a 401 `invalid_request`.
 */
export const bearerOrAccessToken: CredentialReader = (req) => {
  const fromHeader = bearerToken(req);
  if (fromHeader !== null) return fromHeader;
  const v = (req.query as Record<string, unknown> | undefined)?.access_token;
  if (v === undefined) return null;
  if (typeof v !== 'string' || v === '') throw unauthorized('invalid_request');
  return v;
};

/**
 * Checks an action through the permission factory and turns a refusal into the right status:
 * no or a bad credential → 401; a credential that may not see the bucket → 404 (its existence
 * stays hidden); one that may see it but not do the action → 403.
 *
 * Door-neutral but for the credential reader: another door (S3) gives its own, or verifies the
 * request itself (a signature) and hands the principal over with `adopt`; `require` then applies the
 * same permission policy to it.
 */
export class Authorizer {
  constructor(private readonly policy: PermissionPolicy, private readonly credential: CredentialReader = bearerToken) {}

  /** Records the principal a door established itself for this request (null: anonymous). */
  adopt(req: FastifyRequest, identity: Identity | null): void {
    identities.set(req, identity);
  }

  async identity(req: FastifyRequest): Promise<Identity | null> {
    if (identities.has(req)) return identities.get(req)!;
    const token = this.credential(req);
    let id: Identity | null = null;
    if (token !== null) {
      try {
        id = await this.policy.authenticate(token);
      } catch (e) {
        // A token that was valid once: say why it no longer is, so the client asks for a new one.
        if (e instanceof CredentialRefused) throw unauthorized('invalid_token', e.reason === 'expired' ? 'TOKEN_EXPIRED' : 'TOKEN_REVOKED');
        throw e;
      }
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
  readonly gate = async (req: FastifyRequest): Promise<void> => this.gateFor(req, null);

  /** The gate of a request that may read `readOf` (a download): anonymous passes when that bucket is publicly readable. */
  async gateFor(req: FastifyRequest, readOf: string | null): Promise<void> {
    if (this.policy.name === 'allow-all') return;
    const identity = await this.identity(req);
    if (!identity && !(await anonymousMayProceed(this.policy, readOf))) throw unauthorized();
  }

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
    const args = { action, resource, identity, request: { method: req.method, url: req.url, ip: req.ip, headers: req.headers } };
    if (await decide(this.policy, args)) return;
    if (!identity) throw unauthorized();
    if (resource && identity.bucket !== null && identity.bucket !== resource.bucketId) throw new AppError('BUCKET_NOT_FOUND');
    throw new AppError('FORBIDDEN', { action });
  }

  /** Whether the policy allows an action (listings filter with it); never throws a refusal. */
  async allows(req: FastifyRequest, action: Action, resource: Resource | null): Promise<boolean> {
    if (this.policy.name === 'allow-all') return true;
    const identity = await this.identity(req);
    return decide(this.policy, { action, resource, identity, request: { method: req.method, url: req.url, ip: req.ip, headers: req.headers } });
  }
}
