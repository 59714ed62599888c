/**
 * ACLs as far as files-rest has them: every bucket and object is private to the one owner the
 * listings show (who may do what is the permission factory's, with keys and tokens, not an ACL),
 * and the objects of a publicly readable bucket (`files-rest bucket set ID --public-read on`) are
 * readable by everyone. GetBucketAcl and GetObjectAcl answer that ACL (the owner, FULL_CONTROL; and
 * AllUsers READ on an object of a public bucket); PutBucketAcl and PutObjectAcl accept setting it to
 * what it is (canned `private`, `bucket-owner-full-control` or `bucket-owner-read`, `public-read`
 * for an object of a public bucket, or grants that are exactly that ACL), which tools send as a
 * matter of course; any other grant is NotImplemented, never silently dropped.
 */
import type { Bucket } from '../domain/models.js';
import { findHead, findVersion } from '../domain/objects.js';
import { S3Error } from './errors.js';
import { DEFAULT_S3_OWNER, renderOwner } from './listings.js';
import { readSmallBody } from './payload.js';
import { authorize, header, sendEmpty, sendXml, versionIdOf, type S3Request } from './request.js';
import { doc, el, parseXml, type XmlElement } from './xml.js';
import { cannedAclError } from './unsupported-headers.js';


/** S3's group of everyone, anonymous requests included. */
const ALL_USERS = 'http://acs.amazonaws.com/groups/global/AllUsers';

/**
 * The ACL there is: the owner has FULL_CONTROL; an object of a publicly readable bucket
 * (`publicObject`) is also readable by everyone (AllUsers READ), as files-rest serves it to anyone.
 */
function renderAcl(publicObject: boolean): string {
  const owner = `<Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="CanonicalUser">${el('ID', DEFAULT_S3_OWNER.id)}${el('DisplayName', DEFAULT_S3_OWNER.displayName)}</Grantee>`;
  const everyone = `<Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="Group">${el('URI', ALL_USERS)}</Grantee>`;
  const grants = `<Grant>${owner}${el('Permission', 'FULL_CONTROL')}</Grant>` + (publicObject ? `<Grant>${everyone}${el('Permission', 'READ')}</Grant>` : '');
  return doc('AccessControlPolicy', `${renderOwner(DEFAULT_S3_OWNER)}<AccessControlList>${grants}</AccessControlList>`);
}

function notImplemented(what: string): S3Error {
  return new S3Error('NotImplemented', `${what} is not supported by files-rest: every bucket and object is private to its owner (an object is readable by anyone when its bucket is made public); who may do what is set with access keys and the permission factory.`);
}

const PERMISSIONS = new Set(['FULL_CONTROL', 'WRITE', 'WRITE_ACP', 'READ', 'READ_ACP']);

/** One grant: who (`id`, `emailAddress` or a group's `uri`) and what. */
interface Grant {
  kind: 'id' | 'emailAddress' | 'uri';
  value: string;
  permission: string;
}

/**
 * Refuses, as S3 does (400), a grantee that cannot exist here: a canonical user id other than the
 * owner's (files-rest has one owner), an e-mail address (no account has one). A group (AllUsers,
 * AuthenticatedUsers, LogDelivery) is a grant files-rest offers only as it is: AllUsers READ on the
 * objects of a public bucket.
 */
function checkGrantee(kind: Grant['kind'], value: string): void {
  if (kind === 'emailAddress') throw new S3Error('UnresolvableGrantByEmailAddress', 'The e-mail address you provided does not match any account on record.');
  if (kind === 'id' && value !== DEFAULT_S3_OWNER.id) throw new S3Error('InvalidArgument', 'Invalid id', { ArgumentName: 'CanonicalUser/ID', ArgumentValue: value });
}

/** Whether `grants` are exactly the ACL there is (see renderAcl). */
function isTheAcl(grants: readonly Grant[], publicObject: boolean): boolean {
  const key = (g: Grant) => `${g.kind} ${g.value} ${g.permission}`;
  const want = new Set([key({ kind: 'id', value: DEFAULT_S3_OWNER.id, permission: 'FULL_CONTROL' })]);
  if (publicObject) want.add(key({ kind: 'uri', value: ALL_USERS, permission: 'READ' }));
  const got = new Set(grants.map(key));
  return got.size === want.size && [...want].every((k) => got.has(k));
}

/** The grants of an AccessControlPolicy document; MalformedACLError, or S3's 400 for a grantee that cannot exist. */
function grantsOfPolicy(root: XmlElement): Grant[] {
  if (root.name !== 'AccessControlPolicy') throw new S3Error('MalformedACLError');
  const lists = root.children.filter((c) => c.name === 'AccessControlList');
  if (lists.length !== 1) throw new S3Error('MalformedACLError');
  return lists[0]!.children
    .filter((c) => c.name === 'Grant')
    .map((grant) => {
      const grantee = grant.children.find((c) => c.name === 'Grantee');
      const permission = grant.children.find((c) => c.name === 'Permission')?.text.trim();
      if (!grantee || !permission || !PERMISSIONS.has(permission)) throw new S3Error('MalformedACLError');
      const named = grantee.children.filter((c) => c.name === 'ID' || c.name === 'EmailAddress' || c.name === 'URI');
      if (named.length !== 1) throw new S3Error('MalformedACLError');
      const n = named[0]!;
      const kind = n.name === 'ID' ? 'id' : n.name === 'EmailAddress' ? 'emailAddress' : 'uri';
      checkGrantee(kind, n.text.trim());
      return { kind, value: n.text.trim(), permission };
    });
}

/** The permission each `x-amz-grant-*` header gives. */
const GRANT_HEADERS: ReadonlyMap<string, string> = new Map([
  ['x-amz-grant-full-control', 'FULL_CONTROL'],
  ['x-amz-grant-read', 'READ'],
  ['x-amz-grant-write', 'WRITE'],
  ['x-amz-grant-read-acp', 'READ_ACP'],
  ['x-amz-grant-write-acp', 'WRITE_ACP'],
]);

/**
 * The grants of `x-amz-grant-*` headers (`id="…", emailAddress="…", uri="…"`, comma-separated):
 * S3's 400 for a malformed list or a grantee that cannot exist.
 */
function grantsOfHeaders(r: S3Request, names: string[]): Grant[] {
  const out: Grant[] = [];
  for (const name of names) {
    const permission = GRANT_HEADERS.get(name);
    if (!permission) throw new S3Error('InvalidArgument', `${name} is not an S3 grant header.`, { ArgumentName: name });
    for (const item of (header(r, name) ?? '').split(',')) {
      const m = /^\s*(id|emailAddress|uri)\s*=\s*"?([^"]*)"?\s*$/i.exec(item);
      if (!m) throw new S3Error('InvalidArgument', `${name} must list grantees as id="…", emailAddress="…" or uri="…"`, { ArgumentName: name, ArgumentValue: header(r, name) ?? '' });
      const kind = m[1]!.toLowerCase() === 'emailaddress' ? 'emailAddress' : (m[1]!.toLowerCase() as 'id' | 'uri');
      checkGrantee(kind, m[2]!);
      out.push({ kind, value: m[2]!, permission });
    }
  }
  return out;
}

/**
 * Checks a PutBucketAcl / PutObjectAcl asks for the ACL there is (see renderAcl; `publicObject`: an
 * object of a publicly readable bucket); NotImplemented otherwise.
 */
async function requireTheAcl(r: S3Request, publicObject: boolean): Promise<void> {
  const canned = header(r, 'x-amz-acl');
  const grants = [...r.headers.keys()].filter((h) => h.startsWith('x-amz-grant-'));
  if (grants.length > 0 && !isTheAcl(grantsOfHeaders(r, grants), publicObject)) throw notImplemented(`Access control grants (${grants.join(', ')})`);
  const body = await readSmallBody(r);
  if (grants.length > 0) {
    if (canned !== undefined || body.length > 0) throw new S3Error('InvalidRequest', 'Give one of x-amz-acl, x-amz-grant-* headers or an AccessControlPolicy, not several.');
    return;
  }
  if (canned !== undefined) {
    if (body.length > 0) throw new S3Error('UnexpectedContent', 'This request does not support content: give either x-amz-acl or an AccessControlPolicy.');
    const refusal = cannedAclError(canned, publicObject);
    if (refusal) throw refusal;
    return;
  }
  if (body.length === 0) throw new S3Error('MissingSecurityHeader', 'Your request was missing a required header: x-amz-acl, or an AccessControlPolicy body.');
  if (!isTheAcl(grantsOfPolicy(parseXml(body.toString('utf8'))), publicObject)) {
    throw notImplemented(publicObject ? 'An ACL other than FULL_CONTROL to the owner and READ to everyone (an object of a public bucket)' : 'An ACL granting anything but FULL_CONTROL to the owner');
  }
}

/** The version an object ACL request names (`versionId`, else the head): NoSuchKey / NoSuchVersion. */
async function objectOf(r: S3Request, bucket: Bucket): Promise<string> {
  const versionId = versionIdOf(r);
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
  sendXml(r, renderAcl(false));
}

export async function putBucketAclOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id });
  await requireTheAcl(r, false);
  sendEmpty(r, 200);
}

export async function getObjectAclOp(r: S3Request, bucket: Bucket): Promise<void> {
  const versionId = versionIdOf(r);
  await authorize(r, versionId !== null ? 'object-read-version' : 'object-read', { type: 'object', bucketId: bucket.id, key: r.key, ...(versionId ? { id: versionId } : {}) });
  const id = await objectOf(r, bucket);
  sendXml(r, renderAcl(bucket.publicRead === true), 200, { 'x-amz-version-id': id });
}

export async function putObjectAclOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'object', bucketId: bucket.id, key: r.key });
  const id = await objectOf(r, bucket);
  await requireTheAcl(r, bucket.publicRead === true);
  sendEmpty(r, 200, { 'x-amz-version-id': id });
}
