import type { Logger } from 'pino';
import type { Db } from '../db/schema.js';
import type { RunningDigests } from '../storage/backend.js';

interface Cursor {
  /** The backend's running digests, and the stored file's URI. */
  digests: RunningDigests;
  uri: string;
  partSize: number;
  size: number;
  lastPartNumber: number;
  /** Next part to hash. */
  next: number;
  /** Each hashed part's record (checksum and update time) as it was when its bytes were read. */
  partRecords: string[];
  running: Promise<void> | null;
  broken: boolean;
}

/**
 * Computes the MD5 of a multipart upload's whole file in order as contiguous parts are stored,
 * through the backend's optional `runningDigests` capability (fs: a worker thread reading the local
 * file), so completion does not re-read the file. Only for backends that offer it (they write parts
 * in place). State is in memory: after a restart, or when the completion runs in
 * another process, completion falls back to reading the file once.
 *
 * Correctness does not depend on timing. A part's row is written only once its bytes are durable,
 * and the row of each part is read just before its bytes are: at completion, every part's row must
 * still be exactly what it was then (checksum and update time). A part re-sent meanwhile, by this
 * process or another node, changes its row (or deletes it, when a write fails), and the running
 * digest is discarded for one read of the file. Each byte is hashed once here: comparing rows
 * replaces hashing every part a second time, which made the merge's tail a third slower.
 */
/** What identifies one recorded write of a part. */
function partRecord(p: { checksum: string; updated: number }): string {
  return `${p.checksum}@${p.updated}`;
}

export class UploadHasher {
  readonly #cursors = new Map<string, Cursor>();
  /** Completions that used the running digest, and those that had to read the file (observability, tests). */
  readonly stats = { digestUsed: 0, fileReread: 0 };

  constructor(private readonly db: Db, private readonly log: Logger, private readonly maxUploads = 1000) {}

  /** A part of this upload was stored and recorded: hash forward as far as parts are contiguous. */
  partStored(upload: { id: string; size: number; partSize: number; lastPartNumber: number }, digests: RunningDigests, uri: string, partNumber: number): void {
    let c = this.#cursors.get(upload.id);
    if (!c) {
      // Cursors of uploads completed elsewhere are never finished here: evict the oldest.
      if (this.#cursors.size >= this.maxUploads) this.forget(this.#cursors.keys().next().value!);
      c = { digests, uri, partSize: upload.partSize, size: upload.size, lastPartNumber: upload.lastPartNumber, next: 0, partRecords: [], running: null, broken: false };
      this.#cursors.set(upload.id, c);
    }
    if (partNumber < c.next) c.broken = true; // re-sent after it was hashed
    if (!c.broken && !c.running) c.running = this.#advance(upload.id, c);
  }

  async #advance(id: string, c: Cursor): Promise<void> {
    try {
      while (!c.broken && c.next <= c.lastPartNumber) {
        const row = await this.db
          .selectFrom('parts')
          .select(['checksum', 'updated', 'size'])
          .where('upload_id', '=', id)
          .where('part_number', '=', c.next)
          .executeTakeFirst();
        if (!row) return;
        const start = c.next * c.partSize;
        // S3 door parts carry their size (the upload's total is known only at completion).
        const end = row.size !== null && row.size !== undefined ? start + Number(row.size) : Math.min(start + c.partSize, c.size);
        await c.digests.extend(id, c.uri, start, end);
        c.partRecords[c.next] = partRecord(row);
        c.next++;
      }
    } catch (e) {
      c.broken = true;
      this.log.warn({ err: e, uploadId: id }, 'incremental hashing stopped');
    } finally {
      c.running = null;
    }
  }

  /**
   * The whole-file MD5 (`md5:<hex>`) when every part was hashed and each part's MD5 matches the
   * recorded checksum; otherwise null (the caller reads the file). Forgets the upload either way.
   */
  async finish(uploadId: string, recorded: { partNumber: number; checksum: string; updated: number }[]): Promise<string | null> {
    const c = this.#cursors.get(uploadId);
    if (!c) {
      this.stats.fileReread++;
      return null;
    }
    try {
      if (c.running) await c.running;
      if (!c.broken && c.next <= c.lastPartNumber) {
        c.running = this.#advance(uploadId, c);
        await c.running;
      }
      // An S3 door upload may have hashed parts beyond the completed list: then the digest is not the file's.
      const complete =
        !c.broken && recorded.length === c.next && recorded.every((p) => c.partRecords[p.partNumber] === partRecord(p));
      const hex = await c.digests.digest(uploadId).catch(() => null);
      const digest = complete && hex ? `md5:${hex}` : null;
      this.stats[digest ? 'digestUsed' : 'fileReread']++;
      return digest;
    } finally {
      this.#cursors.delete(uploadId);
    }
  }

  /**
   * Forgets an upload's digest. A hashing step or a `finish` already under way holds the cursor:
   * it is marked broken so neither goes on with a digest the backend no longer has.
   */
  forget(uploadId: string): void {
    const c = this.#cursors.get(uploadId);
    if (!c) return;
    c.broken = true;
    this.#cursors.delete(uploadId);
    c.digests.drop(uploadId);
  }

  /** Forgets every upload (the backends' digests end with the backends). */
  async close(): Promise<void> {
    for (const id of [...this.#cursors.keys()]) this.forget(id);
  }
}
