/**
 * The peer: s3rver (https://github.com/jamhall/s3rver, a devDependency), a Node S3 server on koa
 * that keeps each object as plain files (the body, its metadata as JSON, its MD5) and never fsyncs.
 * The benchmark starts it as a child process next to files-rest and measures it with the same client.
 */
import { createRequire } from 'node:module';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { HttpClient } from './client.js';
import { ROOT, startOnFreePorts, type ManagedProcess } from './proc.js';
import type { S3Credentials } from './sigv4.js';
import { s3Target, type StoreTarget } from './targets.js';

/** s3rver's built-in account: it accepts any well-formed SigV4 header naming this access key. */
export const PEER_CREDENTIALS: S3Credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', region: 'us-east-1' };

export interface PeerInfo {
  name: 's3rver';
  version: string | null;
  running: boolean;
  /** Why it is not running. */
  error?: string;
  /** Its process id and command line (node flags, script, options), while it runs. */
  pid?: number;
  args?: string[];
}

export interface Peer {
  info: PeerInfo;
  proc: ManagedProcess | null;
  /** A target on the peer with a pool of `connections` (a fresh client each call), or null when it is not running. */
  target(connections: number): StoreTarget | null;
}

/** s3rver's start script, or null when the package is not installed. */
function s3rverScript(): { script: string; version: string } | null {
  try {
    const pkg = createRequire(join(ROOT, 'package.json')).resolve('s3rver/package.json');
    const version = String((JSON.parse(readFileSync(pkg, 'utf8')) as { version?: unknown }).version ?? '');
    return { script: join(dirname(pkg), 'bin', 's3rver.js'), version };
  } catch {
    return null;
  }
}

/**
 * Starts s3rver on a free port of 127.0.0.1 with its data in `<dir>/s3rver`, and waits until it
 * answers `GET /` (ListBuckets). `--openssl-legacy-provider`: its ListObjectsV2 continuation tokens
 * are DES-encrypted, which OpenSSL 3 only offers through the legacy provider. When it is not
 * installed or does not start, the answer says why (`info.error`) and `target` answers null; the
 * benchmark goes on without it. `onStarted` gets the process at once (for the clean-ups).
 */
export async function startPeer(dir: string, onStarted: (p: ManagedProcess) => void): Promise<Peer> {
  const found = s3rverScript();
  const none = (error: string, version: string | null): Peer => ({
    info: { name: 's3rver', version, running: false, error },
    proc: null,
    target: () => null,
  });
  if (!found) return none('not installed (npm install: it is a devDependency)', null);
  const data = join(dir, 's3rver');
  mkdirSync(data, { recursive: true });
  const argsAt = (port: number) => ['--openssl-legacy-provider', found.script, '--directory', data, '--port', String(port), '--address', '127.0.0.1', '--silent'];
  let proc: ManagedProcess;
  try {
    ({ proc } = await startOnFreePorts(
      's3rver',
      (port) => ({ args: argsAt(port), env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? dir } }),
      { cwd: dir, logFile: join(dir, 's3rver.log'), path: '/' },
    ));
  } catch (e) {
    return none(`did not start: ${String((e as Error).message ?? e).replace(/\s+/g, ' ').slice(0, 300)}`, found.version);
  }
  onStarted(proc);
  const port = Number(new URL(proc.url).port);
  return {
    info: { name: 's3rver', version: found.version, running: true, pid: proc.pid, args: argsAt(port) },
    proc,
    target: (connections) => s3Target('s3rver', proc, new HttpClient(proc.url, connections), PEER_CREDENTIALS, false),
  };
}
