import type { Bucket, ListedVersion } from '../domain/models.js';
import type { LocationReport } from '../domain/locations.js';
import type { MigrationTarget } from '../domain/migration.js';
import { taskSummary, type Task } from '../domain/tasks.js';
import type { MultipartUpload, Part } from '../domain/multipart.js';
import { isoMicros } from '../util/time.js';
import type { Links } from './links.js';

/** Bucket JSON: exactly the reference's keys. */
export function bucketJson(b: Bucket, links: Links) {
  const self = links.bucket(b.id);
  return {
    id: b.id,
    // The bucket's S3 name, only when it has one (the reference's keys otherwise).
    ...(b.name ? { name: b.name } : {}),
    size: b.size,
    quota_size: b.quotaSize,
    max_file_size: b.maxFileSize,
    locked: b.locked,
    // Anyone may download its objects without a credential (files-rest bucket set ID --public-read on).
    public_read: b.publicRead ?? false,
    created: isoMicros(b.created),
    updated: isoMicros(b.updated),
    links: { self, versions: `${self}?versions`, uploads: `${self}?uploads` },
  };
}

/**
 * Object version JSON: the reference's eleven keys, then the file's integrity state, `last_check_at`
 * (null until checked) and `last_check` ("ok", "failed", or null: never checked). A delete marker has
 * no size, no checksum and no integrity state. `links.self` is the plain object URL only for a head
 * with a file; `uploads` only there too.
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
  if (v.file) {
    out.last_check_at = v.file.lastCheckAt === null ? null : isoMicros(v.file.lastCheckAt);
    out.last_check = v.file.lastCheck === null ? null : v.file.lastCheck ? 'ok' : 'failed';
  }
  out.links = live ? { self: url, version: versionUrl, uploads: `${url}?uploads` } : { self: versionUrl, version: versionUrl };
  return out;
}

/** Multipart upload JSON: the reference's keys; `links.object_version` once completed. */
export function multipartJson(u: MultipartUpload, links: Links) {
  const object = links.object(u.bucketId, u.key);
  const out = {
    id: u.id,
    bucket: u.bucketId,
    key: u.key,
    size: u.size,
    part_size: u.partSize,
    last_part_number: u.lastPartNumber,
    last_part_size: u.lastPartSize,
    completed: u.state === 'completing',
    created: isoMicros(u.created),
    updated: isoMicros(u.updated),
    links: { self: `${object}?uploadId=${u.id}`, object, bucket: links.bucket(u.bucketId) } as Record<string, string>,
  };
  if (u.versionId) out.links.object_version = `${object}?versionId=${u.versionId}`;
  return out;
}

/** Part JSON. */
export function partJson(p: Part) {
  return {
    part_number: p.partNumber,
    start_byte: p.startByte,
    end_byte: p.endByte,
    checksum: p.checksum,
    created: isoMicros(p.created),
    updated: isoMicros(p.updated),
  };
}

/** Location JSON (admin endpoints): what it is, what it holds, and the migration towards it (null: none recorded). */
export function locationJson(l: LocationReport, migration: MigrationTarget | null) {
  return {
    name: l.name,
    uri: l.uri,
    kind: l.kind,
    default: l.isDefault,
    files: l.files,
    bytes: l.bytes,
    migration: migration
      ? { left: migration.queued + migration.running, queued: migration.queued, running: migration.running, done: migration.done, failed: migration.failed }
      : null,
    created: isoMicros(l.created),
    updated: isoMicros(l.updated),
  };
}

/** Task JSON (admin endpoints): the job, a one-line summary of its payload, its attempts and last error. */
export function adminTaskJson(t: Task, links: Links) {
  const self = `${links.admin}/tasks/${t.id}`;
  return {
    id: t.id,
    name: t.name,
    state: t.state,
    summary: taskSummary(t),
    attempts: t.attempts,
    max_attempts: t.maxAttempts,
    last_error: t.lastError,
    run_at: isoMicros(t.runAt),
    created: isoMicros(t.created),
    updated: isoMicros(t.updated),
    links: t.state === 'failed' ? { self, retry: `${self}/retry` } : { self },
  };
}
