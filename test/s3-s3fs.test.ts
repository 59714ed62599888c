// The S3 door as a file system: Debian's s3fs-fuse (unmodified, path-style requests, SigV4) mounts a
// bucket, and the mount is used as a file system by ordinary programs (cp, cat, mv, mkdir, rmdir,
// truncate, dd, ln, chmod, touch, ls) while the AWS SDK v3 checks through the door what the bucket
// holds, byte for byte: small files, names with spaces and non-ASCII, an empty file, directories
// ("dir/" objects, and prefixes with no such object), renames (copy then delete, a whole directory,
// 30 MiB by UploadPartCopy), overwrite, append, truncate, in-place writes, a 30 MiB file sent as a
// multipart upload of 10 MiB parts, metadata (mode, mtime, symlinks) in x-amz-meta-* headers, and a
// directory of more than 1000 objects (ListObjects pages). The mount uses `-o nomixupload`, and the
// last two tests mount a second time with s3fs's default "mix upload", which sends a last part larger
// than part 1 (a new 30 MiB file goes as 10 + 20 MiB; an edit near the start of a large file as a
// small uploaded part 1 and a large copied part 2). S3 accepts that; until session 23 the door
// refused it (400 InvalidArgument) and the file could not be written; now such parts are kept and the
// completion assembles them (src/domain/s3-assembly.ts).
//
// s3fs is installed with apt-get when it can be (root on Debian). Mounting needs FUSE: /dev/fuse and
// the right to mount (root or fusermount). Where that is refused the tests are skipped with the
// message, so a CI machine without FUSE does not fail. Every mount is unmounted in `after`, whatever
// happened, and again (lazily) if the process exits, or is killed by SIGTERM, SIGINT or SIGHUP,
// without it. All I/O on the mount runs in child processes: the server runs in this process, and a
// blocking call on the mount would wait for itself. Local-disk storage only, as in s3-tools.test.ts.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateBucketCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { assertAbsent, doorClient, getBytes, listKeys, newDoorKey } from './support/s3-door.js';
import { findOrInstall } from './support/system.js';
import { fuseUnavailable, guardMounts, isMounted, NO_FUSE, unmount, withClientLog, type FuseMount } from './support/fuse.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const S3FS = '/usr/bin/s3fs';
const PATH = '/usr/bin:/bin:/usr/sbin:/sbin';
const MiB = 1024 * 1024;

interface Run {
  code: number;
  stdout: Buffer;
  stderr: string;
}

function run(cmd: string, args: string[], opts: { cwd?: string; timeout?: number } = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { PATH, LC_ALL: 'C.UTF-8' }, cwd: opts.cwd, timeout: opts.timeout ?? 30_000, maxBuffer: 64 * MiB, encoding: 'buffer' }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0, stdout, stderr: stderr.toString() });
    });
  });
}

function ok(r: Run, what: string): Run {
  assert.equal(r.code, 0, `${what}: exit ${r.code}: ${r.stderr}${r.stdout.toString().slice(0, 2000)}`);
  return r;
}

function sha256(b: Buffer): string {
  return createHash('sha256').update(b).digest('hex');
}

interface Mount extends FuseMount {
  /** The last 256 KiB of s3fs's log (stderr; `-f` keeps it in the foreground). */
  log(): string;
}

const skipOnS3 = testStorage() === 's3' ? 'local-disk storage only (the S3-storage pass keeps objects in memory)' : false;

describe('s3fs-fuse mounts a bucket through the S3 door', { skip: skipOnS3 }, () => {
  let t: TestServer | undefined;
  let s3: S3Client | undefined;
  let work = '';
  let bucket = '';
  let passwd = '';
  let skip: string | false = false;
  let main: Mount;
  const mounts: Mount[] = [];
  let releaseGuard = () => {};

  /**
   * Mounts the bucket on work/<name> with s3fs in the foreground (its child). Returns the mount once
   * `ls` through it succeeds; a skip reason when FUSE refuses the mount; throws on any other failure
   * (s3fs 1.90 checks the server only once mounted, and then exits with status 0: the log says why).
   */
  async function mount(name: string, extra: string[]): Promise<Mount | { skip: string }> {
    const dir = join(work, name);
    await mkdir(dir);
    const args = [bucket, dir, '-f', '-o', `url=${t!.s3Url}`, '-o', 'use_path_request_style', '-o', `passwd_file=${passwd}`, '-o', 'retries=2', '-o', 'dbglevel=info', ...extra];
    const child = spawn(S3FS, args, { env: { PATH, HOME: work }, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    const keep = (d: Buffer) => {
      log += d.toString();
      if (log.length > 512 * 1024) log = log.slice(-256 * 1024);
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    child.on('error', (e) => (log += `\n${String(e)}`));
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const m: Mount = { dir, child, exited, log: () => log.slice(-256 * 1024) };
    mounts.push(m); // from now on, after() unmounts it whatever happens
    const end = Date.now() + 20_000;
    for (;;) {
      const gone = child.exitCode !== null || child.signalCode !== null;
      if (gone) {
        await exited;
        const fuse = NO_FUSE.exec(log);
        if (fuse) return { skip: `s3fs cannot mount with FUSE here (s3fs ${args.slice(0, 2).join(' ')} -f …: ${fuse[0].trim()})` };
        throw new Error(`s3fs ended (status ${child.exitCode}, signal ${child.signalCode}) before the mount was usable:\n${log.slice(-8000)}`);
      }
      if (await isMounted(dir)) {
        const ls = await run('ls', ['-A', dir], { timeout: 10_000 });
        if (ls.code === 0 && child.exitCode === null) return m;
      }
      if (Date.now() > end) throw new Error(`s3fs did not mount ${dir} within 20 s:\n${log.slice(-8000)}`);
      await sleep(50);
    }
  }

  /** A shell script run with the mount as its working directory; "$1"… are `args`. */
  function sh(script: string, ...args: string[]): Promise<Run> {
    return run('/bin/sh', ['-c', script, 'sh', ...args], { cwd: main.dir, timeout: 60_000 });
  }

  /** The bytes of a file as read through the mount (by cat, in a child process). */
  async function readThrough(path: string): Promise<Buffer> {
    return ok(await run('cat', [join(main.dir, path)], { timeout: 60_000 }), `cat ${path}`).stdout;
  }

  const get = (key: string) => getBytes(s3!, bucket, key);

  const absent = (key: string) => assertAbsent(s3!, bucket, key);

  const keys = (prefix: string) => listKeys(s3!, bucket, prefix);

  async function ls(dir: string): Promise<string[]> {
    const r = ok(await run('ls', ['-1A', join(main.dir, dir)]), `ls ${dir}`);
    return r.stdout.toString().split('\n').filter(Boolean).sort();
  }

  const withLog = <T>(m: Mount, f: () => Promise<T>) => withClientLog('s3fs', m, f);

  before(async () => {
    const found = await findOrInstall('s3fs', [S3FS]);
    if (found.skip) skip = found.skip;
    else skip = fuseUnavailable() ?? false;
    if (skip) {
      console.log(`# s3fs tests skipped: ${skip}`);
      return;
    }
    releaseGuard = guardMounts(mounts);
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    s3 = doorClient(t, k);
    bucket = `s3fs-${randomBytes(4).toString('hex')}`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    work = await mkdtemp(join(tmpdir(), 'files-rest-s3fs-'));
    passwd = join(work, 'passwd-s3fs');
    await writeFile(passwd, `${k.accessKeyId}:${k.secret}\n`, { mode: 0o600 });
    const m = await mount('mnt', ['-o', 'nomixupload']);
    if ('skip' in m) {
      skip = m.skip;
      console.log(`# s3fs tests skipped: ${skip}`);
      return;
    }
    main = m;
  });

  after(async () => {
    for (const m of mounts) await unmount(m);
    releaseGuard();
    s3?.destroy();
    await t?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('small files written through the mount are objects with the same bytes: names with spaces and non-ASCII, an empty file; ls lists them', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await withLog(main, async () => {
      const files: Record<string, Buffer> = {
        'hello.txt': Buffer.from('hello through s3fs\n'),
        'with space.txt': Buffer.from('a name with a space\n'),
        'données/été ü.txt': Buffer.from('café, non-ASCII name\n'),
        'bin.dat': randomBytes(70_000),
      };
      const local = join(work, 'small');
      await mkdir(local);
      ok(await sh('mkdir "$1"', 'données'), 'mkdir');
      for (const [name, body] of Object.entries(files)) {
        const src = join(local, createHash('md5').update(name).digest('hex'));
        await writeFile(src, body);
        ok(await sh('cp "$1" "$2"', src, name), `cp ${name}`);
      }
      ok(await sh(': > empty'), 'empty file');
      for (const [name, body] of Object.entries(files)) {
        assert.ok((await get(name)).equals(body), `${name} through the door`);
        assert.ok((await readThrough(name)).equals(body), `${name} through the mount`);
      }
      assert.equal((await get('empty')).length, 0);
      assert.deepEqual(await keys(''), ['bin.dat', 'données/', 'données/été ü.txt', 'empty', 'hello.txt', 'with space.txt']);
      assert.deepEqual(await ls(''), ['bin.dat', 'données', 'empty', 'hello.txt', 'with space.txt']);
      assert.deepEqual(await ls('données'), ['été ü.txt']);
    });
  });

  it('objects put through the door are read through the mount (ranged GETs); a prefix with no "dir/" object is a directory', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await withLog(main, async () => {
      const small = randomBytes(100_000);
      const big = randomBytes(20 * MiB + 12345);
      await s3!.send(new PutObjectCommand({ Bucket: bucket, Key: 'sdk/deep/small.bin', Body: small }));
      await s3!.send(new PutObjectCommand({ Bucket: bucket, Key: 'sdk/big.bin', Body: big }));
      assert.equal(ok(await sh('stat -c %F sdk sdk/deep'), 'stat').stdout.toString(), 'directory\ndirectory\n');
      assert.deepEqual(await ls('sdk'), ['big.bin', 'deep']);
      assert.deepEqual(await ls('sdk/deep'), ['small.bin']);
      assert.equal(ok(await sh('stat -c %s sdk/big.bin'), 'stat').stdout.toString().trim(), String(big.length));
      assert.ok((await readThrough('sdk/deep/small.bin')).equals(small));
      assert.equal(sha256(await readThrough('sdk/big.bin')), sha256(big));
      // A read from the middle (dd skips 15 MiB): s3fs fetches only that range.
      const mid = ok(await sh('dd if=sdk/big.bin bs=1M skip=15 count=1 status=none'), 'dd').stdout;
      assert.ok(mid.equals(big.subarray(15 * MiB, 16 * MiB)));
    });
  });

  it('mkdir makes a "dir/" object; rmdir refuses a directory with files in it and removes an empty one; rm -r removes a tree', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await withLog(main, async () => {
      ok(await sh('mkdir -p tree/a/b && printf x > tree/a/file'), 'mkdir -p');
      assert.deepEqual(await keys('tree/'), ['tree/', 'tree/a/', 'tree/a/b/', 'tree/a/file']);
      const dirObject = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'tree/a/' }));
      assert.equal(dirObject.ContentLength, 0);
      const refused = await sh('rmdir tree/a');
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /not empty/i);
      assert.deepEqual(await keys('tree/'), ['tree/', 'tree/a/', 'tree/a/b/', 'tree/a/file']);
      ok(await sh('rmdir tree/a/b'), 'rmdir empty');
      await absent('tree/a/b/');
      ok(await sh('rm -r tree'), 'rm -r');
      assert.deepEqual(await keys('tree'), []);
      assert.ok(!(await ls('')).includes('tree'), 'tree is gone from ls');
    });
  });

  it('rename is a copy and a delete: a file, a directory with its tree, 30 MiB (UploadPartCopy); rm deletes', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await withLog(main, async () => {
      ok(await sh('printf "to be renamed\\n" > r1.txt && mv r1.txt "r 2.txt"'), 'mv file');
      assert.equal((await get('r 2.txt')).toString(), 'to be renamed\n');
      await absent('r1.txt');

      ok(await sh('mkdir -p d1/sub && printf a > d1/a && printf b > d1/sub/b && mv d1 d2'), 'mv dir');
      assert.deepEqual(await keys('d1'), []);
      assert.deepEqual(await keys('d2'), ['d2/', 'd2/a', 'd2/sub/', 'd2/sub/b']);
      assert.equal((await get('d2/sub/b')).toString(), 'b');
      assert.deepEqual(await ls('d2/sub'), ['b']);

      const big = randomBytes(30 * MiB);
      await s3!.send(new PutObjectCommand({ Bucket: bucket, Key: 'mv-src.bin', Body: big }));
      ok(await sh('mkdir moved && mv mv-src.bin moved/dst.bin'), 'mv 30 MiB');
      await absent('mv-src.bin');
      assert.equal(sha256(await get('moved/dst.bin')), sha256(big));
      assert.equal(sha256(await readThrough('moved/dst.bin')), sha256(big));

      ok(await sh('rm "r 2.txt" moved/dst.bin'), 'rm');
      await absent('r 2.txt');
      await absent('moved/dst.bin');
    });
  });

  it('a 30 MiB file written through the mount goes up as a multipart upload of 10 MiB parts: S3 ETag "-3", the same bytes through the door and the mount', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await withLog(main, async () => {
      const body = randomBytes(30 * MiB);
      const src = join(work, 'thirty.bin');
      await writeFile(src, body);
      ok(await sh('mkdir big && cp "$1" big/thirty.bin', src), 'cp 30 MiB');
      const head = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'big/thirty.bin' }));
      assert.equal(head.ContentLength, body.length);
      assert.match(head.ETag!, /^"[0-9a-f]{32}-3"$/, 'three parts of 10 MiB');
      assert.equal((await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'big/thirty.bin', PartNumber: 3 }))).ContentLength, 10 * MiB);
      assert.equal(sha256(await get('big/thirty.bin')), sha256(body));
      assert.equal(sha256(await readThrough('big/thirty.bin')), sha256(body));
      assert.equal(ok(await sh('cmp "$1" big/thirty.bin', src), 'cmp').code, 0);
      const open = await s3!.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
      assert.deepEqual(open.Uploads ?? [], [], 'no upload left open');
      await rm(src);
    });
  });

  it('overwrite, append, truncate (shorter, longer), a write in place, on a small file and on a 12 MiB one: the door has what the mount shows', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await withLog(main, async () => {
      const steps: [string, Buffer][] = [
        ['printf "first version\\n" > edit.txt', Buffer.from('first version\n')],
        ['printf "second\\n" > edit.txt', Buffer.from('second\n')],
        ['printf "more\\n" >> edit.txt', Buffer.from('second\nmore\n')],
        ['truncate -s 3 edit.txt', Buffer.from('sec')],
        ['truncate -s 8 edit.txt', Buffer.concat([Buffer.from('sec'), Buffer.alloc(5)])],
        ['printf XY | dd of=edit.txt bs=1 seek=1 conv=notrunc status=none', Buffer.concat([Buffer.from('sXY'), Buffer.alloc(5)])],
      ];
      for (const [script, want] of steps) {
        ok(await sh(script), script);
        assert.ok((await get('edit.txt')).equals(want), `${script}: through the door`);
        assert.ok((await readThrough('edit.txt')).equals(want), `${script}: through the mount`);
      }

      let ref = randomBytes(12 * MiB);
      const src = join(work, 'twelve.bin');
      const piece = join(work, 'piece.bin');
      await writeFile(src, ref);
      ok(await sh('cp "$1" twelve.bin', src), 'cp 12 MiB');
      const more = randomBytes(3_000_000);
      await writeFile(piece, more);
      ok(await sh('cat "$1" >> twelve.bin', piece), 'append 3 MB');
      ref = Buffer.concat([ref, more]);
      assert.equal(sha256(await get('twelve.bin')), sha256(ref), 'appended');
      const patch = randomBytes(100_000);
      await writeFile(piece, patch);
      ok(await sh('dd if="$1" of=twelve.bin bs=100000 seek=50 conv=notrunc status=none', piece), 'dd in place');
      patch.copy(ref, 5_000_000);
      assert.equal(sha256(await get('twelve.bin')), sha256(ref), 'written in place');
      ok(await sh('truncate -s 7000000 twelve.bin'), 'truncate 12 MiB');
      ref = ref.subarray(0, 7_000_000);
      assert.equal(sha256(await get('twelve.bin')), sha256(ref), 'truncated');
      assert.equal(sha256(await readThrough('twelve.bin')), sha256(ref));
      await rm(src);
      await rm(piece);
    });
  });

  it('chmod, utimes and symlinks: kept in x-amz-meta-* headers, read back through the mount', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await withLog(main, async () => {
      ok(await sh('printf meta > meta.txt && chmod 600 meta.txt && touch -d @1577934245 meta.txt && ln -s meta.txt link'), 'chmod, touch, ln -s');
      const head = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'meta.txt' }));
      assert.equal(head.Metadata?.mode, String(0o100600));
      assert.equal(head.Metadata?.mtime, '1577934245');
      assert.equal((await get('meta.txt')).toString(), 'meta', 'a metadata change (a copy onto itself) keeps the bytes');
      const link = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'link' }));
      assert.equal(link.Metadata?.mode, String(0o120777));
      assert.equal((await get('link')).toString(), 'meta.txt');
      assert.equal(ok(await sh('stat -c "%a %Y" meta.txt && readlink link'), 'stat').stdout.toString(), '600 1577934245\nmeta.txt\n');
    });
  });

  it('a directory of 1005 objects: ls through the mount pages through ListObjects (1000, then 5)', async (ctx) => {
    if (skip) return ctx.skip(skip);
    await withLog(main, async () => {
      const names = Array.from({ length: 1005 }, (_, i) => `f${String(i).padStart(4, '0')}`);
      for (let i = 0; i < names.length; i += 25) {
        await Promise.all(names.slice(i, i + 25).map((n) => s3!.send(new PutObjectCommand({ Bucket: bucket, Key: `many/${n}`, Body: n }))));
      }
      assert.deepEqual(await ls('many'), names);
      assert.equal((await readThrough('many/f1004')).toString(), 'f1004');
    });
  });

  describe("with s3fs's default mix upload (no nomixupload)", () => {
    let mix: Mount | undefined;
    before(async () => {
      if (skip) return;
      const m = await mount('mnt-mix', []);
      if ('skip' in m) throw new Error(`the first mount worked, the second is refused: ${m.skip}`);
      mix = m;
    });

    it('a new 30 MiB file (parts of 10 and 20 MiB: the last one larger than part 1, which S3 accepts)', async (ctx) => {
      if (skip) return ctx.skip(skip);
      await withLog(mix!, async () => {
        const body = randomBytes(30 * MiB);
        const src = join(work, 'mix-thirty.bin');
        await writeFile(src, body);
        try {
          ok(await run('cp', [src, join(mix!.dir, 'mix-thirty.bin')], { timeout: 60_000 }), 'cp 30 MiB (mix upload)');
          assert.equal(sha256(await get('mix-thirty.bin')), sha256(body));
        } finally {
          await rm(src);
        }
      });
    });

    it('a write near the start of an existing 30 MiB object (a 5 MiB uploaded part 1, then a 25 MiB UploadPartCopy part 2)', async (ctx) => {
      if (skip) return ctx.skip(skip);
      await withLog(mix!, async () => {
        const ref = randomBytes(30 * MiB);
        await s3!.send(new PutObjectCommand({ Bucket: bucket, Key: 'mix-edit.bin', Body: ref }));
        const patch = randomBytes(100_000);
        const piece = join(work, 'mix-piece.bin');
        await writeFile(piece, patch);
        try {
          ok(await run('dd', [`if=${piece}`, `of=${join(mix!.dir, 'mix-edit.bin')}`, 'bs=1000', 'seek=1', 'conv=notrunc', 'status=none'], { timeout: 60_000 }), 'dd near the start (mix upload)');
          patch.copy(ref, 1000);
          assert.equal(sha256(await get('mix-edit.bin')), sha256(ref));
        } finally {
          await rm(piece);
        }
      });
    });
  });
});
