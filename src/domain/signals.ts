import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import type { ObjectVersion } from './models.js';

export const SIGNAL_NAMES = ['file-downloaded', 'file-uploaded', 'file-deleted'] as const;

export type SignalName = (typeof SIGNAL_NAMES)[number];

export interface SignalDetails {
  /** The object version concerned: the one served, the new one, or the one deleted. */
  obj: ObjectVersion;
  /** For file-deleted: 'soft' (a delete marker was added) or 'hard' (the version was removed). */
  kind?: 'soft' | 'hard';
  /** For file-downloaded: the bytes served (a range may be less than the file). */
  bytes?: number;
  [extra: string]: unknown;
}

/** What each signal carries, beyond `obj`. */
export interface SignalDetailsMap {
  /**
   * Sent once the response has been fully written, only when bytes were served: never for HEAD,
   * 304, 412, 416 or a client that went away mid-download. `bytes` is what was sent (a range may
   * be less than the file); `proxied` is true when a proxy serves the bytes (X-Accel-Redirect): the
   * signal is then sent when the redirect has been handed to the proxy.
   */
  'file-downloaded': SignalDetails & { bytes: number; proxied?: boolean };
  /** Sent after the new version is committed: a PUT, or the merge of a multipart upload (in the worker). */
  'file-uploaded': SignalDetails;
  /** Sent after the commit: `obj` is the version that was head before the marker (soft) or the removed version (hard). */
  'file-deleted': SignalDetails & { kind: 'soft' | 'hard' };
}

/**
 * Handler shape of SPEC.md: handler(event, senderApp, { obj, ...details }). `sender` is the
 * embedding's Server object (what `createServer` returned), or null outside a server (CLI, worker).
 */
export type SignalHandler<N extends SignalName = SignalName> = (
  event: N,
  sender: unknown,
  details: SignalDetailsMap[N],
) => void | Promise<void>;

/**
 * In-process signals for embedding applications. A handler that throws (or rejects) is logged and
 * never breaks the request that sent the signal. Handlers run synchronously, in the order they
 * were connected, after the change is committed; a slow async handler does not delay the response.
 *
 * @example
 * ```ts
 * const server = await createServer(loadConfig({ DATABASE_URL: 'sqlite:./var/app.db' }));
 * server.signals.connect('file-uploaded', (event, _sender, { obj }) => {
 *   console.log(event, obj.bucketId, obj.key, obj.file?.size);
 * });
 * ```
 */
export class Signals {
  readonly #emitter = new EventEmitter();
  constructor(private readonly sender: unknown, private readonly log: Logger) {
    this.#emitter.setMaxListeners(100);
  }

  /** Connects a handler; returns a function that disconnects it. */
  connect<N extends SignalName>(name: N, handler: SignalHandler<N>): () => void {
    const wrapped = (details: SignalDetailsMap[N]) => {
      try {
        const r = handler(name, this.sender, details);
        if (r && typeof (r as Promise<void>).catch === 'function') {
          (r as Promise<void>).catch((e) => this.log.error({ err: e, signal: name }, 'signal handler failed'));
        }
      } catch (e) {
        this.log.error({ err: e, signal: name }, 'signal handler failed');
      }
    };
    this.#emitter.on(name, wrapped);
    return () => this.#emitter.off(name, wrapped);
  }

  send<N extends SignalName>(name: N, details: SignalDetailsMap[N]): void {
    this.#emitter.emit(name, details);
  }
}
