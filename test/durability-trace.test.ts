// Durability, proven by the order of system calls. A kill -9 leaves the page cache intact, so the
// kill -9 tests prove nothing about a power cut; this test runs the server under strace and checks,
// for every acknowledged upload, that its bytes and its metadata reached stable storage before the
// acknowledgement was written to the socket:
// - the object's file: written to a temporary path, fsync'ed, renamed to its final path, and the
//   directory fsync'ed (so the rename survives), all before the response;
// - SQLite: the last write to the WAL before the response (the commit) is followed by an fdatasync
//   of the WAL before the response (on PostgreSQL the commit's flush is the database server's);
// - a multipart part: its write to the upload's file is fsync'ed before its response;
// - a small object kept in the database (FILES_REST_INLINE_MAX_SIZE): no file is written, and
//   (SQLite) the WAL write of its commit is flushed before the response.
// One request at a time, so the system calls between two responses belong to the second request.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { findOrInstall, type Found } from './support/system.js';
import { testDatabase, testEnvironment } from './support/server.js';

const BIN = fileURLToPath(new URL('../../bin/files-rest.js', import.meta.url));

interface Call {
  line: number;
  name: string;
  /** The text after the pid. */
  text: string;
}

/** The calls of a strace -f -y log, in order; unfinished/resumed pairs counted at the resumption. */
function parse(log: string): Call[] {
  const calls: Call[] = [];
  const pending = new Map<string, string>();
  log.split('\n').forEach((raw, i) => {
    const m = /^(\d+)\s+(.*)$/.exec(raw);
    if (!m) return;
    const [, pid, rest] = m as unknown as [string, string, string];
    const unfinished = /^(\w+)\((.*) <unfinished \.\.\.>$/.exec(rest);
    if (unfinished) {
      pending.set(pid, rest.replace(/ <unfinished \.\.\.>$/, ''));
      return;
    }
    const resumed = /^<\.\.\. (\w+) resumed>(.*)$/.exec(rest);
    if (resumed) {
      const start = pending.get(pid) ?? `${resumed[1]}(`;
      pending.delete(pid);
      calls.push({ line: i, name: resumed[1]!, text: start + resumed[2] });
      return;
    }
    const call = /^(\w+)\(/.exec(rest);
    if (call) calls.push({ line: i, name: call[1]!, text: rest });
  });
  return calls;
}

/** The trace once it holds at least `n` 200 responses (strace writes a call's line after it returns). */
async function traceWith(file: string, n: number): Promise<{ calls: Call[]; responses: number[] }> {
  const end = Date.now() + 10_000;
  for (;;) {
    const calls = parse(readFileSync(file, 'utf8'));
    const responses = calls.map((c, i) => (isResponse(c, '200') ? i : -1)).filter((i) => i >= 0);
    if (responses.length >= n || Date.now() > end) return { calls, responses };
    await new Promise((r) => setTimeout(r, 50));
  }
}

const isResponse = (c: Call, status: string) => (c.name === 'writev' || c.name === 'write') && c.text.includes('<socket:') && c.text.includes(`HTTP/1.1 ${status}`);

/** Whether any process of the process group `pgid` is still running. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The index of a request's last write to SQLite's WAL (its commit) in its segment of calls, after
 * checking that an fdatasync (or fsync) of the WAL follows it within the segment; -1 when none.
 */
function walCommitFlushed(seg: Call[], n: number): number {
  let lastWalWrite = -1;
  seg.forEach((c, i) => {
    if ((c.name === 'pwrite64' || c.name === 'pwritev') && c.text.includes('-wal>')) lastWalWrite = i;
  });
  const walSync = seg.findIndex((c, i) => i > lastWalWrite && (c.name === 'fdatasync' || c.name === 'fsync') && c.text.includes('-wal>'));
  assert.ok(walSync > lastWalWrite, `PUT ${n}: the WAL holding the commit is flushed before the 200`);
  return lastWalWrite;
}

describe('durability: every acknowledgement comes after its flushes (strace)', () => {
  let found: Found;
  let env: Awaited<ReturnType<typeof testEnvironment>>;
  let child: ChildProcess | null = null;
  let url = '';
  let traceFile = '';

  before(async () => {
    found = await findOrInstall('strace', ['/usr/bin/strace']);
    if (!found.path) return;
    env = await testEnvironment('files-rest-trace-');
    traceFile = `${env.dir}/strace.log`;
    child = spawn(
      found.path,
      ['-f', '-y', '-qq', '-s', '64', '-o', traceFile,
        '-e', 'trace=write,writev,pwrite64,pwritev,fsync,fdatasync,rename,renameat,renameat2',
        process.execPath, BIN, 'serve'],
      // No background worker: its polling would add WAL flushes that are nobody's acknowledgement.
      // Its own process group: the traced server is killed with strace (a SIGKILLed strace detaches
      // its tracees, which would run on).
      { env: { PATH: process.env.PATH ?? '', ...env.env, LOG_LEVEL: 'warn', FILES_REST_WORKER: '0', FILES_REST_MULTIPART_CHUNKSIZE_MIN: '1024', FILES_REST_INLINE_MAX_SIZE: '1024' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    );
    let out = '';
    url = await new Promise<string>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`the traced server did not start:\n${out}`)), 30_000);
      const on = (d: Buffer) => {
        out += d.toString();
        const m = /listening on (http:\/\/[^\s"]+)/.exec(out);
        if (m) {
          clearTimeout(t);
          resolve(m[1]!);
        }
      };
      child!.stdout!.on('data', on);
      child!.stderr!.on('data', on);
      child!.on('exit', (code) => reject(new Error(`strace exited with ${code}:\n${out}`)));
    });
  });

  after(async () => {
    if (child?.pid !== undefined) {
      const exited = child.exitCode === null ? new Promise((r) => child!.once('exit', r)) : null;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* the group is gone */
      }
      await exited;
      // The traced server leaves the group only by exiting: wait until no member is left.
      for (let i = 0; i < 100 && groupAlive(child.pid); i++) await new Promise((r) => setTimeout(r, 50));
    }
    await env?.drop();
    if (env) await rm(env.dir, { recursive: true, force: true });
  });

  it('PUT of a file (above FILES_REST_INLINE_MAX_SIZE): file fsync, rename, directory fsync, and (SQLite) the WAL flush, all before the 200', async (t) => {
    if (!found.path) return t.skip(found.skip);
    const bucket = ((await (await fetch(`${url}/files`, { method: 'POST', headers: { connection: 'close' } })).json()) as { id: string }).id;
    const puts = 8;
    const before = (await traceWith(traceFile, 0)).responses.length;
    for (let i = 0; i < puts; i++) {
      const r = await fetch(`${url}/files/${bucket}/obj-${i}.bin`, { method: 'PUT', body: `object number ${i}`.repeat(100), headers: { connection: 'close' } });
      assert.equal(r.status, 200);
    }
    const { calls, responses } = await traceWith(traceFile, before + puts);
    // The last `puts` 200s are the PUTs; each segment runs from the previous response.
    const mine = responses.slice(-puts);
    assert.equal(mine.length, puts);
    for (const [n, end] of mine.entries()) {
      const start = responses[responses.indexOf(end) - 1]!;
      const seg = calls.slice(start + 1, end);
      const at = (pred: (c: Call) => boolean) => seg.findIndex(pred);
      const fsyncTmp = at((c) => c.name === 'fsync' && /\/data\.[^>]*\.tmp>/.test(c.text));
      assert.ok(fsyncTmp >= 0, `PUT ${n}: the temporary file is fsync'ed before the response`);
      const tmp = /<([^>]*\/data\.[^>]*\.tmp)>/.exec(seg[fsyncTmp]!.text)![1]!;
      const dir = tmp.slice(0, tmp.lastIndexOf('/'));
      const renamed = at((c) => c.name.startsWith('rename') && c.text.includes(`"${tmp}"`) && c.text.includes(`"${dir}/data"`));
      assert.ok(renamed > fsyncTmp, `PUT ${n}: renamed into place after the fsync (${renamed} > ${fsyncTmp})`);
      const dirSync = seg.findIndex((c, i) => i > renamed && c.name === 'fsync' && c.text.includes(`<${dir}>`));
      assert.ok(dirSync > renamed, `PUT ${n}: the directory is fsync'ed after the rename`);
      if (testDatabase() === 'sqlite') {
        const lastWalWrite = walCommitFlushed(seg, n);
        assert.ok(lastWalWrite > dirSync, `PUT ${n}: the metadata is committed after the file is in place`);
      }
    }
  });

  it('PUT of a small object kept in the database: no file written, and (SQLite) the WAL write of its commit flushed before the 200', async (t) => {
    if (!found.path) return t.skip(found.skip);
    const bucket = ((await (await fetch(`${url}/files`, { method: 'POST', headers: { connection: 'close' } })).json()) as { id: string }).id;
    const puts = 8;
    const before = (await traceWith(traceFile, 0)).responses.length;
    for (let i = 0; i < puts; i++) {
      const r = await fetch(`${url}/files/${bucket}/small-${i}.txt`, { method: 'PUT', body: `small object ${i}`.repeat(20), headers: { connection: 'close' } });
      assert.equal(r.status, 200);
    }
    const { calls, responses } = await traceWith(traceFile, before + puts);
    const mine = responses.slice(-puts);
    for (const [n, end] of mine.entries()) {
      const seg = calls.slice(responses[responses.indexOf(end) - 1]! + 1, end);
      const dataWrite = seg.find((c) => /^(write|writev|pwrite64|pwritev)$/.test(c.name) && /\/data(\.[^>]*)?>/.test(c.text));
      assert.equal(dataWrite, undefined, `PUT ${n}: no file of the location is written`);
      if (testDatabase() === 'sqlite') {
        assert.ok(walCommitFlushed(seg, n) >= 0, `PUT ${n}: its commit (bytes and metadata) is written to the WAL`);
      }
    }
  });

  it('multipart part: its bytes are fsync\'ed in the upload\'s file before the part\'s 200', async (t) => {
    if (!found.path) return t.skip(found.skip);
    const bucket = ((await (await fetch(`${url}/files`, { method: 'POST', headers: { connection: 'close' } })).json()) as { id: string }).id;
    const init = await fetch(`${url}/files/${bucket}/big.bin?uploads&size=4096&partSize=2048`, { method: 'POST', headers: { connection: 'close' } });
    assert.equal(init.status, 200, await init.clone().text());
    const id = ((await init.json()) as { id: string }).id;
    for (const part of [0, 1]) {
      const before = (await traceWith(traceFile, 0)).responses.length;
      const r = await fetch(`${url}/files/${bucket}/big.bin?uploadId=${id}&partNumber=${part}`, { method: 'PUT', body: Buffer.alloc(2048, part + 1), headers: { connection: 'close' } });
      assert.equal(r.status, 200, await r.text());
      const { calls, responses } = await traceWith(traceFile, before + 1);
      const end = responses.at(-1)!;
      const seg = calls.slice(responses.at(-2)! + 1, end);
      const write = seg.findIndex((c) => (c.name === 'pwritev' || c.name === 'pwrite64' || c.name === 'writev') && /\/data(\.[^>]*)?>/.test(c.text) && !c.text.includes('socket'));
      assert.ok(write >= 0, `part ${part}: written to the upload's file`);
      const file = /<([^>]*\/data[^>]*)>/.exec(seg[write]!.text)![1]!;
      const synced = seg.findIndex((c, i) => i > write && (c.name === 'fsync' || c.name === 'fdatasync') && c.text.includes(`<${file}>`));
      assert.ok(synced > write, `part ${part}: ${file} is flushed before the 200`);
    }
  });
});
