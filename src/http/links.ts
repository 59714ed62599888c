import type { FastifyRequest } from 'fastify';
import type { Config } from '../config.js';

/** Percent-encodes a key for a URL path, keeping '/' as the separator. */
export function encodeKey(key: string): string {
  // Most keys need no escaping at all.
  if (/^[A-Za-z0-9\-._~/]*$/.test(key)) return key;
  return key.split('/').map(encodeURIComponent).join('/');
}

/** Absolute URLs for links: FILES_REST_BASE_URL when set, otherwise the request's scheme and Host. */
export class Links {
  readonly root: string;
  /** `{base}/admin`: the operator endpoints (routes/admin.ts). */
  readonly admin: string;
  /** `origin` when there is no request (admin commands): FILES_REST_BASE_URL still wins. */
  constructor(config: Config, req: FastifyRequest | { origin: string }) {
    const origin = config.baseUrl ?? ('origin' in req ? req.origin : `${req.protocol}://${req.host}`);
    this.root = `${origin}${config.urlPrefix}/files`;
    this.admin = `${origin}${config.urlPrefix}/admin`;
  }
  bucket(id: string): string {
    return `${this.root}/${id}`;
  }
  object(bucketId: string, key: string): string {
    return `${this.root}/${bucketId}/${encodeKey(key)}`;
  }
}
