import type { Command } from 'commander';
import type { Core } from '../service.js';
import { createBucket, getBucketForAdmin, getLiveBucket, setBucketDeleted, setBucketLocked, setBucketName, setBucketProperties, setBucketPublicRead } from '../domain/buckets.js';
import { requireServerKeys } from '../auth/server-key.js';
import { newGrant, signedQuery } from '../auth/signed-urls.js';
import { parseUuid } from '../util/ids.js';
import { checkBucketName, s3KeyCommands } from './s3-commands.js';
import { createLocation, getLocationById, listLocations, setDefaultLocation } from '../domain/locations.js';
import type { Bucket } from '../domain/models.js';
import { createToken, revokeToken } from '../auth/tokens.js';
import { snapshotBucket, syncBuckets } from '../domain/snapshots.js';
import { migrationStatus, queueMigration } from '../domain/migration.js';
import { filesToVerify, verifyFile } from '../domain/integrity.js';
import { reconcileStorage } from '../domain/reconcile.js';
import { filesBelowPolicy, fileStatus, fixityHistory, removeLocation, resolveFileRef, setBucketCopies } from '../domain/replicas.js';
import { isoMicros } from '../util/time.js';
import { Links } from '../http/links.js';
import { bucketJson } from '../http/serializers.js';
import { AppError } from '../errors.js';
import { taskDefinitions } from '../service.js';
import type { Out } from './output.js';

/** The periodic tasks `task run` accepts (test/cli.test.ts checks this list against taskDefinitions). */
export const PERIODIC_TASKS = ['expire-uploads', 'expire-resumable-uploads', 'verify-checksums', 'sweep-storage', 'prune-tasks', 'replicate-below-policy', 'summarise-fixity'] as const;

export type WithCore = <T>(fn: (core: Core, out: Out) => Promise<T>) => Promise<void>;

function sizeOption(name: string, v: string | undefined): number | null | undefined {
  if (v === undefined) return undefined;
  if (v === 'none') return null;
  if (!/^\d+$/.test(v)) throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: name, message: `expected bytes or 'none', got ${v}` }] });
  return Number(v);
}

/** Links as the server would give them: FILES_REST_BASE_URL, else HOST and PORT. */
function adminLinks(core: Core): Links {
  return new Links(core.config, { origin: `http://${core.config.host}:${core.config.port}` });
}

/** An on|off option. */
function onOff(name: string, v: string): boolean {
  if (v === 'on' || v === 'off') return v === 'on';
  throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: name, message: `expected on or off, got ${v}` }] });
}

async function bucketDoc(core: Core, b: Bucket) {
  const loc = await getLocationById(core.ctx.db, b.defaultLocation);
  const links = adminLinks(core);
  return { ...bucketJson(b, links), name: b.name ?? null, deleted: b.deleted, default_location: loc.name };
}

function describeBucket(d: Awaited<ReturnType<typeof bucketDoc>>): string {
  return [
    `bucket ${d.id}`,
    `  name          ${d.name ?? 'none'}`,
    `  location      ${d.default_location}`,
    `  size          ${d.size} bytes`,
    `  quota_size    ${d.quota_size ?? 'none'}`,
    `  max_file_size ${d.max_file_size ?? 'none'}`,
    `  locked        ${d.locked}`,
    `  public_read   ${d.public_read}`,
    `  deleted       ${d.deleted}`,
    `  created       ${d.created}`,
  ].join('\n');
}

export function adminCommands(program: Command, withCore: WithCore): void {
  const location = program.command('location').description('storage locations');
  location
    .command('create <name> <uri>')
    .description('create a storage location')
    .option('--default', 'make it the default location')
    .action((name: string, uri: string, o: { default?: boolean }) =>
      withCore(async (core, out) => {
        const l = await createLocation(core.ctx, { name, uri, isDefault: !!o.default });
        out.print(`created location ${l.name} at ${l.uri}${l.isDefault ? ' (default)' : ''}`, { name: l.name, uri: l.uri, default: l.isDefault });
      }),
    );
  location
    .command('remove <name>')
    .description('remove a location: refused while it is a default location or holds the only good copy of a file; its other copies are forgotten and made again elsewhere')
    .action((name: string) =>
      withCore(async (core, out) => {
        const n = await removeLocation(core.ctx, name);
        out.print(`removed location ${name}; ${n} file(s) lost a copy there (replication queued)`, { name, files: n });
      }),
    );
  location
    .command('list')
    .description('list locations')
    .action(() =>
      withCore(async (core, out) => {
        const ls = await listLocations(core.ctx.db);
        out.print(
          ls.length ? ls.map((l) => `${l.isDefault ? '*' : ' '} ${l.name}\t${l.uri}`).join('\n') : 'no locations',
          ls.map((l) => ({ name: l.name, uri: l.uri, default: l.isDefault })),
        );
      }),
    );
  location
    .command('set-default <name>')
    .description('make a location the default')
    .action((name: string) =>
      withCore(async (core, out) => {
        const l = await setDefaultLocation(core.ctx, name);
        out.print(`${l.name} is now the default location`, { name: l.name, uri: l.uri, default: true });
      }),
    );

  const bucket = program.command('bucket').description('buckets');
  bucket
    .command('create')
    .option('--location <name>', 'location (default: the default location)')
    .description('create a bucket; prints its id')
    .action((o: { location?: string }) =>
      withCore(async (core, out) => {
        const b = await createBucket(core.ctx, { locationName: o.location });
        out.print(b.id, await bucketDoc(core, b));
      }),
    );
  bucket
    .command('show <id>')
    .description("a bucket's fields")
    .action((id: string) =>
      withCore(async (core, out) => {
        const d = await bucketDoc(core, await getBucketForAdmin(core.ctx.db, id));
        out.print(describeBucket(d), d);
      }),
    );
  const stateCommand = (name: string, desc: string, fn: (core: Core, id: string) => Promise<Bucket>, verb: string) =>
    bucket
      .command(`${name} <id>`)
      .description(desc)
      .action((id: string) =>
        withCore(async (core, out) => {
          const b = await fn(core, id);
          out.print(`bucket ${b.id} ${verb}`, await bucketDoc(core, b));
        }),
      );
  stateCommand('lock', 'lock a bucket (objects can be read, not added or deleted)', (c, id) => setBucketLocked(c.ctx, id, true), 'locked');
  stateCommand('unlock', 'unlock a bucket', (c, id) => setBucketLocked(c.ctx, id, false), 'unlocked');
  stateCommand('delete', 'logically delete a bucket (its content stays)', (c, id) => setBucketDeleted(c.ctx, id, true), 'deleted');
  stateCommand('restore', 'undo a logical deletion', (c, id) => setBucketDeleted(c.ctx, id, false), 'restored');
  bucket
    .command('name <id> <name>')
    .description("give a bucket its S3 name ('none' removes it); the S3 API addresses the bucket by it")
    .action((id: string, name: string) =>
      withCore(async (core, out) => {
        await getBucketForAdmin(core.ctx.db, id);
        if (name !== 'none') checkBucketName(name);
        const b = await setBucketName(core.ctx, id, name === 'none' ? null : name);
        const d = await bucketDoc(core, b);
        out.print(describeBucket(d), d);
      }),
    );
  bucket
    .command('set <id>')
    .description("set a bucket's limits and default location ('none' clears a limit)")
    .option('--quota-size <bytes>', 'total quota in bytes, or none')
    .option('--max-file-size <bytes>', 'per-file maximum in bytes, or none')
    .option('--location <name>', 'default location for new files')
    .option('--public-read <on|off>', 'on: anyone may download its objects without a credential (not list them); see docs/security.md')
    .action((id: string, o: { quotaSize?: string; maxFileSize?: string; location?: string; publicRead?: string }) =>
      withCore(async (core, out) => {
        const publicRead = o.publicRead === undefined ? undefined : onOff('public-read', o.publicRead);
        let b = await setBucketProperties(core.ctx, id, {
          quotaSize: sizeOption('quota-size', o.quotaSize),
          maxFileSize: sizeOption('max-file-size', o.maxFileSize),
          locationName: o.location,
        });
        if (publicRead !== undefined) b = await setBucketPublicRead(core.ctx, id, publicRead);
        const d = await bucketDoc(core, b);
        out.print(describeBucket(d), d);
      }),
    );

  bucket
    .command('set-copies <id> <copies>')
    .description("copies of each file the bucket requires, in distinct locations (a number, or 'default': FILES_REST_DEFAULT_COPIES); queues the copies its files lack")
    .action((id: string, copies: string) =>
      withCore(async (core, out) => {
        const n = copies === 'default' ? null : /^\d+$/.test(copies) ? Number(copies) : NaN;
        const queued = await setBucketCopies(core.ctx, id, n);
        out.print(`bucket ${id} requires ${n ?? `the default (${core.config.defaultCopies})`} cop${n === 1 ? 'y' : 'ies'}; ${queued} replication(s) queued`, { id, copies: n, queued });
      }),
    );
  bucket
    .command('snapshot <id>')
    .description('new bucket holding the latest versions, sharing files on disk; prints its id')
    .option('--lock', 'lock the new bucket')
    .action((id: string, o: { lock?: boolean }) =>
      withCore(async (core, out) => {
        const b = await snapshotBucket(core.ctx, id, { lock: o.lock ? true : undefined });
        out.print(b.id, await bucketDoc(core, b));
      }),
    );
  bucket
    .command('sync <src> <dst>')
    .description("mirror SRC's objects into DST")
    .option('--delete-extras', 'soft-delete keys that only DST has')
    .action((src: string, dst: string, o: { deleteExtras?: boolean }) =>
      withCore(async (core, out) => {
        const changes = await syncBuckets(core.ctx, src, dst, { deleteExtras: !!o.deleteExtras });
        out.print(
          changes.length ? changes.map((c) => `${c.action}\t${c.key}`).join('\n') : 'nothing to do: already in sync',
          { source: src, destination: dst, changes },
        );
      }),
    );

  const file = program.command('file').description('file instances: migration and integrity');
  file
    .command('migrate')
    .description('queue migration of file instances to a location (it becomes the default of the buckets concerned)')
    .option('--location <name>', 'target location')
    .option('--bucket <id>', 'only the files of this bucket')
    .option('--status', 'show the progress of migrations instead')
    .action((o: { location?: string; bucket?: string; status?: boolean }) =>
      withCore(async (core, out) => {
        if (o.status) {
          const st = await migrationStatus(core.ctx);
          out.print(
            [
              `migrations: ${st.queued} queued, ${st.running} running, ${st.done} done, ${st.failed} failed`,
              ...st.targets.map((t) => `  to ${t.location}\t${t.queued + t.running} left\t${t.done} done\t${t.failed} failed`),
              ...st.locations.map((l) => `  ${l.name}\t${l.files} files\t${l.bytes} bytes`),
            ].join('\n'),
            st,
          );
          return;
        }
        if (!o.location) throw new Error('--location NAME is required (or --status)');
        const n = await queueMigration(core.ctx, o.location, { bucketId: o.bucket });
        out.print(`queued ${n} file migration(s) to ${o.location}`, { queued: n });
      }),
    );
  file
    .command('verify')
    .description('queue integrity checks (default: files never checked); --wait runs them now and prints the results')
    .option('--all', 'every file')
    .option('--older-than <days>', 'files not checked for this many days')
    .option('--wait', 'check now, in this process, and report')
    .action((o: { all?: boolean; olderThan?: string; wait?: boolean }) =>
      withCore(async (core, out) => {
        const days = o.olderThan === undefined ? undefined : Number(o.olderThan);
        if (days !== undefined && !(days >= 0)) throw new Error(`--older-than: expected a number of days, got ${o.olderThan}`);
        const due = await filesToVerify(core.ctx, { all: !!o.all, olderThanDays: days });
        if (!o.wait) {
          await core.ctx.db.transaction().execute(async (tx) => {
            for (const f of due) await core.queue.enqueue(tx, 'verify-checksum', { fileId: f.id });
          });
          out.print(`queued ${due.length} integrity check(s)`, { queued: due.length });
          return;
        }
        const failed: { file_id: string; uri: string | null; reason: string }[] = [];
        for (const f of due) {
          const r = await verifyFile(core.ctx, f.id);
          if (r.ok !== true) failed.push({ file_id: f.id, uri: r.uri, reason: r.reason ?? 'unknown' });
        }
        out.print(
          [`checked ${due.length} file(s), ${failed.length} failed`, ...failed.map((x) => `  ${x.file_id}\t${x.uri}\t${x.reason}`)].join('\n'),
          { checked: due.length, failed },
        );
        if (failed.length) process.exitCode = 2;
      }),
    );

  file
    .command('status <file>')
    .description('a file instance (id, or BUCKET/KEY for the head version): its copies, their last check, and its replication policy')
    .action((ref: string) =>
      withCore(async (core, out) => {
        const st = await fileStatus(core.ctx, await resolveFileRef(core.ctx, ref));
        out.print(
          [
            `file ${st.file_id}: ${st.good_copies} good of ${st.required_copies} required cop${st.required_copies === 1 ? 'y' : 'ies'}, ${st.size} bytes, ${st.checksum}`,
            ...st.copies.map((c) => `  ${c.location}${c.first ? ' (first)' : ''}\t${c.last_check === null ? 'unchecked' : c.last_check ? 'ok' : 'FAILED'}\t${c.last_check_at === null ? '-' : isoMicros(c.last_check_at)}\t${c.uri}`),
          ].join('\n'),
          st,
        );
      }),
    );
  file
    .command('below-policy')
    .description('files with fewer good copies than their policy requires (replication lag; 0 good: no good copy left)')
    .option('--limit <n>', 'at most this many', '1000')
    .action((o: { limit: string }) =>
      withCore(async (core, out) => {
        const rows = await filesBelowPolicy(core.ctx, { limit: Number(o.limit) });
        out.print(
          rows.length ? rows.map((r) => `${r.file_id}\t${r.good}/${r.required} good\t${r.size} bytes${r.good === 0 ? '\tNO GOOD COPY' : ''}`).join('\n') : 'every file has its copies',
          { files: rows },
        );
        if (rows.some((r) => r.good === 0)) process.exitCode = 2;
      }),
    );
  file
    .command('fixity <file>')
    .description("a file instance's fixity history (id, or BUCKET/KEY): every check, failure, repair and replication of each copy")
    .option('--limit <n>', 'the latest this many events', '1000')
    .action((ref: string, o: { limit: string }) =>
      withCore(async (core, out) => {
        const fileId = await resolveFileRef(core.ctx, ref);
        const h = await fixityHistory(core.ctx, fileId, { limit: Number(o.limit) });
        out.print(
          [
            ...h.summary.map((x) => `summary\t${x.location}\t${x.kind}\t${x.count} (${x.failed} not ok)\t${isoMicros(x.first_at)} .. ${isoMicros(x.last_at)}`),
            ...h.events.map((e) => `${isoMicros(e.at)}\t${e.location}\t${e.kind}\t${e.ok ? 'ok' : 'NOT OK'}\t${e.checksum_found ?? '-'}\t${e.detail ?? ''}`),
          ].join('\n') || 'no fixity events',
          { file_id: fileId, ...h },
        );
      }),
    );

  const storage = program.command('storage').description('storage maintenance');
  storage
    .command('reconcile')
    .description('find stored files without a row (deleted unless --dry-run) and rows whose bytes are missing')
    .option('--dry-run', 'report only')
    .option('--grace-hours <h>', 'leave files younger than this alone', '24')
    .action((o: { dryRun?: boolean; graceHours: string }) =>
      withCore(async (core, out) => {
        const hours = Number(o.graceHours);
        if (!(hours >= 0)) throw new Error(`--grace-hours: expected a number, got ${o.graceHours}`);
        const r = await reconcileStorage(core.ctx, { dryRun: !!o.dryRun, graceSeconds: hours * 3600 });
        out.print(
          [
            `${r.orphans.length} orphaned file(s)${o.dryRun ? ' (dry run: none deleted)' : `, ${r.deleted} deleted`}`,
            ...r.orphans.map((x) => `  orphan\t${x.location}\t${x.uri}\t${x.size}`),
            `${r.missing.length} file instance(s) with missing bytes`,
            ...r.missing.map((x) => `  missing\t${x.location}\t${x.file_id}\t${x.uri}`),
            ...r.skipped.map((x) => `location ${x.location} not examined for orphans: ${x.reason}`),
          ].join('\n'),
          r,
        );
      }),
    );

  const url = program.command('url').description('signed URLs');
  url
    .command('sign <bucket> <key>')
    .description('a URL allowing one download (or, with --upload, one upload) of an object until it expires, signed with the server key')
    .option('--upload', 'a single-use upload (PUT) URL instead of a download URL')
    .option('--version-id <id>', 'a download of that version instead of the head')
    .option('--expires-in <seconds>', 'validity in seconds (default FILES_REST_SIGNED_URL_EXPIRES, at most FILES_REST_SIGNED_URL_MAX_EXPIRES)')
    .action((bucketId: string, key: string, o: { upload?: boolean; versionId?: string; expiresIn?: string }) =>
      withCore(async (core, out) => {
        const max = core.config.signedUrlMaxExpires;
        const expiresIn = o.expiresIn === undefined ? core.config.signedUrlExpires : Number(o.expiresIn);
        if (!Number.isSafeInteger(expiresIn) || expiresIn < 1 || expiresIn > max) {
          throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'expires-in', message: `expected whole seconds from 1 to ${max} (FILES_REST_SIGNED_URL_MAX_EXPIRES)` }] });
        }
        const versionId = o.versionId === undefined ? null : parseUuid(o.versionId);
        if (versionId === null && o.versionId !== undefined) throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'version-id', message: 'not a UUID' }] });
        if (versionId !== null && o.upload) throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'version-id', message: 'an upload URL is for the object, not a version' }] });
        const bucket = await getLiveBucket(core.ctx.db, parseUuid(bucketId) ?? bucketId);
        const action = o.upload ? 'upload' : 'download';
        const grant = newGrant(action, { bucketId: bucket.id, key, versionId, expiresIn });
        const signed = `${adminLinks(core).object(bucket.id, key)}?${signedQuery(requireServerKeys(core.config, null), grant)}`;
        const expires = new Date(grant.expires * 1000).toISOString();
        out.print(signed, { url: signed, method: grant.method, action, bucket: bucket.id, key, version_id: versionId, expires, single_use: grant.nonce !== null });
      }),
    );

  const token = program.command('token').description('API tokens');
  token
    .command('create')
    .description('create an API token; prints it once')
    .option('--bucket <id>', 'limit the token to one bucket')
    .option('--actions <list>', 'comma-separated actions (default: all)')
    .option('--expires-in-days <days>', 'expiry in days')
    .action((o: { bucket?: string; actions?: string; expiresInDays?: string }) =>
      withCore(async (core, out) => {
        const days = o.expiresInDays === undefined ? null : Number(o.expiresInDays);
        if (days !== null && !(days > 0)) throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'expires-in-days', message: 'must be a positive number' }] });
        const { info, token: secret } = await createToken(core.ctx.db, {
          bucket: o.bucket ?? null,
          actions: o.actions ? o.actions.split(',').map((s) => s.trim()).filter(Boolean) : null,
          expiresInDays: days,
        });
        const expires = info.expires === null ? null : isoMicros(info.expires);
        out.print(
          `${secret}\n(token id ${info.id}; ${info.bucket ? `bucket ${info.bucket}` : 'all buckets'}; actions ${info.actions.join(',')}; expires ${expires ?? 'never'})`,
          { id: info.id, token: secret, bucket: info.bucket, actions: info.actions, expires },
        );
      }),
    );
  token
    .command('revoke <id>')
    .description('revoke a token')
    .action((id: string) =>
      withCore(async (core, out) => {
        await revokeToken(core.ctx.db, id);
        out.print(`token ${id} revoked`, { id, revoked: true });
      }),
    );

  s3KeyCommands(program, withCore);

  const task = program.command('task').description('background tasks');
  task
    .command('list')
    .description('background tasks and their state')
    .option('--failed', 'only failed tasks')
    .option('--limit <n>', 'how many', '100')
    .action((o: { failed?: boolean; limit: string }) =>
      withCore(async (core, out) => {
        const tasks = await core.queue.list({ state: o.failed ? 'failed' : undefined, limit: Number(o.limit) || 100 });
        const docs = tasks.map((t) => ({
          id: t.id, name: t.name, state: t.state, attempts: t.attempts, max_attempts: t.maxAttempts, payload: t.payload,
          run_at: isoMicros(t.runAt), last_error: t.lastError, created: isoMicros(t.created), updated: isoMicros(t.updated),
        }));
        out.print(
          docs.length
            ? docs.map((d) => `${d.id}\t${d.name}\t${d.state}\t${d.attempts}/${d.max_attempts}\t${d.last_error ? d.last_error.split('\n')[0] : ''}`).join('\n')
            : 'no tasks',
          docs,
        );
      }),
    );
  task
    .command('retry <id>')
    .description('queue a failed task again')
    .action((id: string) =>
      withCore(async (core, out) => {
        const t = await core.queue.retry(Number(id));
        out.print(`task ${t.id} queued again`, { queued: 1, id: t.id });
      }),
    );
  task
    .command('run <name>')
    .description(`run a periodic task now (${PERIODIC_TASKS.join(', ')}) and wait for it`)
    .action((name: string) =>
      withCore(async (core, out) => {
        const def = taskDefinitions(core).find((d) => d.name === name && d.periodicSeconds);
        if (!def) {
          const names = taskDefinitions(core).filter((d) => d.periodicSeconds).map((d) => d.name);
          throw new Error(`unknown periodic task ${name} (known: ${names.join(', ')})`);
        }
        const t0 = Date.now();
        await def.run({} as never, { signal: new AbortController().signal, log: core.log, task: null as never });
        out.print(`${name} done in ${Date.now() - t0} ms`, { name, done: true, ms: Date.now() - t0 });
      }),
    );
}
