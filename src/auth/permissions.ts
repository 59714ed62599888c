import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import type { Db } from '../db/schema.js';
import type { Action } from './actions.js';
import { checkToken, type TokenInfo } from './tokens.js';

/** What an action is checked against: nothing (creating buckets), or something inside a bucket. */
export interface Resource {
  type: 'bucket' | 'object' | 'multipart';
  bucketId: string;
  /** The object version or multipart upload, when the action is about one. */
  id?: string;
  key?: string;
}

/** Who is asking: the verified credential, or null for an anonymous request. */
export interface Identity {
  /** A stable id (token id for the built-in token factory). */
  id: string;
  /** Buckets this identity may see; null means every bucket. */
  bucket: string | null;
  actions: readonly Action[];
  /**
   * Set when the identity may act on one object only (a signed URL, signed-urls.ts): the key and,
   * for a download of one version, that version. The token factory refuses any other object.
   */
  object?: { key: string; versionId: string | null };
}

export interface PermissionArgs {
  action: Action;
  resource: Resource | null;
  identity: Identity | null;
  /** Read-only view of the request, for factories that decide on headers or addresses. */
  request: { method: string; url: string; ip: string; headers: Readonly<Record<string, string | string[] | undefined>> };
}

/** SPEC.md: "an object with a can() method"; the operation is allowed when can() is true. */
export interface Permission {
  can(): boolean | Promise<boolean>;
}

/**
 * A permission factory (FILES_REST_PERMISSION_FACTORY). Given the action, the resource and the
 * identity, it returns a Permission.
 *
 * @example ./read-only.js — anyone may read, nobody may write
 * ```js
 * export default function factory({ action }) {
 *   return { can: () => ['bucket-read', 'object-read'].includes(action) };
 * }
 * ```
 */
export type PermissionFactory = (args: PermissionArgs) => Permission;

/**
 * Turns a credential into an identity. The built-in one reads API tokens; a factory module may
 * export its own `authenticate`. Null for an unknown credential; throw CredentialRefused for one
 * that was valid and is no longer (the client is told why, 401).
 */
export type Authenticator = (bearer: string) => Promise<Identity | null>;

/** A genuine credential that may no longer be used: it expired or was revoked. */
export class CredentialRefused extends Error {
  constructor(readonly reason: 'expired' | 'revoked') {
    super(`credential ${reason}`);
    this.name = 'CredentialRefused';
  }
}

export interface PermissionPolicy {
  name: string;
  factory: PermissionFactory;
  authenticate: Authenticator;
  /**
   * True when a request without a credential can never be allowed anything (answer 401 early),
   * but for reads of a bucket made publicly readable (`publicRead`).
   */
  requiresCredential: boolean;
  /** Is this (live) bucket publicly readable (`files-rest bucket set ID --public-read on`)? Absent: none is. */
  publicRead?: (bucketId: string) => Promise<boolean>;
}

/** What a publicly readable bucket lets anyone do: download its objects (head or version), nothing else (not even list). */
export const PUBLIC_READ_ACTIONS: ReadonlySet<Action> = new Set<Action>(['object-read', 'object-read-version']);

/**
 * The decision of the policy for every door: the permission factory (asked only when there is an
 * identity or the policy allows anonymous requests), else a public read of a publicly readable bucket.
 */
export async function decide(policy: PermissionPolicy, args: PermissionArgs): Promise<boolean> {
  if ((args.identity || !policy.requiresCredential) && (await policy.factory(args).can())) return true;
  return args.resource !== null && PUBLIC_READ_ACTIONS.has(args.action) && policy.publicRead !== undefined && (await policy.publicRead(args.resource.bucketId));
}

/** May an anonymous request reach the handlers (the doors' early 401)? Only under a policy without credentials, or to read a public bucket. */
export async function anonymousMayProceed(policy: PermissionPolicy, readOf: string | null): Promise<boolean> {
  if (!policy.requiresCredential) return true;
  return readOf !== null && policy.publicRead !== undefined && (await policy.publicRead(readOf));
}

export const allowAll: PermissionFactory = () => ({ can: () => true });

/** The `token` factory: allowed when the token's scope holds the bucket and its actions the action. */
export const tokenFactory: PermissionFactory = ({ action, resource, identity }) => ({
  can: () => {
    if (!identity) return false;
    if (resource && identity.bucket !== null && identity.bucket !== resource.bucketId) return false;
    if (!resource && identity.bucket !== null) return false;
    if (identity.object) {
      if (!resource || (resource.key !== undefined && resource.key !== identity.object.key)) return false;
      if (resource.type === 'object' && resource.id !== undefined && resource.id !== identity.object.versionId) return false;
    }
    return identity.actions.includes(action);
  },
});

function tokenIdentity(t: TokenInfo): Identity {
  return { id: t.id, bucket: t.bucket, actions: t.actions };
}

/** The public-read flag of a live bucket (false for a missing or deleted one). */
function publicReadOf(db: Db): (bucketId: string) => Promise<boolean> {
  return async (bucketId) => {
    const r = await db.selectFrom('buckets').select('public_read').where('id', '=', bucketId).where('deleted', '=', 0).executeTakeFirst();
    return r?.public_read === 1;
  };
}

export async function loadPermissionPolicy(name: string, db: Db): Promise<PermissionPolicy> {
  const publicRead = publicReadOf(db);
  const authenticate: Authenticator = async (bearer) => {
    const t = await checkToken(db, bearer);
    if (t === null) return null;
    if ('refused' in t) throw new CredentialRefused(t.refused);
    return tokenIdentity(t);
  };
  if (name === 'allow-all') return { name, factory: allowAll, authenticate, requiresCredential: false, publicRead };
  if (name === 'token') return { name, factory: tokenFactory, authenticate, requiresCredential: true, publicRead };
  const mod = (await import(pathToFileURL(resolve(name)).href)) as {
    default?: PermissionFactory;
    permissionFactory?: PermissionFactory;
    authenticate?: Authenticator;
  };
  const factory = mod.default ?? mod.permissionFactory;
  if (typeof factory !== 'function') throw new Error(`FILES_REST_PERMISSION_FACTORY: ${name} exports no default factory function`);
  return { name, factory, authenticate: mod.authenticate ?? authenticate, requiresCredential: false, publicRead };
}
