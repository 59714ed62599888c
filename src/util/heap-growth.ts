import { setFlagsFromString } from 'node:v8';

/**
 * How far V8 lets the JavaScript heap grow past what its last full collection kept, for a process
 * that runs for long (`serve`, `worker`). V8 picks the factor itself, up to 4× on a machine with
 * this much memory, and a server that answers many small requests promotes short-lived objects
 * (requests in flight across a young-generation collection) until the heap has grown that far: a
 * server holding 22–30 MB of live objects grew to 112–122 MB of heap under 32 concurrent 4 KiB
 * GETs (README, Performance, "Session 15"). A fixed factor of 1 + percent/100 bounds it; the
 * default, 100, kept that heap at 78 MB, and cost the mixed workload W8 a few percent of CPU per
 * request where 50 cost it 20–30 % (more full collections of a heap that listings keep busy).
 *
 * V8 reads this flag each time it sets the next collection's limit, so it takes effect when set
 * after start-up (unlike the young generation's size, which is fixed when the heap is made). A
 * `--heap-growing-percent` given to Node.js on the command line is left as it is; 0 keeps V8's own.
 */
export function limitHeapGrowth(percent: number, execArgv: readonly string[] = process.execArgv): boolean {
  if (percent <= 0) return false;
  if (execArgv.some((a) => /^--heap[-_]growing[-_]percent(=|$)/.test(a))) return false;
  setFlagsFromString(`--heap-growing-percent=${percent}`);
  return true;
}
