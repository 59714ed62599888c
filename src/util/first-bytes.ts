import type { Readable } from 'node:stream';

/**
 * Resolves once `source` has bytes to read, has ended, or has failed (the reader that comes next
 * sees the failure); rejects with the signal's reason when it aborts first. Reads nothing: the
 * bytes stay in the stream for whoever pipes it next.
 */
export function firstBytes(source: Readable, signal?: AbortSignal): Promise<void> {
  if (source.readableLength > 0 || source.readableEnded || source.destroyed || source.errored) return Promise.resolve();
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const settle = (err?: unknown) => {
      source.off('readable', ready);
      source.off('end', ready);
      source.off('error', ready);
      source.off('close', ready);
      signal?.removeEventListener('abort', aborted);
      if (err === undefined) resolve();
      else reject(err);
    };
    const ready = () => settle();
    const aborted = () => settle(signal!.reason);
    // A 'readable' listener pauses the stream until it is removed; once removed, the next pipe() or
    // 'data' listener makes it flow again (Node.js re-evaluates this on the next tick).
    source.on('readable', ready);
    source.on('end', ready);
    source.on('error', ready);
    source.on('close', ready);
    signal?.addEventListener('abort', aborted, { once: true });
  });
}
