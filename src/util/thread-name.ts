import { writeFileSync } from 'node:fs';

/**
 * Names the calling thread on Linux (`/proc/thread-self/comm`, at most 15 bytes), so `top -H` and
 * /proc/PID/task/TID/comm tell files-rest's worker threads apart; elsewhere, or without /proc, the
 * thread keeps its inherited name.
 */
export function nameThisThread(name: string): void {
  if (process.platform !== 'linux') return;
  try {
    writeFileSync('/proc/thread-self/comm', name);
  } catch {
    // No /proc: the thread keeps its inherited name.
  }
}
