import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Db, Dialect } from '../db/schema.js';
import type { StorageRegistry } from '../storage/registry.js';
import type { Signals } from './signals.js';
import type { Outbox } from './outbox.js';
import type { JobQueue } from './jobs.js';
import type { UploadHasher } from './upload-hasher.js';

/** Everything domain functions need, passed in explicitly. */
export interface DomainContext {
  readonly config: Config;
  readonly db: Db;
  readonly dialect: Dialect;
  readonly storage: StorageRegistry;
  readonly signals: Signals;
  /** Handlers run inside the transaction of each upload and delete (webhook deliveries); absent: none. */
  readonly outbox?: Outbox;
  /** Background jobs, written in the caller's transaction. */
  readonly queue: JobQueue;
  readonly log: Logger;
  /** Hashes multipart uploads in order as their parts arrive (absent: completion reads the file). */
  readonly hasher?: UploadHasher;
}
