/**
 * A bucket's CORS configuration: the rules that say which web origins may send which requests to
 * it from a browser (S3's CORSConfiguration; set through the S3 door's PutBucketCors). The domain
 * keeps the rules and their limits; the door that answers browsers evaluates them (s3/cors.ts).
 */
import { AppError } from '../errors.js';
import { transaction } from '../db/database.js';
import { prepared } from '../db/prepared.js';
import type { Executor } from '../db/schema.js';
import { nowMicros } from '../util/time.js';
import type { DomainContext } from './context.js';

/** One rule: a request from one of its origins with one of its methods (and headers) is allowed. */
export interface CorsRule {
  id?: string;
  /** Origins, each with at most one `*` standing for any text (`*` alone: any origin). */
  allowedOrigins: string[];
  /** Of GET, PUT, HEAD, POST and DELETE. */
  allowedMethods: string[];
  /** Headers a preflight may ask for, each with at most one `*`; compared without case. */
  allowedHeaders: string[];
  /** Response headers a script may read. */
  exposeHeaders: string[];
  /** How long a browser may keep the preflight's answer, in seconds. */
  maxAgeSeconds?: number;
}

/** The methods a rule may allow (S3's). */
export const CORS_METHODS = ['GET', 'PUT', 'HEAD', 'POST', 'DELETE'] as const;
/** S3's limit on the rules of one configuration. */
export const MAX_CORS_RULES = 100;

/** An HTTP header name (RFC 9110's token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

function invalid(reason: string): AppError {
  return new AppError('INVALID_CORS_CONFIGURATION', { reason });
}

/** Checks a configuration against S3's rules; INVALID_CORS_CONFIGURATION names the first problem. */
export function validateCorsRules(rules: readonly CorsRule[]): void {
  if (rules.length === 0) throw invalid('a configuration needs at least one rule');
  if (rules.length > MAX_CORS_RULES) throw invalid(`at most ${MAX_CORS_RULES} rules are allowed`);
  for (const rule of rules) {
    if (rule.allowedOrigins.length === 0) throw invalid('every rule needs an AllowedOrigin');
    if (rule.allowedMethods.length === 0) throw invalid('every rule needs an AllowedMethod');
    for (const m of rule.allowedMethods) {
      if (!(CORS_METHODS as readonly string[]).includes(m)) throw invalid(`unsupported method ${m} (allowed: ${CORS_METHODS.join(', ')})`);
    }
    for (const o of rule.allowedOrigins) {
      if (o === '' || o.split('*').length > 2) throw invalid(`AllowedOrigin "${o}" can not have more than one wildcard`);
    }
    for (const h of rule.allowedHeaders) {
      if (h === '' || h.split('*').length > 2) throw invalid(`AllowedHeader "${h}" can not have more than one wildcard`);
      if (!HEADER_NAME.test(h.replace('*', 'x'))) throw invalid(`AllowedHeader "${h}" is not a header name`);
    }
    // Expose headers are answered in Access-Control-Expose-Headers: each must be a header name.
    for (const h of rule.exposeHeaders) {
      if (!HEADER_NAME.test(h)) throw invalid(`ExposeHeader "${h}" is not a header name`);
    }
    for (const o of rule.allowedOrigins) {
      if (!/^[\x21-\x7e]+$/.test(o)) throw invalid(`AllowedOrigin "${o}" may hold only visible ASCII characters`);
    }
    if (rule.id !== undefined && rule.id.length > 255) throw invalid('a rule ID is at most 255 characters');
    if (rule.maxAgeSeconds !== undefined && !(Number.isSafeInteger(rule.maxAgeSeconds) && rule.maxAgeSeconds >= 0)) {
      throw invalid('MaxAgeSeconds must be a whole number of seconds');
    }
  }
}

/** Replaces a bucket's CORS configuration (null removes it). BUCKET_NOT_FOUND for no live bucket. */
export async function setBucketCors(ctx: DomainContext, bucketId: string, rules: readonly CorsRule[] | null): Promise<void> {
  if (rules !== null) validateCorsRules(rules);
  await transaction(ctx.db, async (tx) => {
    const r = await tx
      .updateTable('buckets')
      .set({ cors: rules === null ? null : JSON.stringify(rules), updated: nowMicros() })
      .where('id', '=', bucketId)
      .where('deleted', '=', 0)
      .returning('id')
      .executeTakeFirst();
    if (!r) throw new AppError('BUCKET_NOT_FOUND');
  });
}

const corsById = prepared((db: Executor, id: string) => db.selectFrom('buckets').select(['id', 'cors']).where('id', '=', id).where('deleted', '=', 0));
const corsByName = prepared((db: Executor, name: string) => db.selectFrom('buckets').select(['id', 'cors']).where('name', '=', name).where('deleted', '=', 0));

/**
 * The CORS rules of the live bucket addressed by id or by S3 name: `rules` null when it has none,
 * the whole result null when there is no such bucket.
 */
export async function findBucketCors(db: Executor, bucket: { id: string } | { name: string }): Promise<{ bucketId: string; rules: CorsRule[] | null } | null> {
  const r = 'id' in bucket ? await corsById.first(db, bucket.id) : await corsByName.first(db, bucket.name);
  if (!r) return null;
  return { bucketId: r.id, rules: r.cors ? (JSON.parse(r.cors) as CorsRule[]) : null };
}
