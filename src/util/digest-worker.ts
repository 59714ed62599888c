/**
 * Runs in a worker thread (digest-thread.ts): keeps one hash per id and feeds it the batches it is
 * sent, in the order they come, handing each batch's memory back for reuse (`free`, with the
 * digest's id: the sender counts its batches in flight); answers `finish` with the digest.
 *
 * It runs at the process's priority. It ran at the lowest (nice 19) until every large body's MD5
 * came here too: with two CPU-bound processes beside it on two cores, a niced thread got so little
 * time that a 256 MiB PUT crawled at 12 MiB/s (306 MiB/s at normal priority, 236 with MD5 on the
 * HTTP thread). On Linux it names itself (`/proc/thread-self/comm`), so `top -H` and
 * bench/w1-threads.ts tell it apart.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { nameThisThread } from './thread-name.js';
import { createHash, type Hash } from 'node:crypto';

nameThisThread(String((workerData as { name: string }).name));

type Msg =
  | { type: 'update'; id: number; algorithms: string[]; data: ArrayBuffer; length: number }
  | { type: 'finish'; id: number; algorithms: string[] }
  | { type: 'drop'; id: number };

/** Per digest id, one running hash per algorithm (fed the same batches). */
const hashes = new Map<number, Hash[]>();

parentPort!.on('message', (m: Msg) => {
  if (m.type === 'drop') {
    hashes.delete(m.id);
    return;
  }
  let hs = hashes.get(m.id);
  if (!hs) {
    hs = m.algorithms.map((a) => createHash(a));
    hashes.set(m.id, hs);
  }
  if (m.type === 'update') {
    const batch = new Uint8Array(m.data, 0, m.length);
    for (const h of hs) h.update(batch);
    parentPort!.postMessage({ type: 'free', id: m.id, data: m.data }, [m.data]);
    return;
  }
  hashes.delete(m.id);
  parentPort!.postMessage({ type: 'digest', id: m.id, digests: hs.map((h) => h.digest()) });
});
