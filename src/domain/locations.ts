import { sql } from 'kysely';
import { AppError } from '../errors.js';
import { prepared } from '../db/prepared.js';
import { isUniqueViolation, transaction } from '../db/database.js';
import { TRUE_LITERAL, type Executor } from '../db/schema.js';
import { newId } from '../util/ids.js';
import { nowMicros } from '../util/time.js';
import type { DomainContext } from './context.js';
import type { Location } from './models.js';
import { toLocation } from './rows.js';
import { claimStorage } from './location-owner.js';

const NAME_RE = /^[a-z][a-z0-9-]{0,19}$/;

export function validateLocationName(name: string): void {
  if (!NAME_RE.test(name)) {
    throw new AppError('INVALID_UPLOAD_REQUEST', {
      reason: `location name ${JSON.stringify(name)} must be 1–20 characters of a-z, 0-9 and '-', starting with a letter`,
    });
  }
}

/** Creates a location. Locations are programmatic only: they depend on the physical storage set-up. */
export async function createLocation(
  ctx: DomainContext,
  input: { name: string; uri: string; isDefault?: boolean },
): Promise<Location> {
  validateLocationName(input.name);
  const backend = ctx.storage.forUri(input.uri);
  const uri = backend.normalizeLocationUri(input.uri);
  if (await ctx.db.selectFrom('locations').select('id').where('name', '=', input.name).executeTakeFirst()) {
    throw new AppError('LOCATION_EXISTS', { name: input.name });
  }
  // Bytes first: the storage is marked as this database's before the row exists.
  await claimStorage(ctx, uri, input.name);
  const now = nowMicros();
  const id = newId();
  try {
    await transaction(ctx.db, async (tx) => {
      if (input.isDefault) await tx.updateTable('locations').set({ is_default: 0, updated: now }).where('is_default', '=', TRUE_LITERAL).execute();
      await tx
        .insertInto('locations')
        .values({ id, name: input.name, uri, is_default: input.isDefault ? 1 : 0, created: now, updated: now })
        .execute();
    });
  } catch (e) {
    if (isUniqueViolation(e)) throw new AppError('LOCATION_EXISTS', { name: input.name });
    throw e;
  }
  return { id, name: input.name, uri, isDefault: !!input.isDefault, created: now, updated: now };
}

export async function listLocations(db: Executor): Promise<Location[]> {
  const rows = await db.selectFrom('locations').selectAll().orderBy('name').execute();
  return rows.map(toLocation);
}

export async function getLocationByName(db: Executor, name: string): Promise<Location> {
  const r = await db.selectFrom('locations').selectAll().where('name', '=', name).executeTakeFirst();
  if (!r) throw new AppError('LOCATION_NOT_FOUND', { name });
  return toLocation(r);
}

/** Files and bytes of the file instances of each location, by location name (a scan of the files table). */
export async function locationUsage(db: Executor): Promise<{ name: string; files: number; bytes: number }[]> {
  const rows = await db
    .selectFrom('locations')
    .leftJoin('files', 'files.location_id', 'locations.id')
    .select(['locations.name', (eb) => eb.fn.count<number>('files.id').as('files'), (eb) => eb.fn.coalesce(eb.fn.sum<number>('files.size'), sql<number>`0`).as('bytes')])
    .groupBy('locations.name')
    .orderBy('locations.name')
    .execute();
  return rows.map((l) => ({ name: l.name, files: Number(l.files), bytes: Number(l.bytes) }));
}

/** A location as the operator sees it: its storage kind (the backend that handles its URI) and what it holds. */
export interface LocationReport extends Location {
  /** The storage backend's name (`fs`, `s3`, …), or null when no configured backend handles the URI. */
  kind: string | null;
  files: number;
  bytes: number;
}

/** Every location with its kind, its file instances and their bytes (by name). */
export async function locationReports(ctx: DomainContext): Promise<LocationReport[]> {
  const [locations, usage] = await Promise.all([listLocations(ctx.db), locationUsage(ctx.db)]);
  const byName = new Map(usage.map((u) => [u.name, u]));
  return locations.map((l) => {
    let kind: string | null;
    try {
      kind = ctx.storage.forUri(l.uri).name;
    } catch {
      kind = null;
    }
    const u = byName.get(l.name);
    return { ...l, kind, files: u?.files ?? 0, bytes: u?.bytes ?? 0 };
  });
}

const locationByIdQuery = prepared((db: Executor, id: string) => db.selectFrom('locations').selectAll().where('id', '=', id));

export async function getLocationById(db: Executor, id: string): Promise<Location> {
  const r = await locationByIdQuery.first(db, id);
  if (!r) throw new AppError('LOCATION_NOT_FOUND', { name: id });
  return toLocation(r);
}

export async function getDefaultLocation(db: Executor): Promise<Location | null> {
  const r = await db.selectFrom('locations').selectAll().where('is_default', '=', TRUE_LITERAL).executeTakeFirst();
  return r ? toLocation(r) : null;
}

export async function setDefaultLocation(ctx: DomainContext, name: string): Promise<Location> {
  return transaction(ctx.db, async (tx) => {
    const loc = await getLocationByName(tx, name);
    const now = nowMicros();
    await tx.updateTable('locations').set({ is_default: 0, updated: now }).where('is_default', '=', TRUE_LITERAL).execute();
    await tx.updateTable('locations').set({ is_default: 1, updated: now }).where('id', '=', loc.id).execute();
    return { ...loc, isDefault: true, updated: now };
  });
}

/**
 * First start: when no location exists, create `default` at FILES_REST_DATA_DIR. Several nodes
 * starting at once are fine: the unique name decides, the others see it exists.
 */
export async function ensureDefaultLocation(ctx: DomainContext): Promise<Location | null> {
  const any = await ctx.db.selectFrom('locations').select('id').limit(1).executeTakeFirst();
  if (any) return null;
  try {
    const loc = await createLocation(ctx, { name: 'default', uri: ctx.config.dataDir, isDefault: true });
    ctx.log.info({ location: loc.name, uri: loc.uri }, `created default location "default" at ${loc.uri}`);
    return loc;
  } catch (e) {
    if (e instanceof AppError && e.code === 'LOCATION_EXISTS') return null;
    throw e;
  }
}
