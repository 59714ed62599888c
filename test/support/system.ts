// Helpers for tests that need a program from Debian's packages (nginx, chromium): find it, or
// install it with apt-get when the test runs as root on Debian, or say plainly why the test is
// skipped. .ci/run installs these packages beforehand, so in CI nothing is installed from here.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';

export type Found = { path: string; skip?: undefined } | { path?: undefined; skip: string };

function run(cmd: string, args: string[], timeoutMs: number): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: -1, output: String(e) });
    });
  });
}

const installs = new Map<string, Promise<Found>>();

/**
 * The first of `binaries` that exists; if none does, `apt-get install -y <pkg>` (root on Debian
 * only, at most once per package per process) and look again. Never throws: returns a skip reason.
 * FILES_REST_TEST_NO_INSTALL=1 turns installing off.
 */
export function findOrInstall(pkg: string, binaries: string[]): Promise<Found> {
  const present = binaries.find((b) => existsSync(b));
  if (present) return Promise.resolve({ path: present });
  let p = installs.get(pkg);
  if (!p) {
    p = install(pkg, binaries);
    installs.set(pkg, p);
  }
  return p;
}

async function install(pkg: string, binaries: string[]): Promise<Found> {
  const missing = `${binaries.join(' or ')} not found`;
  if (process.env.FILES_REST_TEST_NO_INSTALL === '1') return { skip: `${missing} and FILES_REST_TEST_NO_INSTALL=1` };
  if (process.platform !== 'linux' || !existsSync('/usr/bin/apt-get')) return { skip: `${missing} and apt-get is not available to install ${pkg}` };
  if (process.getuid?.() !== 0) return { skip: `${missing} and not running as root, so apt-get cannot install ${pkg}` };
  console.log(`# ${missing}: installing the Debian package ${pkg} (apt-get install -y ${pkg})`);
  const args = ['-o', 'DPkg::Lock::Timeout=300', 'install', '-y', '-q', pkg];
  let r = await run('apt-get', args, 600_000);
  if (r.code !== 0) {
    await run('apt-get', ['-o', 'DPkg::Lock::Timeout=300', 'update', '-q'], 300_000);
    r = await run('apt-get', args, 600_000);
  }
  const present = binaries.find((b) => existsSync(b));
  if (present) return { path: present };
  return { skip: `${missing}; apt-get install ${pkg} failed: ${r.output.trim().split('\n').slice(-3).join(' / ')}` };
}

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** Resolves once something accepts connections on 127.0.0.1:port (tries for at most `timeoutMs`). */
export async function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port });
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > end) throw new Error(`nothing listens on 127.0.0.1:${port}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
