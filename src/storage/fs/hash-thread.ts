/**
 * Runs in a worker thread: keeps one running MD5 per multipart upload and extends it with byte
 * ranges of a local file, in the order it is told. Only the whole file's MD5: each byte is hashed
 * once here (the part's own MD5 was computed as it arrived). Hashing here keeps the main thread (HTTP) free:
 * on a 2-core machine the whole-file digest is computed on the other core while parts arrive.
 * On Linux the thread names itself (files-rest-md5: `top -H`).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { nameThisThread } from '../../util/thread-name.js';
import { createHash, type Hash } from 'node:crypto';
import { open } from 'node:fs/promises';

type Msg =
  | { type: 'range'; seq: number; id: string; path: string; start: number; end: number }
  | { type: 'digest'; seq: number; id: string }
  | { type: 'drop'; id: string };

nameThisThread(String((workerData as { name: string }).name));

/** Each upload's running MD5 and the offset its next range must start at. */
const hashes = new Map<string, { hash: Hash; next: number }>();
const BUF = Buffer.allocUnsafe(1024 * 1024);

async function hashRange(m: Extract<Msg, { type: 'range' }>): Promise<string> {
  let whole = hashes.get(m.id);
  // Ranges are contiguous from 0: a range that does not continue the digest (it was dropped, or a
  // range was skipped) would give the MD5 of part of the file, so it fails and the caller reads the file.
  if (!whole) {
    if (m.start !== 0) throw new Error(`no running digest continues at ${m.start} (it was dropped)`);
    whole = { hash: createHash('md5'), next: 0 };
    hashes.set(m.id, whole);
  }
  if (m.start !== whole.next) throw new Error(`the running digest is at ${whole.next}, not at ${m.start}`);
  const fh = await open(m.path, 'r');
  try {
    let pos = m.start;
    while (pos < m.end) {
      const { bytesRead } = await fh.read(BUF, 0, Math.min(BUF.length, m.end - pos), pos);
      if (bytesRead === 0) throw new Error(`file ended at ${pos}, expected ${m.end}`);
      whole.hash.update(BUF.subarray(0, bytesRead));
      pos += bytesRead;
    }
    whole.next = pos;
  } finally {
    await fh.close();
  }
  return 'ok';
}

let chain: Promise<void> = Promise.resolve();
parentPort!.on('message', (m: Msg) => {
  // One message at a time, in order: ranges of an upload must be hashed in sequence.
  chain = chain.then(async () => {
    try {
      if (m.type === 'range') parentPort!.postMessage({ seq: m.seq, ok: true, value: await hashRange(m) });
      else if (m.type === 'digest') {
        const h = hashes.get(m.id);
        hashes.delete(m.id);
        parentPort!.postMessage({ seq: m.seq, ok: true, value: h ? h.hash.digest('hex') : null });
      } else hashes.delete(m.id);
    } catch (e) {
      if (m.type !== 'drop') {
        hashes.delete(m.id);
        parentPort!.postMessage({ seq: m.seq, ok: false, value: String((e as Error).message) });
      }
    }
  });
});
