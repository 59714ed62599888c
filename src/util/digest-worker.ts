/**
 * Runs in a worker thread (digest-thread.ts): keeps one hash per id and feeds it the batches it is
 * sent, in the order they come, handing each batch's memory back for reuse; answers `finish` with
 * the digest.
 */
import { parentPort } from 'node:worker_threads';
import { createHash, type Hash } from 'node:crypto';

type Msg =
  | { type: 'update'; id: number; algorithm: string; data: ArrayBuffer; length: number }
  | { type: 'finish'; id: number; algorithm: string }
  | { type: 'drop'; id: number };

const hashes = new Map<number, Hash>();

parentPort!.on('message', (m: Msg) => {
  if (m.type === 'drop') {
    hashes.delete(m.id);
    return;
  }
  let h = hashes.get(m.id);
  if (!h) {
    h = createHash(m.algorithm);
    hashes.set(m.id, h);
  }
  if (m.type === 'update') {
    h.update(new Uint8Array(m.data, 0, m.length));
    parentPort!.postMessage({ type: 'free', data: m.data }, [m.data]);
    return;
  }
  hashes.delete(m.id);
  parentPort!.postMessage({ type: 'digest', id: m.id, digest: h.digest() });
});
