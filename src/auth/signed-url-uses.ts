import type { Db } from '../db/schema.js';
import { nowMicros } from '../util/time.js';

/**
 * Records the use of a single-use signed upload URL: true the first time its nonce is seen, false
 * after (the insert is the arbiter, so two concurrent uses cannot both win). Rows of URLs that have
 * expired are dropped on the way: an expired URL is refused before it gets here.
 */
export async function consumeNonce(db: Db, nonce: string, expiresMicros: number): Promise<boolean> {
  await db.deleteFrom('signed_url_uses').where('expires', '<', nowMicros()).execute();
  const r = await db
    .insertInto('signed_url_uses')
    .values({ nonce, expires: expiresMicros })
    .onConflict((oc) => oc.column('nonce').doNothing())
    .executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0n) === 1;
}
