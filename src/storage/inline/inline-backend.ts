import { Readable } from 'node:stream';
import type { Kysely } from 'kysely';
import type { Database, Executor } from '../../db/schema.js';
import { prepared } from '../../db/prepared.js';
import { nowMicros } from '../../util/time.js';
import { StorageError, type ByteRange, type FileReader, type StorageBackend } from '../backend.js';

/** The URI scheme of file instances whose bytes are kept in the database. */
export const INLINE_SCHEME = 'inline:';

/** True for the URI of a file instance kept in the database. */
export function isInlineUri(uri: string): boolean {
  return uri.startsWith(INLINE_SCHEME);
}

const selectData = prepared((db: Executor, uri: string) => db.selectFrom('inline_files').select('data').where('uri', '=', uri));
const insertData = prepared((db: Executor, uri: string, data: Buffer, created: number) =>
  db.insertInto('inline_files').values({ uri, data, created }),
);
const deleteData = prepared((db: Executor, uri: string) => db.deleteFrom('inline_files').where('uri', '=', uri));

/**
 * Writes a small file's bytes inside the caller's transaction: the upload's commit (the file
 * instance, the version, the head) and its bytes reach the disk in one flush of the database's log,
 * shared with every other upload committed with it.
 */
export async function insertInlineFile(tx: Executor, uri: string, data: Buffer, now = nowMicros()): Promise<void> {
  await insertData.execute(tx, uri, data, now);
}

/**
 * Reads a stream into one buffer (an inline upload's bytes, at most FILES_REST_INLINE_MAX_SIZE:
 * the byte meter in front refuses more than the request announced).
 */
export async function collect(source: Readable, signal?: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of source) {
    signal?.throwIfAborted();
    chunks.push(c as Buffer);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/**
 * File instances kept in the metadata database (table `inline_files`), for small uploads
 * (FILES_REST_INLINE_MAX_SIZE). Not a location: an inline file instance belongs to its bucket's
 * location like any other (quotas, migration, replicas), only its bytes are elsewhere. The domain
 * writes them with {@link insertInlineFile} in the upload's own transaction; this backend reads,
 * copies and deletes them through the interface every backend offers, so downloads, checks,
 * migrations and replicas need no special case. It knows nothing of HTTP, buckets or keys.
 */
export class InlineBackend implements StorageBackend {
  readonly name = 'inline';
  constructor(private readonly db: Kysely<Database>) {}

  handles(uri: string): boolean {
    return isInlineUri(uri);
  }

  normalizeLocationUri(uri: string): string {
    throw new Error(`${uri}: inline storage is not a location; small files are kept in the database by FILES_REST_INLINE_MAX_SIZE`);
  }

  makeUri(_locationUri: string, fileId: string): string {
    return `${INLINE_SCHEME}${fileId}`;
  }

  async initialize(): Promise<string | null> {
    throw new Error('inline files are written whole, never in parts');
  }

  async #data(uri: string): Promise<Buffer> {
    const [row] = await selectData.execute(this.db, uri);
    if (!row) throw new StorageError('missing', `no inline file ${uri}`);
    // PostgreSQL's driver gives a Buffer, SQLite's a Buffer or (node:sqlite) a Uint8Array.
    const d = row.data as Buffer | Uint8Array;
    return Buffer.isBuffer(d) ? d : Buffer.from(d.buffer, d.byteOffset, d.byteLength);
  }

  async open(uri: string, range?: ByteRange): Promise<Readable> {
    const data = await this.#data(uri);
    return Readable.from(data.length === 0 ? [] : [range ? data.subarray(range.start, range.end + 1) : data]);
  }

  async readRange(uri: string, range: ByteRange): Promise<Buffer> {
    return (await this.#data(uri)).subarray(range.start, range.end + 1);
  }

  async openReader(uri: string): Promise<FileReader> {
    const data = await this.#data(uri);
    return {
      async read(buffer, offset, length, position) {
        if (position >= data.length) return 0;
        return data.copy(buffer, offset, position, Math.min(data.length, position + length));
      },
      async close() {},
    };
  }

  /** Stores a whole file in its own transaction (a copy made outside an upload's commit). */
  async save(uri: string, source: Readable, opts: { signal?: AbortSignal } = {}): Promise<{ size: number }> {
    const data = await collect(source, opts.signal);
    await this.db.transaction().execute(async (tx) => {
      await deleteData.execute(tx, uri);
      await insertData.execute(tx, uri, data, nowMicros());
    });
    return { size: data.length };
  }

  async update(): Promise<{ size: number; etag: string | null }> {
    throw new Error('inline files are written whole, never in parts');
  }

  async delete(uri: string): Promise<void> {
    await deleteData.execute(this.db, uri);
  }

  async stat(uri: string): Promise<{ size: number } | null> {
    try {
      return { size: (await this.#data(uri)).length };
    } catch (e) {
      if (e instanceof StorageError && e.kind === 'missing') return null;
      throw e;
    }
  }
}
