// git-annex through the S3 door, as research-data users drive it (DataLad keeps datasets this way):
// Debian's git-annex (unmodified, 10.20230126, built with the Haskell `aws` library) with S3 special
// remotes pointed at the door, path-style, while the AWS SDK v3 checks through the door what each
// bucket holds, byte for byte. Covered: initremote making the bucket and its annex-uuid object, or
// taking a bucket made with the SDK (fileprefix=, x-amz-meta-* headers) and refusing one whose
// annex-uuid names another remote; copy --to of a small file, a file under a non-ASCII directory with
// spaces, 3 MiB and 12 MiB; drop here and get back; fsck --fast (HEAD) and full (GET, checksum); drop
// --from (a DELETE: the current object is gone, its version stays behind a delete marker); chunk=1MiB
// (three chunk objects; datacenter=EU, the bucket's location); partsize= multipart uploads, and the
// part size S3 refuses as too small; versioning=yes (PutBucketVersioning); exporttree=yes with
// versioning=yes (version ids recorded from PUT answers, an old content fetched by ?versionId= once
// the file has changed, a rename made by CopyObject); importtree=yes (history built from
// ListObjectVersions, delete markers included); enableremote in a clone (credentials kept by
// enableremote, none in later commands' environment); wrong credentials (403, nothing created);
// `git annex testremote --fast` (git-annex's own checks of a remote, gpg's shared encryption too).
//
// Signatures: git-annex signs with SigV2 by default for a host that is not AWS. With signature=v4 its
// `aws` library (0.22.1) puts the host without its port in the canonical request while the Host
// header carries the port: on a non-default port the door refuses every request with
// SignatureDoesNotMatch, as S3 and every SigV4 server must (the Host header as sent is what is
// signed), and a test pins that. SigV4 is exercised on the default HTTP port: a plain TCP relay on
// 127.x.y.z:80 (a random loopback address) passes the bytes unchanged to the door, as a load balancer
// would; where port 80 cannot be bound (not root) that test is skipped with the reason.
//
// git-annex refuses loopback addresses unless annex.security.allowed-ip-addresses names them: the
// tests' global git config (HOME is a temporary directory) does. git-annex is installed with apt-get
// when it can be (root on Debian), else the tests are skipped with the reason. Local-disk storage
// only, as in s3-tools.test.ts: these tests are about the S3 door.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateBucketCommand,
  DeleteObjectCommand,
  GetBucketLocationCommand,
  GetBucketVersioningCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  ListObjectVersionsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { doorClient, multipartEtag, newDoorKey, s3Code } from './support/s3-door.js';
import { findOrInstall } from './support/system.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const GIT_ANNEX = '/usr/bin/git-annex';
const PATH = '/usr/bin:/bin';
const MiB = 1024 * 1024;
/**
 * git-annex sends a multipart upload's parts in a whole number of lazy-ByteString chunks
 * (Data.ByteString.Lazy's defaultChunkSize: 32 KiB less 16 bytes), rounding partsize= down.
 */
const HASKELL_CHUNK = 32_752;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function sha256(b: Buffer | string): string {
  return createHash('sha256').update(b).digest('hex');
}

/** The records of a `--json` run, one a line. */
function jsonRecords(stdout: string): { command: string; file: string | null; key: string; success: boolean }[] {
  return stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { command: string; file: string | null; key: string; success: boolean });
}

/** How many files a full fsck downloaded and found right ("(checksum...) ok", after a progress meter's \r). */
function checksummed(stdout: string): number {
  return (stdout.match(/\(checksum\.\.\.\) ok/g) ?? []).length;
}

/** The SHA256E key git-annex gives these bytes under a name with this extension. */
function annexKey(content: Buffer, ext: string): string {
  return `SHA256E-s${content.length}--${sha256(content)}${ext}`;
}

const skipOnS3 = testStorage() === 's3' ? 'local-disk storage only (the S3-storage pass keeps objects in memory)' : false;

describe('git-annex S3 special remotes through the S3 door', { skip: skipOnS3 }, () => {
  let t: TestServer | undefined;
  let s3: S3Client;
  let skip: string | false = false;
  let work = '';
  let home = '';
  let origin = '';
  let port = 0;
  let accessKeyId = '';
  let secret = '';
  /** 127.x.y.z, where the SigV4 relay listens on port 80 (see the header). */
  const relayHost = `127.${1 + (randomBytes(1)[0]! % 254)}.${randomBytes(1)[0]!}.${1 + (randomBytes(1)[0]! % 254)}`;
  let relay: net.Server | undefined;
  let relaySkip: string | false = false;
  const relaySockets = new Set<net.Socket>();
  const tag = randomBytes(3).toString('hex');
  /** The bucket of each scenario: lower-case, unique to this run. */
  const bucket = (name: string) => `annex-${tag}-${name}`;

  /** The files of the origin repository, by path. */
  const files = {
    small: 'small.txt',
    spaced: 'données/spa ce é ü.txt',
    big: 'big.bin',
    mp: 'mp.bin',
  } as const;
  const content = new Map<string, Buffer>([
    [files.small, Buffer.from('hello, git-annex through the S3 door\n')],
    [files.spaced, Buffer.from('a name with spaces and non-ASCII, in a non-ASCII directory\n')],
    [files.big, randomBytes(3 * MiB)],
    [files.mp, randomBytes(12 * MiB)],
  ]);
  const bytesOf = (f: string) => content.get(f)!;

  /**
   * A child's environment. No AWS_* credentials unless given: as its documentation says, git-annex
   * needs them only for initremote and enableremote, which keep them in .git/annex/creds/ (see
   * `creds()`); every other command uses those.
   */
  function env(over: Record<string, string> = {}): Record<string, string> {
    return { PATH, HOME: home, LC_ALL: 'C.UTF-8', GIT_CONFIG_NOSYSTEM: '1', ...over };
  }

  /** The access key's credentials as git-annex takes them at initremote and enableremote; `over` replaces either. */
  function creds(over: Record<string, string> = {}): Record<string, string> {
    return { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secret, ...over };
  }

  function run(cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string>; timeout?: number } = {}): Promise<Run> {
    return new Promise((resolve) => {
      execFile(cmd, args, { env: opts.env ?? env(), cwd: opts.cwd, timeout: opts.timeout ?? 60_000, maxBuffer: 64 * MiB }, (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
        resolve({ code, stdout, stderr: err && code === 1 && !stderr ? String(err) : stderr });
      });
    });
  }

  function ok(r: Run, what: string): Run {
    assert.equal(r.code, 0, `${what}: exit ${r.code}\n${r.stderr.slice(-6000)}\n${r.stdout.slice(-3000)}`);
    return r;
  }

  function fails(r: Run, what: string): Run {
    assert.notEqual(r.code, 0, `${what} should fail:\n${r.stdout.slice(-3000)}`);
    return r;
  }

  const annex = (repo: string, args: string[], over?: Record<string, string>, timeout?: number) => run(GIT_ANNEX, args, { cwd: repo, env: env(over), timeout });
  const git = (repo: string, args: string[]) => run('git', args, { cwd: repo });

  /** `git annex initremote NAME type=S3 …` against the door (SigV2 unless `extra` says otherwise). */
  function initremote(repo: string, name: string, b: string, extra: string[] = [], over?: Record<string, string>): Promise<Run> {
    return annex(repo, ['initremote', name, 'type=S3', 'encryption=none', 'host=127.0.0.1', `port=${port}`, 'protocol=http', 'requeststyle=path', `bucket=${b}`, ...extra], creds(over));
  }

  async function keyOf(repo: string, file: string): Promise<string> {
    return ok(await annex(repo, ['lookupkey', file]), `lookupkey ${file}`).stdout.trim();
  }

  async function uuidOf(repo: string, remote: string): Promise<string> {
    return ok(await git(repo, ['config', `remote.${remote}.annex-uuid`]), 'annex-uuid').stdout.trim();
  }

  async function sdkGet(b: string, key: string, versionId?: string): Promise<Buffer> {
    const r = await s3.send(new GetObjectCommand({ Bucket: b, Key: key, VersionId: versionId }));
    return Buffer.from(await r.Body!.transformToByteArray());
  }

  async function sdkAbsent(b: string, key: string): Promise<void> {
    assert.deepEqual(await s3Code(s3.send(new HeadObjectCommand({ Bucket: b, Key: key }))), { name: 'NotFound', status: 404 }, `${b}/${key} is gone`);
  }

  async function sdkKeys(b: string, prefix = ''): Promise<string[]> {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const r = await s3.send(new ListObjectsV2Command({ Bucket: b, Prefix: prefix, ContinuationToken: token }));
      out.push(...(r.Contents ?? []).map((c) => c.Key!));
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return out.sort();
  }

  /** The files whose content is here (`git annex find`), sorted. */
  async function present(repo: string, args: string[] = []): Promise<string[]> {
    const r = ok(await annex(repo, ['find', '--print0', ...args]), 'find');
    return r.stdout.split('\0').filter(Boolean).sort();
  }

  async function sameLocal(repo: string, file: string, want: Buffer): Promise<void> {
    const got = await readFile(join(repo, file));
    assert.equal(got.length, want.length, `${file}: length`);
    assert.ok(got.equals(want), `${file}: the same bytes`);
  }

  async function localContentGone(repo: string, file: string): Promise<void> {
    await assert.rejects(readFile(join(repo, file)), { code: 'ENOENT' }, `${file}: the content is not here`);
  }

  /** Path → annex key of every file of a commit's tree (a symlink's target or a pointer file names it). */
  async function treeKeys(repo: string, rev: string): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const entries = ok(await git(repo, ['ls-tree', '-r', '-z', rev]), 'ls-tree').stdout.split('\0').filter(Boolean);
    for (const e of entries) {
      const [meta, path] = [e.slice(0, e.indexOf('\t')), e.slice(e.indexOf('\t') + 1)];
      const blob = ok(await git(repo, ['cat-file', 'blob', meta.split(' ')[2]!]), 'cat-file').stdout.trim();
      out.set(path, basename(blob));
    }
    return out;
  }

  /** The bytes git-annex holds here for a key. */
  async function keyContent(repo: string, key: string): Promise<Buffer> {
    const where = ok(await annex(repo, ['contentlocation', key]), `contentlocation ${key}`).stdout.trim();
    return readFile(join(repo, where));
  }

  /** A TCP relay on relayHost:80 to the door: the bytes pass unchanged (see the header). */
  function startRelay(): Promise<net.Server | string> {
    const server = net.createServer((c) => {
      const u = net.connect(port, '127.0.0.1');
      relaySockets.add(c);
      relaySockets.add(u);
      c.pipe(u);
      u.pipe(c);
      const end = () => {
        c.destroy();
        u.destroy();
        relaySockets.delete(c);
        relaySockets.delete(u);
      };
      c.on('error', end);
      u.on('error', end);
      c.on('close', end);
      u.on('close', end);
    });
    return new Promise((resolve) => {
      server.once('error', (e) => resolve(`cannot listen on ${relayHost}:80 for the SigV4 relay (${(e as NodeJS.ErrnoException).code ?? String(e)}): SigV4 needs the default port with git-annex's aws library`));
      server.listen(80, relayHost, () => resolve(server));
    });
  }

  before(async () => {
    const found = await findOrInstall('git-annex', [GIT_ANNEX]);
    if (found.skip) {
      skip = found.skip;
      console.log(`# git-annex tests skipped: ${skip}`);
      return;
    }
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    accessKeyId = k.accessKeyId;
    secret = k.secret;
    port = Number(new URL(t.s3Url).port);
    s3 = doorClient(t, k);
    work = await mkdtemp(join(tmpdir(), 'files-rest-git-annex-'));
    home = join(work, 'home');
    await mkdir(home);
    const config: [string, string][] = [
      ['user.name', 'files-rest test'],
      ['user.email', 'test@files-rest.invalid'],
      ['init.defaultBranch', 'main'],
      // git-annex refuses private and loopback addresses unless they are named here.
      ['annex.security.allowed-ip-addresses', `127.0.0.1 ${relayHost}`],
    ];
    for (const [name, value] of config) ok(await run('git', ['config', '--global', name, value]), `git config ${name}`);
    const r = await startRelay();
    if (typeof r === 'string') relaySkip = r;
    else relay = r;

    origin = join(work, 'origin');
    await mkdir(origin);
    ok(await git(origin, ['init', '-q']), 'git init');
    ok(await annex(origin, ['init', 'origin']), 'git annex init');
    for (const [f, b] of content) {
      await mkdir(join(origin, dirname(f)), { recursive: true });
      await writeFile(join(origin, f), b);
    }
    ok(await annex(origin, ['add', '.']), 'git annex add');
    ok(await git(origin, ['commit', '-q', '-m', 'files']), 'git commit');
  });

  after(async () => {
    for (const s of relaySockets) s.destroy();
    if (relay) await new Promise<void>((resolve) => relay!.close(() => resolve()));
    s3?.destroy();
    await t?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('initremote (SigV2, the default for a host that is not AWS) creates the bucket and its annex-uuid; copy --to stores every file under its key, byte for byte', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('s3');
    ok(await initremote(origin, 's3', b), 'initremote s3');
    await s3.send(new HeadBucketCommand({ Bucket: b }));
    assert.equal((await sdkGet(b, 'annex-uuid')).toString(), await uuidOf(origin, 's3'), 'annex-uuid names the remote');
    ok(await annex(origin, ['copy', '--to', 's3', '.']), 'copy --to s3');
    const keys: string[] = [];
    for (const f of content.keys()) {
      const key = await keyOf(origin, f);
      keys.push(key);
      const got = await sdkGet(b, key);
      assert.equal(sha256(got), sha256(bytesOf(f)), `${f} (${key}) through the SDK`);
    }
    assert.deepEqual(await sdkKeys(b), ['annex-uuid', ...keys].sort());
    assert.deepEqual(await present(origin, ['--in', 's3']), [...content.keys()].sort());
  });

  it('drop here, then get --from s3: the same bytes; fsck --from s3, --fast (HEAD) and full (GET and checksum), finds every file', async (ctx) => {
    if (skip) return ctx.skip(skip);
    ok(await annex(origin, ['drop', '.']), 'drop');
    assert.deepEqual(await present(origin), []);
    for (const f of content.keys()) await localContentGone(origin, f);
    ok(await annex(origin, ['get', '--from', 's3', '.']), 'get --from s3');
    for (const [f, b] of content) await sameLocal(origin, f, b);
    const fast = ok(await annex(origin, ['fsck', '--from', 's3', '--fast', '--json', '.']), 'fsck --fast');
    assert.deepEqual(jsonRecords(fast.stdout).map((j) => [j.file, j.success]).sort(), [...content.keys()].sort().map((f) => [f, true]));
    const full = ok(await annex(origin, ['fsck', '--from', 's3', '.']), 'fsck');
    assert.equal(checksummed(full.stdout), content.size, 'a full fsck downloads and checksums every file');
  });

  it('drop --from s3 deletes the object: HEAD answers 404, and the version it was stays behind a delete marker', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('s3');
    const key = await keyOf(origin, files.small);
    ok(await annex(origin, ['drop', '--from', 's3', files.small]), 'drop --from s3');
    await sdkAbsent(b, key);
    const v = await s3.send(new ListObjectVersionsCommand({ Bucket: b, Prefix: key }));
    assert.deepEqual((v.DeleteMarkers ?? []).map((m) => [m.Key, m.IsLatest]), [[key, true]]);
    assert.deepEqual((v.Versions ?? []).map((x) => [x.Key, x.IsLatest, x.Size]), [[key, false, bytesOf(files.small).length]]);
    assert.deepEqual(await present(origin, ['--in', 's3', files.small]), [], 'git-annex knows the remote no longer has it');
    // fsck --fast asks the remote (HEAD) and agrees.
    ok(await annex(origin, ['fsck', '--from', 's3', '--fast', files.small]), 'fsck after drop');
    await sameLocal(origin, files.small, bytesOf(files.small));
  });

  it('a bucket made with the SDK is taken as it is (fileprefix=, x-amz-meta-* headers); a second remote cannot take it while its annex-uuid names the first', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('sdk');
    await s3.send(new CreateBucketCommand({ Bucket: b }));
    await s3.send(new PutObjectCommand({ Bucket: b, Key: 'readme.txt', Body: 'made with the SDK\n' }));
    ok(await initremote(origin, 'sdk', b, ['fileprefix=annex/', 'x-amz-meta-project=climate-2026']), 'initremote sdk');
    assert.deepEqual(await sdkKeys(b), ['annex/annex-uuid', 'readme.txt'], 'only the annex-uuid object is added');
    assert.equal((await sdkGet(b, 'annex/annex-uuid')).toString(), await uuidOf(origin, 'sdk'));
    ok(await annex(origin, ['copy', '--to', 'sdk', files.spaced, files.big]), 'copy --to sdk');
    for (const f of [files.spaced, files.big]) {
      const key = `annex/${await keyOf(origin, f)}`;
      assert.ok((await sdkGet(b, key)).equals(bytesOf(f)), `${key} through the SDK`);
      const head = await s3.send(new HeadObjectCommand({ Bucket: b, Key: key }));
      assert.deepEqual(head.Metadata, { project: 'climate-2026' }, 'x-amz-meta-project is kept');
      assert.equal(head.ContentLength, bytesOf(f).length);
    }
    ok(await annex(origin, ['drop', files.spaced]), 'drop here');
    ok(await annex(origin, ['get', '--from', 'sdk', files.spaced]), 'get --from sdk');
    await sameLocal(origin, files.spaced, bytesOf(files.spaced));

    // git-annex reads the annex-uuid object (GET) and compares its bytes with the new remote's uuid.
    const refused = fails(await initremote(origin, 'sdk2', b, ['fileprefix=annex/']), 'initremote sdk2 on the same bucket and prefix');
    assert.match(refused.stderr, /annex-uuid file indicates it is used by a different special remote/);
    assert.equal((await sdkGet(b, 'annex/annex-uuid')).toString(), await uuidOf(origin, 'sdk'), 'annex-uuid is unchanged');
  });

  it('chunk=1MiB: a 3 MiB file is three 1 MiB chunk objects; get and fsck read them back, drop --from deletes all three (datacenter=EU: the bucket\'s location)', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('chunked');
    ok(await initremote(origin, 'chunked', b, ['chunk=1MiB', 'datacenter=EU']), 'initremote chunked');
    assert.equal((await s3.send(new GetBucketLocationCommand({ Bucket: b }))).LocationConstraint, 'EU', 'CreateBucket\'s LocationConstraint');
    ok(await annex(origin, ['copy', '--to', 'chunked', files.big]), 'copy --to chunked');
    const key = await keyOf(origin, files.big);
    const hash = key.slice(key.indexOf('--'));
    const size = bytesOf(files.big).length;
    const chunks = [1, 2, 3].map((n) => `SHA256E-s${size}-S${MiB}-C${n}${hash}`);
    assert.deepEqual(await sdkKeys(b), ['annex-uuid', ...chunks].sort());
    const joined = Buffer.concat(await Promise.all(chunks.map((c) => sdkGet(b, c))));
    assert.equal(sha256(joined), sha256(bytesOf(files.big)), 'the chunks, end to end, are the file');
    ok(await annex(origin, ['drop', files.big]), 'drop here');
    ok(await annex(origin, ['get', '--from', 'chunked', files.big]), 'get --from chunked');
    await sameLocal(origin, files.big, bytesOf(files.big));
    assert.equal(checksummed(ok(await annex(origin, ['fsck', '--from', 'chunked', files.big]), 'fsck').stdout), 1);
    ok(await annex(origin, ['drop', '--from', 'chunked', files.big]), 'drop --from chunked');
    for (const c of chunks) await sdkAbsent(b, c);
    assert.deepEqual(await sdkKeys(b), ['annex-uuid']);
  });

  it('partsize=6MiB: a 12 MiB file goes as a multipart upload of three parts, its ETag the multipart one; get reads it back', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('multipart');
    ok(await initremote(origin, 'multipart', b, ['partsize=6MiB']), 'initremote multipart');
    ok(await annex(origin, ['copy', '--to', 'multipart', files.mp]), 'copy --to multipart');
    const key = await keyOf(origin, files.mp);
    const whole = bytesOf(files.mp);
    const part = Math.floor((6 * MiB) / HASKELL_CHUNK) * HASKELL_CHUNK; // 6 288 384
    const parts = [whole.subarray(0, part), whole.subarray(part, 2 * part), whole.subarray(2 * part)];
    const head = await s3.send(new HeadObjectCommand({ Bucket: b, Key: key }));
    assert.equal(head.ETag, multipartEtag(parts), 'the ETag of these three parts');
    assert.equal(head.ContentLength, whole.length);
    assert.equal(sha256(await sdkGet(b, key)), sha256(whole));
    assert.deepEqual((await s3.send(new ListMultipartUploadsCommand({ Bucket: b }))).Uploads ?? [], [], 'no upload left open');
    ok(await annex(origin, ['drop', files.mp]), 'drop here');
    ok(await annex(origin, ['get', '--from', 'multipart', files.mp]), 'get --from multipart');
    await sameLocal(origin, files.mp, whole);
  });

  it('partsize=5MiB makes parts of 5 240 320 bytes, under S3\'s 5 MiB least part: the completion is refused with EntityTooSmall, as S3 refuses it', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('smallparts');
    ok(await initremote(origin, 'smallparts', b, ['partsize=5MiB']), 'initremote smallparts');
    const r = fails(await annex(origin, ['copy', '--to', 'smallparts', files.mp]), 'copy --to smallparts');
    assert.match(r.stderr, /EntityTooSmall/);
    await sdkAbsent(b, await keyOf(origin, files.mp));
    assert.deepEqual(await present(origin, ['--in', 'smallparts']), []);
  });

  it('versioning=yes: initremote turns versioning on (PutBucketVersioning); copy, drop here, get back and fsck', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('versioned');
    const init = ok(await initremote(origin, 'versioned', b, ['versioning=yes']), 'initremote versioned');
    assert.match(init.stdout, /enabling bucket versioning/);
    assert.equal((await s3.send(new GetBucketVersioningCommand({ Bucket: b }))).Status, 'Enabled');
    ok(await annex(origin, ['copy', '--to', 'versioned', files.small, files.spaced]), 'copy --to versioned');
    for (const f of [files.small, files.spaced]) {
      const key = await keyOf(origin, f);
      const head = await s3.send(new HeadObjectCommand({ Bucket: b, Key: key }));
      assert.ok(head.VersionId, `${key} has a version id`);
      assert.ok((await sdkGet(b, key, head.VersionId)).equals(bytesOf(f)));
    }
    ok(await annex(origin, ['drop', files.small, files.spaced]), 'drop here');
    ok(await annex(origin, ['get', '--from', 'versioned', files.small, files.spaced]), 'get --from versioned');
    await sameLocal(origin, files.small, bytesOf(files.small));
    await sameLocal(origin, files.spaced, bytesOf(files.spaced));
    ok(await annex(origin, ['fsck', '--from', 'versioned', files.small, files.spaced]), 'fsck --from versioned');
  });

  it('exporttree=yes with versioning=yes: the tree is in the bucket under its own names; a changed file\'s old content is fetched by its recorded ?versionId=; a rename is a CopyObject', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('export');
    ok(await initremote(origin, 'export', b, ['exporttree=yes', 'versioning=yes']), 'initremote export');
    const v1 = Buffer.from('notes, first version\n');
    const v2 = Buffer.from('notes, second version: longer\n');
    await writeFile(join(origin, 'notes.txt'), v1);
    ok(await annex(origin, ['add', 'notes.txt']), 'add notes.txt');
    ok(await git(origin, ['commit', '-q', '-m', 'notes v1']), 'commit');
    const oldKey = await keyOf(origin, 'notes.txt');
    ok(await annex(origin, ['export', 'main', '--to', 'export']), 'export v1');
    assert.deepEqual(await sdkKeys(b), [...content.keys(), 'notes.txt'].sort(), 'the tree, under its file names');
    for (const [f, want] of content) assert.equal(sha256(await sdkGet(b, f)), sha256(want), `${f} through the SDK`);

    // The version id of each PUT's answer is recorded (remote metadata V in the git-annex branch).
    const hashdir = ok(await annex(origin, ['examinekey', '--format=${hashdirlower}', oldKey]), 'examinekey').stdout.trim();
    const rmet = ok(await git(origin, ['show', `git-annex:${hashdir}${oldKey}.log.rmet`]), 'the key\'s remote metadata').stdout;
    const recorded = /:V \+([^#\s]+)#notes\.txt/.exec(rmet)?.[1];
    assert.ok(recorded, `a version id recorded for notes.txt: ${rmet}`);
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: b, Key: 'notes.txt' }))).VersionId, recorded);

    // The file changes; the export replaces the object (a DELETE, then a PUT: a new version).
    await rm(join(origin, 'notes.txt'));
    await writeFile(join(origin, 'notes.txt'), v2);
    ok(await annex(origin, ['add', 'notes.txt']), 'add notes.txt v2');
    ok(await git(origin, ['commit', '-q', '-m', 'notes v2']), 'commit');
    ok(await annex(origin, ['export', 'main', '--to', 'export']), 'export v2');
    assert.ok((await sdkGet(b, 'notes.txt')).equals(v2), 'the current object is the new content');
    const versions = await s3.send(new ListObjectVersionsCommand({ Bucket: b, Prefix: 'notes.txt' }));
    assert.ok((versions.Versions ?? []).some((v) => v.VersionId === recorded && v.IsLatest === false && v.Size === v1.length), 'the old version is kept');

    // A rename: git-annex copies the object (x-amz-copy-source) and deletes the old name.
    await mkdir(join(origin, 'archive'));
    ok(await git(origin, ['mv', 'notes.txt', 'archive/notes v2.txt']), 'git mv');
    ok(await git(origin, ['commit', '-q', '-m', 'rename']), 'commit');
    const renamed = ok(await annex(origin, ['export', 'main', '--to', 'export']), 'export rename');
    assert.match(renamed.stdout, /rename export \S.* -> archive\/notes v2\.txt ok/, 'renamed on the remote, not uploaded again');
    assert.doesNotMatch(renamed.stdout, /export export archive/);
    await sdkAbsent(b, 'notes.txt');
    assert.ok((await sdkGet(b, 'archive/notes v2.txt')).equals(v2));

    // The old content, dropped here, comes back by its version id though notes.txt is now a delete marker.
    ok(await annex(origin, ['drop', '--force', '--key', oldKey]), 'drop the old key here');
    await assert.rejects(keyContent(origin, oldKey));
    ok(await annex(origin, ['get', '--key', oldKey, '--from', 'export']), 'get the old key --from export');
    assert.ok((await keyContent(origin, oldKey)).equals(v1), 'the old version\'s bytes');
  });

  it('importtree=yes with versioning=yes: git annex import builds the history from ListObjectVersions; an overwritten object\'s old version is in it, a deleted one is gone from the tip', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('import');
    await s3.send(new CreateBucketCommand({ Bucket: b }));
    const a1 = Buffer.from('a, first\n');
    const a2 = Buffer.from('a, second\n');
    const bb = Buffer.from('b\n');
    const accent = Buffer.from('accent\n');
    for (const [k, body] of [['a.txt', a1], ['dir/b.txt', bb], ['a.txt', a2], ['é x.txt', accent]] as const) {
      await s3.send(new PutObjectCommand({ Bucket: b, Key: k, Body: body }));
      await sleep(5); // distinct LastModified times: git-annex orders the history by them
    }
    await s3.send(new DeleteObjectCommand({ Bucket: b, Key: 'dir/b.txt' }));
    ok(await initremote(origin, 'import', b, ['exporttree=yes', 'importtree=yes', 'versioning=yes']), 'initremote import');
    ok(await annex(origin, ['import', 'main', '--from', 'import']), 'git annex import');

    const tip = await treeKeys(origin, 'import/main');
    assert.deepEqual([...tip].sort(), [['a.txt', annexKey(a2, '.txt')], ['é x.txt', annexKey(accent, '.txt')]].sort());
    const history = ok(await git(origin, ['rev-list', 'import/main']), 'rev-list').stdout.split('\n').filter(Boolean);
    const trees = await Promise.all(history.map((c) => treeKeys(origin, c)));
    assert.ok(trees.some((tr) => tr.get('a.txt') === annexKey(a1, '.txt')), 'a commit has a.txt\'s first version');
    assert.ok(trees.some((tr) => tr.get('dir/b.txt') === annexKey(bb, '.txt')), 'a commit has dir/b.txt, deleted since');
    for (const [key, want] of [[annexKey(a1, '.txt'), a1], [annexKey(a2, '.txt'), a2], [annexKey(bb, '.txt'), bb], [annexKey(accent, '.txt'), accent]] as const) {
      assert.ok((await keyContent(origin, key)).equals(want), `${key}: downloaded by version id`);
    }
  });

  it('a clone enables the remote (git-annex branch, credentials from the environment) and gets the content; with a wrong secret enableremote succeeds but every request gets 403', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const clone = join(work, 'clone');
    ok(await run('git', ['clone', '-q', origin, clone]), 'git clone');
    ok(await annex(clone, ['init', 'clone']), 'git annex init');
    ok(await annex(clone, ['enableremote', 's3'], creds()), 'enableremote s3');
    ok(await annex(clone, ['enableremote', 'chunked'], creds()), 'enableremote chunked');
    ok(await annex(clone, ['get', '--from', 's3', files.spaced, files.mp]), 'get --from s3');
    ok(await annex(clone, ['copy', '--to', 'chunked', files.mp]), 'copy --to chunked from the clone');
    ok(await annex(clone, ['drop', files.mp]), 'drop here');
    ok(await annex(clone, ['get', '--from', 'chunked', files.mp]), 'get --from chunked');
    await sameLocal(clone, files.spaced, bytesOf(files.spaced));
    await sameLocal(clone, files.mp, bytesOf(files.mp));
    assert.equal((await sdkKeys(bucket('chunked'))).length, 1 + 12, 'twelve 1 MiB chunks and annex-uuid');

    const wrong = join(work, 'wrong');
    ok(await run('git', ['clone', '-q', origin, wrong]), 'git clone');
    ok(await annex(wrong, ['init', 'wrong']), 'git annex init');
    // enableremote only records the credentials (it sends no request); get then uses them.
    ok(await annex(wrong, ['enableremote', 's3'], creds({ AWS_SECRET_ACCESS_KEY: 'not-the-secret-0123456789abcdefghijklmno' })), 'enableremote s3, wrong secret');
    const r = fails(await annex(wrong, ['get', '--from', 's3', files.big]), 'get with a wrong secret');
    assert.match(r.stderr, /statusCode = 403/);
    assert.match(r.stderr, /<Code>SignatureDoesNotMatch<\/Code>/);
    await localContentGone(wrong, files.big);
  });

  it('initremote with a wrong secret, or an unknown access key, fails (403) and creates nothing', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const cases = [
      ['badsecret', { AWS_SECRET_ACCESS_KEY: 'not-the-secret-0123456789abcdefghijklmno' }, 'SignatureDoesNotMatch'],
      ['badkey', { AWS_ACCESS_KEY_ID: 'AKIAUNKNOWN000000000' }, 'InvalidAccessKeyId'],
    ] as const;
    for (const [name, over, code] of cases) {
      const b = bucket(name);
      const r = fails(await initremote(origin, name, b, [], over), `initremote ${name}`);
      assert.match(r.stderr, new RegExp(`s3StatusCode = Status \\{statusCode = 403[^}]*\\}, s3ErrorCode = "${code}"`));
      assert.deepEqual(await s3Code(s3.send(new HeadBucketCommand({ Bucket: b }))), { name: 'NotFound', status: 404 }, `${b} was not created`);
      assert.notEqual((await git(origin, ['config', `remote.${name}.annex-uuid`])).code, 0, 'no remote configured');
    }
  });

  it('signature=v4 on the default HTTP port (the relay): initremote, copy (a multipart upload too), drop, get, fsck and drop --from', async (ctx) => {
    if (skip) return ctx.skip(skip);
    if (relaySkip) return ctx.skip(relaySkip);
    const b = bucket('v4');
    const init = ok(await annex(origin, ['initremote', 'v4', 'type=S3', 'encryption=none', `host=${relayHost}`, 'port=80', 'protocol=http', 'requeststyle=path', `bucket=${b}`, 'signature=v4', 'partsize=6MiB', '--debug'], creds()), 'initremote v4');
    assert.match(init.stderr, /Authorization","AWS4-HMAC-SHA256 Credential=/, 'the requests are SigV4');
    await s3.send(new HeadBucketCommand({ Bucket: b }));
    ok(await annex(origin, ['copy', '--to', 'v4', '.']), 'copy --to v4');
    const all = [...content.keys()];
    for (const f of all) assert.equal(sha256(await sdkGet(b, await keyOf(origin, f))), sha256(bytesOf(f)), `${f} through the SDK`);
    assert.match((await s3.send(new HeadObjectCommand({ Bucket: b, Key: await keyOf(origin, files.mp) }))).ETag ?? '', /-3"$/, 'the 12 MiB file went in three parts');
    ok(await annex(origin, ['drop', ...all]), 'drop here');
    ok(await annex(origin, ['get', '--from', 'v4', ...all]), 'get --from v4');
    for (const f of all) await sameLocal(origin, f, bytesOf(f));
    const fsck = ok(await annex(origin, ['fsck', '--from', 'v4', ...all]), 'fsck --from v4');
    assert.equal(checksummed(fsck.stdout), all.length);
    const key = await keyOf(origin, files.big);
    ok(await annex(origin, ['drop', '--from', 'v4', files.big]), 'drop --from v4');
    await sdkAbsent(b, key);
  });

  it('signature=v4 on a non-default port: git-annex\'s aws library signs the host without the port, the Host header carries it, and the door refuses (SignatureDoesNotMatch) as S3 must', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const b = bucket('v4port');
    const r = fails(await initremote(origin, 'v4port', b, ['signature=v4', '--debug']), 'initremote v4 on a non-default port');
    assert.match(r.stderr, /String to sign: "[A-Z]+\\n\/[^"]*\\nhost:127\.0\.0\.1\\nx-amz-content-sha256:/, 'the client signs host:127.0.0.1, no port');
    assert.ok(!r.stderr.includes(`host:127.0.0.1:${port}\\n`), 'the client never signs the port');
    assert.match(r.stderr, /s3ErrorCode = "SignatureDoesNotMatch"/);
    assert.deepEqual(await s3Code(s3.send(new HeadBucketCommand({ Bucket: b }))), { name: 'NotFound', status: 404 }, `${b} was not created`);
  });

  it('git annex testremote --fast passes on the plain, chunked and multipart remotes (and the SigV4 one): store, retrieve, checkpresent, remove, export, with and without shared encryption', async (ctx) => {
    if (skip) return ctx.skip(skip);
    if (!existsSync('/usr/bin/gpg')) return ctx.skip('gpg (/usr/bin/gpg) is missing: testremote also tests encryption=shared, which needs it');
    const remotes = ['s3', 'chunked', 'multipart', ...(relaySkip ? [] : ['v4'])];
    for (const remote of remotes) {
      const r = ok(await annex(origin, ['testremote', '--fast', remote], undefined, 120_000), `testremote ${remote}`);
      assert.match(r.stdout + r.stderr, /All \d+ tests passed/, `testremote ${remote}`);
    }
  });
});
