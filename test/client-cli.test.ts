import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestServer, type TestServer } from './support/server.js';
import { startProxy, type CountingProxy } from './support/proxy.js';
import { closedPort, findStoredFile, flipByte, md5File, writeTestFile } from './support/client-files.js';
import { waitFor } from './support/http.js';
import { NodeFilesClient } from '../src/client/node.js';

const BIN = fileURLToPath(new URL('../../bin/files-rest.js', import.meta.url));
const KiB = 1024;
const MiB = 1024 * KiB;
// Control characters other than newline: what must never reach a pipe.
const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f]/;

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs `files-rest ARGS` with stdout and stderr piped. */
function cli(args: string[], env: Record<string, string> = {}, cwd?: string): Run {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(cwd ? { cwd } : {}),
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  return { child, stdout: () => out, stderr: () => err, exit };
}

async function cliDone(args: string[], env: Record<string, string> = {}, cwd?: string) {
  const r = cli(args, env, cwd);
  const { code } = await r.exit;
  return { code, stdout: r.stdout(), stderr: r.stderr() };
}

describe('Client commands', () => {
  let s: TestServer;
  let proxy: CountingProxy;
  let dir: string;
  let sdk: NodeFilesClient;
  const running = new Set<ChildProcess>();
  before(async () => {
    s = await startTestServer({
      FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(64 * KiB),
      FILES_REST_MULTIPART_ABORT_ON_PART_FAILURE: '0',
      // Killed clients leave connections behind; do not wait 30 s for them at the end.
      FILES_REST_SHUTDOWN_GRACE: '2',
    });
    proxy = await startProxy(s.url);
    dir = await mkdtemp(join(tmpdir(), 'files-rest-cli-'));
    sdk = new NodeFilesClient({ url: s.url });
  });
  after(async () => {
    for (const c of running) c.kill('SIGKILL');
    await proxy.close();
    await s.close();
    await rm(dir, { recursive: true, force: true });
  });

  function track(r: Run): Run {
    running.add(r.child);
    r.exit.then(() => running.delete(r.child));
    return r;
  }

  it('mb, ls (--versions, --json), rm (soft and --version); URL from FILES_REST_URL', async () => {
    const env = { FILES_REST_URL: s.url };
    const mb = await cliDone(['mb'], env);
    assert.equal(mb.code, 0, mb.stderr);
    const bucket = mb.stdout.trim();
    assert.match(bucket, /^[0-9a-f-]{36}$/);
    const v1 = await sdk.putObject(bucket, 'a.txt', 'one');
    await sdk.putObject(bucket, 'a.txt', 'two');
    await sdk.putObject(bucket, 'b.txt', 'bee');
    const ls = await cliDone(['ls', '--bucket', bucket], env);
    assert.equal(ls.code, 0, ls.stderr);
    assert.deepEqual(ls.stdout.trim().split('\n').map((l) => l.trim().split(/\s+/).at(-1)), ['a.txt', 'b.txt']);
    const rm1 = await cliDone(['rm', 'b.txt', '--bucket', bucket], env);
    assert.equal(rm1.code, 0, rm1.stderr);
    assert.match(rm1.stdout, /^deleted b\.txt \(delete marker [0-9a-f-]{36}\)\n$/);
    const rm2 = await cliDone(['rm', 'a.txt', '--bucket', bucket, '--version', v1.version_id], env);
    assert.equal(rm2.code, 0, rm2.stderr);
    const vs = await cliDone(['ls', '--bucket', bucket, '--versions', '--json'], env);
    assert.equal(vs.code, 0, `${vs.stdout}\n${vs.stderr}`);
    const docs = JSON.parse(vs.stdout) as { key: string; delete_marker: boolean; version_id: string }[];
    assert.equal(docs.length, 3); // a.txt (two), b.txt and its delete marker
    assert.equal(docs.filter((d) => d.delete_marker).length, 1);
    assert.ok(!docs.some((d) => d.version_id === v1.version_id));
    const missing = await cliDone(['rm', 'nope', '--bucket', '00000000-0000-4000-8000-000000000000'], env);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^files-rest: Bucket does not exist\. \(HTTP 404\)\n$/);
    const noUrl = await cliDone(['ls', '--bucket', bucket]);
    assert.equal(noUrl.code, 1);
    assert.match(noUrl.stderr, /FILES_REST_URL/);
  });

  it('a server that cannot be reached: the one-line error names the URL it tried and why', async () => {
    const port = await closedPort();
    const url = `http://127.0.0.1:${port}`;
    const bucket = '00000000-0000-4000-8000-000000000000';
    const ls = await cliDone(['ls', '--bucket', bucket, '--url', url]);
    assert.equal(ls.code, 1);
    assert.equal(ls.stderr, `files-rest: could not reach ${url}/files/${bucket}: connect ECONNREFUSED 127.0.0.1:${port}\n`);
    const file = join(dir, 'unreachable.txt');
    await writeFile(file, 'x');
    const up = await cliDone(['upload', file, '--bucket', bucket, '--url', url, '--retries', '0']);
    assert.equal(up.code, 1);
    assert.match(
      up.stdout,
      new RegExp(`^FAILED .*unreachable\\.txt -> unreachable\\.txt: unreachable\\.txt failed after 1 attempts: could not reach ${url}/files/${bucket}/unreachable\\.txt: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}$`, 'm'),
    );
  });

  it('an upload killed mid-transfer, run again, sends only the parts the server lacks', async () => {
    const bucket = (await sdk.createBucket()).id;
    const file = join(dir, 'resume.bin');
    const size = 4 * MiB;
    const expected = await writeTestFile(file, size, 7);
    const args = ['upload', file, '--url', proxy.url, '--bucket', bucket, '--part-size', '256K', '--parallel', '2', '--json'];
    const partsTotal = size / (256 * KiB);

    proxy.reset();
    proxy.setRates({ up: 1 * MiB });
    const first = track(cli(args));
    await waitFor(async () => proxy.partPuts() >= 5, 30_000);
    first.child.kill('SIGKILL');
    assert.equal((await first.exit).signal, 'SIGKILL');
    proxy.setRates({ up: null });

    // What the server holds once the dust settles (the part in flight was dropped, or finished).
    const uploads = await waitFor(async () => {
      const u = await sdk.listUploads(bucket);
      return u.length === 1 ? u : null;
    });
    let have = -1;
    await waitFor(async () => {
      await new Promise((r) => setTimeout(r, 300));
      const n = (await sdk.listParts(bucket, 'resume.bin', uploads[0]!.id)).parts.length;
      const stable = n === have;
      have = n;
      return stable;
    });
    assert.ok(have >= 5 && have < partsTotal, `parts on the server: ${have}`);

    proxy.reset();
    const second = await cliDone(args);
    assert.equal(second.code, 0, second.stderr);
    const doc = JSON.parse(second.stdout);
    const f = doc.files[0];
    assert.equal(f.ok, true);
    assert.equal(f.resumed, true);
    assert.equal(f.upload_id, uploads[0]!.id);
    assert.equal(f.parts_skipped, have);
    assert.equal(f.parts_sent, partsTotal - have);
    // Counted on the way to the server: only the missing parts were sent.
    assert.equal(proxy.partPutsStarted(), partsTotal - have);
    assert.equal(proxy.partPuts(), partsTotal - have);
    assert.equal(f.checksum, `md5:${expected}`);
    assert.match(second.stderr, new RegExp(`resuming upload ${uploads[0]!.id} of resume\\.bin: the server has ${have} of ${partsTotal} parts`));
    assert.equal((await sdk.listUploads(bucket)).length, 0);
  });

  it('Ctrl-C (SIGINT) finishes the parts in flight, exits 130 without FAILED, says what the server holds; the same command resumes', async () => {
    const bucket = (await sdk.createBucket()).id;
    const file = join(dir, 'sigint.bin');
    const size = 2 * MiB;
    const expected = await writeTestFile(file, size, 8);
    const args = ['upload', file, '--url', proxy.url, '--bucket', bucket, '--part-size', '128K', '--parallel', '2'];
    proxy.reset();
    proxy.setRates({ up: 512 * KiB });
    const first = track(cli(args));
    await waitFor(async () => proxy.partPuts() >= 3, 30_000);
    first.child.kill('SIGINT');
    const { code } = await first.exit;
    proxy.setRates({ up: null });
    assert.equal(code, 130);
    const out = first.stdout();
    assert.ok(!/FAILED/.test(out), out);
    assert.ok(!CONTROL.test(out));
    const m = /^interrupted .*sigint\.bin -> sigint\.bin: the server holds (\d+) of 16 parts of upload ([0-9a-f-]{36})$/m.exec(out);
    assert.ok(m, out);
    const held = Number(m[1]);
    assert.ok(held >= 3 && held < 16, out);
    // What it says is what the server has: the parts in flight were finished, none was cut off.
    assert.equal(proxy.partPutsStarted(), proxy.partPuts());
    assert.equal((await sdk.listParts(bucket, 'sigint.bin', m[2]!)).parts.length, held);
    assert.match(out, new RegExp(`^0 file\\(s\\) uploaded, 0 failed, 1 interrupted \\(the server holds ${held} of 16 parts; the same command resumes\\): `, 'm'));
    assert.match(first.stderr(), new RegExp(`^files-rest: interrupted; the server holds ${held} of 16 parts; run the same command again to resume$`, 'm'));

    proxy.reset();
    const again = await cliDone([...args, '--json']);
    assert.equal(again.code, 0, again.stderr);
    const f = JSON.parse(again.stdout).files[0];
    assert.equal(f.resumed, true);
    assert.equal(f.upload_id, m[2]);
    assert.equal(f.parts_skipped, held);
    assert.equal(f.parts_sent, 16 - held);
    assert.equal(proxy.partPutsStarted(), 16 - held);
    assert.equal(f.checksum, `md5:${expected}`);
  });

  it('a download killed mid-transfer, run again, fetches only the rest (Range); a corrupted one is refused', async () => {
    const bucket = (await sdk.createBucket()).id;
    const file = join(dir, 'dl-src.bin');
    const size = 4 * MiB;
    const expected = await writeTestFile(file, size, 9);
    await sdk.upload(bucket, 'dl.bin', file);
    const dest = join(dir, 'dl-out.bin');
    const args = ['download', 'dl.bin', dest, '--url', proxy.url, '--bucket', bucket, '--json'];

    proxy.reset();
    proxy.setRates({ down: 1 * MiB });
    const first = track(cli(args));
    await waitFor(async () => existsSync(`${dest}.part`) && (await stat(`${dest}.part`)).size >= 1 * MiB, 30_000);
    first.child.kill('SIGKILL');
    await first.exit;
    proxy.setRates({ down: null });
    const partial = (await stat(`${dest}.part`)).size;
    assert.ok(partial > 0 && partial < size);
    assert.ok(existsSync(`${dest}.part.json`));
    assert.equal(existsSync(dest), false);

    proxy.reset();
    const second = await cliDone(args);
    assert.equal(second.code, 0, second.stderr);
    const doc = JSON.parse(second.stdout);
    assert.equal(doc.ok, true);
    assert.equal(doc.resumed_from, partial);
    assert.equal(doc.md5, expected);
    const gets = proxy.requests.filter((r) => r.method === 'GET');
    assert.equal(gets.length, 1);
    assert.equal(gets[0]!.range, `bytes=${partial}-`);
    assert.equal(gets[0]!.status, 206);
    assert.equal(proxy.bytesDown(), size - partial);
    assert.equal(await md5File(dest), expected);
    assert.equal(existsSync(`${dest}.part`), false);

    // Flip a byte of the stored file: the download fails, says why, and leaves no file.
    const stored = await findStoredFile(s.config.dataDir, expected, size);
    assert.ok(stored);
    await flipByte(stored, 123_456);
    const bad = join(dir, 'dl-bad.bin');
    const r = await cliDone(['download', 'dl.bin', bad, '--url', s.url, '--bucket', bucket]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /does not match the server's checksum \(md5:[0-9a-f]{32}, got md5:[0-9a-f]{32}\)/);
    assert.equal(existsSync(bad), false);
    assert.equal(existsSync(`${bad}.part`), false);
  });

  it('directory upload with --recursive: keys from relative paths, several files at once; plain output when piped', async () => {
    const bucket = (await sdk.createBucket()).id;
    const root = join(dir, 'tree');
    await mkdir(join(root, 'sub', 'deeper'), { recursive: true });
    await writeFile(join(root, 'top.txt'), 'top');
    await writeFile(join(root, 'sub', 'mid.txt'), 'mid');
    await writeFile(join(root, 'sub', 'deeper', 'low.txt'), 'low');
    await writeTestFile(join(root, 'sub', 'big.bin'), 1 * MiB + 5, 3);
    const refused = await cliDone(['upload', root, '--url', s.url, '--bucket', bucket]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /is a directory: add --recursive/);

    const r = await cliDone(['upload', root, '--recursive', '--prefix', 'backup/', '--jobs', '2', '--part-size', '256K', '--url', s.url, '--bucket', bucket]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(!CONTROL.test(r.stdout), `control characters in ${JSON.stringify(r.stdout)}`);
    assert.ok(!CONTROL.test(r.stderr));
    const lines = r.stdout.trim().split('\n');
    assert.ok(lines.some((l) => /^upload .*big\.bin -> backup\/sub\/big\.bin: 1\.0 MiB in 5 parts of 256\.0 KiB$/.test(l)), r.stdout);
    assert.ok(lines.some((l) => /^uploaded .*low\.txt -> backup\/sub\/deeper\/low\.txt \(3 B, md5 [0-9a-f]{32}\) in [\d.]+ s$/.test(l)), r.stdout);
    assert.match(lines.at(-1)!, /^4 file\(s\) uploaded, 0 failed: 1\.0 MiB in [\d.]+ s/);
    const keys = [];
    for await (const o of sdk.objects(bucket)) keys.push(o.key);
    assert.deepEqual(keys, ['backup/sub/big.bin', 'backup/sub/deeper/low.txt', 'backup/sub/mid.txt', 'backup/top.txt']);

    // --json: one document on stdout, nothing else there.
    const j = await cliDone(['upload', join(root, 'top.txt'), '--key', 'renamed.txt', '--json', '--url', s.url, '--bucket', bucket]);
    assert.equal(j.code, 0, j.stderr);
    const doc = JSON.parse(j.stdout);
    assert.equal(doc.uploaded, 1);
    assert.equal(doc.files[0].key, 'renamed.txt');
    assert.equal(doc.files[0].checksum, `md5:${createMd5('top')}`);
  });

  it('upload --recursive --skip-unchanged: a second run uploads nothing and says so; changed files go up again', async () => {
    const bucket = (await sdk.createBucket()).id;
    const root = join(dir, 'sync');
    await mkdir(join(root, 'sub'), { recursive: true });
    await writeFile(join(root, 'a.txt'), 'alpha');
    await writeFile(join(root, 'b.txt'), 'bravo');
    await writeFile(join(root, 'empty'), '');
    await writeFile(join(root, 'sub', 'c.txt'), 'charlie');
    await writeTestFile(join(root, 'sub', 'big.bin'), 512 * KiB + 1, 4);
    // A key outside the prefix with the same name: not listed, not compared.
    await sdk.putObject(bucket, 'a.txt', 'alpha');
    const args = ['upload', root, '--recursive', '--skip-unchanged', '--prefix', 'site/', '--part-size', '128K', '--url', proxy.url, '--bucket', bucket];
    const keys = ['site/a.txt', 'site/b.txt', 'site/empty', 'site/sub/big.bin', 'site/sub/c.txt'];
    const first = await cliDone(args);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /^5 file\(s\) uploaded, 0 skipped \(unchanged\), 0 failed: /m);

    proxy.reset();
    const second = await cliDone(args);
    assert.equal(second.code, 0, second.stderr);
    const lines = second.stdout.trim().split('\n');
    for (const k of keys) {
      const re = new RegExp(`^skipped \\(unchanged\\) .* -> ${k.replace(/\./g, '\\.')} \\([\\d.]+ (B|KiB), md5 [0-9a-f]{32}\\)$`);
      assert.ok(lines.some((l) => re.test(l)), second.stdout);
    }
    assert.equal(lines.length, 6, second.stdout);
    assert.match(lines.at(-1)!, /^0 file\(s\) uploaded, 5 skipped \(unchanged\), 0 failed: 0 B in /);
    // One listing of the prefix, nothing else.
    assert.deepEqual(proxy.requests.map((r) => `${r.method} ${r.query.get('prefix')}`), ['GET site/']);

    // Same size with other content, another size, and a deleted key: uploaded again.
    await writeFile(join(root, 'a.txt'), 'ALPHA');
    await writeFile(join(root, 'sub', 'c.txt'), 'charlie!');
    await sdk.deleteObject(bucket, 'site/b.txt');
    const third = await cliDone([...args, '--json']);
    assert.equal(third.code, 0, third.stderr);
    const doc = JSON.parse(third.stdout) as { uploaded: number; skipped: number; files: { key: string; skipped?: boolean; ok: boolean }[] };
    assert.equal(doc.uploaded, 3);
    assert.equal(doc.skipped, 2);
    assert.deepEqual(doc.files.filter((f) => f.skipped).map((f) => f.key).sort(), ['site/empty', 'site/sub/big.bin']);
    const versions = new Map<string, number>();
    for await (const v of sdk.objects(bucket, { versions: true, prefix: 'site/' })) if (!v.delete_marker) versions.set(v.key, (versions.get(v.key) ?? 0) + 1);
    assert.deepEqual(Object.fromEntries(versions), { 'site/a.txt': 2, 'site/b.txt': 2, 'site/empty': 1, 'site/sub/big.bin': 1, 'site/sub/c.txt': 2 });
    assert.equal((await (await sdk.getObject(bucket, 'site/a.txt')).text()), 'ALPHA');
  });

  it('on a terminal (tmux): a progress bar per file with bytes, rate and ETA, then a summary', async (t) => {
    const tmux = spawnSync('tmux', ['-V'], { encoding: 'utf8' });
    if (tmux.status !== 0) {
      t.skip('tmux is not installed (apt-get install -y tmux)');
      return;
    }
    const bucket = (await sdk.createBucket()).id;
    const f1 = join(dir, 'tty-1.bin');
    const f2 = join(dir, 'tty-2.bin');
    const md5s = [await writeTestFile(f1, 2 * MiB, 1), await writeTestFile(f2, 3 * MiB, 2)];
    const sock = `files-rest-test-${process.pid}-${Date.now()}`;
    const tm = (...a: string[]) => spawnSync('tmux', ['-L', sock, ...a], { encoding: 'utf8' });
    const log = join(dir, 'tty.log');
    const cmd = [process.execPath, BIN, 'upload', f1, f2, '--url', proxy.url, '--bucket', bucket, '--part-size', '256K']
      .map((a) => `'${a.replace(/'/g, `'\\''`)}'`)
      .join(' ');
    proxy.setRates({ up: 1 * MiB });
    let socketPath = '';
    try {
      const started = tm('new-session', '-d', '-s', 'cli', '-x', '160', '-y', '30', `${cmd}; echo "EXIT:$?" > '${log}'; sleep 120`);
      assert.equal(started.status, 0, started.stderr);
      socketPath = tm('display-message', '-p', '#{socket_path}').stdout.trim();
      const bar = /tty-[12]\.bin\s+\|[\u2588\u2591]{24}\| +\d+% \| [\d.]+ (B|KiB|MiB)\/[23]\.0 MiB \| [\d.]+ (B|KiB|MiB)\/s \| ETA (\d+[smh][\dsm]*|--)/;
      // Both bars on screen at once, moving: a percentage above zero and a measured rate.
      const screen = await waitFor(async () => {
        const p = tm('capture-pane', '-p', '-t', 'cli').stdout;
        const bars = p.split('\n').filter((l) => bar.test(l));
        return bars.length === 2 && bars.some((l) => !/\|\s+0% \|/.test(l)) ? p : null;
      }, 30_000, 100);
      assert.ok(!/EXIT/.test(screen), screen);
      await waitFor(async () => existsSync(log) && (await readFile(log, 'utf8')).includes('EXIT:'), 60_000, 200);
      assert.equal((await readFile(log, 'utf8')).trim(), 'EXIT:0');
      const final = tm('capture-pane', '-p', '-t', 'cli', '-S', '-100').stdout;
      assert.match(final, /tty-1\.bin\s+\|\u2588{24}\| 100% \| 2\.0 MiB\/2\.0 MiB \| .* \| ETA done/);
      assert.match(final, /tty-2\.bin\s+\|\u2588{24}\| 100% \| 3\.0 MiB\/3\.0 MiB \| .* \| ETA done/);
      assert.match(final, /2 file\(s\) uploaded, 0 failed: 5\.0 MiB in [\d.]+ s/);
      // The result line of each file, the last one's too (logged just before the bars stop).
      assert.match(final, new RegExp(`uploaded .*tty-1\\.bin -> tty-1\\.bin \\(2\\.0 MiB, md5 ${md5s[0]}, 8 part\\(s\\) sent\\)`));
      assert.match(final, new RegExp(`uploaded .*tty-2\\.bin -> tty-2\\.bin \\(3\\.0 MiB, md5 ${md5s[1]}, 12 part\\(s\\) sent\\)`));
    } finally {
      proxy.setRates({ up: null });
      tm('kill-server');
      if (socketPath) await rm(socketPath, { force: true });
    }
  });

  it('on a terminal (tmux), Ctrl-C: the bar stays where it got to (no FAILED), result lines stay, the summary says what the server holds', async (t) => {
    const tmux = spawnSync('tmux', ['-V'], { encoding: 'utf8' });
    if (tmux.status !== 0) {
      t.skip('tmux is not installed (apt-get install -y tmux)');
      return;
    }
    const bucket = (await sdk.createBucket()).id;
    const f1 = join(dir, 'tty-c1.bin');
    const f2 = join(dir, 'tty-c2.bin');
    const md5First = await writeTestFile(f1, 512 * KiB, 5);
    await writeTestFile(f2, 4 * MiB, 6);
    const sock = `files-rest-test-${process.pid}-${Date.now()}-c`;
    const tm = (...a: string[]) => spawnSync('tmux', ['-L', sock, ...a], { encoding: 'utf8' });
    const log = join(dir, 'tty-c.log');
    const cmd = [process.execPath, BIN, 'upload', f1, f2, '--url', proxy.url, '--bucket', bucket, '--part-size', '256K', '--jobs', '1', '--parallel', '2']
      .map((a) => `'${a.replace(/'/g, `'\\''`)}'`)
      .join(' ');
    proxy.setRates({ up: 1 * MiB });
    let socketPath = '';
    try {
      // Ctrl-C reaches the whole foreground group: the shell traps it to go on to the echo.
      const started = tm('new-session', '-d', '-s', 'cli', '-x', '240', '-y', '30', `trap : INT; ${cmd}; echo "EXIT:$?" > '${log}'; sleep 120`);
      assert.equal(started.status, 0, started.stderr);
      socketPath = tm('display-message', '-p', '#{socket_path}').stdout.trim();
      const percent = (screen: string) => {
        const m = /tty-c2\.bin\s+\|[\u2588\u2591]{24}\| +(\d+)% \|/.exec(screen);
        return m ? Number(m[1]) : -1;
      };
      const before = await waitFor(async () => {
        const p = percent(tm('capture-pane', '-p', '-t', 'cli').stdout);
        return p >= 25 ? p : null;
      }, 30_000, 100);
      tm('send-keys', '-t', 'cli', 'C-c');
      await waitFor(async () => existsSync(log) && (await readFile(log, 'utf8')).includes('EXIT:'), 30_000, 200);
      assert.equal((await readFile(log, 'utf8')).trim(), 'EXIT:130');
      const final = tm('capture-pane', '-p', '-t', 'cli', '-S', '-100').stdout;
      assert.ok(!/FAILED/.test(final), final);
      assert.match(final, /tty-c2\.bin\s+\|[\u2588\u2591]{24}\| +\d+% \| .* \| ETA interrupted/);
      assert.ok(percent(final) >= before, `${before}% before Ctrl-C, then:\n${final}`);
      assert.match(final, new RegExp(`uploaded .*tty-c1\\.bin -> tty-c1\\.bin \\(512\\.0 KiB, md5 ${md5First}, 2 part\\(s\\) sent\\)`));
      const m = /interrupted .*tty-c2\.bin -> tty-c2\.bin: the server holds (\d+) of 16 parts of upload [0-9a-f-]{36}/.exec(final);
      assert.ok(m, final);
      assert.match(final, new RegExp(`1 file\\(s\\) uploaded, 0 failed, 1 interrupted \\(the server holds ${m[1]} of 16 parts; the same command resumes\\)`));
      assert.match(final, new RegExp(`files-rest: interrupted; the server holds ${m[1]} of 16 parts; run the same command again to resume`));
    } finally {
      proxy.setRates({ up: null });
      tm('kill-server');
      if (socketPath) await rm(socketPath, { force: true });
    }
  });
});

function createMd5(s: string): string {
  return createHash('md5').update(s).digest('hex');
}
