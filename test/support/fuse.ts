// FUSE mounts made by a test (s3fs-fuse, s3backer): whether they can be made here, how they are
// undone, and a guard that undoes them when the test process ends without after() (a timeout, a
// signal from the test runner), so that no mount outlives its test.
import type { ChildProcess } from 'node:child_process';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/** fusermount (Debian's fuse package, a dependency of the FUSE clients: looked up once they are installed). */
export const fusermount = () => ['/usr/bin/fusermount', '/bin/fusermount', '/usr/bin/fusermount3', '/bin/fusermount3'].find((p) => existsSync(p)) ?? null;
export const UMOUNT = ['/usr/bin/umount', '/bin/umount'].find((p) => existsSync(p)) ?? 'umount';
/** The libfuse / fusermount messages of a mount that is not permitted or not possible here. */
export const NO_FUSE = /^(fuse: |fusermount3?: ).*|.*\/dev\/fuse.*/m;

/** A FUSE client in the foreground (a child of the test) and its mount point. */
export interface FuseMount {
  dir: string;
  child: ChildProcess;
  exited: Promise<void>;
}

/** Why FUSE mounts cannot be made here (no /dev/fuse; neither fusermount nor root), or undefined. */
export function fuseUnavailable(): string | undefined {
  if (!existsSync('/dev/fuse')) return '/dev/fuse does not exist: no FUSE here';
  if (!fusermount() && process.getuid?.() !== 0) return 'no fusermount and not root: cannot mount or unmount with FUSE';
  return undefined;
}

/** Is `dir` a mount point now (its line in /proc/self/mountinfo; the names here need no escaping)? */
export async function isMounted(dir: string): Promise<boolean> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  return info.split('\n').some((l) => l.split(' ')[4] === dir);
}

function quietly(cmd: string, args: string[]): Promise<number> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: 10_000 }, (err) => resolve(err ? 1 : 0));
  });
}

/** Unmounts (lazily if busy), then waits for the client to end (killed after 10 s); a dead client's mount goes too. */
export async function unmount(m: FuseMount): Promise<void> {
  const fm = fusermount();
  if (await isMounted(m.dir)) {
    if ((await quietly(fm ?? UMOUNT, fm ? ['-u', m.dir] : [m.dir])) !== 0) await quietly(fm ?? UMOUNT, fm ? ['-uz', m.dir] : ['-l', m.dir]);
  }
  if (m.child.exitCode === null && m.child.signalCode === null) {
    await Promise.race([m.exited, sleep(10_000)]);
    if (m.child.exitCode === null && m.child.signalCode === null) {
      m.child.kill('SIGKILL');
      await m.exited;
    }
  }
  if (await isMounted(m.dir)) await quietly(UMOUNT, ['-l', m.dir]);
}

const SIGNALS: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

/**
 * Until the returned function is called: should the process end (exit, or one of the signals the
 * test runner cancels a file with), every mount of `mounts` still served is undone at once and its
 * client killed; after a signal the process then dies of it as it would have.
 */
export function guardMounts(mounts: readonly FuseMount[]): () => void {
  const onExit = () => {
    const fm = fusermount();
    for (const m of mounts) {
      if (m.child.exitCode !== null || m.child.signalCode !== null) continue;
      spawnSync(fm ?? UMOUNT, fm ? ['-uz', m.dir] : ['-l', m.dir], { stdio: 'ignore', timeout: 5000 });
      m.child.kill('SIGKILL');
    }
  };
  const onSignal = (sig: NodeJS.Signals) => {
    onExit();
    release();
    process.kill(process.pid, sig);
  };
  const release = () => {
    process.off('exit', onExit);
    for (const s of SIGNALS) process.off(s, onSignal);
  };
  process.on('exit', onExit);
  for (const s of SIGNALS) process.on(s, onSignal);
  return release;
}

/** Runs `f`; on failure, the end of the FUSE client's log (named `client`) goes with the assertion. */
export async function withClientLog<T>(client: string, m: { log(): string }, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw new Error(`${e instanceof Error ? e.message : String(e)}\n--- ${client} log (end) ---\n${m.log().slice(-6000)}`, { cause: e });
  }
}
