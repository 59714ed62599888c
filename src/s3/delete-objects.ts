/**
 * DeleteObjects (POST /<bucket>?delete): up to 1000 keys, each deleted as DeleteObject deletes it
 * (a delete marker, or with a VersionId that version; with its ETag, LastModifiedTime and Size
 * conditions) through the domain, one after the other; a
 * refusal is reported for its key and the others go on. Quiet mode lists only the errors. S3 wants
 * the body protected: Content-MD5 or an x-amz-checksum-* (header or trailer), verified.
 */
import { isAppError } from '../errors.js';
import type { Bucket } from '../domain/models.js';
import { hardDeleteVersion, placeDeleteMarker } from '../domain/objects.js';
import { deleteCheck, parseDeleteCondition, type DeleteCondition } from './delete-object.js';
import { toS3Error } from './error-map.js';
import { S3Error } from './errors.js';
import { readSmallBody } from './payload.js';
import { authorize, header, sendXml, type S3Request } from './request.js';
import { doc, el, parseXml } from './xml.js';

/** S3's limit on the keys of one request. */
export const MAX_DELETE_KEYS = 1000;
/** The largest body read: 1000 keys of 1024 bytes, escaped, with version ids, with room to spare. */
const MAX_BODY = 8 * 1024 * 1024;

interface Target {
  key: string;
  versionId: string | null;
  /** The entry's ETag, LastModifiedTime and Size conditions, if any. */
  condition: DeleteCondition | null;
}

type Outcome =
  | { ok: true; key: string; versionId?: string; deleteMarker?: boolean; deleteMarkerVersionId?: string }
  | { ok: false; key: string; versionId?: string; code: string; message: string };

function hasIntegrityHeader(r: S3Request): boolean {
  if (header(r, 'content-md5') !== undefined) return true;
  for (const name of r.headers.keys()) {
    if (name.startsWith('x-amz-checksum-') && name !== 'x-amz-checksum-mode' && name !== 'x-amz-checksum-type' && name !== 'x-amz-checksum-algorithm') return true;
  }
  return /x-amz-checksum-/i.test(header(r, 'x-amz-trailer') ?? '');
}

function parseTargets(body: string): { quiet: boolean; targets: Target[] } {
  const root = parseXml(body);
  if (root.name !== 'Delete') throw new S3Error('MalformedXML');
  let quiet = false;
  const targets: Target[] = [];
  for (const c of root.children) {
    if (c.name === 'Quiet') {
      const q = c.text.trim().toLowerCase();
      if (q !== 'true' && q !== 'false') throw new S3Error('MalformedXML');
      quiet = q === 'true';
    } else if (c.name === 'Object') {
      const keys = c.children.filter((e) => e.name === 'Key');
      const versions = c.children.filter((e) => e.name === 'VersionId');
      if (keys.length !== 1 || versions.length > 1) throw new S3Error('MalformedXML');
      // Keys are taken as written (S3 keeps their spaces); a version id is trimmed.
      const versionId = versions.length === 1 ? versions[0]!.text.trim() : null;
      const one = (name: string) => {
        const found = c.children.filter((e) => e.name === name);
        if (found.length > 1) throw new S3Error('MalformedXML');
        return found[0]?.text;
      };
      const condition = parseDeleteCondition({ ifMatch: one('ETag'), lastModified: one('LastModifiedTime'), size: one('Size') });
      targets.push({ key: keys[0]!.text, versionId: versionId === '' ? null : versionId, condition });
    } else {
      throw new S3Error('MalformedXML');
    }
  }
  if (targets.length === 0 || targets.length > MAX_DELETE_KEYS) throw new S3Error('MalformedXML');
  return { quiet, targets };
}

async function deleteOne(r: S3Request, bucket: Bucket, t: Target): Promise<Outcome> {
  const base = { key: t.key, ...(t.versionId !== null ? { versionId: t.versionId } : {}) };
  const check = t.condition ? { check: deleteCheck(t.condition) } : {};
  try {
    if (t.key === '') throw new S3Error('InvalidArgument', 'The key must not be empty.');
    if (t.versionId !== null) {
      await authorize(r, 'object-delete-version', { type: 'object', bucketId: bucket.id, key: t.key, id: t.versionId });
      try {
        const removed = await hardDeleteVersion(r.ctx, bucket.id, t.key, t.versionId, { shared: 'release', ...check });
        return removed.file ? { ok: true, ...base } : { ok: true, ...base, deleteMarker: true, deleteMarkerVersionId: removed.versionId };
      } catch (e) {
        // As DeleteObject: a version that is not there is deleted already.
        if (isAppError(e, 'OBJECT_NOT_FOUND')) return { ok: true, ...base };
        throw e;
      }
    }
    await authorize(r, 'object-delete', { type: 'object', bucketId: bucket.id, key: t.key });
    try {
      const { marker } = await placeDeleteMarker(r.ctx, bucket.id, t.key, check);
      return { ok: true, ...base, deleteMarker: true, deleteMarkerVersionId: marker.versionId };
    } catch (e) {
      // As DeleteObject: a conditional delete of a key that never had anything is deleted already.
      if (t.condition && isAppError(e, 'OBJECT_NOT_FOUND')) return { ok: true, ...base };
      throw e;
    }
  } catch (e) {
    const err = toS3Error(e);
    if (err.status >= 500) r.log.error({ err: e, key: t.key }, 'DeleteObjects: one key failed');
    return { ok: false, ...base, code: err.code, message: err.message };
  }
}

function render(o: Outcome): string {
  const id = o.versionId !== undefined ? el('VersionId', o.versionId) : '';
  if (!o.ok) return `<Error>${el('Key', o.key)}${id}${el('Code', o.code)}${el('Message', o.message)}</Error>`;
  const marker = o.deleteMarker ? el('DeleteMarker', true) + el('DeleteMarkerVersionId', o.deleteMarkerVersionId!) : '';
  return `<Deleted>${el('Key', o.key)}${id}${marker}</Deleted>`;
}

export async function deleteObjectsOp(r: S3Request, bucket: Bucket): Promise<void> {
  if (!hasIntegrityHeader(r)) throw new S3Error('InvalidRequest', 'Missing required header for this request: Content-MD5 OR x-amz-checksum-*');
  const body = await readSmallBody(r, MAX_BODY);
  const { quiet, targets } = parseTargets(body.toString('utf8'));
  const parts: string[] = [];
  for (const t of targets) {
    const o = await deleteOne(r, bucket, t);
    if (!o.ok || !quiet) parts.push(render(o));
  }
  sendXml(r, doc('DeleteResult', parts.join('')));
}
