/**
 * Object tagging through the S3 door (GetObjectTagging, PutObjectTagging, DeleteObjectTagging, the
 * `x-amz-tagging` header of PutObject and CopyObject): S3 tag sets are the tags of a version that
 * the REST door stores from its tags header and shows in a version's `tags`, so a tag set through
 * one door is seen through the other. And bucket tagging (GetBucketTagging, PutBucketTagging,
 * DeleteBucketTagging): the bucket's own tags (domain/bucket-tags.ts). S3's limits apply to what
 * this door writes.
 */
import { isAppError } from '../errors.js';
import type { Bucket } from '../domain/models.js';
import { setVersionTags } from '../domain/tags.js';
import { findBucketTags, setBucketTags } from '../domain/bucket-tags.js';
import { S3Error } from './errors.js';
import { readSmallBody } from './payload.js';
import { addressedObject, authorize, header, sendEmpty, sendXml, versionIdOf, type S3Request } from './request.js';
import { doc, el, parseXml } from './xml.js';

/** S3's limits on a tag set: an object's, a bucket's. */
const MAX_TAGS = 10;
const MAX_BUCKET_TAGS = 50;
const MAX_KEY = 128;
const MAX_VALUE = 256;

/** Refuses (InvalidTag) a tag set beyond S3's limits or with characters the store cannot hold. */
export function checkTagSet(tags: [string, string][], of: 'object' | 'bucket' = 'object'): Record<string, string> {
  const max = of === 'object' ? MAX_TAGS : MAX_BUCKET_TAGS;
  if (tags.length > max) throw new S3Error('InvalidTag', `${of === 'object' ? 'Object' : 'Bucket'} tags cannot be greater than ${max}.`);
  const out: Record<string, string> = {};
  for (const [k, v] of tags) {
    if (k.length === 0 || [...k].length > MAX_KEY) throw new S3Error('InvalidTag', `The TagKey you have provided is invalid (1 to ${MAX_KEY} characters).`);
    if ([...v].length > MAX_VALUE) throw new S3Error('InvalidTag', `The TagValue you have provided is invalid (at most ${MAX_VALUE} characters).`);
    if (/[\u0000-\u001f\u007f]/.test(k + v)) throw new S3Error('InvalidTag', 'Tags cannot contain control characters.');
    if (Object.hasOwn(out, k)) throw new S3Error('InvalidTag', 'Cannot provide multiple Tags with the same key.');
    if (of === 'bucket' && k.toLowerCase().startsWith('aws:')) throw new S3Error('InvalidTag', 'System tags cannot be added/updated by requester (a TagKey may not begin with aws:).');
    out[k] = v;
  }
  return out;
}

/** The `x-amz-tagging` header (URL query encoded, `a=1&b=2`) as a checked tag set; undefined when absent. */
export function taggingHeader(r: S3Request): Record<string, string> | undefined {
  const text = header(r, 'x-amz-tagging');
  if (text === undefined) return undefined;
  let pairs: [string, string][];
  try {
    // Node hands header bytes over as Latin-1 characters; the percent-decoded text is UTF-8.
    pairs = [...new URLSearchParams(Buffer.from(text, 'latin1').toString('utf8'))];
  } catch {
    throw new S3Error('InvalidArgument', 'The x-amz-tagging header is not URL query encoded.');
  }
  return checkTagSet(pairs);
}

/** `x-amz-tagging-count` of a GET or HEAD, when the version has tags. */
export function taggingCountHeader(tags: Record<string, string>): Record<string, string> {
  const n = Object.keys(tags).length;
  return n > 0 ? { 'x-amz-tagging-count': String(n) } : {};
}

export async function getObjectTaggingOp(r: S3Request, bucket: Bucket): Promise<void> {
  const versionId = versionIdOf(r);
  await authorize(r, versionId !== null ? 'object-read-version' : 'object-read', { type: 'object', bucketId: bucket.id, key: r.key, ...(versionId ? { id: versionId } : {}) });
  const v = await addressedObject(r, bucket.id, versionId);
  sendXml(r, renderTagging(v.tags), 200, { 'x-amz-version-id': v.versionId });
}

/** A `Tagging` document, its tags by key, as S3 and RGW list them (not in the order they were given). */
function renderTagging(tags: Record<string, string>): string {
  const set = Object.entries(tags)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, val]) => `<Tag>${el('Key', k)}${el('Value', val)}</Tag>`)
    .join('');
  return doc('Tagging', `<TagSet>${set}</TagSet>`);
}

/** A `<Tagging><TagSet>…</TagSet></Tagging>` document's tags (PutObjectTagging's and PutBucketTagging's body, PostObject's `tagging` field). */
export function parseTagging(body: string, of: 'object' | 'bucket' = 'object'): Record<string, string> {
  const root = parseXml(body);
  if (root.name !== 'Tagging') throw new S3Error('MalformedXML');
  const sets = root.children.filter((c) => c.name === 'TagSet');
  if (sets.length !== 1) throw new S3Error('MalformedXML');
  const pairs: [string, string][] = [];
  for (const tag of sets[0]!.children) {
    if (tag.name !== 'Tag') throw new S3Error('MalformedXML');
    const k = tag.children.filter((c) => c.name === 'Key');
    const v = tag.children.filter((c) => c.name === 'Value');
    if (k.length !== 1 || v.length !== 1) throw new S3Error('MalformedXML');
    pairs.push([k[0]!.text, v[0]!.text]);
  }
  return checkTagSet(pairs, of);
}

export async function putObjectTaggingOp(r: S3Request, bucket: Bucket): Promise<void> {
  const versionId = versionIdOf(r);
  await authorize(r, 'bucket-update', { type: 'object', bucketId: bucket.id, key: r.key, ...(versionId ? { id: versionId } : {}) });
  const tags = parseTagging((await readSmallBody(r)).toString('utf8'));
  const saved = await setVersionTags(r.ctx, { bucketId: bucket.id, key: r.key, versionId }, tags).catch(notFound(versionId));
  sendEmpty(r, 200, { 'x-amz-version-id': saved.versionId });
}

export async function deleteObjectTaggingOp(r: S3Request, bucket: Bucket): Promise<void> {
  const versionId = versionIdOf(r);
  await authorize(r, 'bucket-update', { type: 'object', bucketId: bucket.id, key: r.key, ...(versionId ? { id: versionId } : {}) });
  const saved = await setVersionTags(r.ctx, { bucketId: bucket.id, key: r.key, versionId }, {}).catch(notFound(versionId));
  sendEmpty(r, 204, { 'x-amz-version-id': saved.versionId });
}

/** A missing version is NoSuchVersion (the table says NoSuchKey for a missing object). */
function notFound(versionId: string | null) {
  return (e: unknown): never => {
    if (versionId !== null && isAppError(e, 'OBJECT_NOT_FOUND')) throw new S3Error('NoSuchVersion');
    throw e;
  };
}

export async function getBucketTaggingOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-read', { type: 'bucket', bucketId: bucket.id });
  const tags = await findBucketTags(r.ctx.db, bucket.id);
  if (!tags) throw new S3Error('NoSuchTagSet', undefined, { BucketName: r.bucketName });
  sendXml(r, renderTagging(tags));
}

/** PutBucketTagging replaces the bucket's tag set (an empty one removes it), as S3 does: 204. */
export async function putBucketTaggingOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id });
  const tags = parseTagging((await readSmallBody(r)).toString('utf8'), 'bucket');
  await setBucketTags(r.ctx, bucket.id, tags);
  sendEmpty(r, 204);
}

export async function deleteBucketTaggingOp(r: S3Request, bucket: Bucket): Promise<void> {
  await authorize(r, 'bucket-update', { type: 'bucket', bucketId: bucket.id });
  await setBucketTags(r.ctx, bucket.id, null);
  sendEmpty(r, 204);
}
