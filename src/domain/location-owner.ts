import { Readable } from 'node:stream';
import { AppError, isAppError } from '../errors.js';
import type { Executor } from '../db/schema.js';
import { isStorageError, type StorageBackend } from '../storage/backend.js';
import type { DomainContext } from './context.js';
import type { Location } from './models.js';

/**
 * Location ownership. A location's storage (a directory, an S3 prefix) belongs to one database: a
 * marker object `.files-rest-owner` at its root names the database's id (table database_identity).
 * A location is not created in, adopted in or swept in storage whose marker names another database,
 * so two databases sharing a data directory never take each other's files for orphans.
 *
 * The marker is an ordinary stored file written with the backend's own `save` and read with `open`.
 */
export const OWNER_MARKER = '.files-rest-owner';

/** The marker's URI under a location (a file in the directory, an object under the S3 prefix). */
export function markerUri(locationUri: string): string {
  return `${locationUri.replace(/\/+$/, '')}/${OWNER_MARKER}`;
}

export function isMarkerUri(uri: string): boolean {
  return uri === OWNER_MARKER || uri.endsWith(`/${OWNER_MARKER}`);
}

const ids = new WeakMap<object, string>();

/** This database's id (written once by migration 0002). */
export async function databaseId(db: Executor): Promise<string> {
  const known = ids.get(db);
  if (known) return known;
  const r = await db.selectFrom('database_identity').select('id').orderBy('created').executeTakeFirstOrThrow();
  ids.set(db, r.id);
  return r.id;
}

/** Who owns the storage at a location URI: a database id, or null when there is no marker. */
export async function readOwner(backend: StorageBackend, locationUri: string): Promise<string | null> {
  let stream: Readable;
  try {
    stream = await backend.open(markerUri(locationUri));
  } catch (e) {
    if (isStorageError(e, 'missing')) return null;
    throw e;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of stream) {
    chunks.push(c as Buffer);
    size += (c as Buffer).length;
    if (size > 64 * 1024) break;
  }
  stream.destroy();
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    const doc = JSON.parse(text) as { database_id?: unknown };
    if (typeof doc.database_id === 'string' && doc.database_id) return doc.database_id;
  } catch {
    /* below */
  }
  // Something unreadable is there: never treat the storage as ours.
  return 'an unreadable marker';
}

async function writeOwner(backend: StorageBackend, locationUri: string, id: string, name: string): Promise<void> {
  const doc = {
    database_id: id,
    location: name,
    written: new Date().toISOString(),
    note: 'This storage belongs to the files-rest database with this id. Do not delete or copy this file; see the README (location ownership).',
  };
  await backend.save(markerUri(locationUri), Readable.from([Buffer.from(`${JSON.stringify(doc, null, 2)}\n`)]));
}

function ownedElsewhere(uri: string, owner: string): AppError {
  return new AppError('LOCATION_OWNED_ELSEWHERE', { uri, owner, marker: markerUri(uri) });
}

/**
 * Makes the storage at `uri` this database's: fine when the marker names us, written when there is
 * none (a new location, or one this database already knew before markers existed: adoption),
 * refused (LOCATION_OWNED_ELSEWHERE) when it names another database.
 */
export async function claimStorage(ctx: DomainContext, uri: string, name: string): Promise<'owned' | 'claimed'> {
  const backend = ctx.storage.forUri(uri);
  const me = await databaseId(ctx.db);
  const owner = await readOwner(backend, uri);
  if (owner === me) return 'owned';
  if (owner !== null) throw ownedElsewhere(uri, owner);
  await writeOwner(backend, uri, me, name);
  // Two databases claiming at the same moment: the marker that stayed decides.
  const now = await readOwner(backend, uri);
  if (now !== me) throw ownedElsewhere(uri, now ?? 'nobody (the marker vanished)');
  return 'claimed';
}

/**
 * At the start of `serve`, `worker` and `init`: every location of this database is claimed. A
 * location whose storage holds no marker is adopted (its marker written); one owned by another
 * database stops the start. Storage that cannot be reached or written is left for later (logged).
 */
export async function adoptLocations(ctx: DomainContext, locations: Location[]): Promise<void> {
  for (const loc of locations) {
    try {
      if ((await claimStorage(ctx, loc.uri, loc.name)) === 'claimed') {
        ctx.log.info({ location: loc.name, uri: loc.uri }, `adopted location ${loc.name}: wrote its owner marker ${markerUri(loc.uri)}`);
      }
    } catch (e) {
      // Only another owner stops the start. Storage that cannot be read or written now (offline,
      // read-only) is left unmarked: the sweep skips it, and the next start tries again.
      if (isAppError(e, 'LOCATION_OWNED_ELSEWHERE')) throw e;
      ctx.log.warn({ location: loc.name, err: e }, `location ${loc.name}: cannot check or write its owner marker now: ${(e as Error)?.message ?? e}`);
    }
  }
}

/** Whether reconciliation may treat the location's unknown files as its own orphans, and if not, why. */
export async function sweepRefusal(ctx: DomainContext, loc: Location): Promise<string | null> {
  const owner = await readOwner(ctx.storage.forUri(loc.uri), loc.uri);
  if (owner === (await databaseId(ctx.db))) return null;
  if (owner === null) return `no owner marker at ${markerUri(loc.uri)}: start files-rest serve or worker once to adopt the location`;
  return (
    `the storage belongs to another database (${owner}, see ${markerUri(loc.uri)}); ` +
    `give this database storage of its own (location create, then file migrate --location)`
  );
}
