/**
 * `upload --skip-unchanged`: which local files the bucket already holds as they are. One paged
 * listing of the heads under the keys' common prefix (not a request per file); a local MD5 only for
 * files whose size matches a head's, compared with the head's `md5:<hex>` checksum.
 */
import { fileMd5, type FilesClient } from '../client/node.js';

export interface Head {
  size: number;
  checksum: string;
}

/** Longest prefix shared by every key ('' for none). */
export function commonPrefix(keys: string[]): string {
  if (keys.length === 0) return '';
  let p = keys[0]!;
  for (const k of keys) {
    let i = 0;
    while (i < p.length && i < k.length && p[i] === k[i]) i++;
    p = p.slice(0, i);
  }
  // Not half a surrogate pair: it would not survive URL encoding.
  return /[\uD800-\uDBFF]$/.test(p) ? p.slice(0, -1) : p;
}

/** The bucket's heads (delete markers left out) under `prefix`, by key. */
export async function headsByKey(client: FilesClient, bucketId: string, prefix: string): Promise<Map<string, Head>> {
  const heads = new Map<string, Head>();
  for await (const v of client.objects(bucketId, { limit: 1000, ...(prefix ? { prefix } : {}) })) {
    if (!v.delete_marker && v.size !== undefined && v.checksum) heads.set(v.key, { size: v.size, checksum: v.checksum });
  }
  return heads;
}

/** The file's hex MD5 when it is the head (same size, same MD5); null when it must be uploaded. */
export async function unchangedMd5(head: Head | undefined, path: string, size: number): Promise<string | null> {
  if (!head || head.size !== size || !head.checksum.startsWith('md5:')) return null;
  const md5 = await fileMd5(path);
  return head.checksum === `md5:${md5}` ? md5 : null;
}
