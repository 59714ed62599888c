// files-rest's Node.js flags (src/util/node-flags.ts) are given wherever files-rest is started: the
// `files-rest` command's first line, `npm start`, and deploy/'s systemd units (cluster.test.ts: the
// server processes of a cluster). A process started through the command runs with them.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { rm } from 'node:fs/promises';
import { NODE_FLAGS, missingNodeFlags } from '../src/util/node-flags.js';
import { testEnvironment } from './support/server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(`${ROOT}${path}`, 'utf8');

describe("files-rest's Node.js flags", () => {
  it('are on the first line of the files-rest command', () => {
    assert.equal(read('bin/files-rest.js').split('\n')[0], `#!/usr/bin/env -S node ${NODE_FLAGS.join(' ')}`);
  });

  it('are given by npm start and by every systemd unit in deploy/', () => {
    const start = (JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start;
    assert.equal(start, `node ${NODE_FLAGS.join(' ')} bin/files-rest.js serve`);
    for (const unit of ['files-rest-api@.service', 'files-rest-worker@.service']) {
      const exec = read(`deploy/${unit}`).split('\n').find((l) => l.startsWith('ExecStart='));
      assert.ok(exec?.startsWith(`ExecStart=/usr/bin/node ${NODE_FLAGS.join(' ')} /opt/files-rest/bin/files-rest.js `), `${unit}: ${exec}`);
    }
  });

  it('reach the server when the command is run as a program (its first line)', async () => {
    const env = await testEnvironment('files-rest-node-flags-', { ownDatabase: false });
    const child = spawn(`${ROOT}bin/files-rest.js`, ['serve'], { env: { PATH: process.env.PATH ?? '', ...env.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the server did not start:\n${out}`)), 20_000);
        const onData = (d: Buffer) => {
          out += d.toString();
          if (/listening on http/.test(out)) {
            clearTimeout(timer);
            resolve();
          }
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
        child.once('exit', (code) => reject(new Error(`the server exited (${code}):\n${out}`)));
      });
      // Listening, so `env` has long made way for node: this is node's own command line.
      const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
      assert.match(cmdline[0]!, /node/);
      assert.deepEqual(missingNodeFlags(cmdline), [], `command line: ${cmdline.join(' ')}`);
    } finally {
      child.kill('SIGKILL');
      await rm(env.dir, { recursive: true, force: true });
    }
  });

  it('missingNodeFlags names the flags a command line lacks', () => {
    assert.deepEqual(missingNodeFlags([]), [...NODE_FLAGS]);
    assert.deepEqual(missingNodeFlags(['--inspect', ...NODE_FLAGS]), []);
  });
});
