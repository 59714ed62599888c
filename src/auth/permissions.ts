import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import type { Db } from '../db/schema.js';
import type { Action } from './actions.js';
import { verifyToken, type TokenInfo } from './tokens.js';

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
 * export its own `authenticate`.
 */
export type Authenticator = (bearer: string) => Promise<Identity | null>;

export interface PermissionPolicy {
  name: string;
  factory: PermissionFactory;
  authenticate: Authenticator;
  /** True when a request without a credential can never be allowed anything (answer 401 early). */
  requiresCredential: boolean;
}

export const allowAll: PermissionFactory = () => ({ can: () => true });

/** The `token` factory: allowed when the token's scope holds the bucket and its actions the action. */
export const tokenFactory: PermissionFactory = ({ action, resource, identity }) => ({
  can: () => {
    if (!identity) return false;
    if (resource && identity.bucket !== null && identity.bucket !== resource.bucketId) return false;
    if (!resource && identity.bucket !== null) return false;
    return identity.actions.includes(action);
  },
});

function tokenIdentity(t: TokenInfo): Identity {
  return { id: t.id, bucket: t.bucket, actions: t.actions };
}

export async function loadPermissionPolicy(name: string, db: Db): Promise<PermissionPolicy> {
  const authenticate: Authenticator = async (bearer) => {
    const t = await verifyToken(db, bearer);
    return t ? tokenIdentity(t) : null;
  };
  if (name === 'allow-all') return { name, factory: allowAll, authenticate, requiresCredential: false };
  if (name === 'token') return { name, factory: tokenFactory, authenticate, requiresCredential: true };
  const mod = (await import(pathToFileURL(resolve(name)).href)) as {
    default?: PermissionFactory;
    permissionFactory?: PermissionFactory;
    authenticate?: Authenticator;
  };
  const factory = mod.default ?? mod.permissionFactory;
  if (typeof factory !== 'function') throw new Error(`FILES_REST_PERMISSION_FACTORY: ${name} exports no default factory function`);
  return { name, factory, authenticate: mod.authenticate ?? authenticate, requiresCredential: false };
}
