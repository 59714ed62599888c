// This process's threads as Linux lists them (/proc/self/task): their names and nice values. A thread
// that exits between the listing and the read of its files is left out (its files are gone by then).
import { readdirSync, readFileSync } from 'node:fs';

export interface ThreadInfo {
  id: string;
  name: string;
  nice: number;
}

export function processThreads(): ThreadInfo[] {
  const out: ThreadInfo[] = [];
  for (const id of readdirSync('/proc/self/task')) {
    let text: string;
    try {
      text = readFileSync(`/proc/self/task/${id}/stat`, 'utf8');
    } catch {
      continue;
    }
    out.push({ id, name: text.slice(text.indexOf('(') + 1, text.lastIndexOf(')')), nice: Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[16]) });
  }
  return out;
}

/** How many of this process's threads have this name. */
export function threadsNamed(name: string): number {
  return processThreads().filter((t) => t.name === name).length;
}
