import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { Db } from '../db/schema.js';

interface Reply {
  seq: number;
  ok: boolean;
  value: string | null;
}

interface Cursor {
  path: string;
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
 * Computes the MD5 of a multipart upload's whole file in order as contiguous parts are stored, in a
 * worker thread, so completion does not re-read the file. Only for backends that write parts in
 * place into a local file (fs). State is in memory: after a restart, or when the completion runs in
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
  readonly #waiting = new Map<number, (r: Reply) => void>();
  #worker: Worker | null = null;
  #seq = 0;
  /** Completions that used the running digest, and those that had to read the file (observability, tests). */
  readonly stats = { digestUsed: 0, fileReread: 0 };

  constructor(private readonly db: Db, private readonly log: Logger, private readonly maxUploads = 1000) {}

  #thread(): Worker {
    if (!this.#worker) {
      this.#worker = new Worker(new URL('../storage/fs/hash-thread.js', import.meta.url));
      this.#worker.unref();
      this.#worker.on('message', (r: Reply) => {
        this.#waiting.get(r.seq)?.(r);
        this.#waiting.delete(r.seq);
      });
      this.#worker.on('error', (e) => {
        this.log.error({ err: e }, 'hash thread failed');
        for (const c of this.#cursors.values()) c.broken = true;
        for (const w of this.#waiting.values()) w({ seq: -1, ok: false, value: String(e) });
        this.#waiting.clear();
        this.#worker = null;
      });
    }
    return this.#worker;
  }

  #call(msg: Record<string, unknown>): Promise<Reply> {
    const seq = ++this.#seq;
    return new Promise((resolve) => {
      this.#waiting.set(seq, resolve);
      this.#thread().postMessage({ ...msg, seq });
    });
  }

  /** A part of this upload was stored and recorded: hash forward as far as parts are contiguous. */
  partStored(upload: { id: string; size: number; partSize: number; lastPartNumber: number }, path: string, partNumber: number): void {
    let c = this.#cursors.get(upload.id);
    if (!c) {
      // Cursors of uploads completed elsewhere are never finished here: evict the oldest.
      if (this.#cursors.size >= this.maxUploads) this.forget(this.#cursors.keys().next().value!);
      c = { path, partSize: upload.partSize, size: upload.size, lastPartNumber: upload.lastPartNumber, next: 0, partRecords: [], running: null, broken: false };
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
          .select(['checksum', 'updated'])
          .where('upload_id', '=', id)
          .where('part_number', '=', c.next)
          .executeTakeFirst();
        if (!row) return;
        const start = c.next * c.partSize;
        const end = Math.min(start + c.partSize, c.size);
        const r = await this.#call({ type: 'range', id, path: c.path, start, end });
        if (!r.ok || !r.value) {
          c.broken = true;
          return;
        }
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
      const complete =
        !c.broken && c.next === c.lastPartNumber + 1 && recorded.length === c.next && recorded.every((p) => c.partRecords[p.partNumber] === partRecord(p));
      const r = await this.#call({ type: 'digest', id: uploadId });
      const digest = complete && r.ok && r.value ? `md5:${r.value}` : null;
      this.stats[digest ? 'digestUsed' : 'fileReread']++;
      return digest;
    } finally {
      this.#cursors.delete(uploadId);
    }
  }

  forget(uploadId: string): void {
    if (this.#cursors.delete(uploadId) && this.#worker) this.#worker.postMessage({ type: 'drop', id: uploadId });
  }

  async close(): Promise<void> {
    const w = this.#worker;
    this.#worker = null;
    this.#cursors.clear();
    if (w) await w.terminate();
  }
}
