/**
 * The server key: the AES-256-GCM key S3 access key secrets are stored under (a SigV4 secret must
 * be usable for HMAC, so it cannot be kept as a hash), and from which the signing key of signed
 * URLs is derived (signed-urls.ts, HKDF with its own label). From FILES_REST_SERVER_KEY; without it and
 * with SQLite, from a file beside the database (`files-rest-server.key`, mode 0600), made at the
 * first `serve`/`init`/`key create`. PostgreSQL installations must set the setting (several hosts
 * share the database, they must share the key). FILES_REST_SERVER_KEY_PREVIOUS keys still decrypt,
 * for rotation (`files-rest key rewrap` re-encrypts every secret under the current key).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';

export interface ServerKeys {
  /** Encrypts new secrets. */
  readonly current: Buffer;
  /** Decrypt only (FILES_REST_SERVER_KEY_PREVIOUS). */
  readonly previous: readonly Buffer[];
  /** Where the current key came from, for messages (never the key itself). */
  readonly source: string;
  /** True when this call generated the key file. */
  readonly created?: boolean;
}

export const SERVER_KEY_FILE = 'files-rest-server.key';

/** The key file of a SQLite database URL, or null (PostgreSQL, in-memory SQLite). */
export function serverKeyFile(databaseUrl: string): string | null {
  if (!databaseUrl.startsWith('sqlite:')) return null;
  const file = databaseUrl.slice('sqlite:'.length);
  if (file === '' || file === ':memory:') return null;
  return join(dirname(resolve(file)), SERVER_KEY_FILE);
}

function decodeKey(text: string, where: string): Buffer {
  const key = Buffer.from(text.trim(), 'base64');
  if (key.length !== 32) throw new Error(`${where}: expected base64 of 32 bytes`);
  return key;
}

/**
 * The server keys, or null when there are none (PostgreSQL without the setting; SQLite without a
 * key file and `create` false). With `create`, a SQLite installation without a setting gets a new
 * key file, logged (the path, never the key).
 */
export function loadServerKeys(config: Config, log: Logger | null, opts: { create?: boolean } = {}): ServerKeys | null {
  const previous = config.serverKeyPrevious.map((k) => decodeKey(k, 'FILES_REST_SERVER_KEY_PREVIOUS'));
  if (config.serverKey !== null) return { current: decodeKey(config.serverKey, 'FILES_REST_SERVER_KEY'), previous, source: 'FILES_REST_SERVER_KEY' };
  const file = serverKeyFile(config.databaseUrl);
  if (file === null) return null;
  if (existsSync(file)) return { current: decodeKey(readFileSync(file, 'utf8'), file), previous, source: file };
  if (!opts.create) return null;
  mkdirSync(dirname(file), { recursive: true });
  let created = false;
  try {
    writeFileSync(file, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
    created = true;
    log?.info({ file }, 'generated the server key that encrypts S3 access key secrets and signs URLs (FILES_REST_SERVER_KEY not set); back it up with the database');
  } catch (e) {
    // Another process made it first: use that one.
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  return { current: decodeKey(readFileSync(file, 'utf8'), file), previous, source: file, created };
}

/** The server keys, or SERVER_KEY_REQUIRED naming the setting. */
export function requireServerKeys(config: Config, log: Logger | null, opts: { create?: boolean } = {}): ServerKeys {
  const keys = loadServerKeys(config, log, opts);
  if (!keys) throw new AppError('SERVER_KEY_REQUIRED');
  return keys;
}

/** AES-256-GCM under `key`: base64 of iv(12) ‖ tag(16) ‖ ciphertext. */
export function encryptSecret(key: Buffer, secret: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64');
}

function decryptWith(key: Buffer, blob: Buffer): string | null {
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, blob.subarray(0, 12));
    decipher.setAuthTag(blob.subarray(12, 28));
    return Buffer.concat([decipher.update(blob.subarray(28)), decipher.final()]).toString('utf8');
  } catch {
    return null;
  }
}

/** Decrypts with the current key, then the previous ones; null when none fits. */
export function decryptSecret(keys: ServerKeys, encrypted: string): { secret: string; current: boolean } | null {
  const blob = Buffer.from(encrypted, 'base64');
  if (blob.length < 28) return null;
  const s = decryptWith(keys.current, blob);
  if (s !== null) return { secret: s, current: true };
  for (const k of keys.previous) {
    const p = decryptWith(k, blob);
    if (p !== null) return { secret: p, current: false };
  }
  return null;
}
