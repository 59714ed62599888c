/**
 * Child processes of the benchmark (files-rest and the bare ceiling servers): start, wait until
 * healthy, sample their memory and CPU from /proc, stop. Every child is killed when the benchmark
 * exits, whatever the reason.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

/** The repository root (this file runs from dist/bench/lib/). */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of live) {
    try {
      c.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
});

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** True when something accepts TCP connections at the URL's host and port within 1.5 s. */
export function reachable(url: string): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const s = net.connect({ host: u.hostname, port: Number(u.port || 5432) });
    s.setTimeout(1500);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
    s.once('timeout', () => {
      s.destroy();
      resolve(false);
    });
  });
}

export interface ManagedProcess {
  name: string;
  pid: number;
  url: string;
  logFile: string;
  /** Resolves with the exit code (or null after a signal) once the process is gone. */
  exited: Promise<number | null>;
  isRunning(): boolean;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
  /** The last part of its output, for error messages. */
  tail(bytes?: number): string;
}

export function startProcess(name: string, args: string[], opts: { env: Record<string, string>; logFile: string; port: number; cwd?: string }): ManagedProcess {
  const fd = openSync(opts.logFile, 'a');
  const child = spawn(process.execPath, args, { cwd: opts.cwd ?? ROOT, env: opts.env, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  if (child.pid === undefined) throw new Error(`could not start ${name}`);
  live.add(child);
  let running = true;
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      running = false;
      live.delete(child);
      resolve(code);
    });
  });
  const tail = (bytes = 4000) => {
    try {
      const all = readFileSync(opts.logFile, 'utf8');
      return all.slice(-bytes);
    } catch {
      return '';
    }
  };
  return {
    name,
    pid: child.pid,
    url: `http://127.0.0.1:${opts.port}`,
    logFile: opts.logFile,
    exited,
    isRunning: () => running,
    tail,
    async stop(graceMs = 15_000) {
      if (!running) return;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(t);
    },
  };
}

/** Polls `<url><path>` until it answers 200; fails when the process exits or after `timeoutMs`. */
export async function waitHealthy(p: ManagedProcess, path = '/healthz', timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; i < 10_000 && Date.now() < deadline; i++) {
    if (!p.isRunning()) throw new Error(`${p.name} exited during start-up:\n${p.tail()}`);
    try {
      const r = await fetch(`${p.url}${path}`, { signal: AbortSignal.timeout(2000) });
      await r.arrayBuffer();
      if (r.status === 200) return;
    } catch {
      /* not listening yet */
    }
    await sleep(100);
  }
  throw new Error(`${p.name} did not become healthy within ${timeoutMs} ms:\n${p.tail()}`);
}

/**
 * Starts a server on ports that were free a moment ago (`freePort`) and waits until `path` answers
 * 200. Between choosing a port and the server binding it another process (a test server running in
 * parallel) may take it: the start is then repeated on fresh ports, up to five times.
 */
export async function startOnFreePorts(
  name: string,
  at: (port: number, secondPort: number) => { args: string[]; env: Record<string, string> },
  opts: { logFile: string; cwd?: string; path?: string },
): Promise<{ proc: ManagedProcess; port: number; secondPort: number }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const secondPort = await freePort();
    const { args, env } = at(port, secondPort);
    const proc = startProcess(name, args, { cwd: opts.cwd, env, logFile: opts.logFile, port });
    try {
      await waitHealthy(proc, opts.path);
      return { proc, port, secondPort };
    } catch (e) {
      await proc.stop();
      if (attempt >= 5 || !/already in use|EADDRINUSE/.test(String(e))) throw e;
    }
  }
}

let clkTck = 0;
/** Clock ticks per second (CLK_TCK): the unit of the CPU times in /proc/PID/stat. */
export function ticksPerSecond(): number {
  if (clkTck) return clkTck;
  try {
    clkTck = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    clkTck = 100;
  }
  return clkTck;
}

type StatusField = 'VmRSS' | 'VmHWM' | 'RssAnon' | 'RssFile' | 'RssShmem';

function statusKb(pid: number, field: StatusField): number | null {
  return statusKbs(pid, [field])?.[field] ?? null;
}

/** Fields of /proc/PID/status in kB, read in one go; null when the process is gone. */
function statusKbs<F extends StatusField>(pid: number, fields: readonly F[]): Record<F, number> | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const out = {} as Record<F, number>;
  for (const f of fields) {
    const m = new RegExp(`^${f}:\\s+(\\d+) kB`, 'm').exec(text);
    out[f] = m ? Number(m[1]) : 0;
  }
  return out;
}

/**
 * Resident bytes of the process's mappings of files whose path starts with `prefix` (SQLite's
 * database file and its -shm index, mapped with mmap_size), from /proc/PID/smaps; null when unknown.
 */
export function mappedRssBytes(pid: number, prefix: string): number | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return null;
  }
  let kb = 0;
  let inside = false;
  for (const line of text.split('\n')) {
    // A mapping's header: "start-end perms offset dev inode   path".
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) {
      const path = line.split(/\s+/).slice(5).join(' ');
      inside = path.startsWith(prefix);
    } else if (inside && line.startsWith('Rss:')) {
      kb += Number(/(\d+)/.exec(line)![1]);
    }
  }
  return kb * 1024;
}

/** The memory of a process right now (bytes): total resident, anonymous, and mapped files. */
export function memoryNow(pid: number): { rss: number; anon: number; file: number } | null {
  const k = statusKbs(pid, ['VmRSS', 'RssAnon', 'RssFile', 'RssShmem'] as const);
  return k ? { rss: k.VmRSS * 1024, anon: k.RssAnon * 1024, file: (k.RssFile + k.RssShmem) * 1024 } : null;
}

/** User + system CPU seconds the process has used so far. */
export function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which is in parentheses and may contain spaces).
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    const utime = Number(rest[11]);
    const stime = Number(rest[12]);
    return (utime + stime) / ticksPerSecond();
  } catch {
    return null;
  }
}

/** Busy CPU seconds of the whole machine so far (all cores; from /proc/stat). */
export function machineBusySeconds(): number | null {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal (guest time is already in user)
    const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = v;
    return (user + nice + system + irq + softirq + steal) / ticksPerSecond();
  } catch {
    return null;
  }
}

export interface ResourceUsage {
  /** Highest resident set size seen, bytes: max of VmHWM (reset at start) and the sampled VmRSS. */
  peakRssBytes: number;
  /** Highest anonymous resident memory sampled (RssAnon: heaps, buffers), bytes. */
  peakRssAnonBytes: number;
  /** Highest resident memory of mapped files sampled (RssFile + RssShmem: code, mapped database pages), bytes. */
  peakRssFileBytes: number;
  /** Of those, resident pages of the mapped database files at the end (null: no database file watched). */
  dbMappedBytes: number | null;
  /** CPU seconds the process used during the measurement. */
  cpuSeconds: number;
  /** CPU seconds the whole machine was busy during the measurement (every process, every core). */
  machineBusySeconds: number;
  wallSeconds: number;
}

/**
 * Watches a process during one measurement: resets its peak-RSS counter (VmHWM, via
 * /proc/PID/clear_refs) and samples VmRSS every `intervalMs` as a fall-back.
 */
export class ResourceMonitor {
  #maxKb = 0;
  #maxAnon = 0;
  #maxFile = 0;
  readonly #timer: NodeJS.Timeout;
  readonly #cpu0: number;
  readonly #machine0: number;
  readonly #t0 = performance.now();
  readonly hwmReset: boolean;
  /** `dbPrefix`: the path (prefix) of the database files the process maps, reported apart. */
  constructor(private readonly pid: number, intervalMs = 20, private readonly dbPrefix: string | null = null) {
    let reset = false;
    try {
      writeFileSync(`/proc/${pid}/clear_refs`, '5');
      reset = true;
    } catch {
      /* older kernel or not permitted: sampling only */
    }
    this.hwmReset = reset;
    this.#cpu0 = cpuSeconds(pid) ?? 0;
    this.#machine0 = machineBusySeconds() ?? 0;
    this.#sample();
    this.#timer = setInterval(() => this.#sample(), intervalMs);
  }
  #sample(): void {
    const m = memoryNow(this.pid);
    if (!m) return;
    this.#maxKb = Math.max(this.#maxKb, m.rss / 1024);
    this.#maxAnon = Math.max(this.#maxAnon, m.anon);
    this.#maxFile = Math.max(this.#maxFile, m.file);
  }
  stop(): ResourceUsage {
    clearInterval(this.#timer);
    this.#sample();
    const hwm = this.hwmReset ? statusKb(this.pid, 'VmHWM') ?? 0 : 0;
    const cpu = (cpuSeconds(this.pid) ?? this.#cpu0) - this.#cpu0;
    const machine = (machineBusySeconds() ?? this.#machine0) - this.#machine0;
    return {
      peakRssBytes: Math.max(hwm, this.#maxKb) * 1024,
      peakRssAnonBytes: this.#maxAnon,
      peakRssFileBytes: this.#maxFile,
      dbMappedBytes: this.dbPrefix === null ? null : mappedRssBytes(this.pid, this.dbPrefix),
      cpuSeconds: cpu,
      machineBusySeconds: machine,
      wallSeconds: (performance.now() - this.#t0) / 1000,
    };
  }
}

/** Measures the benchmark's own CPU time over a measurement (the client side). */
export class ClientCpu {
  readonly #u0 = process.cpuUsage();
  stop(): number {
    const d = process.cpuUsage(this.#u0);
    return (d.user + d.system) / 1e6;
  }
}
