import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { testEnvironment } from './server.js';

/** Every regular file under a directory (recursively), as paths; a location's owner marker is not counted. */
export async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await filesUnder(p)));
    else if (e.name !== '.files-rest-owner') out.push(p);
  }
  return out;
}

/** A readable of `size` bytes made of a repeated pattern, generated as it is read. */
export function patternStream(size: number, chunk = 1024 * 1024, seed = 7): Readable {
  const block = Buffer.alloc(chunk);
  for (let i = 0; i < chunk; i++) block[i] = (i * 31 + seed) & 0xff;
  let left = size;
  return new Readable({
    read() {
      if (left <= 0) return this.push(null);
      const n = Math.min(left, chunk);
      left -= n;
      this.push(n === chunk ? block : block.subarray(0, n));
    },
  });
}

/** Environment for a files-rest child process with its own temp dir and database. */
export async function processEnv(extra: Record<string, string> = {}): Promise<{ env: Record<string, string>; dir: string; drop: () => Promise<void> }> {
  const { dir, drop, env } = await testEnvironment('files-rest-proc-');
  return { dir, drop, env: { ...env, ...extra } };
}
