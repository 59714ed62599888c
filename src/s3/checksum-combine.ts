/**
 * A multipart object's checksum from its parts' checksums, as S3 computes it at
 * CompleteMultipartUpload, without reading a byte again:
 * - COMPOSITE (CRC32, CRC32C, SHA-1, SHA-256): the algorithm over the parts' binary checksums
 *   concatenated in order, in base64, then `-<number of parts>`.
 * - FULL_OBJECT (CRC32, CRC32C, CRC64NVME): the CRC of every byte of the object, combined from the
 *   parts' CRCs and sizes as zlib's `crc32_combine` does (x^(8·len) mod P times the first CRC, plus
 *   the second), which holds for any reflected CRC whose initial value and final XOR are all ones,
 *   as these three are.
 *
 * @example
 * ```ts
 * await compositeChecksum('SHA256', ['275VF5lo…', 'mrHwOfjT…', 'Vw7oB/nK…']); // 'uWBwpe1d…=-3'
 * fullObjectCrc('CRC32', [{ value: 'JRTCyQ==', size: 5 << 20 }, …]); // 'WgDhBQ=='
 * ```
 */
import { checksumOf, type ChecksumAlgorithm } from './checksums.js';

/** How a multipart object's checksum is made from its parts' (S3's `x-amz-checksum-type`). */
export type ChecksumType = 'COMPOSITE' | 'FULL_OBJECT';

/** The CRCs S3 can combine into a full-object checksum: their reflected polynomials and widths. */
const CRCS: Partial<Record<ChecksumAlgorithm, { poly: bigint; width: number }>> = {
  CRC32: { poly: 0xedb88320n, width: 32 },
  CRC32C: { poly: 0x82f63b78n, width: 32 },
  CRC64NVME: { poly: 0x9a6c9329ac4bc9b5n, width: 64 },
};

/** The checksum types an algorithm allows, the default first (S3's rules). */
export function checksumTypesOf(algorithm: ChecksumAlgorithm): readonly ChecksumType[] {
  if (algorithm === 'CRC64NVME') return ['FULL_OBJECT'];
  if (algorithm === 'SHA1' || algorithm === 'SHA256') return ['COMPOSITE'];
  return ['COMPOSITE', 'FULL_OBJECT'];
}

/** a·b mod P in the CRC's reflected bit order (zlib's multmodp); `a` is not zero. */
function multModP(a: bigint, b: bigint, poly: bigint, width: number): bigint {
  let m = 1n << BigInt(width - 1);
  let p = 0n;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1n)) === 0n) break;
    }
    m >>= 1n;
    b = b & 1n ? (b >> 1n) ^ poly : b >> 1n;
  }
  return p;
}

/** x^(8·bytes) mod P, by squaring. */
function shiftOperator(bytes: number, poly: bigint, width: number): bigint {
  let result = 1n << BigInt(width - 1); // x^0
  let square = 1n << BigInt(width - 2); // x^1
  for (let i = 0; i < 3; i++) square = multModP(square, square, poly, width); // x^8
  for (let n = BigInt(bytes); n > 0n; n >>= 1n) {
    if (n & 1n) result = multModP(square, result, poly, width);
    square = multModP(square, square, poly, width);
  }
  return result;
}

const toBigInt = (b64: string): bigint => BigInt(`0x${Buffer.from(b64, 'base64').toString('hex') || '0'}`);
const toBase64 = (v: bigint, width: number): string => Buffer.from(v.toString(16).padStart(width / 4, '0'), 'hex').toString('base64');

/**
 * The CRC of the parts' bytes one after another, from each part's CRC (base64, as S3 prints it) and
 * size. Parts of one size share their shift operator, so a 10 000-part upload costs a few
 * milliseconds.
 */
export function fullObjectCrc(algorithm: ChecksumAlgorithm, parts: readonly { value: string; size: number }[]): string {
  const crc = CRCS[algorithm];
  if (!crc) throw new Error(`${algorithm} cannot make a full-object checksum`);
  const operators = new Map<number, bigint>();
  let combined: bigint | null = null;
  for (const part of parts) {
    const value = toBigInt(part.value);
    if (combined === null) {
      combined = value;
      continue;
    }
    if (part.size === 0) continue;
    let op = operators.get(part.size);
    if (op === undefined) operators.set(part.size, (op = shiftOperator(part.size, crc.poly, crc.width)));
    combined = (combined === 0n ? 0n : multModP(op, combined, crc.poly, crc.width)) ^ value;
  }
  return toBase64(combined ?? 0n, crc.width);
}

/** The composite checksum of the parts (base64 values, in order): `<base64>-<count>`. */
export async function compositeChecksum(algorithm: ChecksumAlgorithm, values: readonly string[]): Promise<string> {
  return `${await checksumOf(algorithm, Buffer.concat(values.map((v) => Buffer.from(v, 'base64'))))}-${values.length}`;
}
