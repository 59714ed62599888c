// Deterministic data for tests: the same bytes and the same "random" choices on every run.

/** `size` bytes of a non-repeating-looking but fixed pattern. */
export function patternBuffer(size: number, seed = 1): Buffer {
  const rnd = prng(seed);
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = Math.floor(rnd() * 256);
  return b;
}

/** mulberry32: a small seeded generator of numbers in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
