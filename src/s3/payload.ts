/**
 * A request body as the S3 door stores it: decoded from aws-chunked when framed so, seen by the
 * x-amz-checksum-* hashers, and checked against everything the request announced (Content-MD5,
 * a hex x-amz-content-sha256, checksum headers and trailers) once it has been received, before
 * anything is committed (`verify`, passed to the domain's putObject).
 *
 * For an upload the door hands the domain's `receive` the request itself, the decoder as a stage of
 * its one pipeline (`through`) and the hashers as observers of its byte meter: no pipeline of the
 * door's own, no extra copy of each chunk (every `stream.pipeline` costs an AbortController and a
 * DOMException with a stack when it ends, about 25 µs per small PUT here).
 */
import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import type { ExpectedDigest } from '../domain/objects.js';
import { isS3Error, S3Error } from './errors.js';
import { createAwsChunkedDecoder, isAwsChunked, type AwsChunkedDecoder } from './chunked.js';
import {
  algorithmOfHeader,
  checkChecksum,
  checksumHeaderName,
  createChecksumHasher,
  parseChecksumAlgorithm,
  parseContentMd5,
  validateChecksumValue,
  type ChecksumAlgorithm,
  type ChecksumHasher,
} from './checksums.js';
import { continueBody, header, type S3Request } from './request.js';
import { carriesNoBody } from './sigv4.js';

export interface Payload {
  /** The request: the bytes as sent. */
  readonly source: Readable;
  /** The stages that decode them (the aws-chunked decoder), none for a plain body. */
  readonly through: NodeJS.ReadWriteStream[];
  /** What must see every decoded byte (the checksum hashers). */
  readonly observers: readonly ChecksumHasher[];
  /** The decoded size announced (Content-Length or x-amz-decoded-content-length). */
  readonly declaredSize: number;
  /** Digests the domain checks itself (Content-MD5, a signed payload's SHA-256). */
  readonly expectedDigests: ExpectedDigest[];
  /** Checks checksum headers and trailers against the bytes; throws BadDigest and the like. */
  verify(): Promise<void>;
  /** The checksums to store with the version (`x-amz-checksum-crc32` → base64), after verify. */
  readonly checksums: Record<string, string>;
  /** The S3 error that ended the body early (a bad chunk signature, bad framing), if any. */
  failure(): S3Error | undefined;
}

/** Headers of the `x-amz-checksum-` family that are not checksums. */
const NOT_CHECKSUMS = new Set(['x-amz-checksum-mode', 'x-amz-checksum-algorithm', 'x-amz-checksum-type']);

/**
 * The `x-amz-checksum-<algorithm>` headers a request carries, each algorithm with its value (trimmed,
 * not yet checked); an `x-amz-checksum-` header naming no algorithm S3 knows is InvalidRequest.
 */
export function checksumHeadersSent(r: S3Request): [ChecksumAlgorithm, string][] {
  const out: [ChecksumAlgorithm, string][] = [];
  for (const name of r.headers.keys()) {
    if (NOT_CHECKSUMS.has(name)) continue;
    const alg = algorithmOfHeader(name);
    if (alg) out.push([alg, header(r, name)!.trim()]);
    else if (name.startsWith('x-amz-checksum-')) throw new S3Error('InvalidRequest', `Unknown checksum algorithm in ${name}.`);
  }
  return out;
}

/** Passes the decoded bytes through the hashers (a small body read whole: readSmallBody). */
class Tap extends Transform {
  constructor(private readonly hashers: readonly ChecksumHasher[]) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    for (const h of this.hashers) h.update(chunk);
    cb(null, chunk);
  }
}

export interface PayloadOptions {
  /**
   * The checksum algorithm the body must carry (an UploadPart of an upload that declared one): a
   * checksum of another algorithm is refused; none at all, and it is computed and stored.
   */
  checksum?: ChecksumAlgorithm;
  /**
   * The `x-amz-checksum-*` headers describe the object, not this body (CompleteMultipartUpload):
   * they are left to the operation.
   */
  checksumHeadersDescribeObject?: boolean;
}

/** Reads how a request's body comes and sets up its decoding and checks; throws S3 errors. */
export async function openPayload(r: S3Request, opts: PayloadOptions = {}): Promise<Payload> {
  const mode = r.auth?.payload ?? 'UNSIGNED-PAYLOAD';
  let decoder: AwsChunkedDecoder | null = null;
  let declaredSize: number;
  const lengthText = header(r, 'content-length');
  // SigV2 signs no body: its requests are UNSIGNED-PAYLOAD, never aws-chunked.
  if (r.auth && !('version' in r.auth) && isAwsChunked(mode)) {
    const d = createAwsChunkedDecoder(r.auth, r.headers);
    if (isS3Error(d)) throw d;
    decoder = d;
    declaredSize = Number(header(r, 'x-amz-decoded-content-length')!.trim());
  } else {
    if (lengthText === undefined) throw new S3Error('MissingContentLength');
    if (!/^\d{1,15}$/.test(lengthText.trim())) throw new S3Error('InvalidArgument', 'Content-Length is not a valid length.');
    declaredSize = Number(lengthText.trim());
  }

  const expectedDigests: ExpectedDigest[] = [];
  const md5 = header(r, 'content-md5');
  if (md5 !== undefined) {
    const v = parseContentMd5(md5);
    if (isS3Error(v)) throw v;
    expectedDigests.push({ algorithm: 'md5', value: v, header: 'Content-MD5' });
  }
  if (mode === 'sha256' && r.auth?.payloadSha256) {
    expectedDigests.push({ algorithm: 'sha256', value: Buffer.from(r.auth.payloadSha256, 'hex'), header: 'x-amz-content-sha256' });
  }

  // Checksums: given in headers, announced as trailers, or only named (x-amz-sdk-checksum-algorithm: computed and stored).
  const wanted = new Map<ChecksumAlgorithm, { expected?: string; trailer?: string }>();
  for (const [alg, value] of opts.checksumHeadersDescribeObject ? [] : checksumHeadersSent(r)) {
    const bad = validateChecksumValue(alg, value);
    if (bad) throw bad;
    wanted.set(alg, { expected: value });
  }
  if (wanted.size > 1) throw new S3Error('InvalidRequest', 'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.');
  const trailerText = header(r, 'x-amz-trailer');
  if (trailerText !== undefined) {
    for (const t of trailerText.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean)) {
      const alg = algorithmOfHeader(t);
      if (!alg) throw new S3Error('InvalidRequest', `The trailer ${t} is not a checksum files-rest understands.`);
      wanted.set(alg, { trailer: t });
    }
  }
  const sdkAlg = header(r, 'x-amz-sdk-checksum-algorithm') ?? header(r, 'x-amz-checksum-algorithm');
  if (sdkAlg !== undefined) {
    const alg = parseChecksumAlgorithm(sdkAlg.trim());
    if (!alg) throw new S3Error('InvalidRequest', `Checksum algorithm ${sdkAlg} is not supported.`);
    // The algorithm named must be the one whose checksum is sent (S3 refuses a CRC32 named beside a CRC32C value).
    if (wanted.size > 0 && !wanted.has(alg)) {
      const name = header(r, 'x-amz-sdk-checksum-algorithm') !== undefined ? 'x-amz-sdk-checksum-algorithm' : 'x-amz-checksum-algorithm';
      throw new S3Error('InvalidRequest', `Value for ${name} header is invalid.`);
    }
    if (!wanted.has(alg)) wanted.set(alg, {});
  }
  if (opts.checksum) {
    const required = opts.checksum;
    for (const alg of wanted.keys()) {
      if (alg !== required) {
        throw new S3Error('InvalidRequest', `Checksum Type mismatch occurred, expected checksum Type: ${required.toLowerCase()}, actual checksum Type: ${alg.toLowerCase()}`);
      }
    }
    if (!wanted.has(required)) wanted.set(required, {});
  }
  const hashers = new Map<ChecksumAlgorithm, ChecksumHasher>();
  for (const alg of wanted.keys()) hashers.set(alg, await createChecksumHasher(alg));

  let failed: S3Error | undefined;
  decoder?.on('error', (err) => {
    if (isS3Error(err)) failed ??= err;
  });

  const checksums: Record<string, string> = {};
  // Everything that could refuse the request from its headers has: the client may send the body now.
  continueBody(r);
  return {
    source: r.req,
    through: decoder ? [decoder] : [],
    observers: [...hashers.values()],
    declaredSize,
    expectedDigests,
    checksums,
    failure: () => failed,
    async verify() {
      if (failed) throw failed;
      for (const [alg, w] of wanted) {
        const actual = hashers.get(alg)!.digest();
        let expected = w.expected;
        if (w.trailer !== undefined) {
          expected = decoder?.trailers[w.trailer];
          if (expected === undefined) throw new S3Error('InvalidRequest', `The trailer ${w.trailer} was announced but not sent.`);
          const bad = validateChecksumValue(alg, expected.trim());
          if (bad) throw bad;
          expected = expected.trim();
        }
        if (expected !== undefined) {
          const mismatch = checkChecksum(alg, expected, actual);
          if (mismatch) throw mismatch;
        }
        checksums[checksumHeaderName(alg)] = actual;
      }
    },
  };
}

/** Reads a small body (a request's XML) whole, decoded and checked as any payload; at most `limit` bytes. */
export async function readSmallBody(r: S3Request, limit = 64 * 1024, opts: PayloadOptions = {}): Promise<Buffer> {
  const chunked = r.auth !== null && isAwsChunked(r.auth.payload);
  if (!chunked && carriesNoBody(r.headers)) return Buffer.alloc(0);
  const p = await openPayload(r, opts);
  if (p.declaredSize > limit) throw new S3Error('InvalidRequest', `The request body is larger than ${limit} bytes.`);
  const stream = new Tap(p.observers);
  pipeline([p.source, ...p.through, stream], () => {});
  const parts: Buffer[] = [];
  let size = 0;
  try {
    for await (const c of stream as AsyncIterable<Buffer>) {
      size += c.length;
      if (size > limit) throw new S3Error('InvalidRequest', `The request body is larger than ${limit} bytes.`);
      parts.push(c);
    }
  } catch (e) {
    throw p.failure() ?? (isS3Error(e) ? e : new S3Error('IncompleteBody'));
  }
  const body = Buffer.concat(parts);
  if (size !== p.declaredSize) throw new S3Error('IncompleteBody');
  await p.verify();
  const { createHash } = await import('node:crypto');
  for (const d of p.expectedDigests) {
    if (!createHash(d.algorithm).update(body).digest().equals(d.value)) {
      throw d.header === 'x-amz-content-sha256' ? new S3Error('XAmzContentSHA256Mismatch') : new S3Error('BadDigest');
    }
  }
  return body;
}
