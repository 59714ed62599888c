import { AppError, validationError } from '../errors.js';

// C0 controls and DEL break logs, headers and terminals; nothing legitimate needs them in a file name.
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Why `text` cannot be a key, or null when it can: no control character (NUL included, which
 * PostgreSQL cannot store or even compare) and valid Unicode (lone surrogates have no UTF-8 form).
 */
export function keyTextProblem(text: string): string | null {
  if (CONTROL.test(text)) return 'control characters are not allowed';
  if (!text.isWellFormed()) return 'not valid Unicode';
  return null;
}

/**
 * Why `text` cannot be a listing filter of the S3 door (a prefix, a delimiter, a marker), or null
 * when it can. S3 takes any text there; files-rest takes any but NUL (PostgreSQL can neither store
 * nor compare it) and lone surrogates. Another control character matches no key, since no key holds
 * one: a prefix with one lists nothing, a delimiter with one groups nothing, a marker with one is a
 * position like any other. (The REST door refuses them in a prefix or cursor: `validateKeyFilter`.)
 */
export function filterTextProblem(text: string): string | null {
  if (text.includes('\u0000')) return 'NUL is not allowed';
  if (!text.isWellFormed()) return 'not valid Unicode';
  return null;
}

/**
 * Validates a key that is only looked up (read, delete, a multipart upload's key): the same text
 * rules as for storing one, so every database answers alike, but no length rule (a key stored
 * under a longer limit stays reachable).
 */
export function validateLookupKey(key: string): void {
  const problem = keyTextProblem(key);
  if (problem) throw new AppError('INVALID_KEY', { reason: problem });
}

/** Validates a key prefix or cursor key of a listing (field: the query parameter's name). */
export function validateKeyFilter(text: string, field: string): void {
  const problem = keyTextProblem(text);
  if (problem) throw validationError(field, `${problem[0]!.toUpperCase()}${problem.slice(1)}.`);
}

/** Validates an object key (already percent-decoded). Keys are text and never become file paths. */
export function validateKey(key: string, maxLen: number): void {
  if (key.length === 0) throw new AppError('INVALID_KEY', { reason: 'the key is empty' });
  validateLookupKey(key);
  // Length in characters (code points), as the reference counts it.
  let n = 0;
  for (const _ of key) if (++n > maxLen) throw new AppError('KEY_TOO_LONG');
}

/** The key's last path segment: the file name offered for download. */
export function basename(key: string): string {
  const i = key.lastIndexOf('/');
  return i === -1 ? key : key.slice(i + 1);
}

/**
 * Smallest string greater than every string that starts with `prefix` (UTF-8 byte order), or null
 * when there is none. Used to turn a prefix filter into an index range.
 */
export function prefixUpperBound(prefix: string): string | null {
  const cps = Array.from(prefix);
  while (cps.length > 0) {
    const last = cps.pop()!.codePointAt(0)!;
    if (last < 0x10ffff) {
      let next = last + 1;
      if (next >= 0xd800 && next <= 0xdfff) next = 0xe000;
      return cps.join('') + String.fromCodePoint(next);
    }
  }
  return null;
}
