/**
 * Summarises a V8 CPU profile (from `npm run bench -- --profile`, which runs files-rest under
 * `node --cpu-prof`): where the server's CPU time went, by function (self and inclusive time) and by
 * package.
 *
 * Usage: node dist/bench/profile-summary.js FILE.cpuprofile [--top N] [--filter TEXT]
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

function shortUrl(url: string): string {
  if (!url) return '';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) return url.slice(nm + '/node_modules/'.length);
  const d = url.indexOf('/dist/');
  if (d >= 0) return url.slice(d + 1);
  return url.replace(/^file:\/\//, '');
}

function group(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const d = /\/dist\/(src\/[^/]+(?:\/[^/]+)?)/.exec(url);
  if (d) return d[1]!.replace(/\.js$/, '');
  return shortUrl(url);
}

export function summarizeProfile(p: Profile, opts: { top?: number; filter?: string } = {}): string {
  const top = opts.top ?? 25;
  const byId = new Map<number, ProfileNode>();
  for (const n of p.nodes) byId.set(n.id, n);
  // Self time per node from samples and time deltas (µs); fall back to hit counts.
  const selfUs = new Map<number, number>();
  if (p.samples && p.timeDeltas && p.samples.length === p.timeDeltas.length) {
    for (let i = 0; i < p.samples.length; i++) {
      const dt = p.timeDeltas[i + 1] ?? 0;
      selfUs.set(p.samples[i]!, (selfUs.get(p.samples[i]!) ?? 0) + Math.max(0, dt));
    }
  } else {
    const total = p.endTime - p.startTime;
    const hits = p.nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0) || 1;
    for (const n of p.nodes) selfUs.set(n.id, ((n.hitCount ?? 0) * total) / hits);
  }
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

  const key = (n: ProfileNode) => `${n.callFrame.functionName || '(anonymous)'}  ${shortUrl(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`;
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  const groups = new Map<string, number>();
  let total = 0;
  let idle = 0;
  for (const n of p.nodes) {
    const t = selfUs.get(n.id) ?? 0;
    if (!t) continue;
    total += t;
    const fn = n.callFrame.functionName;
    if (fn === '(idle)' || fn === '(program)') idle += fn === '(idle)' ? t : 0;
    self.set(key(n), (self.get(key(n)) ?? 0) + t);
    groups.set(group(n.callFrame.url, fn), (groups.get(group(n.callFrame.url, fn)) ?? 0) + t);
    // Inclusive: add to each distinct function on the stack once.
    const seen = new Set<string>();
    for (let id: number | undefined = n.id; id !== undefined; id = parent.get(id)) {
      const k = key(byId.get(id)!);
      if (seen.has(k)) continue;
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + t);
    }
  }
  const busy = total - idle;
  const pct = (t: number) => `${((100 * t) / (busy || 1)).toFixed(1).padStart(5)}%`;
  const ms = (t: number) => `${(t / 1000).toFixed(0).padStart(7)} ms`;
  const list = (m: Map<string, number>, n: number) =>
    [...m.entries()]
      .filter(([k]) => !k.startsWith('(idle)') && !k.startsWith('(root)') && (!opts.filter || k.includes(opts.filter)))
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([k, t]) => `  ${ms(t)} ${pct(t)}  ${k}`)
      .join('\n');
  return [
    `profile: ${((p.endTime - p.startTime) / 1e6).toFixed(1)} s wall, ${(busy / 1e6).toFixed(1)} s busy (percentages are of busy time)`,
    `\nby package / module (self time):`,
    list(groups, top),
    `\ntop functions by self time:`,
    list(self, top),
    `\ntop functions by inclusive time:`,
    list(incl, top),
  ].join('\n');
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const file = args.find((a) => !a.startsWith('--'));
  if (!file) {
    process.stderr.write('usage: node dist/bench/profile-summary.js FILE.cpuprofile [--top N] [--filter TEXT]\n');
    process.exit(2);
  }
  const ti = args.indexOf('--top');
  const fi = args.indexOf('--filter');
  const prof = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  process.stdout.write(
    summarizeProfile(prof, { top: ti >= 0 ? Number(args[ti + 1]) : 25, filter: fi >= 0 ? args[fi + 1] : undefined }) + '\n',
  );
}
