/**
 * The `x-amz-checksum-*` algorithms the AWS SDKs send, as incremental hashers that answer in base64
 * as S3 does (big-endian digest bytes), and the Content-MD5 check. CRCs run in WebAssembly
 * (hash-wasm), SHA-1/SHA-256/MD5 in Node's crypto.
 *
 * @example
 * ```ts
 * const h = await createChecksumHasher('CRC32C');
 * for await (const chunk of body) h.update(chunk);
 * if (h.digest() !== headers['x-amz-checksum-crc32c']) fail(new S3Error('BadDigest'));
 * ```
 */
import { createHash } from 'node:crypto';
import { createCRC32, createCRC64 } from 'hash-wasm';
import { S3Error } from './errors.js';

/** A checksum algorithm S3 accepts in `x-amz-checksum-<name>` / `x-amz-sdk-checksum-algorithm`. */
export type ChecksumAlgorithm = 'CRC32' | 'CRC32C' | 'CRC64NVME' | 'SHA1' | 'SHA256';

/** Every {@link ChecksumAlgorithm}. */
export const CHECKSUM_ALGORITHMS: readonly ChecksumAlgorithm[] = ['CRC32', 'CRC32C', 'CRC64NVME', 'SHA1', 'SHA256'];

/** Digest length in bytes of each algorithm. */
const DIGEST_BYTES: Record<ChecksumAlgorithm, number> = { CRC32: 4, CRC32C: 4, CRC64NVME: 8, SHA1: 20, SHA256: 32 };

// Reflected polynomials, as hash-wasm takes them.
const CRC32C_POLYNOMIAL = 0x82f63b78;
const CRC64NVME_POLYNOMIAL = '9a6c9329ac4bc9b5';

/** An incremental checksum. `digest()` may be called once, after the last `update`. */
export interface ChecksumHasher {
  readonly algorithm: ChecksumAlgorithm;
  update(data: Uint8Array): void;
  /** The checksum as S3 prints it: base64 of the big-endian digest. */
  digest(): string;
}

/** Starts an incremental checksum of an algorithm. */
export async function createChecksumHasher(algorithm: ChecksumAlgorithm): Promise<ChecksumHasher> {
  switch (algorithm) {
    case 'SHA1':
    case 'SHA256': {
      const h = createHash(algorithm === 'SHA1' ? 'sha1' : 'sha256');
      return { algorithm, update: (d) => void h.update(d), digest: () => h.digest('base64') };
    }
    case 'CRC32':
    case 'CRC32C':
    case 'CRC64NVME': {
      const h =
        algorithm === 'CRC64NVME'
          ? await createCRC64(CRC64NVME_POLYNOMIAL)
          : await createCRC32(algorithm === 'CRC32C' ? CRC32C_POLYNOMIAL : undefined);
      h.init();
      return {
        algorithm,
        update: (d) => void h.update(d),
        // hash-wasm answers the CRC as big-endian hex, which is the byte order S3 encodes.
        digest: () => Buffer.from(h.digest('hex'), 'hex').toString('base64'),
      };
    }
  }
}

/** The checksum of a whole buffer, base64. */
export async function checksumOf(algorithm: ChecksumAlgorithm, data: Uint8Array): Promise<string> {
  const h = await createChecksumHasher(algorithm);
  h.update(data);
  return h.digest();
}

/** `x-amz-checksum-crc32c` for `CRC32C`, and so on. */
export function checksumHeaderName(algorithm: ChecksumAlgorithm): string {
  return `x-amz-checksum-${algorithm.toLowerCase()}`;
}

/** The algorithm of an `x-amz-checksum-*` header or trailer name (any case), or undefined. */
export function algorithmOfHeader(name: string): ChecksumAlgorithm | undefined {
  const lower = name.toLowerCase();
  if (!lower.startsWith('x-amz-checksum-')) return undefined;
  return parseChecksumAlgorithm(lower.slice('x-amz-checksum-'.length));
}

/** The algorithm named by `x-amz-sdk-checksum-algorithm` / `x-amz-checksum-algorithm` (any case), or undefined. */
export function parseChecksumAlgorithm(name: string): ChecksumAlgorithm | undefined {
  const upper = name.toUpperCase();
  return (CHECKSUM_ALGORITHMS as readonly string[]).includes(upper) ? (upper as ChecksumAlgorithm) : undefined;
}

function decodeBase64Exact(value: string, bytes: number): Buffer | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value) || value.length % 4 !== 0) return undefined;
  const buf = Buffer.from(value, 'base64');
  return buf.length === bytes && buf.toString('base64') === value ? buf : undefined;
}

/**
 * Checks the form of a checksum value a client sent (base64 of the algorithm's digest length):
 * `InvalidRequest` as S3 answers ("Value for x-amz-checksum-crc32 header is invalid.") when not.
 */
export function validateChecksumValue(algorithm: ChecksumAlgorithm, value: string): S3Error | undefined {
  if (decodeBase64Exact(value, DIGEST_BYTES[algorithm])) return undefined;
  return new S3Error('InvalidRequest', `Value for ${checksumHeaderName(algorithm)} header is invalid.`);
}

/**
 * Compares a checksum the client sent with the one computed: `BadDigest` as S3 answers when they
 * differ (a malformed value is also a mismatch here: check the form first with
 * {@link validateChecksumValue} to answer `InvalidRequest` before reading the body).
 */
export function checkChecksum(algorithm: ChecksumAlgorithm, expected: string, actual: string): S3Error | undefined {
  if (expected === actual) return undefined;
  return new S3Error('BadDigest', `The ${algorithm} you specified did not match the calculated checksum.`);
}

/**
 * Parses a Content-MD5 header: the 16 MD5 bytes, or `InvalidDigest` ("The Content-MD5 you
 * specified was invalid.") when it is not base64 of 16 bytes.
 */
export function parseContentMd5(value: string): Buffer | S3Error {
  return decodeBase64Exact(value.trim(), 16) ?? new S3Error('InvalidDigest', 'The Content-MD5 you specified was invalid.');
}

/** A streaming MD5 for Content-MD5 checks and ETags; `digest()` answers the 16 raw bytes. */
export function createMd5(): { update(data: Uint8Array): void; digest(): Buffer } {
  const h = createHash('md5');
  return { update: (d) => void h.update(d), digest: () => h.digest() };
}

/**
 * Compares the Content-MD5 a client sent (already parsed) with the MD5 of the body received:
 * `BadDigest` ("The Content-MD5 you specified did not match what we received.") when they differ.
 */
export function checkContentMd5(expected: Buffer, actual: Buffer): S3Error | undefined {
  if (expected.length === actual.length && expected.equals(actual)) return undefined;
  return new S3Error('BadDigest', 'The Content-MD5 you specified did not match what we received.');
}
