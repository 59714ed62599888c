import type { Bucket, ListedVersion } from '../domain/models.js';
import { isoMicros } from '../util/time.js';
import type { Links } from './links.js';

/** Bucket JSON: exactly the reference's keys. */
export function bucketJson(b: Bucket, links: Links) {
  const self = links.bucket(b.id);
  return {
    id: b.id,
    size: b.size,
    quota_size: b.quotaSize,
    max_file_size: b.maxFileSize,
    locked: b.locked,
    created: isoMicros(b.created),
    updated: isoMicros(b.updated),
    links: { self, versions: `${self}?versions`, uploads: `${self}?uploads` },
  };
}

/**
 * Object version JSON: the reference's eleven keys. A delete marker has no size and no checksum.
 * `links.self` is the plain object URL only for a head with a file; `uploads` only there too.
 */
export function versionJson(v: ListedVersion, links: Links) {
  const url = links.object(v.bucketId, v.key);
  const versionUrl = `${url}?versionId=${v.versionId}`;
  const live = v.isHead && v.file !== null;
  const out: Record<string, unknown> = {
    key: v.key,
    version_id: v.versionId,
    is_head: v.isHead,
    delete_marker: v.file === null,
  };
  if (v.file) out.size = v.file.size;
  out.mimetype = v.mimetype;
  if (v.file) out.checksum = v.file.checksum;
  out.tags = v.tags;
  out.created = isoMicros(v.created);
  out.updated = isoMicros(v.updated);
  out.links = live ? { self: url, version: versionUrl, uploads: `${url}?uploads` } : { self: versionUrl, version: versionUrl };
  return out;
}
