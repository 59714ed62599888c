/**
 * GetObjectAttributes (`GET /bucket/key?attributes`, the attributes named in
 * `x-amz-object-attributes`): ETag (unquoted, as S3 gives it here), Checksum (as HeadObject gives it,
 * a composite one with its `-N`, as Ceph's s3-tests expect; and its type), ObjectParts (a multipart object's part count and, paged by
 * `x-amz-part-number-marker` / `x-amz-max-parts`, each part's number and size, every part but the
 * last of the upload's part size, and its checksum when the parts' were kept), StorageClass and ObjectSize. What is read and refused is
 * GetObject's (versionToRead).
 */
import type { Bucket } from '../domain/models.js';
import { s3PartRange } from '../domain/s3-uploads.js';
import { S3Error } from './errors.js';
import { keptPartChecksums, keptPartChecksumXml, objectChecksumXml } from './multipart-checksums.js';
import { s3EtagOf, versionToRead } from './objects.js';
import { header, sendXml, type S3Request } from './request.js';
import { doc, el } from './xml.js';

const ATTRIBUTES = ['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize'] as const;
type Attribute = (typeof ATTRIBUTES)[number];

/** The attributes asked for; InvalidArgument for none or an unknown one. */
function requestedAttributes(r: S3Request): Set<Attribute> {
  const names = (header(r, 'x-amz-object-attributes') ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  if (names.length === 0) throw new S3Error('InvalidArgument', 'The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty', { ArgumentName: 'x-amz-object-attributes' });
  for (const n of names) {
    if (!(ATTRIBUTES as readonly string[]).includes(n)) throw new S3Error('InvalidArgument', 'Invalid attribute name specified.', { ArgumentName: 'x-amz-object-attributes', ArgumentValue: n });
  }
  return new Set(names as Attribute[]);
}

/** An integer header within [min, max], or `fallback`. */
function intHeader(r: S3Request, name: string, fallback: number, min: number, max: number): number {
  const v = header(r, name)?.trim();
  if (v === undefined || v === '') return fallback;
  if (!/^\d{1,10}$/.test(v) || Number(v) < min || Number(v) > max) throw new S3Error('InvalidArgument', `${name} must be an integer from ${min} to ${max}.`, { ArgumentName: name, ArgumentValue: v });
  return Number(v);
}

/** GET /bucket/key?attributes */
export async function getObjectAttributesOp(r: S3Request, bucket: Pick<Bucket, 'id'>): Promise<void> {
  const { version, meta, checked } = await versionToRead(r, bucket, undefined, () => ({
    wanted: requestedAttributes(r),
    maxParts: intHeader(r, 'x-amz-max-parts', 1000, 0, 2147483647),
    marker: intHeader(r, 'x-amz-part-number-marker', 0, 0, 2147483647),
  }));
  const { wanted, maxParts, marker } = checked!;
  const file = version.file!;
  let inner = '';
  if (wanted.has('ETag')) inner += el('ETag', s3EtagOf(version, meta).replace(/^"|"$/g, ''));
  if (wanted.has('Checksum')) {
    const sums = objectChecksumXml(meta);
    if (sums) inner += `<Checksum>${sums}</Checksum>`;
  }
  if (wanted.has('ObjectParts')) {
    const first = s3PartRange(meta, file.size, 1);
    const count = first.kind === 'part' || first.kind === 'none' ? first.count : null;
    // Only an object made by a multipart upload has parts to tell (S3 gives none for a single upload);
    // one completed before part sizes were recorded tells only its count.
    if (first.kind === 'unknown') inner += `<ObjectParts>${el('PartsCount', first.count)}</ObjectParts>`;
    else if (count !== null) {
      const limit = Math.min(maxParts, 1000);
      const kept = keptPartChecksums(meta);
      let parts = '';
      let last = marker;
      for (let n = marker + 1; n <= count && n <= marker + limit; n++) {
        const p = s3PartRange(meta, file.size, n);
        if (p.kind !== 'part') break;
        parts += `<Part>${el('PartNumber', n)}${el('Size', p.end - p.start + 1)}${keptPartChecksumXml(kept, n)}</Part>`;
        last = n;
      }
      const paging = el('PartNumberMarker', marker) + el('NextPartNumberMarker', last) + el('MaxParts', limit) + el('IsTruncated', last < count);
      inner += `<ObjectParts>${el('PartsCount', count)}${paging}${parts}</ObjectParts>`;
    }
  }
  if (wanted.has('StorageClass')) inner += el('StorageClass', 'STANDARD');
  if (wanted.has('ObjectSize')) inner += el('ObjectSize', file.size);
  sendXml(r, doc('GetObjectAttributesResponse', inner), 200, {
    'last-modified': new Date(Math.floor(version.created / 1000)).toUTCString(),
    'x-amz-version-id': version.versionId,
  });
}
