/**
 * ACLs as far as files-rest has them: every bucket and object is private to the one owner the
 * listings show (who may do what is the permission factory's, with keys and tokens, not an ACL).
 * GetBucketAcl and GetObjectAcl answer that ACL (the owner, FULL_CONTROL); PutBucketAcl and
 * PutObjectAcl accept setting it to what it is (canned `private`, `bucket-owner-full-control` or
 * `bucket-owner-read`, or a policy granting the owner FULL_CONTROL and nobody else anything), which
 * tools send as a matter of course; any other grant is NotImplemented, never silently dropped.
 */
import type { Bucket } from '../domain/models.js';
import { findHead, findVersion } from '../domain/objects.js';
import { S3Error } from './errors.js';
import { DEFAULT_S3_OWNER, renderOwner } from './listings.js';
import { readSmallBody } from './payload.js';
import { authorize, header, sendEmpty, sendXml, type S3Request } from './request.js';
import { doc, el, parseXml, type XmlElement } from './xml.js';
import { cannedAclError } from './unsupported-headers.js';


/** The one ACL there is: the owner has FULL_CONTROL. */
function renderAcl(): string {
  const grantee = `<Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser">${el('ID', DEFAULT_S3_OWNER.id)}${el('DisplayName', DEFAULT_S3_OWNER.displayName)}</Grantee>`;
  return doc('AccessControlPolicy', `${renderOwner(DEFAULT_S3_OWNER)}<AccessControlList><Grant>${grantee}${el('Permission', 'FULL_CONTROL')}</Grant></AccessControlList>`);
}

function notImplemented(what: string): S3Error {
  return new S3Error('NotImplemented', `${what} is not supported by files-rest: every bucket and object is private to its owner; who may do what is set with access keys and the permission factory.`);
}

const PERMISSIONS = new Set(['FULL_CONTROL', 'WRITE', 'WRITE_ACP', 'READ', 'READ_ACP']);

/**
 * Refuses, as S3 does (400), a grantee that cannot exist here: a canonical user id other than the
 * owner's (files-rest has one owner), an e-mail address (no account has one). A group (AllUsers,
 * AuthenticatedUsers, LogDelivery) is a grant files-rest does not offer: left to NotImplemented.
 */
function checkGrantee(kind: 'id' | 'emailAddress' | 'uri', value: string): void {
  if (kind === 'emailAddress') throw new S3Error('UnresolvableGrantByEmailAddress', 'The e-mail address you provided does not match any account on record.');
  if (kind === 'id' && value !== DEFAULT_S3_OWNER.id) throw new S3Error('InvalidArgument', 'Invalid id', { ArgumentName: 'CanonicalUser/ID', ArgumentValue: value });
}

/** Whether an AccessControlPolicy document grants the owner FULL_CONTROL and nothing else. */
function isOwnerOnly(root: XmlElement): boolean {
  if (root.name !== 'AccessControlPolicy') throw new S3Error('MalformedACLError');
  const lists = root.children.filter((c) => c.name === 'AccessControlList');
  if (lists.length !== 1) throw new S3Error('MalformedACLError');
  const grants = lists[0]!.children.filter((c) => c.name === 'Grant');
  let ownerFullControl = false;
  for (const grant of grants) {
    const grantee = grant.children.find((c) => c.name === 'Grantee');
    const permission = grant.children.find((c) => c.name === 'Permission')?.text.trim();
    if (!grantee || !permission || !PERMISSIONS.has(permission)) throw new S3Error('MalformedACLError');
    const named = grantee.children.filter((c) => c.name === 'ID' || c.name === 'EmailAddress' || c.name === 'URI');
    if (named.length !== 1) throw new S3Error('MalformedACLError');
    const n = named[0]!;
    checkGrantee(n.name === 'ID' ? 'id' : n.name === 'EmailAddress' ? 'emailAddress' : 'uri', n.text.trim());
    // checkGrantee let an ID through only when it is the owner's.
    ownerFullControl = n.name === 'ID' && permission === 'FULL_CONTROL';
  }
  return grants.length === 1 && ownerFullControl;
}

/**
 * The grantees of `x-amz-grant-*` headers (`id="…", emailAddress="…", uri="…"`, comma-separated):
 * S3's 400 for one that cannot exist; true when the headers give the owner FULL_CONTROL and nothing
 * else (the ACL there is).
 */
function grantHeadersAreOwnerOnly(r: S3Request, names: string[]): boolean {
  let ownerOnly = names.length === 1 && names[0] === 'x-amz-grant-full-control';
  for (const name of names) {
    for (const item of (header(r, name) ?? '').split(',')) {
      const m = /^\s*(id|emailAddress|uri)\s*=\s*"?([^"]*)"?\s*$/i.exec(item);
      if (!m) throw new S3Error('InvalidArgument', `${name} must list grantees as id="…", emailAddress="…" or uri="…"`, { ArgumentName: name, ArgumentValue: header(r, name) ?? '' });
      const kind = m[1]!.toLowerCase() === 'emailaddress' ? 'emailAddress' : (m[1]!.toLowerCase() as 'id' | 'uri');
      checkGrantee(kind, m[2]!);
      if (kind !== 'id') ownerOnly = false;
    }
  }
  return ownerOnly;
}

/** Checks a PutBucketAcl / PutObjectAcl asks for the ACL there is; NotImplemented otherwise. */
async function requireOwnerOnly(r: S3Request): Promise<void> {
  const canned = header(r, 'x-amz-acl');
  const grants = [...r.headers.keys()].filter((h) => h.startsWith('x-amz-grant-'));
  if (grants.length > 0 && !grantHeadersAreOwnerOnly(r, grants)) throw notImplemented(`Access control grants (${grants.join(', ')})`);
  const body = await readSmallBody(r);
  if (grants.length > 0) {
    if (canned !== undefined || body.length > 0) throw new S3Error('InvalidRequest', 'Give one of x-amz-acl, x-amz-grant-* headers or an AccessControlPolicy, not several.');
    return;
  }
  if (canned !== undefined) {
    if (body.length > 0) throw new S3Error('UnexpectedContent', 'This request does not support content: give either x-amz-acl or an AccessControlPolicy.');
    const refusal = cannedAclError(canned);
    if (refusal) throw refusal;
    return;
  }
  if (body.length === 0) throw new S3Error('MissingSecurityHeader', 'Your request was missing a required header: x-amz-acl, or an AccessControlPolicy body.');
  if (!isOwnerOnly(parseXml(body.toString('utf8')))) throw notImplemented('An ACL granting anything but FULL_CONTROL to the owner');
}

/** The version an object ACL request names (`versionId`, else the head): NoSuchKey / NoSuchVersion. */
async function objectOf(r: S3Request, bucket: Bucket): Promise<string> {
  const versionId = r.query.get('versionId');
  if (versionId === '') throw new S3Error('InvalidArgument', 'Version id cannot be the empty string.');
  if (versionId !== null) {
    const v = await findVersion(r.ctx.db, bucket.id, r.key, versionId);
    if (!v) throw new S3Error('NoSuchVersion', undefined, { Key: r.key, VersionId: versionId });
    return v.versionId;
  }
  const head = await findHead(r.ctx.db, bucket.id, r.key);
  if (!head || !head.file) throw new S3Error('NoSuchKey', undefined, { Key: r.key });
  return head.versionId;
}

export async function getBucketAclOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-read', { type: 'bucket', bucketId: bucket.id });
  sendXml(r, renderAcl());
}

export async function putBucketAclOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id });
  await requireOwnerOnly(r);
  sendEmpty(r, 200);
}

export async function getObjectAclOp(r: S3Request, bucket: Bucket): Promise<void> {
  const versionId = r.query.get('versionId');
  await authorize(r, versionId !== null ? 'object-read-version' : 'object-read', { type: 'object', bucketId: bucket.id, key: r.key, ...(versionId ? { id: versionId } : {}) });
  const id = await objectOf(r, bucket);
  sendXml(r, renderAcl(), 200, { 'x-amz-version-id': id });
}

export async function putObjectAclOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'object', bucketId: bucket.id, key: r.key });
  const id = await objectOf(r, bucket);
  await requireOwnerOnly(r);
  sendEmpty(r, 200, { 'x-amz-version-id': id });
}
