/**
 * `x-amz-copy-source` of CopyObject and UploadPartCopy: `[/]bucket/key[?versionId=id]`, the key
 * percent-encoded (UTF-8). One reading for both operations.
 */
import { S3Error } from './errors.js';
import { checkedVersionId } from './request.js';
import { percentDecodeBytes } from './uri.js';

export interface CopySource {
  bucketName: string;
  key: string;
  /** The version named, or null for the key's current one. */
  versionId: string | null;
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

export function parseCopySource(value: string): CopySource {
  let text = value.trim();
  let versionId: string | null = null;
  const q = text.indexOf('?');
  if (q !== -1) {
    versionId = checkedVersionId(new URLSearchParams(text.slice(q + 1)).get('versionId'), 'x-amz-copy-source');
    text = text.slice(0, q);
  }
  if (text.startsWith('/')) text = text.slice(1);
  let decoded: string;
  try {
    decoded = UTF8.decode(percentDecodeBytes(text));
  } catch {
    throw new S3Error('InvalidArgument', 'Invalid copy source encoding.');
  }
  const slash = decoded.indexOf('/');
  if (slash <= 0 || slash === decoded.length - 1) throw new S3Error('InvalidArgument', 'Copy Source must mention the source bucket and key: sourcebucket/sourcekey.');
  return { bucketName: decoded.slice(0, slash), key: decoded.slice(slash + 1), versionId };
}
