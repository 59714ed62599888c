import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { AppError, isAppError } from '../errors.js';
import { isStorageError, readExactly, ShortReadError, type ByteRange, type FileReader } from '../storage/backend.js';
import { recordCopyResult } from './replicas.js';
import { getLiveBucket } from './buckets.js';
import type { DomainContext } from './context.js';
import type { FileInstance, ObjectVersion } from './models.js';
import { bytesReadWith, findHeadInLiveBucket, getVersionForRead } from './objects.js';

/**
 * The domain half of a download, for every door: which version a read gets, whether its bytes may be
 * served, and how they are read through the backend's optional capabilities. A door keeps its own
 * conditionals, range syntax, headers and the writing of the bytes.
 */

/** Reads up to this size are read into memory in one go (`readRange`) instead of streamed. */
export const SMALL_READ = 64 * 1024;

/** The door's permission checks, run where the reference runs them (between the lookups). */
export interface ReadChecks {
  /** May the caller read the object (head or any version)? Runs once the bucket is known to be live. */
  object(): Promise<void>;
  /** May the caller read this version, which is not the head? */
  version(versionId: string): Promise<void>;
}

/**
 * The version a read addresses: the head (bucket and version in one lookup), or with `versionId`
 * that version (a delete marker included: `servableFile` refuses it). Missing or deleted bucket:
 * BUCKET_NOT_FOUND; no such object or version: OBJECT_NOT_FOUND, each after the checks that hide it.
 */
export async function resolveRead(
  ctx: DomainContext,
  addr: { bucketId: string; key: string; versionId: string | null },
  checks: ReadChecks,
  /** The bytes will be read (a GET, not a HEAD): a small head's inline bytes come with its lookup. */
  opts: { bytes?: boolean } = {},
): Promise<ObjectVersion> {
  if (addr.versionId === null) {
    const head = await findHeadInLiveBucket(ctx.db, addr.bucketId, addr.key, opts.bytes ?? false);
    await checks.object();
    if (!head || head.fileId === null) throw new AppError('OBJECT_NOT_FOUND');
    return head;
  }
  await getLiveBucket(ctx.db, addr.bucketId);
  await checks.object();
  const version = await getVersionForRead(ctx.db, addr.bucketId, addr.key, addr.versionId);
  if (!version.isHead) await checks.version(version.versionId);
  return version;
}

/** A file whose bytes may be served: stored, readable, and not known corrupted. */
export type ServableFile = FileInstance & { uri: string };

/**
 * May this version's bytes be served? A delete marker: VERSION_IS_DELETE_MARKER; a file marked
 * unreadable (or without a URI): STORAGE_UNAVAILABLE; a file whose last integrity check failed:
 * FILE_CORRUPTED, unless FILES_REST_SERVE_CORRUPTED_FILES says to serve it anyway. The first copy
 * is the best one known (replicas.ts): when it is known bad, so is every other copy.
 */
export function servableFile(ctx: DomainContext, version: ObjectVersion): ServableFile {
  const file = version.file;
  if (!file) throw new AppError('VERSION_IS_DELETE_MARKER');
  if (!file.readable || !file.uri) throw new AppError('STORAGE_UNAVAILABLE');
  if (file.lastCheck === false && !ctx.config.serveCorruptedFiles) throw new AppError('FILE_CORRUPTED');
  return file as ServableFile;
}

/**
 * The bytes of a read, in the form the backend offers best for their size: nothing; a buffer (a
 * small read, `readRange`); a positional reader for the door to pump through its own buffers (a
 * large read, `openReader`; the caller closes it); or a stream (`open`, any backend). `copy` is the
 * copy being read; `checksum`, when set, is what the door must verify the whole file against as it
 * sends it (FILES_REST_CHECK_DOWNLOADS=all), breaking the body off on a mismatch.
 */
export type FileContent =
  | { kind: 'empty' }
  | { kind: 'buffer'; data: Buffer; copy?: ReadCopy }
  | { kind: 'reader'; reader: FileReader; range: ByteRange; copy: ReadCopy; checksum: string | null }
  | { kind: 'stream'; stream: Readable; copy: ReadCopy; checksum: string | null };

/** One copy of a file, as a read sees it. */
export interface ReadCopy {
  locationId: string;
  uri: string;
}

/** The bytes of a copy do not match the file's checksum (found while reading them). */
export class ChecksumMismatchOnRead extends Error {
  constructor(readonly found: string) {
    super(`the copy read does not match the file's checksum (found ${found})`);
    this.name = 'ChecksumMismatchOnRead';
  }
}

/**
 * The copies a read tries, in order: the first copy (always the best one known, see replicas.ts),
 * then the others not known bad, oldest first; copies known bad last, and only under
 * FILES_REST_SERVE_CORRUPTED_FILES=1. The others are looked up only when the first copy fails.
 */
async function* readCandidates(ctx: DomainContext, file: ServableFile): AsyncGenerator<ReadCopy> {
  yield { locationId: file.locationId ?? '', uri: file.uri };
  // Read before the first copy's failure is recorded (which may swap it with one of these).
  const rows = await ctx.db
    .selectFrom('file_copies')
    .select(['location_id', 'uri', 'last_check'])
    .where('file_id', '=', file.id)
    .where('uri', '!=', file.uri)
    .orderBy('created')
    .execute();
  for (const r of rows) if (r.last_check !== 0) yield { locationId: r.location_id, uri: r.uri };
  if (ctx.config.serveCorruptedFiles) for (const r of rows) if (r.last_check === 0) yield { locationId: r.location_id, uri: r.uri };
}

function md5Of(data: Buffer): string {
  return `md5:${createHash('md5').update(data).digest('hex')}`;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

/**
 * Opens `range` (or the whole file) of a servable file, from the first copy that can be read: a copy
 * missing, unreadable or (a whole small read, FILES_REST_CHECK_DOWNLOADS) not matching the checksum
 * is reported (readFailed) and the next copy tried, without the client noticing. No copy readable:
 * FILE_MISSING / STORAGE_UNAVAILABLE; every copy corrupt: its bytes under
 * FILES_REST_SERVE_CORRUPTED_FILES=1, else FILE_CORRUPTED.
 */
export async function openContent(ctx: DomainContext, file: ServableFile, range: ByteRange | null): Promise<FileContent> {
  const whole = range ?? { start: 0, end: file.size - 1 };
  const length = whole.end - whole.start + 1;
  if (length <= 0) return { kind: 'empty' };
  const wholeFile = whole.start === 0 && whole.end === file.size - 1;
  const mode = wholeFile && file.checksum?.startsWith('md5:') ? ctx.config.checkDownloads : 'off';
  let firstError: unknown = null;
  let corrupt: Buffer | null = null;
  // A failure is recorded once the next candidate is known (the record may swap the copies).
  let failed: { copy: ReadCopy; e: unknown } | null = null;
  const flush = async () => {
    if (failed) await readFailed(ctx, file, failed.copy, failed.e);
    failed = null;
  };
  // An inline file's bytes read with its version (objects.ts, `bytesReadWith`): the first copy's.
  const fetched = bytesReadWith(file);
  for await (const copy of readCandidates(ctx, file)) {
    await flush();
    const backend = ctx.storage.forUri(copy.uri);
    try {
      let data: Buffer | null = null;
      // The MD5 of `data` when it is already known (the statement that read it computed it).
      let md5: string | null = null;
      if (fetched && copy.uri === file.uri && fetched.data.length === file.size) {
        data = fetched.data.subarray(whole.start, whole.end + 1);
        if (wholeFile) md5 = fetched.md5;
      } else {
        if (length > SMALL_READ && backend.openReader) {
          const reader = await backend.openReader(copy.uri);
          return { kind: 'reader', reader, range: whole, copy, checksum: mode === 'all' ? file.checksum : null };
        }
        if (length <= SMALL_READ && backend.readRange) data = await backend.readRange(copy.uri, whole);
        else if (length <= SMALL_READ && mode !== 'off') data = await readAll(await backend.open(copy.uri));
        if (data === null) return { kind: 'stream', stream: await backend.open(copy.uri, range ?? undefined), copy, checksum: mode === 'all' ? file.checksum : null };
      }
      if (mode !== 'off') {
        const found = md5 ?? md5Of(data);
        if (found !== file.checksum || data.length !== file.size) {
          failed = { copy, e: new ChecksumMismatchOnRead(found) };
          corrupt ??= data;
          continue;
        }
      }
      return { kind: 'buffer', data, copy };
    } catch (e) {
      if (isAppError(e)) throw e;
      firstError ??= e;
      failed = { copy, e };
    }
  }
  await flush();
  if (corrupt) {
    if (ctx.config.serveCorruptedFiles) return { kind: 'buffer', data: corrupt };
    throw new AppError('FILE_CORRUPTED');
  }
  throw storageFailure(ctx, file, firstError);
}

/**
 * The content as one stream, for a door that pipes (the S3 door): a reader is read in 1 MiB chunks and
 * closed at the end. A mid-stream failure is reported (readFailed) before the stream errors.
 */
export function contentStream(ctx: DomainContext, file: FileInstance, content: Exclude<FileContent, { kind: 'empty' }>): Readable {
  if (content.kind === 'buffer') return Readable.from([content.data], { objectMode: false });
  if (content.kind === 'stream') return content.stream;
  const { reader, range, copy } = content;
  async function* chunks() {
    try {
      let position = range.start;
      while (position <= range.end) {
        const n = Math.min(1024 * 1024, range.end - position + 1);
        const buf = Buffer.allocUnsafe(n);
        await readExactly(reader, buf, n, position);
        position += n;
        yield buf;
      }
    } catch (e) {
      await readFailed(ctx, file, copy, e);
      throw e;
    } finally {
      await reader.close();
    }
  }
  return Readable.from(chunks(), { objectMode: false });
}

const recentChecks = new Map<string, number>();

/**
 * A read of `copy` failed. Missing, short or wrong bytes are recorded as the copy's failure (the
 * copy swaps with a good one, its repair is queued: replicas.ts), so the next read goes to a good
 * copy; any other error (the storage unreachable) queues an integrity check of the file, at most
 * once a minute per file and process. Never throws: the read goes on with another copy.
 */
export async function readFailed(ctx: DomainContext, file: FileInstance, copy: ReadCopy, e: unknown): Promise<void> {
  try {
    const detail =
      e instanceof ChecksumMismatchOnRead ? `read: ${e.message}` : e instanceof ShortReadError ? `read: ${e.message}` : isStorageError(e, 'missing') ? 'read: the stored file is missing' : null;
    if (detail !== null) {
      await recordCopyResult(ctx, {
        fileId: file.id,
        locationId: copy.locationId,
        uri: copy.uri,
        ok: false,
        checksumFound: e instanceof ChecksumMismatchOnRead ? e.found : null,
        detail,
        onlyIfGood: true,
      });
      return;
    }
    ctx.log.warn({ err: e, fileId: file.id, uri: copy.uri }, 'a copy of a file could not be read; another copy is tried');
    const now = Date.now();
    if ((recentChecks.get(file.id) ?? 0) > now - 60_000) return;
    if (recentChecks.size > 10_000) recentChecks.clear();
    recentChecks.set(file.id, now);
    await ctx.queue.enqueue(ctx.db, 'verify-checksum', { fileId: file.id });
    ctx.queue.wake();
  } catch (err) {
    ctx.log.error({ err, fileId: file.id, uri: copy.uri }, 'could not record the failed read of a copy');
  }
}

/** What a client is told when the stored bytes cannot be read. */
export function storageFailure(ctx: DomainContext, file: FileInstance, e: unknown): AppError {
  if (isAppError(e)) return e;
  if (isStorageError(e, 'missing')) {
    ctx.log.error({ err: e, fileId: file.id, uri: file.uri }, 'stored file is missing');
    return new AppError('FILE_MISSING', {}, { cause: e });
  }
  return new AppError('STORAGE_UNAVAILABLE', {}, { cause: e });
}
