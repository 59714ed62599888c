/**
 * Runs in a worker thread (digest-thread.ts): keeps one hash per id and feeds it the batches it is
 * sent, in the order they come, handing each batch's memory back for reuse (`free`, with the
 * digest's id: the sender counts its batches in flight); answers `finish` with the digest.
 *
 * On Linux the thread lowers its own scheduling priority to the lowest (nice 19) first: hashing
 * then runs when the HTTP thread and libuv's file threads leave a core idle (waiting for the disk
 * or the network) instead of taking turns with them. Measured on 1 GiB PUTs with a signed
 * payload, two cores, 12 pairs each, interleaved: at normal priority the median pair reached 0.84
 * of the REST door's speed, niced 0.86-0.89. The sender's limit on batches in flight keeps a
 * thread starved by a busy machine from piling up memory: the upload then waits for it.
 */
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { createHash, type Hash } from 'node:crypto';

/** The nice value of the digest thread: the lowest priority. */
const BACKGROUND_NICE = 19;

// Linux only: there a thread id names one thread to setpriority(2); elsewhere it may name the
// whole process, which must keep its priority.
if (process.platform === 'linux') {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, BACKGROUND_NICE);
  } catch {
    // No /proc, or refused: the thread keeps the process's priority; digests stay correct.
  }
}

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
    parentPort!.postMessage({ type: 'free', id: m.id, data: m.data }, [m.data]);
    return;
  }
  hashes.delete(m.id);
  parentPort!.postMessage({ type: 'digest', id: m.id, digest: h.digest() });
});
