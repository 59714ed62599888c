import type { Readable } from 'node:stream';
import { AppError, isAppError } from '../errors.js';
import type { DomainContext } from './context.js';
import type { ObjectVersion } from './models.js';
import { checkUploadAllowed, commitNewVersion, findVersion, putObject } from './objects.js';
import { servableFile, storageFailure } from './reads.js';
import type { Precondition } from './preconditions.js';

/**
 * Copy of one version to a key, as a new version (new version id) of the destination. Within one
 * location the new version shares the source's file instance (no byte is copied, as snapshots do:
 * the destination bucket's size counts it, and a hard delete of either version is FILE_SHARED while
 * the other exists); across locations the bytes are streamed from the source's storage into the
 * destination's default location (bytes first, then one transaction, as any upload).
 */
export interface CopyInput {
  /** The source version, resolved by the caller (its permission checks and conditions passed). */
  source: ObjectVersion;
  bucketId: string;
  key: string;
  mimetype: string;
  tags: Record<string, string>;
  metadata?: Record<string, string>;
  signal?: AbortSignal;
  /** If-Match / If-None-Match on the destination key, checked before and again in the commit. */
  precondition?: Precondition | null;
}

const SOURCE_CHECKSUM = 'source checksum';

export async function copyObject(ctx: DomainContext, input: CopyInput): Promise<ObjectVersion> {
  const file = servableFile(ctx, input.source);
  const bucket = await checkUploadAllowed(ctx, input.bucketId, input.key, file.size, input.precondition);
  if (file.locationId === bucket.defaultLocation) {
    const version = await commitNewVersion(
      ctx,
      { bucketId: bucket.id, key: input.key, file: { existingId: file.id, size: file.size }, mimetype: input.mimetype, tags: input.tags, metadata: input.metadata, precondition: input.precondition },
      {
        // The source may have been hard-deleted since it was read: share only a file that still is.
        inTransaction: async (tx) => {
          const still = await findVersion(tx, input.source.bucketId, input.source.key, input.source.versionId);
          if (!still || still.fileId !== file.id) throw new AppError('OBJECT_NOT_FOUND');
        },
      },
    );
    ctx.signals.send('file-uploaded', { obj: version });
    return version;
  }
  let source: Readable;
  try {
    source = await ctx.storage.forUri(file.uri).open(file.uri);
  } catch (e) {
    throw storageFailure(ctx, file, e);
  }
  // A failure to read the source is the storage's, not a client that went away (putObject's reading of a failed source).
  let readError: unknown = null;
  source.once('error', (e) => (readError = e));
  const md5 = file.checksum?.startsWith('md5:') ? Buffer.from(file.checksum.slice(4), 'hex') : null;
  return putObject(ctx, {
    bucketId: bucket.id,
    key: input.key,
    source,
    declaredSize: file.size,
    contentType: input.mimetype,
    tags: input.tags,
    metadata: input.metadata,
    signal: input.signal,
    precondition: input.precondition,
    // The copy must be the bytes the source's checksum promises.
    expectedDigests: md5 && md5.length === 16 ? [{ algorithm: 'md5', value: md5, header: SOURCE_CHECKSUM }] : [],
  }).catch((e: unknown) => {
    if (readError !== null) throw storageFailure(ctx, file, readError);
    // The stored bytes are not what their checksum says: the source is corrupted, nothing was copied.
    if (isAppError(e, 'CHECKSUM_MISMATCH') && e.params.header === SOURCE_CHECKSUM) {
      ctx.log.error({ fileId: file.id, uri: file.uri }, 'copy source does not match its checksum');
      throw new AppError('FILE_CORRUPTED', {}, { cause: e });
    }
    throw e;
  }).finally(() => {
    // Refused before its bytes were read (a full quota, a locked bucket, a precondition), the copy
    // leaves the source open: its file handle would wait for the garbage collector (DEP0137).
    source.destroy();
  });
}
