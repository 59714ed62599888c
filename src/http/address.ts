import type { FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { parseUuid } from '../util/ids.js';
import { validateLookupKey } from '../domain/keys.js';
import { decodeKeySegment } from './query.js';

/** The object a REST URL names: `{prefix}/files/<bucket id>/<key>`. */
export interface ObjectAddress {
  bucketId: string;
  key: string;
}

/**
 * Reads bucket id and key from the raw URL: the key is everything after the bucket id, percent-decoded
 * once, slashes (and empty segments) kept as they are.
 */
export function objectAddress(req: FastifyRequest, prefix: string): ObjectAddress {
  const raw = req.raw.url ?? '';
  const path = raw.split('?', 1)[0]!;
  const base = `${prefix}/files/`;
  const rest = path.slice(base.length);
  const slash = rest.indexOf('/');
  const bucketId = parseUuid(rest.slice(0, slash));
  if (!bucketId) throw new AppError('BUCKET_NOT_FOUND');
  const key = decodeKeySegment(rest.slice(slash + 1));
  // Every route, reads and deletes too: a key no database can hold is refused alike on all of them.
  validateLookupKey(key);
  return { bucketId, key };
}
