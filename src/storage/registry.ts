import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import type { Config } from '../config.js';
import type { StorageBackend } from './backend.js';
import { FsBackend } from './fs/fs-backend.js';
import { InlineBackend } from './inline/inline-backend.js';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';

/**
 * Picks the backend for a location or file URI. Several backends can be active at once (a migration
 * moves files from one to another); FILES_REST_STORAGE_FACTORY chooses which are available.
 */
export class StorageRegistry {
  constructor(private readonly backends: StorageBackend[]) {}

  forUri(uri: string): StorageBackend {
    const b = this.backends.find((x) => x.handles(uri));
    if (!b) throw new Error(`no storage backend handles ${uri} (FILES_REST_STORAGE_FACTORY)`);
    return b;
  }

  all(): readonly StorageBackend[] {
    return this.backends;
  }

  /** At shutdown: every backend lets its writes in flight settle and removes their leftovers. */
  async close(): Promise<void> {
    await Promise.all(this.backends.map((b) => b.close?.()));
  }
}

export type StorageFactory = (config: Config) => StorageBackend | StorageBackend[] | Promise<StorageBackend | StorageBackend[]>;

/**
 * The backends of FILES_REST_STORAGE_FACTORY, and the database's own for small files kept inline
 * (storage/inline: always there, so files stored inline stay readable when FILES_REST_INLINE_MAX_SIZE
 * is lowered later).
 */
export async function createStorage(config: Config, db: Kysely<Database>): Promise<StorageRegistry> {
  const inline = new InlineBackend(db);
  const fs = new FsBackend({ splitLength: config.storagePathSplitLength, dimensions: config.storagePathDimensions });
  const name = config.storageFactory;
  if (name === 'fs') return new StorageRegistry([inline, fs]);
  if (name === 's3') {
    // Loaded only when chosen, so fs-only deployments never load the AWS SDK.
    const { createS3Backend } = await import('./s3/s3-backend.js');
    return new StorageRegistry([inline, createS3Backend(config), fs]);
  }
  const mod = (await import(pathToFileURL(resolve(name)).href)) as { default?: StorageFactory; createStorage?: StorageFactory };
  const factory = mod.default ?? mod.createStorage;
  if (typeof factory !== 'function') {
    throw new Error(`FILES_REST_STORAGE_FACTORY: ${name} exports no default factory function`);
  }
  const made = await factory(config);
  return new StorageRegistry([inline, ...(Array.isArray(made) ? made : [made]), fs]);
}
