// The ledger of a bucket's bytes (src/domain/ledger.ts): reservations and stored sizes keep
// size + reserved ≤ quota, at its edges and under concurrency; reservations come back on abort,
// expiry and failure; a locked bucket refuses every write.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestServer, type TestServer } from './support/server.js';
import { transaction } from '../src/db/database.js';
import { createBucket, findBucket, setBucketLocked, setBucketProperties } from '../src/domain/buckets.js';
import { assertWritable, lockBucketAndStore, lockBucketForWrite, releaseReservation, removeStored, reserve } from '../src/domain/ledger.js';
import { abortUpload, expireUploads, initiateUpload } from '../src/domain/multipart.js';
import { isAppError } from '../src/errors.js';
import { findHead, putObject, STORE_BATCH_MAX_INLINE_BYTES, storeBatchStats } from '../src/domain/objects.js';
import { Readable } from 'node:stream';

describe('The ledger of a bucket', () => {
  let s: TestServer;
  const ctx = () => s.server.core.ctx;
  before(async () => {
    // No in-process worker: its periodic expire-uploads would race the test's own call and take some of the expired uploads first.
    s = await startTestServer({ FILES_REST_MULTIPART_CHUNKSIZE_MIN: '1', FILES_REST_WORKER: '0' });
  });
  after(async () => {
    await s?.close();
  });

  async function bucketWithQuota(quota: number | null) {
    const b = await createBucket(ctx());
    return setBucketProperties(ctx(), b.id, { quotaSize: quota });
  }
  const account = async (id: string) => {
    const b = (await findBucket(ctx().db, id))!;
    return { size: b.size, reserved: b.reservedSize };
  };
  /** Runs one ledger write under the bucket's lock, as every caller does. */
  const write = (id: string, fn: (tx: Parameters<Parameters<typeof transaction>[1]>[0], b: Awaited<ReturnType<typeof lockBucketForWrite>>) => Promise<void>) =>
    transaction(ctx().db, async (tx) => fn(tx, await lockBucketForWrite(tx, id)));
  /** A stored file joins the bucket, in its own transaction, as an upload's commit does. */
  const store = (id: string, bytes: number, reserved?: number) => transaction(ctx().db, (tx) => lockBucketAndStore(tx, id, bytes, reserved));
  const refusal = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => (isAppError(e) ? e.code : e));

  it('a reservation or a stored file of exactly the quota left is taken; one byte more is QUOTA_EXCEEDED', async () => {
    const b = await bucketWithQuota(100);
    await write(b.id, (tx, x) => reserve(tx, x, 60));
    await store(b.id, 40);
    assert.deepEqual(await account(b.id), { size: 40, reserved: 60 });
    assert.equal(await refusal(write(b.id, (tx, x) => reserve(tx, x, 1))), 'QUOTA_EXCEEDED');
    assert.equal(await refusal(store(b.id, 1)), 'QUOTA_EXCEEDED');
    // A reserved file joins without a second check: its bytes move from reserved to size.
    await store(b.id, 60, 60);
    assert.deepEqual(await account(b.id), { size: 100, reserved: 0 });
    await write(b.id, (tx) => removeStored(tx, b.id, 100));
    assert.deepEqual(await account(b.id), { size: 0, reserved: 0 });
  });

  it('a quota of 0 holds zero bytes (not unlimited): an empty file is taken, one byte is not', async () => {
    const b = await bucketWithQuota(0);
    await store(b.id, 0);
    assert.equal(await refusal(write(b.id, (tx, x) => reserve(tx, x, 1))), 'QUOTA_EXCEEDED');
    assert.equal(await refusal(store(b.id, 1)), 'QUOTA_EXCEEDED');
    assert.equal(await refusal(initiateUpload(ctx(), { bucketId: b.id, key: 'k', size: 1, partSize: 1 })), 'QUOTA_EXCEEDED');
    assert.deepEqual(await account(b.id), { size: 0, reserved: 0 });
  });

  it('a reservation is released on abort, on expiry and on a failed completion, once', async () => {
    const b = await bucketWithQuota(1000);
    const u1 = await initiateUpload(ctx(), { bucketId: b.id, key: 'a', size: 300, partSize: 300 });
    const u2 = await initiateUpload(ctx(), { bucketId: b.id, key: 'b', size: 200, partSize: 200 });
    const u3 = await initiateUpload(ctx(), { bucketId: b.id, key: 'c', size: 100, partSize: 100 });
    assert.deepEqual(await account(b.id), { size: 0, reserved: 600 });
    await abortUpload(ctx(), u1.id);
    assert.equal(await refusal(abortUpload(ctx(), u1.id)), 'UPLOAD_NOT_FOUND');
    assert.deepEqual(await account(b.id), { size: 0, reserved: 300 });
    // Expired: older than FILES_REST_MULTIPART_EXPIRES days; failed: its completion failed.
    await ctx().db.updateTable('multipart_uploads').set({ created: 0 }).where('id', '=', u2.id).execute();
    await ctx().db.updateTable('multipart_uploads').set({ state: 'failed', error: 'part 0 does not match its checksum' }).where('id', '=', u3.id).execute();
    assert.equal(await expireUploads(ctx()), 2);
    assert.deepEqual(await account(b.id), { size: 0, reserved: 0 });
    await write(b.id, (tx, x) => reserve(tx, x, 10));
    await write(b.id, (tx) => releaseReservation(tx, b.id, 10));
    assert.deepEqual(await account(b.id), { size: 0, reserved: 0 });
  });

  it('a locked bucket refuses every write with BUCKET_LOCKED, and takes them again once unlocked', async () => {
    const b = await bucketWithQuota(null);
    const locked = await setBucketLocked(ctx(), b.id, true);
    assert.throws(() => assertWritable(locked), (e: unknown) => isAppError(e, 'BUCKET_LOCKED'));
    assert.equal(await refusal(write(b.id, (tx, x) => reserve(tx, x, 1))), 'BUCKET_LOCKED');
    // Refused after the statement that counted the bytes: the transaction takes the change back.
    assert.equal(await refusal(store(b.id, 5)), 'BUCKET_LOCKED');
    assert.deepEqual(await account(b.id), { size: 0, reserved: 0 });
    assert.equal(await refusal(initiateUpload(ctx(), { bucketId: b.id, key: 'k', size: 1, partSize: 1 })), 'BUCKET_LOCKED');
    await setBucketLocked(ctx(), b.id, false);
    await write(b.id, (tx, x) => reserve(tx, x, 1));
    assert.deepEqual(await account(b.id), { size: 0, reserved: 1 });
  });

  it('concurrent uploads past the quota: those that fit are stored, each refused one leaves no file, bytes or version, and the size is theirs', async () => {
    // Every upload passes the check before its body (the bucket is empty then); the commit's check,
    // under the bucket's lock, refuses those that no longer fit. They commit in a group: on PostgreSQL
    // each in one statement whose writes the refusal takes back.
    const b = await bucketWithQuota(100);
    const count = async (table: 'files' | 'inline_files' | 'object_versions') =>
      Number((await ctx().db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);
    const before = { files: await count('files'), inline: await count('inline_files') };
    const tries = await Promise.allSettled(
      Array.from({ length: 8 }, (_, i) =>
        putObject(ctx(), { bucketId: b.id, key: `q${i}`, source: Readable.from([Buffer.alloc(30, i)]), declaredSize: 30 }),
      ),
    );
    const stored = tries.filter((t) => t.status === 'fulfilled');
    assert.equal(stored.length, 3);
    for (const t of tries) if (t.status === 'rejected') assert.ok(isAppError(t.reason, 'QUOTA_EXCEEDED'), String(t.reason));
    assert.deepEqual(await account(b.id), { size: 90, reserved: 0 });
    const versions = await ctx().db.selectFrom('object_versions').select(['key', 'version_id', 'is_head']).where('bucket_id', '=', b.id).execute();
    assert.deepEqual(
      versions.map((v) => v.key).sort(),
      stored.map((t) => (t as PromiseFulfilledResult<Awaited<ReturnType<typeof putObject>>>).value.key).sort(),
    );
    assert.ok(versions.every((v) => v.is_head === 1));
    assert.equal(await count('files'), before.files + 3);
    assert.equal(await count('inline_files'), before.inline + (s.config.inlineMaxSize >= 30 ? 3 : 0));
    // What was answered is what is stored: each version reads back with its bytes.
    for (const t of stored) {
      const v = (t as PromiseFulfilledResult<Awaited<ReturnType<typeof putObject>>>).value;
      const head = await findHead(ctx().db, b.id, v.key);
      assert.equal(head?.versionId, v.versionId);
      assert.equal(head?.seq, v.seq);
      assert.equal(head?.file?.size, 30);
      assert.equal(head?.file?.storageClass, v.file?.storageClass);
    }
  });

  it('concurrent uploads to one bucket: each key keeps one head, the size counts every version, each answer is what is stored (PostgreSQL: in one statement per group)', async () => {
    const b = await bucketWithQuota(null);
    const big = s.config.inlineMaxSize + 1;
    // Keys with a head already: their heads are retired by the group's commit.
    const old = new Map<string, Awaited<ReturnType<typeof putObject>>>();
    for (let i = 0; i < 4; i++) old.set(`k${i}`, await putObject(ctx(), { bucketId: b.id, key: `k${i}`, source: Readable.from([Buffer.alloc(10, i)]), declaredSize: 10 }));
    const upload = (key: string, size: number, fill: number) => putObject(ctx(), { bucketId: b.id, key, source: Readable.from([Buffer.alloc(size, fill)]), declaredSize: size });
    const batchesBefore = { ...storeBatchStats };
    // Distinct keys, inline and as files; then a second round with one key sent six times at once.
    const first = await Promise.all(Array.from({ length: 24 }, (_, i) => upload(`k${i}`, i % 2 ? big : 30, i)));
    const second = await Promise.all([...Array.from({ length: 6 }, (_, i) => upload('same', 20 + i, 100 + i)), ...Array.from({ length: 6 }, (_, i) => upload(`m${i}`, 5, i))]);
    if (ctx().dialect === 'postgres') assert.ok(storeBatchStats.uploads > batchesBefore.uploads, 'some uploads were committed in a batch');
    else assert.deepEqual(storeBatchStats, batchesBefore, 'SQLite commits no batch');
    const rows = await ctx().db.selectFrom('object_versions').selectAll().where('bucket_id', '=', b.id).execute();
    const heads = rows.filter((r) => r.is_head === 1);
    assert.deepEqual(heads.map((r) => r.key).sort(), [...new Set(rows.map((r) => r.key))].sort(), 'one head per key');
    assert.equal(heads.length, new Set(heads.map((r) => r.key)).size);
    for (const [key, v] of old) {
      const r = rows.find((x) => x.version_id === v.versionId)!;
      assert.equal(r.is_head, 0, `${key}'s old head is retired`);
      assert.ok(r.updated > r.created);
    }
    const sameVersions = rows.filter((r) => r.key === 'same');
    assert.equal(sameVersions.length, 6);
    const stored = [...old.values(), ...first, ...second];
    assert.equal((await account(b.id)).size, stored.reduce((n, v) => n + v.file!.size, 0));
    // What was answered is what is stored.
    for (const v of [...first, ...second]) {
      const r = rows.find((x) => x.version_id === v.versionId)!;
      assert.equal(Number(r.seq), v.seq);
      assert.equal(r.key, v.key);
      const head = await findHead(ctx().db, b.id, v.key);
      if (head?.versionId === v.versionId) assert.equal(head.file?.checksum, v.file?.checksum);
    }
    for (const v of first) assert.equal((await findHead(ctx().db, b.id, v.key))?.versionId, v.versionId);
  });

  it('many large inline uploads at once: all stored, and no batch carries more than 1 MiB of bytes (PostgreSQL sends a batch\'s bytes as text)', async () => {
    const b = await bucketWithQuota(null);
    const size = Math.min(s.config.inlineMaxSize, 60 * 1024);
    const count = Math.ceil((2 * STORE_BATCH_MAX_INLINE_BYTES) / size);
    const versions = await Promise.all(
      Array.from({ length: count }, (_, i) => putObject(ctx(), { bucketId: b.id, key: `big${i}`, source: Readable.from([Buffer.alloc(size, i)]), declaredSize: size })),
    );
    assert.equal(versions.length, count);
    assert.equal((await account(b.id)).size, count * size);
    for (const v of versions) assert.equal((await findHead(ctx().db, b.id, v.key))?.versionId, v.versionId);
    assert.ok(storeBatchStats.largestInlineBytes <= STORE_BATCH_MAX_INLINE_BYTES, `largest batch: ${storeBatchStats.largestInlineBytes} bytes`);
  });

  it('concurrent reservations never pass the quota together', async () => {
    const b = await bucketWithQuota(100);
    const tries = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => initiateUpload(ctx(), { bucketId: b.id, key: `k${i}`, size: 30, partSize: 30 })),
    );
    const won = tries.filter((t) => t.status === 'fulfilled').length;
    assert.equal(won, 3);
    for (const t of tries) if (t.status === 'rejected') assert.ok(isAppError(t.reason, 'QUOTA_EXCEEDED'), String(t.reason));
    assert.deepEqual(await account(b.id), { size: 0, reserved: 90 });
  });
});
