/**
 * A Transform that decodes `Content-Encoding: aws-chunked` request bodies, the framing the AWS SDKs
 * use for streaming uploads (x-amz-content-sha256 `STREAMING-*`):
 *
 * - `STREAMING-AWS4-HMAC-SHA256-PAYLOAD`: `hex-size;chunk-signature=sig\r\n<data>\r\n` …
 *   `0;chunk-signature=sig\r\n\r\n`; each chunk signed, chained from the request's signature.
 * - `STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER`: the same, then trailer lines
 *   (`x-amz-checksum-crc32:<base64>\r\n`), a signed `x-amz-trailer-signature:sig\r\n`, and `\r\n`.
 * - `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: `hex-size\r\n<data>\r\n` … `0\r\n`, trailer lines, `\r\n`.
 *
 * The decoded bytes flow through as they arrive (no buffering of whole chunks), so a chunk's bytes
 * are pushed before its signature, which follows them, can be checked: a consumer must treat what it
 * received as unverified until the stream ends without error (store to a path nobody reads first).
 * Every framing fault ends the stream with an {@link S3Error}; nothing is thrown at the caller.
 * The trailers are in {@link AwsChunkedDecoder.trailers} once the stream has ended; checking a
 * checksum trailer against the bytes is the caller's job (see checksums.ts).
 *
 * Leniency: chunks smaller than 8 KiB are accepted anywhere (S3 refuses signed ones but the last);
 * the final empty line may be missing when the body ends right after the last chunk or trailer.
 */
import { createHash, timingSafeEqual, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { S3Error } from './errors.js';
import type { HmacSha256Key } from '../util/hmac.js';
import { EMPTY_SHA256, headerText, requestHeaders, type PayloadMode, type SigV4Input, type VerifiedSigV4 } from './sigv4.js';

/** The framings this decoder reads. */
export type AwsChunkedMode =
  | 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD'
  | 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER'
  | 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';

/** What chunk and trailer signatures are checked with: the fields of a {@link VerifiedSigV4}. */
export interface ChunkSigning {
  readonly signingKey: HmacSha256Key;
  readonly longDate: string;
  readonly scope: string;
  /** The request's signature, which the first chunk's signature chains from. */
  readonly seedSignature: string;
}

export interface AwsChunkedOptions {
  readonly mode: AwsChunkedMode;
  /** Required for the signed modes. */
  readonly signing?: ChunkSigning;
  /** x-amz-decoded-content-length: the decoded size the body must have; unchecked when undefined. */
  readonly decodedContentLength?: number;
  /**
   * The trailer names x-amz-trailer announced (lower case). The trailers that arrive must be exactly
   * these; none are allowed when empty.
   */
  readonly trailerNames?: readonly string[];
  /** The largest chunk accepted, in bytes (default 64 MiB). */
  readonly maxChunkSize?: number;
}

const CRLF = Buffer.from('\r\n');
/** The longest chunk-size or trailer line accepted (a signed size line is about 85 bytes). */
const MAX_LINE = 4096;
const MAX_TRAILER_BYTES = 16 * 1024;
const DEFAULT_MAX_CHUNK = 64 * 1024 * 1024;
const SIZE_LINE = /^([0-9a-fA-F]{1,16})(?:;(.*))?$/s;
const CHUNK_SIGNATURE = /^chunk-signature=([0-9a-f]{64})$/;
const TRAILER_LINE = /^([A-Za-z0-9!#$%&'*+.^_`|~-]+):[ \t]*(.*?)[ \t]*$/s;

type State = 'size' | 'data' | 'data-crlf' | 'trailer' | 'done' | 'failed';

function malformed(reason: string): S3Error {
  return new S3Error('InvalidRequest', `Malformed aws-chunked body: ${reason}.`);
}

function signatureMismatch(): S3Error {
  return new S3Error('SignatureDoesNotMatch');
}

/**
 * Decodes an aws-chunked body; see the module comment. Errors with `IncompleteBody` (the body ends
 * early, or its decoded size is not x-amz-decoded-content-length), `SignatureDoesNotMatch` (a chunk
 * or trailer signature is wrong or missing), `InvalidArgument` (a chunk larger than allowed) or
 * `InvalidRequest` (bad framing: size line, missing CRLF, trailers not as announced, bytes after the end).
 */
export class AwsChunkedDecoder extends Transform {
  /** The trailers received, names in lower case (the signature trailer left out); complete once the stream ended. */
  readonly trailers: Record<string, string> = {};
  /** Decoded bytes passed on so far. */
  decodedBytes = 0;

  private readonly mode: AwsChunkedMode;
  private readonly signing: ChunkSigning | undefined;
  private readonly expectedLength: number | undefined;
  private readonly trailerNames: readonly string[];
  private readonly maxChunkSize: number;
  private state: State = 'size';
  /** A partial line carried over from the previous input buffer. */
  private partial: Buffer | null = null;
  /** Bytes of the current chunk still to come. */
  private left = 0;
  /** Bytes of the CRLF after a chunk's data already seen (0 or 1). */
  private crlfSeen = 0;
  private chunkSignature = '';
  private chunkHash: Hash | null = null;
  private previousSignature: string;
  private trailerSignature: string | undefined;
  private trailerBytes = 0;
  /** The sum of the chunk sizes announced so far. */
  private announced = 0;

  constructor(options: AwsChunkedOptions) {
    super();
    this.mode = options.mode;
    this.signing = options.signing;
    this.expectedLength = options.decodedContentLength;
    this.trailerNames = (options.trailerNames ?? []).map((n) => n.toLowerCase());
    this.maxChunkSize = options.maxChunkSize ?? DEFAULT_MAX_CHUNK;
    this.previousSignature = options.signing?.seedSignature ?? '';
  }

  private get signed(): boolean {
    return this.mode !== 'STREAMING-UNSIGNED-PAYLOAD-TRAILER';
  }

  private get withTrailer(): boolean {
    return this.mode !== 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.state === 'failed') return callback();
    const err = this.consume(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
    if (err) {
      this.state = 'failed';
      return callback(err);
    }
    callback();
  }

  override _flush(callback: TransformCallback): void {
    if (this.state === 'failed') return callback();
    const err = this.end_();
    if (err) this.state = 'failed';
    callback(err ?? undefined);
  }

  /** The body ended: is it complete? */
  private end_(): S3Error | null {
    if (this.signed && !this.signing) return malformed('no signing context for a signed payload');
    // Tolerated: the final empty line missing when the body ends at a line boundary after the last chunk.
    const atEnd = this.state === 'done' || (this.state === 'trailer' && this.partial === null);
    if (!atEnd) return new S3Error('IncompleteBody', 'The request body terminated unexpectedly');
    if (this.state === 'trailer') {
      const err = this.finishTrailers();
      if (err) return err;
    }
    return null;
  }

  private consume(buf: Buffer): S3Error | null {
    if (this.signed && !this.signing) return malformed('no signing context for a signed payload');
    let pos = 0;
    while (pos < buf.length) {
      switch (this.state) {
        case 'size':
        case 'trailer': {
          const r = this.takeLine(buf, pos);
          if (r instanceof S3Error) return r;
          if (r === null) return null;
          pos = r.next;
          const err = this.state === 'size' ? this.onSizeLine(r.line) : this.onTrailerLine(r.line);
          if (err) return err;
          break;
        }
        case 'data': {
          const n = Math.min(this.left, buf.length - pos);
          const data = buf.subarray(pos, pos + n);
          this.chunkHash?.update(data);
          this.push(data);
          this.decodedBytes += n;
          this.left -= n;
          pos += n;
          if (this.left === 0) this.state = 'data-crlf';
          break;
        }
        case 'data-crlf': {
          if (buf[pos] !== CRLF[this.crlfSeen]) return malformed('chunk data is not followed by CRLF');
          pos++;
          if (++this.crlfSeen === 2) {
            this.crlfSeen = 0;
            const err = this.endChunk(this.chunkHash?.digest('hex') ?? '');
            if (err) return err;
            this.state = 'size';
          }
          break;
        }
        case 'done':
          return malformed('data after the end of the body');
        case 'failed':
          return null;
      }
    }
    return null;
  }

  /**
   * The next CRLF-terminated line from `pos` (joined with a carried-over partial line), or null when
   * the buffer ends first (the rest is carried over).
   */
  private takeLine(buf: Buffer, pos: number): { line: string; next: number } | S3Error | null {
    if (this.partial) {
      const head = buf.subarray(pos, pos + MAX_LINE + 2);
      const joined = Buffer.concat([this.partial, head]);
      const i = joined.indexOf(CRLF);
      if (i < 0) {
        if (joined.length > MAX_LINE + 1) return malformed('line too long');
        this.partial = joined;
        return null;
      }
      if (i > MAX_LINE) return malformed('line too long');
      const next = pos + i + 2 - this.partial.length;
      this.partial = null;
      return { line: joined.toString('latin1', 0, i), next };
    }
    const i = buf.indexOf(CRLF, pos);
    if (i < 0) {
      if (buf.length - pos > MAX_LINE + 1) return malformed('line too long');
      this.partial = Buffer.from(buf.subarray(pos));
      return null;
    }
    if (i - pos > MAX_LINE) return malformed('line too long');
    return { line: buf.toString('latin1', pos, i), next: i + 2 };
  }

  private onSizeLine(line: string): S3Error | null {
    const m = SIZE_LINE.exec(line);
    if (!m) return malformed('invalid chunk size line');
    const size = parseInt(m[1]!, 16);
    if (size > this.maxChunkSize) return new S3Error('InvalidArgument', `Chunk size ${size} is larger than ${this.maxChunkSize} bytes.`);
    if (this.expectedLength !== undefined && this.announced + size > this.expectedLength) {
      return new S3Error('IncompleteBody', 'The request body is longer than x-amz-decoded-content-length');
    }
    if (this.signed) {
      const sig = m[2] === undefined ? null : CHUNK_SIGNATURE.exec(m[2]);
      if (!sig) return malformed('chunk without a valid chunk-signature');
      this.chunkSignature = sig[1]!;
    }
    this.announced += size;
    if (size > 0) {
      this.left = size;
      this.chunkHash = this.signed ? createHash('sha256') : null;
      this.state = 'data';
      return null;
    }
    // The final chunk.
    const err = this.endChunk(EMPTY_SHA256);
    if (err) return err;
    if (this.expectedLength !== undefined && this.announced !== this.expectedLength) {
      return new S3Error('IncompleteBody', 'The decoded body is shorter than x-amz-decoded-content-length');
    }
    this.state = 'trailer';
    return null;
  }

  /** Checks the signature of the chunk just read (signed modes). */
  private endChunk(dataHash: string): S3Error | null {
    if (!this.signed) return null;
    const s = this.signing!;
    const sts = `AWS4-HMAC-SHA256-PAYLOAD\n${s.longDate}\n${s.scope}\n${this.previousSignature}\n${EMPTY_SHA256}\n${dataHash}`;
    if (!sameSignature(s.signingKey.sign(sts), this.chunkSignature)) return signatureMismatch();
    this.previousSignature = this.chunkSignature;
    this.chunkHash = null;
    return null;
  }

  private onTrailerLine(line: string): S3Error | null {
    if (line === '') {
      this.state = 'done';
      return this.finishTrailers();
    }
    if (!this.withTrailer) return malformed('trailer after the final chunk of a payload without trailers');
    this.trailerBytes += line.length + 2;
    if (this.trailerBytes > MAX_TRAILER_BYTES) return malformed('trailers too long');
    const m = TRAILER_LINE.exec(line);
    if (!m) return malformed('invalid trailer line');
    const name = m[1]!.toLowerCase();
    const value = m[2]!;
    if (name === 'x-amz-trailer-signature' && this.signed) {
      if (this.trailerSignature !== undefined || !/^[0-9a-f]{64}$/.test(value)) return malformed('invalid x-amz-trailer-signature');
      this.trailerSignature = value;
      return null;
    }
    if (!this.trailerNames.includes(name)) {
      return new S3Error('InvalidRequest', `The trailer ${name} was not announced in x-amz-trailer.`);
    }
    if (name in this.trailers) return malformed(`trailer ${name} repeated`);
    if (value === '') return new S3Error('InvalidRequest', `The trailer ${name} has no value.`);
    this.trailers[name] = value;
    return null;
  }

  /** The trailer section ended: all announced trailers came, and the trailer signature is right. */
  private finishTrailers(): S3Error | null {
    for (const name of this.trailerNames) {
      if (!(name in this.trailers)) return new S3Error('InvalidRequest', `The trailer ${name} announced in x-amz-trailer is missing.`);
    }
    if (this.signed && this.withTrailer) {
      if (this.trailerSignature === undefined) {
        if (this.trailerNames.length === 0) return null;
        return new S3Error('SignatureDoesNotMatch', 'The trailer signature (x-amz-trailer-signature) is missing.');
      }
      const canonical = Object.keys(this.trailers)
        .sort()
        .map((n) => `${n}:${this.trailers[n]}\n`)
        .join('');
      const s = this.signing!;
      const hash = createHash('sha256').update(canonical, 'utf8').digest('hex');
      const sts = `AWS4-HMAC-SHA256-TRAILER\n${s.longDate}\n${s.scope}\n${this.previousSignature}\n${hash}`;
      if (!sameSignature(s.signingKey.sign(sts), this.trailerSignature)) return signatureMismatch();
    }
    return null;
  }
}

function sameSignature(expected: Buffer, givenHex: string): boolean {
  const given = Buffer.from(givenHex, 'hex');
  return given.length === expected.length && timingSafeEqual(expected, given);
}

/** Whether a payload mode is one of the aws-chunked framings. */
export function isAwsChunked(mode: PayloadMode): mode is AwsChunkedMode {
  return mode.startsWith('STREAMING-');
}

/**
 * Builds the decoder for a verified request from its headers: `x-amz-decoded-content-length`
 * (required: `MissingContentLength` when absent, `InvalidArgument` when not a number) and
 * `x-amz-trailer` (comma-separated names; required by the trailer modes, refused otherwise).
 */
export function createAwsChunkedDecoder(
  auth: Pick<VerifiedSigV4, 'payload' | 'signingKey' | 'longDate' | 'scope' | 'seedSignature'>,
  headers: SigV4Input['headers'],
  options: { maxChunkSize?: number } = {},
): AwsChunkedDecoder | S3Error {
  if (!isAwsChunked(auth.payload)) return new S3Error('InvalidRequest', 'The payload is not aws-chunked.');
  const byName = requestHeaders(headers);
  const header = (name: string): string | undefined => headerText(byName, name);
  const lengthText = header('x-amz-decoded-content-length');
  if (lengthText === undefined) {
    return new S3Error('MissingContentLength', 'You must provide the x-amz-decoded-content-length header with an aws-chunked body.');
  }
  if (!/^\d{1,15}$/.test(lengthText.trim())) {
    return new S3Error('InvalidArgument', 'x-amz-decoded-content-length is not a valid length.', {
      ArgumentName: 'x-amz-decoded-content-length',
      ArgumentValue: lengthText,
    });
  }
  const trailerText = header('x-amz-trailer');
  const trailerNames = trailerText === undefined ? [] : trailerText.split(',').map((s) => s.trim().toLowerCase()).filter((s) => s !== '');
  const withTrailer = auth.payload !== 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD';
  if (withTrailer && trailerNames.length === 0) return new S3Error('InvalidRequest', `${auth.payload} requires the x-amz-trailer header.`);
  if (!withTrailer && trailerNames.length > 0) return new S3Error('InvalidRequest', `x-amz-trailer requires a -TRAILER payload.`);
  return new AwsChunkedDecoder({
    mode: auth.payload,
    signing: auth.payload === 'STREAMING-UNSIGNED-PAYLOAD-TRAILER' ? undefined : auth,
    decodedContentLength: Number(lengthText.trim()),
    trailerNames,
    maxChunkSize: options.maxChunkSize,
  });
}
