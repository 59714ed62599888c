// The S3 door as a backup target: Debian's duplicity 0.8 (unmodified; its boto3 backend, Debian's
// python3-boto3, SigV4, path-style requests to an IP endpoint; --s3-endpoint-url and no region, so
// boto3 signs for us-east-1) backs up a directory as a user would, and the AWS SDK v3 checks through
// the door what the bucket holds. The directory has small files, an empty file, a 12 MiB file, names
// with spaces and non-ASCII, a symlink and a subdirectory; the backup prefix itself has a space and a
// non-ASCII letter, and already holds 1001 other objects, so that duplicity's own files are on the
// second page of every listing it makes (boto3 lists with ListObjects v1, encoding-type=url, and
// follows the Marker). Volumes are 10 MiB and boto3's multipart chunk 5 MiB: a volume goes up as a
// multipart upload of three parts, a small one as one PUT, and a volume comes back with
// s3transfer's ranged GETs (8 MiB pieces).
//
// Scenarios, in order (each builds on the one before): a GnuPG-encrypted full backup, whose volumes'
// bytes are those duplicity hashed in its manifest; `verify` and `verify --compare-data` (which must
// notice a changed file); a restore on a "new machine" (empty archive dir and HOME: everything comes
// from the door), compared file by file, byte for byte; an incremental backup after changes,
// `collection-status`, `list-current-files`; a restore of the latest state, and of single files as
// they were at the full backup (-t, --file-to-restore); `remove-older-than` and
// `remove-all-but-n-full` deleting old chains through the door (gone from the listing, a delete
// marker each: buckets here are versioned; the other objects untouched); a backup with
// --no-encryption, read back both by the SDK (plain gzip/tar, the manifest byte for byte) and by
// duplicity; a wrong secret, which must fail cleanly with the door's 403 and store nothing; and
// --s3-use-server-side-encryption, which files-rest refuses by design (README: NotImplemented rather
// than a silent success), and --s3-use-glacier (an archive class files-rest does not offer), which
// must fail cleanly too, leaving no object and no open upload, while --s3-use-ia (a class of
// immediate access) is stored as STANDARD.
//
// Every duplicity runs in a child process (execFile: the server runs in this process), with its
// HOME, archive dir and TMPDIR in a temporary directory, --num-retries 1 (a failing request is never
// hidden by duplicity's retries, nor waited for 30 s), and a timeout. The gpg-agents GnuPG starts
// for those HOMEs are stopped in after(). duplicity (and python3-boto3, which its S3 backend needs)
// is installed with apt-get when it can be (root on Debian), else the tests are skipped with the
// reason. Local-disk storage only, as in s3-tools.test.ts.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { gunzipSync } from 'node:zlib';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectVersionsCommand,
  PutObjectCommand,
  S3Client,
  ListObjectsV2Command,
  paginateListObjectsV2,
} from '@aws-sdk/client-s3';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { doorClient, getBytes, newDoorKey, s3Code } from './support/s3-door.js';
import { findOrInstall } from './support/system.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const DUPLICITY = '/usr/bin/duplicity';
const PATH = '/usr/bin:/bin:/usr/sbin:/sbin';
const MiB = 1024 * 1024;
const PASSPHRASE = 'correct horse battery staple';
/** duplicity's --volsize and --s3-multipart-chunk-size (MB, as duplicity counts: MiB). */
const VOLSIZE = 10;
const CHUNK = 5;
/** Where the backups go in the bucket: a space and a non-ASCII letter, as a user may name it. */
const PREFIX = 'home backups/été/';
/** Other objects already under the prefix, named to sort before duplicity's: a full first page. */
const OTHERS = 1001;

interface Run {
  code: number;
  /** stdout then stderr: duplicity writes its notices to one, its warnings and errors to the other. */
  out: string;
}

function sha256(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

/** The epoch second of a duplicity time in a file name (`20261128T231728Z`). */
function dupTime(s: string): number {
  const m = /^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z$/.exec(s);
  assert.ok(m, `not a duplicity time: ${s}`);
  return Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!) / 1000;
}

const nowSecond = () => Math.floor(Date.now() / 1000);

/** Waits until the clock's second is past `s`: duplicity names its backups by the second. */
async function pastSecond(s: number): Promise<void> {
  while (nowSecond() <= s) await sleep(50);
}

type Entry = { type: 'dir'; mode: number } | { type: 'file'; mode: number; size: number; sha256: string; mtime: number } | { type: 'link'; target: string };

/** Every entry under `root` (not root itself), by relative path: type, mode, bytes, mtime (s), link target. */
async function tree(root: string): Promise<Record<string, Entry>> {
  const out: Record<string, Entry> = {};
  async function walk(rel: string): Promise<void> {
    for (const name of (await readdir(join(root, rel))).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const p = join(root, r);
      const st = await lstat(p);
      if (st.isSymbolicLink()) out[r] = { type: 'link', target: await readlink(p) };
      else if (st.isDirectory()) {
        out[r] = { type: 'dir', mode: st.mode & 0o7777 };
        await walk(r);
      } else {
        const b = await readFile(p);
        out[r] = { type: 'file', mode: st.mode & 0o7777, size: b.length, sha256: sha256(b), mtime: Math.floor(st.mtimeMs / 1000) };
      }
    }
  }
  await walk('');
  return out;
}

/** A computer duplicity runs on: its HOME (GnuPG's home in it) and duplicity's archive dir (its cache). */
interface Machine {
  home: string;
  archive: string;
  tmp: string;
}

const skipOnS3 = testStorage() === 's3' ? 'local-disk storage only (the S3-storage pass keeps objects in memory)' : false;

describe('duplicity backs up a directory to the S3 door (boto3+s3)', { skip: skipOnS3 }, () => {
  let t: TestServer | undefined;
  let s3: S3Client | undefined;
  let skip: string | false = false;
  let work = '';
  let bucket = '';
  let accessKeyId = '';
  let secret = '';
  let src = '';
  let laptop: Machine;
  const machines: Machine[] = [];
  let url = '';
  /** The source tree at the full backup, and what the files that the incremental changes held then. */
  let atFull: Record<string, Entry> = {};
  const oldBytes = new Map<string, Buffer>();
  /** The second at which the full backup had ended (its time is at or before it; the incremental's after it). */
  let fullDone = 0;
  let incDone = 0;
  let fullTime = '';
  let fullVolumes = 0;
  let incTime = '';

  async function machine(name: string): Promise<Machine> {
    const m = { home: join(work, name, 'home'), archive: join(work, name, 'archive'), tmp: join(work, name, 'tmp') };
    for (const d of [m.home, m.archive, m.tmp]) await mkdir(d, { recursive: true });
    machines.push(m);
    return m;
  }

  /** duplicity <command> [options] <args…> on machine `m`, with the door's endpoint and the key's secret (or `opts.secret`). */
  function dup(m: Machine, command: string, args: string[], opts: { secret?: string; timeout?: number } = {}): Promise<Run> {
    const argv = [
      command,
      '--archive-dir', m.archive,
      '--s3-endpoint-url', t!.s3Url,
      '--volsize', String(VOLSIZE),
      '--s3-multipart-chunk-size', String(CHUNK),
      '--num-retries', '1',
      ...args,
    ];
    const env = {
      PATH,
      LC_ALL: 'C.UTF-8',
      HOME: m.home,
      TMPDIR: m.tmp,
      AWS_ACCESS_KEY_ID: accessKeyId,
      AWS_SECRET_ACCESS_KEY: opts.secret ?? secret,
      PASSPHRASE,
    };
    return new Promise((resolve) => {
      execFile(DUPLICITY, argv, { env, timeout: opts.timeout ?? 60_000, maxBuffer: 16 * MiB }, (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
        resolve({ code, out: `${stdout}${stderr}${err && code === -1 ? `\n${String(err)}` : ''}` });
      });
    });
  }

  function ok(r: Run, what: string): Run {
    assert.equal(r.code, 0, `duplicity ${what}: exit ${r.code}:\n${r.out.slice(-6000)}`);
    return r;
  }

  const get = (key: string) => getBytes(s3!, bucket, key);

  /** Every key under `prefix`, every page of ListObjectsV2, with size and ETag. */
  async function objects(prefix: string): Promise<Map<string, { size: number; etag: string }>> {
    const out = new Map<string, { size: number; etag: string }>();
    for await (const page of paginateListObjectsV2({ client: s3! }, { Bucket: bucket, Prefix: prefix })) {
      for (const c of page.Contents ?? []) out.set(c.Key!, { size: c.Size!, etag: c.ETag! });
    }
    return out;
  }

  /** duplicity's files in the bucket (under PREFIX), by name without the prefix. */
  async function dupFiles(prefix = PREFIX): Promise<string[]> {
    return [...(await objects(`${prefix}duplicity-`)).keys()].map((k) => k.slice(prefix.length)).sort();
  }

  /** The names duplicity gives a full backup of `vols` volumes at `time` (encrypted: `.gpg`, else plain). */
  function fullNames(time: string, vols: number, gpg = true): string[] {
    const volumes = Array.from({ length: vols }, (_, i) => `duplicity-full.${time}.vol${i + 1}.difftar.${gpg ? 'gpg' : 'gz'}`);
    return [`duplicity-full-signatures.${time}.sigtar.${gpg ? 'gpg' : 'gz'}`, `duplicity-full.${time}.manifest${gpg ? '.gpg' : ''}`, ...volumes].sort();
  }

  /** The plain manifest duplicity keeps in machine `m`'s archive dir for the set named `name`. */
  async function localManifest(m: Machine, name: string): Promise<string> {
    const [sub] = await readdir(m.archive);
    return readFile(join(m.archive, sub!, name), 'utf8');
  }

  /** Volume number → SHA-1 of the volume file duplicity uploaded, as its manifest says. */
  function volumeHashes(manifest: string): Map<number, string> {
    const out = new Map<number, string>();
    for (const block of manifest.split(/^(?=Volume \d+:)/m).slice(1)) {
      const m = /^Volume (\d+):[\s\S]*?Hash SHA1 ([0-9a-f]{40})/.exec(block);
      assert.ok(m, `a volume without its hash in the manifest:\n${block}`);
      out.set(Number(m[1]), m[2]!);
    }
    return out;
  }

  /**
   * Each volume of a set is in the bucket with the bytes duplicity hashed (SHA-1 in its manifest);
   * one larger than the multipart chunk went up in parts (`"…-N"` ETag, N = size / 5 MiB rounded up),
   * a smaller one in one PUT. Returns the volumes' total size.
   */
  async function checkVolumes(manifest: string, volumeName: (n: number) => string): Promise<number> {
    const hashes = volumeHashes(manifest);
    assert.ok(hashes.size >= 2, `expected at least two volumes:\n${manifest}`);
    const listed = await objects(`${PREFIX}duplicity-`);
    let total = 0;
    for (const [n, sha1] of hashes) {
      const key = `${PREFIX}${volumeName(n)}`;
      const body = await get(key);
      assert.equal(createHash('sha1').update(body).digest('hex'), sha1, `${key}: not the bytes duplicity uploaded`);
      const l = listed.get(key);
      assert.ok(l, `${key} is not listed`);
      assert.equal(l.size, body.length, `${key}: listed size`);
      const head = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
      assert.equal(head.ContentLength, body.length, `${key}: HEAD's Content-Length`);
      assert.equal(head.ETag, l.etag, `${key}: the same ETag in HEAD and the listing`);
      if (body.length > CHUNK * MiB) assert.match(l.etag, new RegExp(`^"[0-9a-f]{32}-${Math.ceil(body.length / (CHUNK * MiB))}"$`), `${key} (${body.length} bytes): a multipart upload of ${CHUNK} MiB parts`);
      else assert.match(l.etag, /^"[0-9a-f]{32}"$/, `${key} (${body.length} bytes): one PUT`);
      total += body.length;
    }
    return total;
  }

  before(async () => {
    const found = await findOrInstall('duplicity', [DUPLICITY]);
    const boto3 = found.skip ? found : await findOrInstall('python3-boto3', ['/usr/lib/python3/dist-packages/boto3/__init__.py']);
    const gpg = boto3.skip ? boto3 : await findOrInstall('gnupg', ['/usr/bin/gpg']);
    if (gpg.skip) {
      skip = gpg.skip;
      console.log(`# duplicity tests skipped: ${skip}`);
      return;
    }
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    accessKeyId = k.accessKeyId;
    secret = k.secret;
    s3 = doorClient(t, k);
    bucket = `duplicity-${randomBytes(4).toString('hex')}`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    url = `boto3+s3://${bucket}/${PREFIX.replace(/\/$/, '')}`;
    // Other objects under the prefix (names with a space and non-ASCII, sorting before "duplicity-").
    const others = Array.from({ length: OTHERS }, (_, i) => `${PREFIX}aaa notes/café ${String(i).padStart(4, '0')}.txt`);
    for (let i = 0; i < others.length; i += 50) {
      await Promise.all(others.slice(i, i + 50).map((Key) => s3!.send(new PutObjectCommand({ Bucket: bucket, Key, Body: Key }))));
    }
    work = await mkdtemp(join(tmpdir(), 'files-rest-duplicity-'));
    laptop = await machine('laptop');
    src = join(work, 'src');
    await mkdir(join(src, 'sub dir'), { recursive: true });
    await writeFile(join(src, 'notes.txt'), 'Things to back up.\n');
    await writeFile(join(src, 'a file with spaces.txt'), 'spaces in the name\n');
    await writeFile(join(src, 'sub dir', 'naïve café – ünïcødé.txt'), 'non-ASCII: naïve café, 日本語\n');
    await writeFile(join(src, '日本語.txt'), randomBytes(3000));
    await writeFile(join(src, 'empty'), '');
    await writeFile(join(src, 'big.bin'), randomBytes(12 * MiB));
    await symlink('notes.txt', join(src, 'link to notes'));
  });

  after(async () => {
    // The gpg-agent GnuPG started for each HOME (it outlives duplicity): stopped by its own tool.
    for (const m of machines) {
      if (!existsSync(join(m.home, '.gnupg'))) continue;
      await new Promise<void>((resolve) => execFile('/usr/bin/gpgconf', ['--homedir', join(m.home, '.gnupg'), '--kill', 'gpg-agent'], { env: { PATH, HOME: m.home }, timeout: 10_000 }, () => resolve()));
    }
    s3?.destroy();
    await t?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('a full backup (GnuPG): volumes, manifest and signatures in the bucket, each volume with the bytes duplicity hashed, the large ones as multipart uploads', async (ctx) => {
    if (skip) return ctx.skip(skip);
    atFull = await tree(src);
    for (const f of ['a file with spaces.txt', 'big.bin', 'empty']) oldBytes.set(f, await readFile(join(src, f)));
    const r = ok(await dup(laptop, 'full', [src, url]), 'full');
    fullDone = nowSecond();
    assert.match(r.out, /^Errors 0$/m);
    assert.match(r.out, new RegExp(`^SourceFiles ${Object.keys(atFull).length + 1}$`, 'm'), 'every file, the directories and the root');

    const names = await dupFiles();
    const full = /^duplicity-full\.(\d{8}T\d{6}Z)\.manifest\.gpg$/.exec(names.find((n) => n.endsWith('.manifest.gpg')) ?? '');
    assert.ok(full, `no full backup's manifest among ${names.join(', ')}`);
    fullTime = full[1]!;
    assert.ok(dupTime(fullTime) <= fullDone && dupTime(fullTime) >= fullDone - 60, `backup time ${fullTime}`);

    const manifest = await localManifest(laptop, `duplicity-full.${fullTime}.manifest`);
    fullVolumes = volumeHashes(manifest).size;
    assert.deepEqual(names, fullNames(fullTime, fullVolumes), 'the full backup is these files, nothing more, nothing missing');
    const total = await checkVolumes(manifest, (n) => `duplicity-full.${fullTime}.vol${n}.difftar.gpg`);
    assert.ok(total > 12 * MiB, `random bytes do not compress: ${total} bytes of volumes`);
    // Encrypted: the manifest in the bucket is not the plain one duplicity keeps locally.
    const remote = await get(`${PREFIX}duplicity-full.${fullTime}.manifest.gpg`);
    assert.ok(!remote.includes('Volume 1:') && !remote.includes('big.bin'), 'the stored manifest is encrypted');
    // The objects that were there before are untouched.
    assert.equal((await objects(`${PREFIX}aaa notes/`)).size, OTHERS);
  });

  it('verify reads every volume back through the door: 0 differences, also with --compare-data; a changed file is found', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const count = Object.keys(atFull).length + 1;
    const v = ok(await dup(laptop, 'verify', [url, src]), 'verify');
    assert.match(v.out, new RegExp(`Verify complete: ${count} files compared, 0 differences found\\.`));
    const c = ok(await dup(laptop, 'verify', ['--compare-data', url, src]), 'verify --compare-data');
    assert.match(c.out, new RegExp(`Verify complete: ${count} files compared, 0 differences found\\.`));

    // The same length and mtime, other bytes: only reading the data back can tell.
    const p = join(src, 'notes.txt');
    const before = await readFile(p);
    const st = await lstat(p);
    await writeFile(p, Buffer.from(before.toString().toUpperCase()));
    await utimes(p, st.atime, st.mtime);
    try {
      const d = await dup(laptop, 'verify', ['--compare-data', url, src]);
      assert.equal(d.code, 1, `verify --compare-data of a changed file: exit ${d.code}\n${d.out.slice(-4000)}`);
      assert.match(d.out, /Difference found: Data for file notes\.txt is different/);
      assert.match(d.out, new RegExp(`Verify complete: ${count} files compared, 1 difference found\\.`));
    } finally {
      await writeFile(p, before);
      await utimes(p, st.atime, st.mtime);
    }
  });

  it('a new machine (empty archive dir and HOME) restores the whole backup from the door: every file byte for byte, the empty file, the symlink, the names', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const fresh = await machine('new-machine');
    const out = join(work, 'restore-full');
    const r = ok(await dup(fresh, 'restore', [url, out]), 'restore on a new machine');
    assert.match(r.out, /Copying duplicity-full\.\d{8}T\d{6}Z\.manifest\.gpg to local cache/, 'the metadata came from the door');
    assert.deepEqual(await tree(out), atFull);
    const s = ok(await dup(fresh, 'collection-status', [url]), 'collection-status');
    assert.match(s.out, /Found 0 secondary backup chains\./);
    assert.match(s.out, /Number of contained backup sets: 1\n/);
    assert.match(s.out, new RegExp(`Total number of contained volumes: ${fullVolumes}\\n`));
  });

  it('an incremental backup after changing, removing and adding files; collection-status and list-current-files see it', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await writeFile(join(src, 'a file with spaces.txt'), 'spaces in the name\nand a second line\n');
    const big = await readFile(join(src, 'big.bin'));
    randomBytes(MiB).copy(big, 5 * MiB);
    await writeFile(join(src, 'big.bin'), big);
    await rm(join(src, 'empty'));
    await writeFile(join(src, 'sub dir', 'new – ü.txt'), 'added after the full backup\n');
    await pastSecond(fullDone);
    const r = ok(await dup(laptop, 'incr', [src, url]), 'incr');
    incDone = nowSecond();
    assert.match(r.out, /^Errors 0$/m);
    assert.match(r.out, /^DeletedFiles 1$/m);

    const inc = (await dupFiles()).filter((n) => !fullNames(fullTime, fullVolumes).includes(n));
    const m = /^duplicity-inc\.(\d{8}T\d{6}Z)\.to\.(\d{8}T\d{6}Z)\.manifest\.gpg$/.exec(inc.find((n) => n.endsWith('.manifest.gpg')) ?? '');
    assert.ok(m, `no incremental manifest among ${inc.join(', ')}`);
    assert.equal(m[1], fullTime, 'the incremental follows the full backup');
    incTime = m[2]!;
    assert.ok(dupTime(incTime) > fullDone && dupTime(incTime) <= incDone);
    const vols = inc.filter((n) => n.includes('.difftar.')).length;
    assert.ok(vols >= 1);
    assert.deepEqual(inc, [
      ...Array.from({ length: vols }, (_, i) => `duplicity-inc.${fullTime}.to.${incTime}.vol${i + 1}.difftar.gpg`),
      `duplicity-inc.${fullTime}.to.${incTime}.manifest.gpg`,
      `duplicity-new-signatures.${fullTime}.to.${incTime}.sigtar.gpg`,
    ].sort());

    const s = ok(await dup(laptop, 'collection-status', [url]), 'collection-status');
    assert.match(s.out, /Found 0 secondary backup chains\./);
    assert.match(s.out, /Number of contained backup sets: 2\n/);
    assert.match(s.out, new RegExp(`^\\s+Full\\s+.*\\s${fullVolumes}$`, 'm'));
    assert.match(s.out, /^\s+Incremental\s+/m);

    const l = ok(await dup(laptop, 'list-current-files', [url]), 'list-current-files');
    // Each line: a ctime-style date (24 characters), a space, the path.
    const listed = l.out.split('\n').filter((x) => /^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} /.test(x)).map((x) => x.slice(25)).sort();
    assert.deepEqual(listed, ['.', ...Object.keys(await tree(src))].sort());
  });

  it('restore: the latest state on a new machine, byte for byte; single files as they were at the full backup (-t, --file-to-restore)', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const fresh = await machine('second-machine');
    const out = join(work, 'restore-latest');
    ok(await dup(fresh, 'restore', [url, out]), 'restore of the latest state');
    const now = await tree(src);
    assert.deepEqual(await tree(out), now);

    // The full backup's time is at or before fullDone, the incremental's after it.
    for (const f of ['a file with spaces.txt', 'big.bin', 'empty']) {
      const one = join(work, `restore-one-${sha256(Buffer.from(f)).slice(0, 8)}`);
      ok(await dup(laptop, 'restore', ['-t', String(fullDone), '--file-to-restore', f, url, one]), `restore -t ${fullDone} --file-to-restore ${f}`);
      const got = await readFile(one);
      assert.equal(got.length, oldBytes.get(f)!.length, `${f} as it was at the full backup: size`);
      assert.ok(got.equals(oldBytes.get(f)!), `${f} as it was at the full backup`);
    }
    assert.ok(!(await readFile(join(src, 'big.bin'))).equals(oldBytes.get('big.bin')!), 'big.bin was changed since');
  });

  it('remove-older-than and remove-all-but-n-full delete old chains through the door: gone from the listing, a delete marker each, other objects untouched', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const chain1 = await dupFiles();
    await pastSecond(incDone);
    const beforeSecond = nowSecond();
    ok(await dup(laptop, 'full', [src, url]), 'second full');
    const secondDone = nowSecond();
    const chain2 = (await dupFiles()).filter((n) => !chain1.includes(n));
    assert.ok(chain2.length >= 4, `the second full backup: ${chain2.join(', ')}`);

    // Older than the second full backup: the first chain (full and incremental).
    const r = ok(await dup(laptop, 'remove-older-than', [String(beforeSecond), '--force', url]), 'remove-older-than --force');
    assert.match(r.out, /Deleting backup chain at time:/);
    assert.deepEqual(await dupFiles(), chain2, 'only the second chain is listed');
    const versions = await s3!.send(new ListObjectVersionsCommand({ Bucket: bucket, Prefix: `${PREFIX}duplicity-` }));
    assert.ok(!versions.IsTruncated);
    for (const n of chain1) {
      const key = `${PREFIX}${n}`;
      const markers = (versions.DeleteMarkers ?? []).filter((d) => d.Key === key);
      assert.equal(markers.length, 1, `${key}: one delete marker`);
      assert.equal(markers[0]!.IsLatest, true, `${key}: the delete marker is the latest version`);
      assert.equal((versions.Versions ?? []).filter((v) => v.Key === key).length, 1, `${key}: the version it hides is kept (versioned bucket)`);
      assert.deepEqual(await s3Code(s3!.send(new GetObjectCommand({ Bucket: bucket, Key: key }))), { name: 'NoSuchKey', status: 404 }, key);
    }

    await pastSecond(secondDone);
    ok(await dup(laptop, 'full', [src, url]), 'third full');
    const chain3 = (await dupFiles()).filter((n) => !chain2.includes(n));
    assert.ok(chain3.length >= 4, `the third full backup: ${chain3.join(', ')}`);
    const k = ok(await dup(laptop, 'remove-all-but-n-full', ['1', '--force', url]), 'remove-all-but-n-full 1 --force');
    assert.match(k.out, /Deleting backup chain at time:/);
    assert.deepEqual(await dupFiles(), chain3, 'only the last full backup is listed');
    for (const n of chain2) assert.deepEqual(await s3Code(s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: `${PREFIX}${n}` }))), { name: 'NotFound', status: 404 }, n);

    // A machine that knows nothing sees one chain of one set; the other objects are all still there.
    const s = ok(await dup(await machine('third-machine'), 'collection-status', [url]), 'collection-status after the removals');
    assert.match(s.out, /Found 0 secondary backup chains\./);
    assert.match(s.out, /Number of contained backup sets: 1\n/);
    assert.match(s.out, /No orphaned or incomplete backup sets found\./);
    assert.equal((await objects(`${PREFIX}aaa notes/`)).size, OTHERS);
  });

  it('a backup with --no-encryption is plain gzip and tar in the bucket (the manifest byte for byte) and restores byte for byte', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const prefix = 'plain/';
    const plainUrl = `boto3+s3://${bucket}/plain`;
    const home = await machine('plain');
    ok(await dup(home, 'full', ['--no-encryption', src, plainUrl]), 'full --no-encryption');
    const names = await dupFiles(prefix);
    const time = /^duplicity-full\.(\d{8}T\d{6}Z)\.manifest$/.exec(names.find((n) => n.endsWith('.manifest')) ?? '')?.[1];
    assert.ok(time, `no plain manifest among ${names.join(', ')}`);
    const manifestName = `duplicity-full.${time}.manifest`;
    const manifest = await localManifest(home, manifestName);
    const volumes = volumeHashes(manifest);
    assert.deepEqual(names, fullNames(time, volumes.size, false));
    assert.ok((await get(`${prefix}${manifestName}`)).equals(Buffer.from(manifest)), 'the manifest in the bucket is the one duplicity keeps');
    const tars: Buffer[] = [];
    for (const [n, sha1] of volumes) {
      const body = await get(`${prefix}duplicity-full.${time}.vol${n}.difftar.gz`);
      assert.equal(createHash('sha1').update(body).digest('hex'), sha1, `volume ${n}`);
      tars.push(gunzipSync(body));
    }
    // Gzipped tars of the snapshot: each small file is in one of them, under its name, as it is.
    for (const f of ['notes.txt', 'a file with spaces.txt', 'sub dir/naïve café – ünïcødé.txt', '日本語.txt']) {
      const bytes = await readFile(join(src, f));
      assert.ok(tars.some((tar) => tar.includes(`snapshot/${f}`) && tar.includes(bytes)), `${f} in a volume`);
    }
    const out = join(work, 'restore-plain');
    ok(await dup(await machine('plain-reader'), 'restore', ['--no-encryption', plainUrl, out]), 'restore --no-encryption on a new machine');
    assert.deepEqual(await tree(out), await tree(src));
  });

  it('a wrong secret fails cleanly: a non-zero exit with the door\'s 403 to HeadBucket, nothing stored', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const r = await dup(await machine('wrong-secret'), 'full', [src, `boto3+s3://${bucket}/wrong`], { secret: `${secret.slice(0, -4)}XXXX` });
    assert.notEqual(r.code, 0, `a backup with a wrong secret succeeded:\n${r.out.slice(-4000)}`);
    assert.match(r.out, /An error occurred \(403\) when calling the HeadBucket operation: Forbidden/);
    assert.deepEqual([...(await objects('wrong/')).keys()], []);
    const uploads = await s3!.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: 'wrong/' }));
    assert.deepEqual(uploads.Uploads ?? [], []);
  });

  it('--s3-use-server-side-encryption is refused as files-rest documents (NotImplemented, not a silent success): a clean failure, no object, no open upload', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const r = await dup(await machine('sse'), 'full', ['--s3-use-server-side-encryption', src, `boto3+s3://${bucket}/sse`]);
    assert.notEqual(r.code, 0, `a backup asking for server-side encryption succeeded:\n${r.out.slice(-4000)}`);
    assert.match(r.out, /An error occurred \(NotImplemented\) when calling the CreateMultipartUpload operation: Server-side encryption \(x-amz-server-side-encryption\) is not supported/);
    assert.deepEqual([...(await objects('sse/')).keys()], []);
    const uploads = await s3!.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: 'sse/' }));
    assert.deepEqual(uploads.Uploads ?? [], []);
  });

  it('--s3-use-ia (STANDARD_IA, immediate access) is stored as STANDARD; --s3-use-glacier is refused, not ignored: a clean failure, no object, no open upload', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const ia = await dup(await machine('ia'), 'full', ['--s3-use-ia', src, `boto3+s3://${bucket}/ia`]);
    assert.equal(ia.code, 0, ia.out.slice(-4000));
    const stored = await s3!.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: 'ia/' }));
    assert.ok((stored.Contents ?? []).length >= 3, JSON.stringify(stored.Contents));
    assert.deepEqual([...new Set(stored.Contents!.map((c) => c.StorageClass))], ['STANDARD']);
    const r = await dup(await machine('glacier'), 'full', ['--s3-use-glacier', src, `boto3+s3://${bucket}/glacier`]);
    assert.notEqual(r.code, 0, `a backup asking for GLACIER succeeded:\n${r.out.slice(-4000)}`);
    assert.match(r.out, /An error occurred \(NotImplemented\) when calling the \w+ operation: The storage class GLACIER \(x-amz-storage-class\) is not supported/);
    assert.deepEqual([...(await objects('glacier/')).keys()], []);
    const uploads = await s3!.send(new ListMultipartUploadsCommand({ Bucket: bucket, Prefix: 'glacier/' }));
    assert.deepEqual(uploads.Uploads ?? [], []);
  });
});
