/**
 * One S3 request as the door's handlers see it: the wire path split into bucket and key, the
 * query, the verified identity, and the answer helpers (XML, errors, x-amz-request-id).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { decide, type Identity, type PermissionPolicy, type Resource } from '../auth/permissions.js';
import type { Action } from '../auth/actions.js';
import type { DomainContext } from '../domain/context.js';
import type { ObjectVersion } from '../domain/models.js';
import { findHead, findVersion } from '../domain/objects.js';
import type { UsableAccessKey } from './access-keys.js';
import { renderS3ErrorXml, S3Error } from './errors.js';
import { headerText, type RequestHeaders, type VerifiedSigV4 } from './sigv4.js';
import { isUuid } from '../util/ids.js';
import type { VerifiedSigV2 } from './sigv2.js';

export interface S3Request {
  readonly ctx: DomainContext;
  readonly policy: PermissionPolicy;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly log: Logger;
  readonly requestId: string;
  readonly method: string;
  /** The path as sent (percent-encoding intact). */
  readonly rawPath: string;
  readonly query: URLSearchParams;
  /** The first path segment, decoded; '' for the service (`/`). */
  readonly bucketName: string;
  /** The rest of the path, decoded; '' when the request is about the bucket. */
  readonly key: string;
  /** The request's headers by lower-case name (read once from `rawHeaders`). */
  readonly headers: RequestHeaders;
  /** The verified SigV4 credential, null for an anonymous request. */
  /** The request's verified signature (SigV4, or SigV2 whose body is unsigned); null: anonymous. */
  readonly auth: VerifiedSigV4 | VerifiedSigV2 | null;
  readonly identity: Identity | null;
  /** An access key by its id (cached), or null: for credentials carried in the body (PostObject). */
  readonly findAccessKey: (accessKeyId: string) => Promise<UsableAccessKey | null>;
}

const continued = new WeakSet<ServerResponse>();

/**
 * Tells a client that sent `Expect: 100-continue` to send its body: called by the operations once the
 * request is authenticated and authorised and the body is about to be read (openPayload). A request
 * refused before that is answered without a 100, so the client never sends a body it would send in
 * vain (the connection is then closed, the body unread), as S3 does. The door handles Node.js's
 * 'checkContinue' itself; Node would otherwise send the 100 for every request on arrival.
 */
export function continueBody(r: S3Request): void {
  if (continued.has(r.res) || r.res.headersSent) return;
  const expect = r.req.headers.expect;
  if (expect === undefined || expect.trim().toLowerCase() !== '100-continue') return;
  continued.add(r.res);
  r.res.writeContinue();
}

/** Sends an XML document (200 unless told). */
export function sendXml(r: S3Request, body: string, status = 200, headers: Record<string, string> = {}): void {
  const buf = Buffer.from(body, 'utf8');
  const head = Object.assign({}, headers);
  head['content-type'] = 'application/xml';
  head['content-length'] = String(buf.length);
  r.res.writeHead(status, head);
  r.res.end(r.method === 'HEAD' ? undefined : buf);
}

/**
 * Sends an empty answer. The answers' headers are copied with Object.assign and then set: an object
 * spread first in a literal (`{ ...headers, 'content-length': '0' }`) took 0.5–4.5 µs against 0.1 in
 * a micro-benchmark (V8 builds such objects slowly; see download.ts).
 */
export function sendEmpty(r: S3Request, status: number, headers: Record<string, string> = {}): void {
  const head = Object.assign({}, headers);
  head['content-length'] = '0';
  r.res.writeHead(status, head);
  r.res.end();
}

/** The most of a refused request's unread body the door reads and drops so that its client can read the answer. */
const DRAIN_MAX = 1024 * 1024;

/**
 * Whether the connection must close after answering a request whose body was not read to its end,
 * refused with `err`. A small body (at most 1 MiB announced) is kept and dropped instead, so that a
 * client still sending reads the answer (Node.js 24.22's fetch sends a form in several writes, and got
 * EPIPE when the door closed on it): one never started is left to Node.js, which reads and drops the
 * rest once the answer is sent; one partly read (a PostObject form refused after its fields) is
 * unhooked from its readers and drained here. A large or unknown length, a client waiting for
 * `100 Continue` (which it was not sent), a body that stalled or broke off, closes it.
 */
function closeOrDrain(req: IncomingMessage, err: S3Error): boolean {
  if (req.complete) return false;
  if (req.destroyed || req.headers.expect !== undefined || err.code === 'RequestTimeout' || err.code === 'IncompleteBody') return true;
  const length = Number(req.headers['content-length']);
  if (!(Number.isSafeInteger(length) && length <= DRAIN_MAX)) return true;
  if (req.readableDidRead) {
    req.unpipe();
    req.resume();
  }
  return false;
}

/**
 * Sends S3's XML error document. HEAD answers carry no body (S3 gives only the status). When the
 * request body was not read to its end the connection is closed after the answer, unless it is
 * small enough to drop (closeOrDrain).
 */
export function sendError(res: ServerResponse, req: IncomingMessage, err: S3Error, resource: string, requestId: string, extra: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = Buffer.from(renderS3ErrorXml(err, { resource, requestId }), 'utf8');
  const headers: Record<string, string> = Object.assign({}, extra);
  headers['content-type'] = 'application/xml';
  headers['content-length'] = String(body.length);
  if (closeOrDrain(req, err)) headers.connection = 'close';
  res.writeHead(err.status, headers);
  res.end(req.method === 'HEAD' ? undefined : body);
}

/**
 * Asks the permission factory, as the REST door does, with the same action names. Refused:
 * AccessDenied (S3 answers that for a bucket outside a key's scope too).
 */
export async function authorize(r: S3Request, action: Action, resource: Resource | null): Promise<void> {
  if (r.policy.name === 'allow-all') return;
  const args = {
    action,
    resource,
    identity: r.identity,
    request: { method: r.method, url: r.req.url ?? '/', ip: r.req.socket.remoteAddress ?? '', headers: r.req.headers },
  };
  // The policy decides, a public read of a publicly readable bucket included (anonymous GetObject).
  if (await decide(r.policy, args)) return;
  if (!r.identity && r.policy.requiresCredential) throw new S3Error('AccessDenied', 'Anonymous requests are not allowed; sign the request with an access key.');
  throw new S3Error('AccessDenied');
}

/** Whether the permission factory allows an action (ListBuckets filters with it). */
export async function allowed(r: S3Request, action: Action, resource: Resource | null): Promise<boolean> {
  try {
    await authorize(r, action, resource);
    return true;
  } catch {
    return false;
  }
}

/** A single request header as text (repeated ones joined with `,`), or undefined. */
export function header(r: { headers: RequestHeaders }, name: string): string | undefined {
  return headerText(r.headers, name);
}

/**
 * A version id as named by a client (`versionId`, a copy source's `?versionId=`): an empty one, or one
 * that no version of files-rest can have (not a UUID, nor S3's `null`), is InvalidArgument, as S3 and
 * MinIO answer ("Invalid version id specified"), rather than NoSuchVersion, or a DeleteObject's 204.
 */
export function checkedVersionId(v: string | null, argumentName = 'versionId'): string | null {
  if (v === null) return null;
  if (v === '') throw new S3Error('InvalidArgument', 'Version id cannot be the empty string.', { ArgumentName: argumentName, ArgumentValue: v });
  if (v !== 'null' && !isUuid(v)) throw new S3Error('InvalidArgument', 'Invalid version id specified', { ArgumentName: argumentName, ArgumentValue: v });
  return v;
}

/** The `versionId` a request names, or null (see checkedVersionId). */
export function versionIdOf(r: S3Request): string | null {
  return checkedVersionId(r.query.get('versionId'));
}

/**
 * The object version a request addresses with its bytes: `versionId`'s, else the head. Missing:
 * NoSuchVersion / NoSuchKey; a delete marker named by its id is MethodNotAllowed, a head that is one
 * NoSuchKey, as S3 answers.
 */
export async function addressedObject(r: S3Request, bucketId: string, versionId: string | null): Promise<ObjectVersion> {
  const v = versionId !== null ? await findVersion(r.ctx.db, bucketId, r.key, versionId) : await findHead(r.ctx.db, bucketId, r.key);
  if (!v) throw new S3Error(versionId !== null ? 'NoSuchVersion' : 'NoSuchKey');
  if (!v.file) throw new S3Error(versionId !== null ? 'MethodNotAllowed' : 'NoSuchKey', versionId !== null ? 'The specified method is not allowed against a delete marker.' : undefined);
  return v;
}
