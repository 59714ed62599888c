/**
 * An S3 door upload whose completed part list does not fit the in-place layout (parts numbered
 * 1..N, every one but the last of the upload's part size) is assembled: the listed parts' bytes are
 * copied, in the list's order, from where they lie in the upload's file into a new file instance,
 * and the object is made of that. S3 accepts any ascending part numbers (gaps, a list that starts
 * at 2: the MinIO JavaScript client numbers its parts from 2) and parts of any size but the
 * minimum; files-rest's fast path copies nothing and the assembly costs one copy of the object.
 *
 * Only for a backend whose parts are written in place and readable at once (`truncate`: fs): an S3
 * storage backend's parts are a native multipart upload underneath, not readable before it is
 * completed.
 *
 * Each part's MD5 is checked as it is copied against the part's record (its ETag): the new file
 * holds exactly the parts the client named, or the completion is refused (a part re-sent while the
 * copy ran). The new file is written whole and durably (`save`) before any row names it; a
 * completion that fails after the copy deletes it.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { AppError } from '../errors.js';
import type { StorageBackend } from '../storage/backend.js';

/** A listed part and where its bytes lie in the upload's file. */
export interface PartToAssemble {
  /** 1-based, as the client numbers it. */
  partNumber: number;
  offset: number;
  size: number;
  /** Its recorded checksum (`md5:<hex>`), which the copied bytes must have. */
  checksum: string;
}

/** True when `backend` can assemble an upload's parts into a new file. */
export function canAssemble(backend: StorageBackend): boolean {
  return backend.truncate !== undefined;
}

/**
 * Copies `parts` from `sourceUri` into a new file at `targetUri`; answers the new file's size and
 * MD5 (`md5:<hex>`). Throws MULTIPART_PART_IN_PROGRESS when a part's bytes no longer match its
 * record; nothing remains at `targetUri` when it throws.
 */
export async function assembleParts(backend: StorageBackend, sourceUri: string, targetUri: string, parts: readonly PartToAssemble[], signal?: AbortSignal): Promise<{ size: number; checksum: string }> {
  const whole = createHash('md5');
  async function* bytes(): AsyncGenerator<Buffer> {
    for (const p of parts) {
      if (p.size === 0) {
        if (`md5:${createHash('md5').digest('hex')}` !== p.checksum) throw new AppError('MULTIPART_PART_IN_PROGRESS', { part: p.partNumber });
        continue;
      }
      const part = createHash('md5');
      const stream = await backend.open(sourceUri, { start: p.offset, end: p.offset + p.size - 1 });
      let got = 0;
      try {
        for await (const chunk of stream as AsyncIterable<Buffer>) {
          signal?.throwIfAborted();
          part.update(chunk);
          whole.update(chunk);
          got += chunk.length;
          yield chunk;
        }
      } finally {
        stream.destroy();
      }
      if (got !== p.size || `md5:${part.digest('hex')}` !== p.checksum) throw new AppError('MULTIPART_PART_IN_PROGRESS', { part: p.partNumber });
    }
  }
  const source = Readable.from(bytes(), { objectMode: false });
  const { size } = await backend.save(targetUri, source, { signal });
  return { size, checksum: `md5:${whole.digest('hex')}` };
}
