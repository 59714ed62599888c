/**
 * Checksums of S3 multipart uploads, besides the MD5 every part has: the algorithm and type an
 * upload declares at CreateMultipartUpload (`x-amz-checksum-algorithm`, `x-amz-checksum-type`), each
 * part's checksum (verified as it arrives, recorded with the part), and the object's at
 * CompleteMultipartUpload: the parts' checksums listed by the client must be the recorded ones, and
 * the object's checksum is made from them (checksum-combine.ts), checked against the one the client
 * sent, stored with the object and answered by GetObject / HeadObject with `x-amz-checksum-mode`.
 * An upload that declared nothing takes the checksum headers of its completion without checking
 * or storing them, as S3 does.
 */
import { S3_PART_CHECKSUMS_KEY, type CompletionCheck, type ListedPart } from '../domain/s3-uploads.js';
import { checksumTypesOf, compositeChecksum, fullObjectCrc, type ChecksumType } from './checksum-combine.js';
import { algorithmOfHeader, CHECKSUM_ALGORITHMS, checksumHeaderName, parseChecksumAlgorithm, validateChecksumValue, type ChecksumAlgorithm } from './checksums.js';
import { S3Error } from './errors.js';
import { checksumHeadersSent } from './payload.js';
import { header, type S3Request } from './request.js';
import { el } from './xml.js';

/** What an upload declared: the algorithm of every part's checksum and how the object's is made. */
export interface DeclaredChecksum {
  algorithm: ChecksumAlgorithm;
  type: ChecksumType;
}

/** The stored form of a declaration (the upload's UPLOAD_CHECKSUM_KEY): `CRC32:COMPOSITE`. */
export function declarationText(d: DeclaredChecksum): string {
  return `${d.algorithm}:${d.type}`;
}

/** An upload's declaration from its stored form, or null (none, or not one of ours). */
export function parseDeclaration(text: string | null | undefined): DeclaredChecksum | null {
  const [alg, type] = (text ?? '').split(':');
  const algorithm = parseChecksumAlgorithm(alg ?? '');
  if (!algorithm || (type !== 'COMPOSITE' && type !== 'FULL_OBJECT')) return null;
  return { algorithm, type };
}

/** The declaration of a CreateMultipartUpload, or null; refuses what S3 refuses, before anything is made. */
export function declaredChecksum(r: S3Request): DeclaredChecksum | null {
  const algText = header(r, 'x-amz-checksum-algorithm')?.trim();
  const typeText = header(r, 'x-amz-checksum-type')?.trim();
  if (algText === undefined || algText === '') {
    if (typeText !== undefined) throw new S3Error('InvalidRequest', 'The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.');
    return null;
  }
  const algorithm = parseChecksumAlgorithm(algText);
  if (!algorithm) {
    throw new S3Error('InvalidRequest', `Checksum algorithm provided is unsupported. Please try again with any of the valid types: [${CHECKSUM_ALGORITHMS.join(', ')}]`);
  }
  const allowed = checksumTypesOf(algorithm);
  if (typeText === undefined) return { algorithm, type: allowed[0]! };
  const type = typeText.toUpperCase();
  if (type !== 'COMPOSITE' && type !== 'FULL_OBJECT') throw new S3Error('InvalidRequest', 'Value for x-amz-checksum-type header is invalid.');
  if (!allowed.includes(type)) throw new S3Error('InvalidRequest', `The ${type} checksum type cannot be used with the ${algorithm.toLowerCase()} checksum algorithm.`);
  return { algorithm, type };
}

/** The response headers naming a declaration (CreateMultipartUpload). */
export function declarationHeaders(d: DeclaredChecksum | null): Record<string, string> {
  return d ? { 'x-amz-checksum-algorithm': d.algorithm, 'x-amz-checksum-type': d.type } : {};
}

/** The XML elements naming a declaration (ListParts, ListMultipartUploads). */
export function declarationXml(d: DeclaredChecksum | null): string {
  return d ? el('ChecksumAlgorithm', d.algorithm) + el('ChecksumType', d.type) : '';
}

/** The part's checksum to record (`CRC32:<base64>`): the declared algorithm's, else the first the client sent. */
export function partChecksumText(checksums: Record<string, string>, declared: DeclaredChecksum | null): string | null {
  for (const [name, value] of Object.entries(checksums)) {
    const alg = algorithmOfHeader(name);
    if (alg && (!declared || alg === declared.algorithm)) return `${alg}:${value}`;
  }
  return null;
}

/** A recorded part checksum's algorithm and value. */
function parsePartChecksum(text: string | null): { algorithm: ChecksumAlgorithm; value: string } | null {
  const i = text?.indexOf(':') ?? -1;
  if (!text || i < 0) return null;
  const algorithm = parseChecksumAlgorithm(text.slice(0, i));
  return algorithm ? { algorithm, value: text.slice(i + 1) } : null;
}

/** `<ChecksumCRC32>…</ChecksumCRC32>` for a recorded part checksum (ListParts, CopyPartResult). */
export function partChecksumXml(text: string | null): string {
  const c = parsePartChecksum(text);
  return c ? el(`Checksum${c.algorithm}`, c.value) : '';
}

/** Checksum headers (readChecksumHeaders') as S3's elements: `<ChecksumCRC32>`…, then `<ChecksumType>` unless left out. */
function checksumElements(headers: Record<string, string>, withType: boolean): string {
  let out = '';
  for (const alg of CHECKSUM_ALGORITHMS) {
    const v = headers[checksumHeaderName(alg)];
    if (v !== undefined) out += el(`Checksum${alg}`, v);
  }
  return out && withType ? out + el('ChecksumType', headers['x-amz-checksum-type']!) : out;
}

/** The object's checksum elements from its stored metadata (CompleteMultipartUploadResult, GetObjectAttributes). */
export function objectChecksumXml(metadata: Record<string, string> | null | undefined): string {
  return checksumElements(readChecksumHeaders(metadata ?? {}), true);
}

/** The object checksum a CompleteMultipartUpload sent in its headers, and its type; refuses an unknown or doubled one. */
function completionHeaders(r: S3Request): { sent: { algorithm: ChecksumAlgorithm; value: string } | null; type: string | null; size: number | null } {
  const headers = checksumHeadersSent(r);
  if (headers.length > 1) throw new S3Error('InvalidRequest', 'Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.');
  const sent = headers[0] ? { algorithm: headers[0][0], value: headers[0][1] } : null;
  const type = header(r, 'x-amz-checksum-type')?.trim().toUpperCase() ?? null;
  const sizeText = header(r, 'x-amz-mp-object-size')?.trim();
  if (sizeText !== undefined && !/^\d{1,15}$/.test(sizeText)) throw new S3Error('InvalidRequest', 'Value for x-amz-mp-object-size header is invalid.');
  return { sent, type, size: sizeText === undefined ? null : Number(sizeText) };
}

/** The checksums a CompleteMultipartUpload lists for one part (`<ChecksumCRC32>` …), by algorithm. */
export type ListedChecksums = Partial<Record<ChecksumAlgorithm, string>>;

/**
 * The completion's checksum rules: its headers are read now (a malformed one is refused before the
 * body is read); the check it answers, given the client's part list, runs in the domain's
 * completion transaction against the parts it completes:
 * - `x-amz-mp-object-size`, when sent, must be the object's size (InvalidRequest);
 * - an upload that declared an algorithm: each listed part's checksum of that algorithm must be the
 *   recorded one (InvalidPart), and a COMPOSITE upload must list one for every part (InvalidRequest);
 *   a `x-amz-checksum-type` other than the declared one is BadDigest; the object's checksum sent
 *   must be the one made from the parts (BadDigest), and that checksum and its type are stored;
 * - an upload that declared an algorithm must list parts 1..N (InvalidPartOrder, given the list,
 *   before the domain reads a byte: such a list is never assembled).
 */
export function completionCheck(r: S3Request, declaredText: string | null | undefined): (list: readonly { partNumber: number; checksums: ListedChecksums }[]) => CompletionCheck {
  const { sent, type, size } = completionHeaders(r);
  const declared = parseDeclaration(declaredText);
  if (declared && sent) {
    if (sent.algorithm !== declared.algorithm) {
      throw new S3Error('InvalidRequest', `The upload was created using a ${declared.algorithm.toLowerCase()} checksum; the request gives a ${sent.algorithm.toLowerCase()} checksum.`);
    }
    const bare = declared.type === 'COMPOSITE' ? sent.value.replace(/-\d{1,5}$/, '') : sent.value;
    if (validateChecksumValue(declared.algorithm, bare)) throw new S3Error('InvalidRequest', `Value for ${checksumHeaderName(declared.algorithm)} header is invalid.`);
  }
  return (list) => {
    // With a checksum on every part, S3 (general purpose buckets) wants the part numbers to start at 1
    // and be consecutive; without one, any ascending numbers will do. Refused before anything is read.
    if (declared && list.some((p, i) => p.partNumber !== i + 1)) {
      throw new S3Error('InvalidPartOrder', `The upload was created with a ${declared.algorithm.toLowerCase()} checksum on each part: the part numbers must start at 1 and be consecutive.`);
    }
    return checkParts(list);
  };
  function checkParts(list: readonly { partNumber: number; checksums: ListedChecksums }[]): CompletionCheck {
    return async (parts: readonly ListedPart[], uploadChecksum: string | null): Promise<Record<string, string>> => {
      const listed = new Map(list.map((p) => [p.partNumber, p.checksums]));
      const total = parts.reduce((s, p) => s + p.size, 0);
      if (size !== null && size !== total) {
        throw new S3Error('InvalidRequest', `The provided 'x-amz-mp-object-size' header value ${size} does not match what was computed: ${total}`);
      }
      // The declaration read with the upload row, in this transaction (it cannot change, but this is the one committed).
      const d = parseDeclaration(uploadChecksum);
      if (!d) return {};
      if (type !== null && type !== d.type) {
        throw new S3Error('BadDigest', `The upload was created with the ${d.type} checksum type; the request gives ${type}.`);
      }
      const values = parts.map((p) => {
        const recorded = parsePartChecksum(p.clientChecksum);
        const given = listed.get(p.partNumber)?.[d.algorithm];
        if (given === undefined && d.type === 'COMPOSITE') {
          throw new S3Error(
            'InvalidRequest',
            `The upload was created using a ${d.algorithm.toLowerCase()} checksum. The complete request must include the checksum for each part. It was missing for part ${p.partNumber} in the request.`,
          );
        }
        if (!recorded || recorded.algorithm !== d.algorithm || (given !== undefined && given !== recorded.value)) {
          throw new S3Error('InvalidPart', `Part ${p.partNumber}: its ${d.algorithm} checksum is not the one recorded when it was uploaded.`);
        }
        return recorded.value;
      });
      const value = d.type === 'COMPOSITE' ? await compositeChecksum(d.algorithm, values) : fullObjectCrc(d.algorithm, values.map((v, i) => ({ value: v, size: parts[i]!.size })));
      if (sent) {
        const sentValue = d.type === 'COMPOSITE' && !/-\d{1,5}$/.test(sent.value) ? `${sent.value}-${parts.length}` : sent.value;
        if (sentValue !== value) throw new S3Error('BadDigest', `The ${d.algorithm.toLowerCase()} you specified for the object did not match what was computed from its parts.`);
      }
      // The parts' own too: GetObject with partNumber answers one of them (base64 holds no space).
      return { [checksumHeaderName(d.algorithm)]: value, 'x-amz-checksum-type': d.type, [S3_PART_CHECKSUMS_KEY]: values.join(' ') };
    };
  }
}

/**
 * The checksum headers of a read with `x-amz-checksum-mode: ENABLED`, from the object's stored
 * metadata: the object's checksum and type for the whole object (a checksum stored without a type
 * is a single upload's, of every byte: FULL_OBJECT), or, for `partNumber` n of a multipart object,
 * that part's checksum (when its parts' were kept) with the object's type.
 */
export function readChecksumHeaders(meta: Record<string, string>, partNumber: number | null = null): Record<string, string> {
  const out: Record<string, string> = {};
  if (partNumber === null) {
    for (const alg of CHECKSUM_ALGORITHMS) {
      const v = meta[checksumHeaderName(alg)];
      if (v !== undefined) out[checksumHeaderName(alg)] = v;
    }
  } else {
    const kept = keptPartChecksums(meta);
    const part = kept?.values[partNumber - 1];
    if (kept && part) out[checksumHeaderName(kept.algorithm)] = part;
  }
  if (Object.keys(out).length > 0) out['x-amz-checksum-type'] = meta['x-amz-checksum-type'] ?? 'FULL_OBJECT';
  return out;
}

/**
 * The parts' checksums kept with a multipart object, in part order, and their algorithm (the
 * object's); null when none were kept. Read once for a listing of its parts.
 */
export function keptPartChecksums(meta: Record<string, string>): { algorithm: ChecksumAlgorithm; values: string[] } | null {
  const text = meta[S3_PART_CHECKSUMS_KEY];
  const algorithm = CHECKSUM_ALGORITHMS.find((a) => meta[checksumHeaderName(a)] !== undefined);
  return text && algorithm ? { algorithm, values: text.split(' ') } : null;
}

/** One part's kept checksum as XML (`<ChecksumCRC32>…`), for GetObjectAttributes' parts; '' when none. */
export function keptPartChecksumXml(kept: ReturnType<typeof keptPartChecksums>, partNumber: number): string {
  const v = kept?.values[partNumber - 1];
  return kept && v ? el(`Checksum${kept.algorithm}`, v) : '';
}
