import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * One full garbage collection once a long-running process has started (`serve`, `worker`), so that
 * V8 gives back the memory its start-up took. Loading the modules grows the young generation to its
 * largest (two 16 MB halves) and leaves it so: start-up runs only young-generation collections, and
 * V8's memory reducer, which shrinks the heap of a process gone quiet, is armed only by a full
 * collection. An idle server therefore held 98–104 MB (RssAnon 52–57) for as long as it stayed idle,
 * creeping up as its background work allocated.
 *
 * The collection is V8's "last resort" kind (collect all available garbage, then shrink the young
 * generation; 8–11 ms on Node.js 20 here, 80 ms on Node.js 24): a second after start an idle server
 * holds 91 MB instead of 98, and once the reducer has run, about 16 s after start, 78 MB (RssAnon 31;
 * 84 with a plain full collection). README, Performance, "Session 18".
 *
 * `gc` is taken from a fresh context after `--expose-gc` is set, so the process's own global gets no
 * `gc`; when Node.js was started with `--expose-gc` that one is used. V8 versions that do not know an
 * option of the call ignore it and run a plain full collection.
 */
export function collectAfterStartup(): boolean {
  const gc = (globalThis as { gc?: () => void }).gc ?? exposedGc();
  if (!gc) return false;
  (gc as (o?: object) => void)({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  return true;
}

function exposedGc(): (() => void) | null {
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('gc');
    return typeof gc === 'function' ? (gc as () => void) : null;
  } catch {
    return null;
  }
}
