/** Small stream and timing helpers that work in browsers and in Node. */

/** Reads a ReadableStream chunk by chunk (browsers without async iteration of streams included). */
export async function* readChunks(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array, void, undefined> {
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      if (value && value.byteLength > 0) yield value;
    }
  } finally {
    // Stops the source when the consumer leaves early (error, abort).
    await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/** Waits `ms`; rejects with the signal's reason when it is aborted first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** A signal that aborts when any of the given ones does. */
export function anySignal(signals: (AbortSignal | undefined)[]): { signal: AbortSignal; abort: (reason?: unknown) => void; dispose: () => void } {
  const ctrl = new AbortController();
  const cleanups: (() => void)[] = [];
  for (const s of signals) {
    if (!s) continue;
    if (s.aborted) {
      ctrl.abort(s.reason);
      break;
    }
    const on = () => ctrl.abort(s.reason);
    s.addEventListener('abort', on, { once: true });
    cleanups.push(() => s.removeEventListener('abort', on));
  }
  return {
    signal: ctrl.signal,
    abort: (reason?: unknown) => ctrl.abort(reason),
    dispose: () => cleanups.forEach((f) => f()),
  };
}

/** A promise with its resolve and reject; its rejection is never reported as unhandled. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(v: T): void;
  reject(e: unknown): void;
  settled: boolean;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => undefined);
  const d: Deferred<T> = {
    promise,
    settled: false,
    resolve: (v) => {
      d.settled = true;
      resolve(v);
    },
    reject: (e) => {
      d.settled = true;
      reject(e);
    },
  };
  return d;
}
