/**
 * The one HTTP client every figure and every ceiling is measured with: an undici Pool of keep-alive
 * connections to 127.0.0.1. Large bodies are generated from a repeating pattern and streamed, and
 * large downloads are counted and dropped, so the client never holds a whole object in memory.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { Pool } from 'undici';

export const MiB = 1024 * 1024;

export interface JsonResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
  text: string;
}

export class HttpClient {
  readonly pool: Pool;
  constructor(readonly origin: string, connections = 32) {
    this.pool = new Pool(origin, {
      connections,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      headersTimeout: 120_000,
      bodyTimeout: 120_000,
    });
  }

  /** A request whose (small) answer is read whole and parsed when it is JSON. */
  async request(method: string, path: string, opts: { body?: Buffer | Readable; headers?: Record<string, string> } = {}): Promise<JsonResponse> {
    const r = await this.pool.request({ method: method as 'GET', path, body: opts.body, headers: opts.headers });
    const text = await r.body.text();
    let json: unknown = undefined;
    const ct = String(r.headers['content-type'] ?? '');
    if (ct.includes('json') && text.trim()) {
      try {
        json = JSON.parse(text);
      } catch {
        /* left undefined */
      }
    }
    return { status: r.statusCode, headers: r.headers, json, text };
  }

  /** Like `request`, but fails unless the status is 2xx. */
  async ok(method: string, path: string, opts: { body?: Buffer | Readable; headers?: Record<string, string> } = {}): Promise<JsonResponse> {
    const r = await this.request(method, path, opts);
    if (r.status < 200 || r.status > 299) throw new Error(`${method} ${path}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
    return r;
  }

  /** Streams `length` bytes of the repeating pattern (starting at `offset` in it) as the body. */
  async putPattern(path: string, pattern: Buffer, offset: number, length: number, method = 'PUT', headers: () => Record<string, string> = () => ({})): Promise<JsonResponse & { seconds: number }> {
    const t0 = performance.now();
    const r = await this.ok(method, path, { body: patternStream(pattern, offset, length), headers: { ...headers(), 'content-length': String(length) } });
    return { ...r, seconds: (performance.now() - t0) / 1000 };
  }

  /** Downloads and counts a body without keeping it; fails unless 200 and `expectedBytes` arrived. */
  async getCount(path: string, expectedBytes: number | null, headers: () => Record<string, string> = () => ({})): Promise<{ bytes: number; seconds: number; headers: JsonResponse['headers'] }> {
    const t0 = performance.now();
    const r = await this.pool.request({ method: 'GET', path, headers: headers() });
    let bytes = 0;
    for await (const chunk of r.body as AsyncIterable<Buffer>) bytes += chunk.length;
    const seconds = (performance.now() - t0) / 1000;
    if (r.statusCode !== 200) throw new Error(`GET ${path}: HTTP ${r.statusCode}`);
    if (expectedBytes !== null && bytes !== expectedBytes) throw new Error(`GET ${path}: ${bytes} bytes, expected ${expectedBytes}`);
    return { bytes, seconds, headers: r.headers };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/** `length` bytes of `pattern` repeated, starting at `offset` within the repetition. */
export function patternStream(pattern: Buffer, offset: number, length: number): Readable {
  let pos = offset;
  const end = offset + length;
  return new Readable({
    highWaterMark: 4 * MiB,
    read() {
      // Push up to one pattern's worth per call; the same buffer is reused, never copied.
      if (pos >= end) {
        this.push(null);
        return;
      }
      const at = pos % pattern.length;
      const n = Math.min(pattern.length - at, end - pos);
      pos += n;
      this.push(at === 0 && n === pattern.length ? pattern : pattern.subarray(at, at + n));
    },
  });
}

const digestCache = new WeakMap<Buffer, Map<string, string>>();
/** The digest (hex) of `size` bytes of the repeating pattern, computed once per pattern, size and algorithm. */
export function patternDigest(pattern: Buffer, size: number, algorithm: 'md5' | 'sha256'): string {
  let bySize = digestCache.get(pattern);
  if (!bySize) digestCache.set(pattern, (bySize = new Map()));
  const id = `${algorithm}:${size}`;
  const hit = bySize.get(id);
  if (hit) return hit;
  const h = createHash(algorithm);
  let left = size;
  while (left > 0) {
    const n = Math.min(pattern.length, left);
    h.update(n === pattern.length ? pattern : pattern.subarray(0, n));
    left -= n;
  }
  const hex = h.digest('hex');
  bySize.set(id, hex);
  return hex;
}

const md5Cache = new WeakMap<Buffer, Map<number, string>>();
/** MD5 (hex) of `size` bytes of the repeating pattern, computed once per pattern and size before any timing. */
export function patternMd5(pattern: Buffer, size: number): string {
  let bySize = md5Cache.get(pattern);
  if (!bySize) md5Cache.set(pattern, (bySize = new Map()));
  const hit = bySize.get(size);
  if (hit) return hit;
  const h = createHash('md5');
  let left = size;
  while (left > 0) {
    const n = Math.min(pattern.length, left);
    h.update(n === pattern.length ? pattern : pattern.subarray(0, n));
    left -= n;
  }
  const hex = h.digest('hex');
  bySize.set(size, hex);
  return hex;
}

export interface LatencySummary {
  count: number;
  p50Ms: number;
  p99Ms: number;
  meanMs: number;
  maxMs: number;
}

export function summarize(samples: Float64Array | number[], count = samples.length): LatencySummary {
  const s = Float64Array.from(samples.slice(0, count)).sort();
  const pick = (p: number) => (s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]! : NaN);
  let sum = 0;
  for (const v of s) sum += v;
  return { count: s.length, p50Ms: pick(0.5), p99Ms: pick(0.99), meanMs: s.length ? sum / s.length : NaN, maxMs: s.length ? s[s.length - 1]! : NaN };
}

/** What one request of a loop did, when its op tells: its kind (e.g. `get`) and the object bytes it moved. */
export interface OpOutcome {
  kind: string;
  bytes: number;
}

/** The recorded requests of one kind in a loop: latencies, rate, and object bytes moved. */
export interface KindResult extends LatencySummary {
  ops: number;
  opsPerSec: number;
  bytes: number;
  mibps: number;
}

export interface LoopResult extends LatencySummary {
  ops: number;
  /** Requests sent during the unrecorded warm-up. */
  warmupOps: number;
  seconds: number;
  opsPerSec: number;
  /** Object bytes moved by the recorded requests (0 unless the op reports outcomes). */
  bytes: number;
  mibps: number;
  /** Per kind, when the op reports outcomes. */
  byKind: Record<string, KindResult>;
}

/**
 * A closed loop: `concurrency` workers each send one request after another until `durationMs` has
 * passed or `maxOps` requests were sent, after an unrecorded warm-up of `warmupMs`. Any failed
 * request stops the loop and fails the measurement. An op may report what it did (`OpOutcome`):
 * the result then also holds the object bytes moved and, per kind, the latencies and rates.
 */
export async function closedLoop(opts: {
  concurrency: number;
  durationMs: number;
  maxOps: number;
  warmupMs: number;
  op: (worker: number, seq: number) => Promise<void | OpOutcome>;
}): Promise<LoopResult> {
  let seq = 0;
  let failed = false;
  const workers = Array.from({ length: opts.concurrency }, (_, i) => i);
  const kinds = new Map<string, { lat: number[]; bytes: number }>();
  let bytes = 0;
  const run = async (until: number, maxOps: number, record: Float64Array | null, counter: { n: number }) => {
    await Promise.all(
      workers.map(async (w) => {
        while (!failed && counter.n < maxOps && performance.now() < until) {
          const slot = counter.n++;
          const t0 = performance.now();
          let out: void | OpOutcome;
          try {
            out = await opts.op(w, seq++);
          } catch (e) {
            failed = true;
            throw e;
          }
          if (record) {
            const dt = performance.now() - t0;
            record[slot] = dt;
            if (out) {
              let k = kinds.get(out.kind);
              if (!k) kinds.set(out.kind, (k = { lat: [], bytes: 0 }));
              k.lat.push(dt);
              k.bytes += out.bytes;
              bytes += out.bytes;
            }
          }
        }
      }),
    );
  };
  const warm = { n: 0 };
  if (opts.warmupMs > 0) await run(performance.now() + opts.warmupMs, opts.maxOps, null, warm);
  const lat = new Float64Array(opts.maxOps);
  const counter = { n: 0 };
  const start = performance.now();
  await run(start + opts.durationMs, opts.maxOps, lat, counter);
  const seconds = (performance.now() - start) / 1000;
  const summary = summarize(lat, counter.n);
  const byKind: Record<string, KindResult> = {};
  for (const [kind, k] of [...kinds].sort(([a], [b]) => (a < b ? -1 : 1))) {
    byKind[kind] = { ...summarize(k.lat), ops: k.lat.length, opsPerSec: k.lat.length / seconds, bytes: k.bytes, mibps: k.bytes / MiB / seconds };
  }
  return { ...summary, ops: counter.n, warmupOps: warm.n, seconds, opsPerSec: counter.n / seconds, bytes, mibps: bytes / MiB / seconds, byKind };
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
