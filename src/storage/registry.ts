import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import type { Config } from '../config.js';
import type { StorageBackend } from './backend.js';
import { FsBackend } from './fs/fs-backend.js';

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

export async function createStorage(config: Config): Promise<StorageRegistry> {
  const fs = new FsBackend({ splitLength: config.storagePathSplitLength, dimensions: config.storagePathDimensions });
  const name = config.storageFactory;
  if (name === 'fs') return new StorageRegistry([fs]);
  if (name === 's3') {
    // Loaded only when chosen, so fs-only deployments never load the AWS SDK.
    const { createS3Backend } = await import('./s3/s3-backend.js');
    return new StorageRegistry([createS3Backend(config), fs]);
  }
  const mod = (await import(pathToFileURL(resolve(name)).href)) as { default?: StorageFactory; createStorage?: StorageFactory };
  const factory = mod.default ?? mod.createStorage;
  if (typeof factory !== 'function') {
    throw new Error(`FILES_REST_STORAGE_FACTORY: ${name} exports no default factory function`);
  }
  const made = await factory(config);
  return new StorageRegistry([...(Array.isArray(made) ? made : [made]), fs]);
}
