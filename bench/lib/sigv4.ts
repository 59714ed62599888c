/**
 * SigV4 request signing for the benchmark's S3 client (header-signed, path-style): the canonical
 * request, the string to sign and the day's signing key, as an S3 client computes them, so the S3
 * door is measured through the same undici Pool as the REST door.
 */
import { createHash, createHmac } from 'node:crypto';

export const UNSIGNED = 'UNSIGNED-PAYLOAD';

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();
const keys = new Map<string, Buffer>();

function signingKey(c: S3Credentials, day: string): Buffer {
  const id = `${c.accessKeyId}/${day}/${c.region}`;
  let k = keys.get(id);
  if (!k) keys.set(id, (k = hmac(hmac(hmac(hmac(`AWS4${c.secretAccessKey}`, day), c.region), 's3'), 'aws4_request')));
  return k;
}

/**
 * The headers that sign `method path` (path already URI-encoded, no query) for a body whose SHA-256
 * is `payloadSha256` (hex), or UNSIGNED-PAYLOAD. `query` is the request's canonical query string
 * (names and values URI-encoded, sorted by name, `name=value` joined by `&`), '' when it has none.
 */
export function signHeaders(c: S3Credentials, host: string, method: string, path: string, payloadSha256: string, query = ''): Record<string, string> {
  const amzDate = new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${c.region}/s3/aws4_request`;
  const signed = 'host;x-amz-content-sha256;x-amz-date';
  const canonical = [method, path, query, `host:${host}`, `x-amz-content-sha256:${payloadSha256}`, `x-amz-date:${amzDate}`, '', signed, payloadSha256].join('\n');
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, createHash('sha256').update(canonical).digest('hex')].join('\n');
  const signature = createHmac('sha256', signingKey(c, day)).update(toSign).digest('hex');
  return {
    'x-amz-content-sha256': payloadSha256,
    'x-amz-date': amzDate,
    authorization: `AWS4-HMAC-SHA256 Credential=${c.accessKeyId}/${scope}, SignedHeaders=${signed}, Signature=${signature}`,
  };
}
