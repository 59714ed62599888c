import mime from 'mime-types';

const GENERIC = new Set(['application/octet-stream', 'application/x-www-form-urlencoded', 'multipart/form-data']);
const MIME_RE = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/;

/**
 * The stored media type: guessed from the key's extension (as the reference does); when the key says
 * nothing, the client's Content-Type is used if it is a specific, well-formed type.
 */
export function chooseMimetype(key: string, clientType: string | undefined): string {
  const guessed = mime.lookup(key);
  if (guessed) return guessed;
  const t = clientType?.split(';')[0]?.trim().toLowerCase();
  if (t && MIME_RE.test(t) && !GENERIC.has(t)) return t;
  return 'application/octet-stream';
}

const INLINE_SAFE = new Set([
  'audio/mpeg', 'audio/ogg', 'audio/wav', 'audio/webm',
  'image/gif', 'image/jpeg', 'image/png', 'image/tiff', 'text/plain',
]);

// Types a browser would render or run. Served as text/plain; text/javascript and text/xml are added
// to the reference's list (it let them fall through to octet-stream).
const AS_PLAIN_TEXT = new Set([
  'application/javascript', 'application/json', 'application/xhtml+xml', 'application/xml',
  'text/css', 'text/csv', 'text/html', 'image/svg+xml', 'text/javascript', 'text/xml',
]);

export interface ServedType {
  contentType: string;
  /** True when the type forces `Content-Disposition: attachment`. */
  forceAttachment: boolean;
}

/** What a download is served as: never a type the browser would render as active content. */
export function sanitizeMimetype(stored: string | null, key: string): ServedType {
  const base = key.slice(key.lastIndexOf('/') + 1).toLowerCase();
  const t = (stored ?? '').toLowerCase();
  if (INLINE_SAFE.has(t)) return { contentType: withCharset(t), forceAttachment: false };
  if (AS_PLAIN_TEXT.has(t) || base === 'readme') return { contentType: withCharset('text/plain'), forceAttachment: false };
  return { contentType: 'application/octet-stream', forceAttachment: true };
}

function withCharset(t: string): string {
  return t.startsWith('text/') ? `${t}; charset=utf-8` : t;
}
