/**
 * The S3 door's bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket,
 * GetBucketLocation, Get/PutBucketVersioning.
 */
import { isAppError } from '../errors.js';
import { createBucket } from '../domain/buckets.js';
import { deleteEmptyBucket } from '../domain/bucket-deletion.js';
import type { Bucket } from '../domain/models.js';
import { toBucket } from '../domain/rows.js';
import { S3Error, xmlEscape } from './errors.js';
import { bucketNameProblem, isBucketId, resolveBucket } from './names.js';
import { readSmallBody } from './payload.js';
import { allowed, authorize, sendEmpty, sendXml, type S3Request } from './request.js';
import { DEFAULT_S3_OWNER, renderOwner } from './listings.js';
import { childText, doc, el, parseXml } from './xml.js';

/** The region the door answers with; any region is accepted in signatures. */
export const DOOR_REGION = 'us-east-1';
/** The owner of every bucket: the same ID and name as the listings' owner of every object. */
const OWNER = renderOwner(DEFAULT_S3_OWNER);

function isoDate(micros: number): string {
  return new Date(Math.floor(micros / 1000)).toISOString();
}

/** The name a bucket is shown under: its S3 name, else its id. */
export function displayName(b: Bucket): string {
  return b.name ?? b.id;
}

export async function listBucketsOp(r: S3Request): Promise<void> {
  if (r.policy.name !== 'allow-all' && !r.identity && r.policy.requiresCredential) {
    throw new S3Error('AccessDenied', 'Anonymous requests are not allowed; sign the request with an access key.');
  }
  // Paging (max-buckets, continuation-token) and prefix, as S3's ListBuckets has them; buckets in
  // the order of their names, as S3 lists them. The token is the last name given, encoded.
  const maxText = r.query.get('max-buckets');
  if (maxText !== null && (!/^\d{1,5}$/.test(maxText) || Number(maxText) < 1 || Number(maxText) > 10000)) {
    throw new S3Error('InvalidArgument', 'max-buckets must be an integer from 1 to 10000.', { ArgumentName: 'max-buckets', ArgumentValue: maxText });
  }
  const max = maxText === null ? Infinity : Number(maxText);
  const token = r.query.get('continuation-token');
  let after: string | null = null;
  if (token !== null && token !== '') {
    after = Buffer.from(token, 'base64url').toString('utf8');
    if (Buffer.from(after, 'utf8').toString('base64url') !== token) throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect.', { ArgumentName: 'continuation-token' });
  }
  const prefix = r.query.get('prefix') ?? '';
  let q = r.ctx.db.selectFrom('buckets').selectAll().where('deleted', '=', 0);
  if (r.identity?.bucket) q = q.where('id', '=', r.identity.bucket);
  const named = (await q.execute())
    .map((row) => toBucket(row))
    .map((b) => ({ b, name: displayName(b) }))
    .filter((x) => x.name.startsWith(prefix) && (after === null || x.name > after))
    .sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
  let items = '';
  let given = 0;
  let lastName: string | null = null;
  let next: string | null = null;
  for (const { b, name } of named) {
    if (!(await allowed(r, 'bucket-read', { type: 'bucket', bucketId: b.id }))) continue;
    if (given === max) {
      next = Buffer.from(lastName ?? '', 'utf8').toString('base64url');
      break;
    }
    items += `<Bucket>${el('Name', name)}${el('CreationDate', isoDate(b.created))}</Bucket>`;
    lastName = name;
    given++;
  }
  const tail = (next !== null ? el('ContinuationToken', next) : '') + (prefix !== '' ? el('Prefix', prefix) : '');
  sendXml(r, doc('ListAllMyBucketsResult', `${OWNER}<Buckets>${items}</Buckets>${tail}`));
}

/**
 * CreateBucket's optional body: a CreateBucketConfiguration whose LocationConstraint names any
 * region (the bucket's `region`, answered by GetBucketLocation); null for none or us-east-1, which S3
 * answers as empty. A value that cannot be a region's name is InvalidLocationConstraint.
 */
function regionOfConfiguration(body: Buffer): string | null {
  if (body.length === 0 || body.toString('utf8').trim() === '') return null;
  const root = parseXml(body.toString('utf8'));
  if (root.name !== 'CreateBucketConfiguration') throw new S3Error('MalformedXML');
  const region = childText(root, 'LocationConstraint')?.trim() ?? '';
  if (region !== '' && !/^[A-Za-z0-9][A-Za-z0-9-]{0,62}$/.test(region)) throw new S3Error('InvalidLocationConstraint');
  return region === '' || region === DOOR_REGION ? null : region;
}

export async function createBucketOp(r: S3Request): Promise<void> {
  const name = r.bucketName;
  await authorize(r, 'location-update', null);
  const body = await readSmallBody(r);
  const region = regionOfConfiguration(body);
  const existing = await resolveBucket(r.ctx.db, name);
  if (existing) {
    const mine = r.policy.name === 'allow-all' || (await allowed(r, 'bucket-read', { type: 'bucket', bucketId: existing.id }));
    if (!mine) throw new S3Error('BucketAlreadyExists');
    // As S3 in us-east-1 (the region the door answers as): creating again a bucket you own there
    // succeeds and changes nothing; in any other region it is BucketAlreadyOwnedByYou.
    if (existing.region == null && region === null) return sendEmpty(r, 200, { location: `/${name}` });
    throw new S3Error('BucketAlreadyOwnedByYou');
  }
  const problem = bucketNameProblem(name);
  if (problem) throw new S3Error('InvalidBucketName', `The specified bucket is not valid: ${problem}.`, { BucketName: name });
  if (isBucketId(name)) throw new S3Error('InvalidBucketName', 'Names shaped as a bucket id (a UUID) are reserved: they address the bucket of that id.', { BucketName: name });
  try {
    await createBucket(r.ctx, { name, region });
  } catch (e) {
    // Another request took the name in the meantime (the unique index).
    if (!isAppError(e) && (await resolveBucket(r.ctx.db, name))) throw new S3Error('BucketAlreadyExists');
    throw e;
  }
  sendEmpty(r, 200, { location: `/${name}` });
}

export async function headBucketOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-read', { type: 'bucket', bucketId: bucket.id });
  sendEmpty(r, 200, { 'x-amz-bucket-region': bucket.region ?? DOOR_REGION });
}

export async function deleteBucketOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'location-update', { type: 'bucket', bucketId: bucket.id });
  await deleteEmptyBucket(r.ctx, bucket.id);
  sendEmpty(r, 204);
}

export async function getBucketLocationOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-read', { type: 'bucket', bucketId: bucket.id });
  // The region named at creation; empty for us-east-1 (or none), as S3 answers for it.
  if (bucket.region) sendXml(r, doc('LocationConstraint', xmlEscape(bucket.region)));
  else sendXml(r, `<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>`);
}

export async function getBucketVersioningOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-read', { type: 'bucket', bucketId: bucket.id });
  sendXml(r, doc('VersioningConfiguration', el('Status', 'Enabled')));
}

export async function putBucketVersioningOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id });
  const body = await readSmallBody(r);
  const root = parseXml(body.toString('utf8'));
  if (root.name !== 'VersioningConfiguration') throw new S3Error('MalformedXML');
  const status = childText(root, 'Status');
  if (status === 'Suspended') throw new S3Error('NotImplemented', 'Versioning cannot be suspended: files-rest keeps every version of every object.');
  if (status !== undefined && status !== 'Enabled') throw new S3Error('MalformedXML');
  if (childText(root, 'MfaDelete') === 'Enabled') throw new S3Error('NotImplemented', 'MFA delete is not supported.');
  sendEmpty(r, 200);
}
