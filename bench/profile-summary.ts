/**
 * Summarises a V8 CPU profile (from `npm run bench -- --profile`, which runs files-rest under
 * `node --cpu-prof`): where the server's CPU time went, by function (self and inclusive time) and by
 * package.
 *
 * Usage: node dist/bench/profile-summary.js FILE.cpuprofile [--top N] [--filter TEXT]
 *          [--window FROM_END,LENGTH] [--per N]
 *   --window  only the samples of LENGTH seconds that start FROM_END seconds before the profile ends
 *             (a workload's measured loop, without start-up, seeding and shutdown)
 *   --per N   also give each layer's time per unit, for N requests (or GiB) in that window
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

/** The layer a function belongs to, for the per-request view of a small-request workload. */
export function layer(cf: CallFrame): string | null {
  const { url, functionName: f } = cf;
  if (f === '(idle)' || f === '(root)') return null;
  if (f === '(garbage collector)') return 'garbage collector';
  if (f === '(program)') return 'V8 and native, unattributed';
  if (url.includes('/kysely/') && url.includes('sqlite-driver') && f === 'executeQuery') return 'SQLite: running statements (better-sqlite3)';
  if (url.includes('/pg/') || url.includes('/pg-protocol/') || url.includes('/pg-pool/')) return 'PostgreSQL client (pg)';
  if (url.includes('/kysely/') || url.includes('/dist/src/db/')) return 'Kysely and query plumbing';
  if (!url && ['open', 'read', 'close', 'fsync', 'fdatasync', 'mkdir', 'rename', 'openFileHandle', 'writeBuffers', 'FSReqCallback', 'unlink', 'lstat', 'stat'].includes(f)) {
    return 'file system calls handed to the thread pool';
  }
  if (url === 'node:fs' || url === 'node:internal/fs/promises' || url.startsWith('node:internal/fs/')) return 'file system calls handed to the thread pool';
  if (/\/node_modules\/(fastify|@fastify|find-my-way|avvio|light-my-request|toad-cache|fast-json-stringify)\//.test(url)) return 'Fastify';
  if (url.includes('/node_modules/pino')) return 'pino';
  if (url.includes('/prom-client/') || url.includes('/dist/src/http/metrics')) return 'metrics';
  if (url.includes('/dist/src/')) return 'files-rest code';
  if (url.startsWith('node:') || !url) return 'Node: HTTP, sockets, streams, event loop';
  return 'other libraries';
}

export function summarizeProfile(p: Profile, opts: { top?: number; filter?: string; window?: { fromEnd: number; length: number }; per?: number } = {}): string {
  const top = opts.top ?? 25;
  const byId = new Map<number, ProfileNode>();
  for (const n of p.nodes) byId.set(n.id, n);
  // Self time per node from samples and time deltas (µs); fall back to hit counts.
  const selfUs = new Map<number, number>();
  let windowNote = '';
  if (p.samples && p.timeDeltas && p.samples.length === p.timeDeltas.length) {
    const lo = opts.window ? p.endTime - opts.window.fromEnd * 1e6 : -Infinity;
    const hi = opts.window ? lo + opts.window.length * 1e6 : Infinity;
    let at = p.startTime;
    for (let i = 0; i < p.samples.length; i++) {
      at += p.timeDeltas[i]!;
      if (at < lo || at > hi) continue;
      const dt = p.timeDeltas[i + 1] ?? 0;
      selfUs.set(p.samples[i]!, (selfUs.get(p.samples[i]!) ?? 0) + Math.max(0, dt));
    }
    if (opts.window) windowNote = ` in a window of ${opts.window.length} s ending ${opts.window.fromEnd - opts.window.length} s before the profile's end`;
  } else {
    if (opts.window) throw new Error('--window needs a profile with samples and time deltas');
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
  const layers = new Map<string, number>();
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
    const l = layer(n.callFrame);
    if (l) layers.set(l, (layers.get(l) ?? 0) + t);
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
  const per = opts.per;
  const perUnit = per
    ? [
        `\nby layer, per unit (${per} units${windowNote}):`,
        [...layers.entries()]
          .sort((a, b) => b[1] - a[1])
          .map(([k, t]) => `  ${(t / per).toFixed(1).padStart(8)} µs ${pct(t)}  ${k}`)
          .join('\n'),
        `  ${(busy / per).toFixed(1).padStart(8)} µs in all`,
      ]
    : [];
  return [
    `profile: ${((p.endTime - p.startTime) / 1e6).toFixed(1)} s wall${windowNote}, ${(busy / 1e6).toFixed(1)} s busy (percentages are of busy time)`,
    ...perUnit,
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
    process.stderr.write('usage: node dist/bench/profile-summary.js FILE.cpuprofile [--top N] [--filter TEXT] [--window FROM_END,LENGTH] [--per N]\n');
    process.exit(2);
  }
  const value = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const w = value('--window')?.split(',').map(Number);
  if (w && (w.length !== 2 || !w.every((x) => Number.isFinite(x) && x > 0) || w[1]! > w[0]!)) {
    process.stderr.write('--window FROM_END,LENGTH: two positive numbers of seconds, LENGTH at most FROM_END\n');
    process.exit(2);
  }
  const per = value('--per') !== undefined ? Number(value('--per')) : undefined;
  if (per !== undefined && !(per > 0)) {
    process.stderr.write('--per N: a positive number\n');
    process.exit(2);
  }
  const prof = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  process.stdout.write(
    summarizeProfile(prof, {
      top: value('--top') !== undefined ? Number(value('--top')) : 25,
      filter: value('--filter'),
      window: w ? { fromEnd: w[0]!, length: w[1]! } : undefined,
      per,
    }) + '\n',
  );
}
