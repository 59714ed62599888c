// Replicas across the local disk and a real S3 store that goes away (issue 18, acceptance): a
// two-copy policy over the file system and Ceph's RADOS Gateway, then the gateway stopped (SIGKILL of
// radosgw; the monitor and the OSD stay): uploads are still acknowledged (with one copy), the lag is
// reported (below-policy, the metric, the REST fixity view), every download is still served (from the
// local copy when the first copy is on RGW); the gateway started again, the worker's retries make the
// missing copies and the lag drains to zero.
//
// The cluster is this file's own (test/support/rgw.ts, ~15–20 s to start), never the run's shared one,
// which other test processes use while this one stops its gateway. Skips with the reason when it
// cannot start (binaries missing), and under TEST_SKIP_RGW=1 / TEST_SKIP_S3=1, or when the run's
// shared cluster could not start (TEST_RGW_SKIP). scripts/run-tests.mjs runs it in the SQLite pass (and
// the PostgreSQL one under TEST_ONLY_DATABASE=postgres), never in the S3/RGW storage passes.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Readable } from 'node:stream';
import { CreateBucketCommand, GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { startTestServer, testDatabase, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { createBucket, md5, put, req, waitFor } from './support/http.js';
import { runCli } from './support/process.js';
import { startRgwCluster, type RgwCluster } from './support/rgw.js';
import { createLocation } from '../src/domain/locations.js';
import { setBucketProperties } from '../src/domain/buckets.js';
import { fileStatus, filesBelowPolicy, replicationLag, resolveFileRef, setBucketCopies } from '../src/domain/replicas.js';
import { verifyFile } from '../src/domain/integrity.js';
import { loadConfig } from '../src/config.js';
import { createS3Client } from '../src/storage/s3/s3-backend.js';
import { parseS3Uri } from '../src/storage/s3/uri.js';

// These tests read the copies of uploads by path: small uploads too are files here.
storeSmallObjectsAsFiles();

const KiB = 1024;
const MiB = 1024 * KiB;

function skipReason(): string | null {
  if (process.env.TEST_SKIP_RGW === '1') return 'TEST_SKIP_RGW=1';
  if (process.env.TEST_SKIP_S3 === '1') return 'TEST_SKIP_S3=1';
  if (process.env.TEST_RGW_SKIP) return process.env.TEST_RGW_SKIP;
  // One Ceph cluster more per pass is costly: `npm test` runs this on SQLite only, unless asked for
  // PostgreSQL alone (TEST_ONLY_DATABASE=postgres).
  if (testDatabase() === 'postgres' && process.env.TEST_ONLY_DATABASE === undefined) return 'runs in the SQLite pass (TEST_ONLY_DATABASE=postgres runs it on PostgreSQL)';
  return null;
}

const reason = skipReason();
const started = Date.now();
const cluster: RgwCluster | { skip: string } = reason ? { skip: reason } : await startRgwCluster();
const clusterSeconds = (Date.now() - started) / 1000;
after(async () => {
  if (!('skip' in cluster)) await cluster.close();
});

/** One object of the test: its bucket, key and bytes. */
interface Obj {
  bucket: string;
  key: string;
  body: Buffer;
}

describe('Two copies on the local disk and Ceph RGW; RGW stopped and started again', { skip: 'skip' in cluster ? cluster.skip : false }, () => {
  const rgw = cluster as RgwCluster;
  let s: TestServer;
  let s3: S3Client;
  /** Its first copy on the local disk (the server's default location), the second on RGW. */
  let local: string;
  /** Its first copy on RGW, the second on the local disk: reads try RGW first. */
  let remote: string;
  const before1: Obj[] = [];
  const during: Obj[] = [];
  const ctx = () => s.server.core.ctx;
  const all = () => [...before1, ...during];

  before(async () => {
    const s3Env = {
      FILES_REST_S3_ENDPOINT: rgw.endpoint,
      FILES_REST_S3_REGION: 'us-east-1',
      FILES_REST_S3_ACCESS_KEY_ID: rgw.accessKeyId,
      FILES_REST_S3_SECRET_ACCESS_KEY: rgw.secretAccessKey,
    };
    s3 = createS3Client(loadConfig(s3Env));
    const bucket = `replicas-${randomBytes(4).toString('hex')}`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    s = await startTestServer({
      ...s3Env,
      FILES_REST_STORAGE_FACTORY: 's3',
      FILES_REST_REPLICA_LOCATIONS: 'default,rgw',
      FILES_REST_MIGRATION_GRACE: '0',
    });
    await createLocation(ctx(), { name: 'rgw', uri: `s3://${bucket}/replicas` });
    local = await createBucket(s.files);
    await setBucketCopies(ctx(), local, 2);
    remote = await createBucket(s.files);
    await setBucketProperties(ctx(), remote, { locationName: 'rgw' });
    await setBucketCopies(ctx(), remote, 2);
  });
  after(async () => {
    await s?.close();
    s3?.destroy();
  });

  /** Replication jobs queued or running. */
  async function replicating(): Promise<number> {
    const r = await ctx().db.selectFrom('tasks').select('id').where('name', '=', 'replicate-file').where('state', 'in', ['queued', 'running']).execute();
    return r.length;
  }

  async function downloadAll(objs: Obj[]): Promise<void> {
    for (const o of objs) {
      const r = await fetch(`${s.files}/${o.bucket}/${o.key}`);
      const body = Buffer.from(await r.arrayBuffer());
      assert.equal(r.status, 200, `${o.key}: ${r.status} ${body.toString().slice(0, 200)}`);
      assert.equal(body.length, o.body.length, o.key);
      assert.equal(md5(body), md5(o.body), o.key);
    }
  }

  /** The bytes of one copy, read straight from its store (the file system, or RGW with a client of the test's own). */
  async function copyBytes(uri: string): Promise<Buffer> {
    if (!uri.startsWith('s3://')) return readFile(uri.startsWith('file://') ? fileURLToPath(uri) : uri);
    const a = parseS3Uri(uri);
    const r = await s3.send(new GetObjectCommand({ Bucket: a.bucket, Key: a.key }));
    const chunks: Buffer[] = [];
    for await (const c of r.Body as Readable) chunks.push(c as Buffer);
    return Buffer.concat(chunks);
  }

  /** Every object has its two copies, one on each store, both holding exactly its bytes; none is known bad. */
  async function twoGoodCopies(objs: Obj[]): Promise<void> {
    for (const o of objs) {
      const st = await fileStatus(ctx(), await resolveFileRef(ctx(), `${o.bucket}/${o.key}`));
      assert.equal(st.required_copies, 2, o.key);
      assert.equal(st.good_copies, 2, `${o.key}: ${JSON.stringify(st)}`);
      assert.deepEqual(st.copies.map((c) => c.location).sort(), ['default', 'rgw'], o.key);
      assert.equal(st.copies.find((c) => c.first)!.location, o.bucket === local ? 'default' : 'rgw', `${o.key}: first copy`);
      assert.equal(st.checksum, `md5:${md5(o.body)}`, o.key);
      for (const c of st.copies) {
        assert.notEqual(c.last_check, false, `${o.key}: copy in ${c.location} recorded bad`);
        assert.equal(md5(await copyBytes(c.uri)), md5(o.body), `${o.key}: copy in ${c.location}`);
      }
    }
  }

  it('RGW up: each file gets its second copy (local disk and RGW), verified; downloads serve every byte', async (t) => {
    t.diagnostic(`own Ceph cluster with RGW started in ${clusterSeconds.toFixed(1)} s`);
    const sizes = [1 * KiB, 40 * KiB, 200 * KiB, 9 * MiB];
    for (const [i, size] of sizes.entries()) before1.push({ bucket: local, key: `up-local-${i}`, body: randomBytes(size) });
    for (const [i, size] of [2 * KiB, 300 * KiB].entries()) before1.push({ bucket: remote, key: `up-remote-${i}`, body: randomBytes(size) });
    const t0 = Date.now();
    for (const o of before1) assert.equal((await put(`${s.files}/${o.bucket}/${o.key}`, o.body)).status, 200, o.key);
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0 && (await replicating()) === 0, 60_000, 100);
    t.diagnostic(`${before1.length} files replicated in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await twoGoodCopies(before1);
    await downloadAll(before1);
    assert.deepEqual(await replicationLag(ctx()), { files: 0, bytes: 0, noGoodCopy: 0 });
  });

  it('RGW stopped: uploads acknowledged with one copy, the lag reported (below-policy, metric, fixity view), every download served', async (t) => {
    const t0 = Date.now();
    await rgw.stopGateway('SIGKILL');
    t.diagnostic(`gateway stopped in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    assert.equal(await fetch(rgw.endpoint).then(() => 'answered', () => 'down'), 'down');

    // Uploads to the bucket whose first copies are local: acknowledged, with their one copy.
    for (const [i, size] of [3 * KiB, 100 * KiB, 9 * MiB].entries()) during.push({ bucket: local, key: `down-${i}`, body: randomBytes(size) });
    for (const o of during) {
      const r = await put(`${s.files}/${o.bucket}/${o.key}`, o.body);
      assert.equal(r.status, 200, `${o.key}: ${r.status} ${r.text}`);
      const st = await fileStatus(ctx(), await resolveFileRef(ctx(), `${o.bucket}/${o.key}`));
      assert.deepEqual(st.copies.map((c) => c.location), ['default'], o.key);
    }
    const ids = new Set(await Promise.all(during.map((o) => resolveFileRef(ctx(), `${o.bucket}/${o.key}`))));
    // The worker tries: each replication fails (the store is unreachable) and is queued again for later.
    await waitFor(async () => {
      const tasks = await ctx().db.selectFrom('tasks').select(['payload', 'state', 'attempts', 'last_error']).where('name', '=', 'replicate-file').execute();
      const tried = tasks.filter((x) => ids.has((JSON.parse(x.payload) as { fileId: string }).fileId) && x.state === 'queued' && x.attempts >= 1 && x.last_error);
      return tried.length === ids.size;
    }, 30_000, 100);

    // The lag: the below-policy listing (the admin command), the metric, and each file's fixity view.
    const below = await runCli(['file', 'below-policy', '--json'], s.env);
    assert.equal(below.code, 0, below.stderr);
    const listed = (JSON.parse(below.stdout).files as { file_id: string; good: number; required: number }[]).map((f) => [f.file_id, f.good, f.required]);
    assert.deepEqual(listed.sort(), [...ids].map((id) => [id, 1, 2]).sort());
    const metrics = (await req(`${s.url}/metrics`)).text;
    assert.match(metrics, new RegExp(`files_rest_replication_lag\\{unit="files"\\} ${during.length}\\b`));
    assert.match(metrics, new RegExp(`files_rest_replication_lag\\{unit="bytes"\\} ${during.reduce((n, o) => n + o.body.length, 0)}\\b`));
    assert.match(metrics, /files_rest_files_without_good_copy 0\b/);
    for (const o of during) {
      const f = await req(`${s.files}/${o.bucket}/${o.key}?fixity`);
      assert.equal(f.status, 200);
      assert.equal(f.json.required_copies, 2);
      assert.equal(f.json.good_copies, 1);
      assert.equal(f.json.copies.length, 1);
    }

    // Every download works, byte for byte: the new files and the old ones, also those whose first
    // copy is on RGW (read from their local copy).
    await downloadAll(all());
    // Those read RGW first: its failure (unreachable, not missing) queued a check of the file, no repair.
    const checks = new Set(
      (await ctx().db.selectFrom('tasks').select('payload').where('name', '=', 'verify-checksum').execute()).map((x) => (JSON.parse(x.payload) as { fileId: string }).fileId),
    );
    for (const o of before1.filter((x) => x.bucket === remote)) assert.ok(checks.has(await resolveFileRef(ctx(), `${o.bucket}/${o.key}`)), `${o.key}: RGW was not tried first`);
    assert.equal((await ctx().db.selectFrom('tasks').select('id').where('name', '=', 'repair-copy').execute()).length, 0);
    // An unreachable store is not a damaged copy: none is recorded bad, no first copy moved.
    for (const o of before1) {
      const st = await fileStatus(ctx(), await resolveFileRef(ctx(), `${o.bucket}/${o.key}`));
      assert.equal(st.good_copies, 2, `${o.key}: ${JSON.stringify(st)}`);
      assert.equal(st.copies.find((c) => c.first)!.location, o.bucket === local ? 'default' : 'rgw', o.key);
    }
    // A bucket whose first copies go to RGW cannot take uploads meanwhile: refused as storage unavailable.
    const refused = await put(`${s.files}/${remote}/down-remote`, randomBytes(KiB));
    assert.equal(refused.status, 503, refused.text);
    t.diagnostic(`gateway down for ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  });

  it('RGW started again: the worker retries, the lag drains to zero, every file has its two copies with matching checksums', async (t) => {
    const t0 = Date.now();
    await rgw.startGateway();
    const restart = (Date.now() - t0) / 1000;
    const pending = await ctx().db.selectFrom('tasks').select(['attempts', 'run_at']).where('name', '=', 'replicate-file').where('state', '=', 'queued').execute();
    const due = Math.max(0, ...pending.map((x) => (Number(x.run_at) / 1000 - Date.now()) / 1000));
    t.diagnostic(`gateway answering again in ${restart.toFixed(1)} s; ${pending.length} replications queued (attempts ${pending.map((x) => x.attempts).join(',')}), the last due in ${due.toFixed(1)} s`);
    // No retry-delay setting: the queue's backoff (2 s, 4 s, 8 s…) grows with the outage, short here.
    // Bounded by when the last retry is due, plus time to copy.
    const t1 = Date.now();
    const bound = Math.max(60_000, due * 1000 + 30_000);
    await waitFor(async () => (await filesBelowPolicy(ctx())).length === 0 && (await replicating()) === 0, bound, 100).catch(async (e: Error) => {
      const tasks = await ctx().db.selectFrom('tasks').select(['name', 'state', 'attempts', 'run_at', 'last_error']).where('name', '=', 'replicate-file').execute();
      throw new Error(`${e.message}: the lag did not drain: ${JSON.stringify(tasks)}`);
    });
    t.diagnostic(`lag drained ${((Date.now() - t1) / 1000).toFixed(1)} s after the gateway answered`);
    assert.deepEqual(await replicationLag(ctx()), { files: 0, bytes: 0, noGoodCopy: 0 });
    assert.match((await req(`${s.url}/metrics`)).text, /files_rest_replication_lag\{unit="files"\} 0\b/);
    // Nothing the outage touched ended as a failed task: copies and the checks downloads queued
    // (RGW unreachable, not a damaged copy) were retried, not given up (JOB_ATTEMPTS: 10 tries).
    const failed = await ctx().db.selectFrom('tasks').select(['name', 'last_error']).where('state', '=', 'failed').execute();
    assert.deepEqual(failed, []);
    const checks = await ctx().db.selectFrom('tasks').select(['max_attempts']).where('name', 'in', ['verify-checksum', 'replicate-file']).execute();
    assert.ok(checks.length > 0);
    for (const c of checks) assert.equal(c.max_attempts, 10);
    const others = await ctx().db.selectFrom('tasks').select(['name', 'state', 'attempts', 'last_error']).where('state', '!=', 'done').execute();
    if (others.length) t.diagnostic(`tasks not done: ${JSON.stringify(others)}`);
    await twoGoodCopies(all());
    for (const o of all()) {
      const r = await verifyFile(ctx(), await resolveFileRef(ctx(), `${o.bucket}/${o.key}`));
      assert.equal(r.ok, true, `${o.key}: ${r.reason}`);
    }
    // The admin command agrees; downloads (RGW first again where it holds the first copy) are served.
    const status = await runCli(['file', 'status', `${local}/down-0`, '--json'], s.env);
    assert.equal(status.code, 0, status.stderr);
    assert.equal(JSON.parse(status.stdout).good_copies, 2);
    await downloadAll(all());
  });
});
