/**
 * The end of one request body, for every door (the REST door's Fastify routes and the S3 door's
 * node:http handlers): a client that disconnects mid-body aborts the upload; one that stops sending
 * for FILES_REST_BODY_IDLE_TIMEOUT seconds mid-body is cut with UPLOAD_TIMEOUT.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import { AppError, isAppError } from '../errors.js';

/** The end of one upload request: the client went away or stopped sending (see `watchBody`). */
export interface UploadWatch {
  /** Aborted when the client disconnects mid-body, or with UPLOAD_TIMEOUT when its body stalls. */
  signal: AbortSignal;
  /** `p`, or the abort's refusal if the upload is cut first (a form stalled before its file part). */
  until<T>(p: Promise<T>): Promise<T>;
  done(): void;
}

/**
 * Watches a request's body. A client that disconnects aborts it; one that stops sending for
 * `idleSeconds` mid-body is cut: the abort carries UPLOAD_TIMEOUT (408), the storage cleans up as
 * for a disconnect, and the answer closes the connection.
 *
 * The idle clock is the socket's timeout, which every chunk the HTTP parser receives resets. When it
 * runs out with received bytes still unread (the storage or the database is slow, backpressure),
 * the stall is ours and the clock starts again; with none, the client sent nothing for that long.
 */
export function watchBody(raw: IncomingMessage, idleSeconds: number, log: { warn(obj: object, msg: string): void }): UploadWatch {
  const abort = new AbortController();
  const socket = raw.socket as Socket | null;
  const ms = Math.round(idleSeconds * 1000);
  const onClose = () => {
    if (!raw.complete) abort.abort();
  };
  const onTimeout = () => {
    if (raw.complete || abort.signal.aborted) return;
    // Bytes received and not yet read: the stall is ours (backpressure, a slow storage or database).
    // None: the client has sent nothing for the whole period, whether or not the body is being read
    // yet (a part write waiting for its first bytes holds it paused, and was never cut before).
    if (raw.readableLength > 0) {
      socket?.setTimeout(ms);
      return;
    }
    log.warn({ idleSeconds }, 'upload cut: its body stalled');
    abort.abort(new AppError('UPLOAD_TIMEOUT', { seconds: idleSeconds }));
  };
  const stopClock = () => {
    if (socket && !socket.destroyed) socket.setTimeout(0);
  };
  raw.once('close', onClose);
  // Gone already (while the request was being checked): its 'close' has passed.
  if (raw.destroyed) onClose();
  if (ms > 0 && socket && !raw.complete) {
    // IncomingMessage re-emits the socket's timeout while its body is incomplete; with a listener
    // there, Node leaves the socket open for the answer.
    raw.on('timeout', onTimeout);
    raw.once('end', stopClock);
    socket.setTimeout(ms);
  }
  return {
    signal: abort.signal,
    until: (p) => {
      const refusal = () => (isAppError(abort.signal.reason) ? abort.signal.reason : new AppError('CLIENT_DISCONNECTED'));
      if (abort.signal.aborted) {
        // The client is gone already; what `p` comes to no longer matters, but it must not go unhandled.
        p.catch(() => {});
        return Promise.reject(refusal());
      }
      return new Promise((resolve, reject) => {
        const onAbort = () => reject(refusal());
        abort.signal.addEventListener('abort', onAbort, { once: true });
        p.then(resolve, reject).finally(() => abort.signal.removeEventListener('abort', onAbort));
      });
    },
    done() {
      raw.off('close', onClose);
      raw.off('timeout', onTimeout);
      raw.off('end', stopClock);
      stopClock();
    },
  };
}
