/**
 * W8, a mixed workload: many clients, each sending its next request when the previous one has been
 * answered, 70 % GETs of seeded objects, 20 % PUTs of new keys and 10 % listings (the first page of
 * the bucket), objects of 4 KiB to 1 MiB. The sequence of requests comes from a fixed seed, so every
 * target gets the same one.
 */
import { closedLoop, patternMd5, type LoopResult, type OpOutcome } from './client.js';
import type { StoreTarget } from './targets.js';

/** W8's object sizes: 4 KiB × 2^k for k = 0…8 (4 KiB to 1 MiB), equally frequent. */
export const W8_SIZES: readonly number[] = Array.from({ length: 9 }, (_, k) => 4096 * 2 ** k);

export interface W8Params {
  clients: number;
  durationMs: number;
  warmupMs: number;
  maxOps: number;
  /** Objects seeded before the loop (the GETs' objects). */
  objects: number;
  /** Keys per listing page. */
  pageKeys: number;
  seed: number;
}

export type W8Op = { kind: 'get'; object: number } | { kind: 'put'; size: number } | { kind: 'list' };

/** A small seeded PRNG (mulberry32): floats in [0, 1). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * The requests of W8, in order (the loop's n-th request is entry n modulo the length): exactly
 * 70 % GETs (of a seeded object picked at random), 20 % PUTs (each size equally often) and 10 %
 * listings per 10 000, shuffled with the seeded PRNG.
 */
export function w8Schedule(objects: number, seed: number, length = 10_000): W8Op[] {
  const rand = prng(seed);
  const ops: W8Op[] = [];
  let puts = 0;
  for (let i = 0; i < length; i++) {
    const slot = i % 10;
    if (slot < 7) ops.push({ kind: 'get', object: Math.floor(rand() * objects) });
    else if (slot < 9) ops.push({ kind: 'put', size: W8_SIZES[puts++ % W8_SIZES.length]! });
    else ops.push({ kind: 'list' });
  }
  for (let i = ops.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [ops[i], ops[j]] = [ops[j]!, ops[i]!];
  }
  return ops;
}

/** Key and size of seeded object `i`: the sizes in turn. */
export const w8SeedKey = (i: number) => `w8/obj/${String(i).padStart(5, '0')}.bin`;
export const w8SeedSize = (i: number) => W8_SIZES[i % W8_SIZES.length]!;

/** Stores W8's seeded objects in `bucket`, `inFlight` PUTs at a time; each answer's MD5 is checked. */
export async function seedW8(t: StoreTarget, bucket: string, objects: number, pattern: Buffer, inFlight = 8): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (let guard = 0; guard < objects && next < objects; guard++) {
        const i = next++;
        const size = w8SeedSize(i);
        const path = t.objectPath(bucket, w8SeedKey(i));
        const r = await t.http.ok('PUT', path, { body: pattern.subarray(0, size), headers: t.sign('PUT', path)() });
        if (t.putMd5(r) !== patternMd5(pattern, size)) throw new Error(`${t.name} W8 seeding ${path}: answered MD5 ${t.putMd5(r) ?? 'none'}`);
      }
    }),
  );
}

/**
 * W8's loop on one target: `w.clients` workers, `w.durationMs` after a `w.warmupMs` warm-up. Every
 * answer is checked: a GET's length and ETag (MD5), a PUT's reported MD5, a listing's page full
 * (`w.pageKeys` keys; the bucket holds more from the start). Object bytes of GETs and PUTs count
 * towards MiB/s; listings count as requests only.
 */
export function w8Loop(t: StoreTarget, bucket: string, w: W8Params, pattern: Buffer, schedule: readonly W8Op[]): () => Promise<LoopResult> {
  if (w.objects < w.pageKeys) throw new Error(`W8: ${w.objects} seeded objects cannot fill a page of ${w.pageKeys}`);
  const md5 = new Map(W8_SIZES.map((s) => [s, patternMd5(pattern, s)]));
  return () =>
    closedLoop({
      concurrency: w.clients,
      durationMs: w.durationMs,
      maxOps: w.maxOps,
      warmupMs: w.warmupMs,
      op: async (_worker, seq): Promise<OpOutcome> => {
        const o = schedule[seq % schedule.length]!;
        if (o.kind === 'get') {
          const size = w8SeedSize(o.object);
          const path = t.objectPath(bucket, w8SeedKey(o.object));
          const r = await t.http.getCount(path, size, t.sign('GET', path));
          if (t.getMd5(r.headers) !== md5.get(size)) throw new Error(`${t.name} W8 GET ${path}: ETag ${String(r.headers.etag)}`);
          return { kind: 'get', bytes: size };
        }
        if (o.kind === 'put') {
          const path = t.objectPath(bucket, `w8/new/${String(seq).padStart(8, '0')}.bin`);
          const r = await t.http.ok('PUT', path, { body: pattern.subarray(0, o.size), headers: t.sign('PUT', path)() });
          if (t.putMd5(r) !== md5.get(o.size)) throw new Error(`${t.name} W8 PUT ${path}: answered MD5 ${t.putMd5(r) ?? 'none'}`);
          return { kind: 'put', bytes: o.size };
        }
        const n = await t.listPage(bucket, w.pageKeys);
        if (n !== w.pageKeys) throw new Error(`${t.name} W8 listing of ${bucket}: ${n} keys, expected a full page of ${w.pageKeys}`);
        return { kind: 'list', bytes: 0 };
      },
    });
}
