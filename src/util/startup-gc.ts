import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * One full garbage collection once a long-running process has started (`serve`, `worker`), so that
 * V8 gives back the memory its start-up took. Loading the modules grows the young generation to its
 * largest (two 16 MB halves) and leaves it so; start-up runs young-generation collections only, and
 * V8's memory reducer, which shrinks the heap of a process gone quiet, is armed only by a full one.
 * Whether an idle server ever got one was left to chance (its background work's allocations): in
 * some starts it settled at 77–80 MB within 20 s, in others it held 98–104 MB (RssAnon 52–57) for
 * as long as it stayed idle, as in the benchmark's last full run (103 MB settled). With this
 * collection (5–10 ms) the reducer runs about 8 s later: 77–82 MB (RssAnon 32–37) 21 s after start
 * in three starts out of three. README, Performance, "Session 18".
 *
 * `gc` is taken from a fresh context after `--expose-gc` is set, so the process's own global gets no
 * `gc`; when Node.js was started with `--expose-gc` that one is used. It is called without options:
 * Node.js 20's V8 runs a young-generation collection for any options object it is given.
 */
export function collectAfterStartup(): boolean {
  const gc = (globalThis as { gc?: () => void }).gc ?? exposedGc();
  if (!gc) return false;
  gc();
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
