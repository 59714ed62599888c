import type { Tx } from '../db/schema.js';
import type { SignalDetailsMap } from './signals.js';

/** The changes an outbox records: those made by a transaction (a download changes nothing). */
export type OutboxEvent = 'file-uploaded' | 'file-deleted';

export type OutboxHandler = <N extends OutboxEvent>(tx: Tx, event: N, details: SignalDetailsMap[N]) => Promise<void>;

/**
 * The transactional outbox: handlers run inside the transaction that makes a change, with that
 * transaction, so what they write (a webhook delivery task) commits with the change or not at all.
 * A crash between the commit and a later "enqueue" can't lose an event. Signals, by contrast, are
 * sent in-process after the commit and are not kept anywhere.
 */
export class Outbox {
  readonly #handlers: OutboxHandler[] = [];

  add(handler: OutboxHandler): () => void {
    this.#handlers.push(handler);
    return () => {
      const i = this.#handlers.indexOf(handler);
      if (i >= 0) this.#handlers.splice(i, 1);
    };
  }

  /** Called by the domain inside the transaction of the change; a handler that fails fails the change. */
  async record<N extends OutboxEvent>(tx: Tx, event: N, details: SignalDetailsMap[N]): Promise<void> {
    for (const h of this.#handlers) await h(tx, event, details);
  }
}
