import { createMD5 } from 'hash-wasm';

/** An incremental MD5. */
export interface Md5Hasher {
  update(data: Uint8Array): void;
  /** Lowercase hex digest; the hasher is done afterwards. */
  digest(): string;
}

export type Md5Factory = () => Promise<Md5Hasher>;

/** MD5 in WebAssembly (hash-wasm): works in browsers and in Node. */
export const wasmMd5: Md5Factory = async () => {
  const h = await createMD5();
  h.init();
  return {
    update: (data) => void h.update(data),
    digest: () => h.digest('hex'),
  };
};

/** Hex → base64 (Content-MD5 form), without Node's Buffer. */
export function hexToBase64(hex: string): string {
  let bin = '';
  for (let i = 0; i < hex.length; i += 2) bin += String.fromCharCode(parseInt(hex.slice(i, i + 2), 16));
  return btoa(bin);
}

/** Base64 → hex; null when it is not valid base64 of 16 bytes. */
export function base64ToHex(b64: string): string | null {
  let bin: string;
  try {
    bin = atob(b64.trim());
  } catch {
    return null;
  }
  if (bin.length !== 16) return null;
  let hex = '';
  for (let i = 0; i < bin.length; i++) hex += bin.charCodeAt(i).toString(16).padStart(2, '0');
  return hex;
}

/**
 * The MD5 the server announced for a download, as hex: Content-MD5 (base64), else Repr-Digest
 * `md5=:…:`, else an ETag of the form "md5:<hex>". Null when none is there.
 */
export function expectedMd5(headers: Headers): string | null {
  const cm = headers.get('content-md5');
  if (cm) {
    const hex = base64ToHex(cm);
    if (hex) return hex;
  }
  const rd = /(?:^|,)\s*md5=:([^:]+):/i.exec(headers.get('repr-digest') ?? '');
  if (rd) {
    const hex = base64ToHex(rd[1]!);
    if (hex) return hex;
  }
  const et = /^(?:W\/)?"md5:([0-9a-f]{32})"$/i.exec(headers.get('etag') ?? '');
  return et ? et[1]!.toLowerCase() : null;
}
