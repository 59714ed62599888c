import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, readFile, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { filesUnder } from './fixtures.js';

/** A local port nothing listens on (it was free a moment ago): connections to it are refused. */
export async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const { port } = srv.address() as AddressInfo;
  await new Promise((resolve) => srv.close(resolve));
  return port;
}

/**
 * Writes `size` bytes of random-looking content quickly: one random MiB block, with the MiB index
 * stamped into every block so that no two parts are alike. Returns the hex MD5.
 */
export async function writeTestFile(path: string, size: number, seed = 1): Promise<string> {
  const block = randomBytes(1024 * 1024);
  block[0] = seed & 0xff;
  const h = createHash('md5');
  const fh = await open(path, 'w');
  try {
    for (let off = 0, i = 0; off < size; off += block.length, i++) {
      block.writeUInt32BE(i, 4);
      const piece = block.subarray(0, Math.min(block.length, size - off));
      h.update(piece);
      await fh.write(piece);
    }
  } finally {
    await fh.close();
  }
  return h.digest('hex');
}

export async function md5File(path: string): Promise<string> {
  const h = createHash('md5');
  for await (const c of createReadStream(path, { highWaterMark: 1024 * 1024 }) as AsyncIterable<Buffer>) h.update(c);
  return h.digest('hex');
}

/** The file under the server's data directory whose content has this MD5 (hex); null if none. */
export async function findStoredFile(dataDir: string, md5hex: string, size: number): Promise<string | null> {
  const { stat } = await import('node:fs/promises');
  for (const f of await filesUnder(dataDir)) {
    if ((await stat(f)).size !== size) continue;
    if ((await md5File(f)) === md5hex) return f;
  }
  return null;
}

/** Flips one byte of a file in place (simulates corruption on disk). */
export async function flipByte(path: string, offset: number): Promise<void> {
  const fh = await open(path, 'r+');
  try {
    const b = Buffer.alloc(1);
    await fh.read(b, 0, 1, offset);
    b[0] = b[0]! ^ 0xff;
    await fh.write(b, 0, 1, offset);
  } finally {
    await fh.close();
  }
}

export { readFile, writeFile };
