import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../../bin/files-rest.js', import.meta.url));

export interface ServerProcess {
  url: string;
  files: string;
  child: ChildProcess;
  /** stdout+stderr so far */
  output(): string;
  /**
   * Resolves once the output matches `re` (stdout and stderr are separate pipes, so a line
   * written to one after a line on the other can still arrive first); rejects after `ms`.
   */
  waitFor(re: RegExp, ms?: number): Promise<void>;
  /** Peak resident memory of the process in bytes (VmHWM). */
  peakRss(): number;
  kill(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Runs `files-rest <command>` as a child process with the given environment (and working directory). */
export function runCli(args: string[], env: Record<string, string>, opts: { cwd?: string } = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { PATH: process.env.PATH ?? '', FILES_REST_S3_PORT: 'off', ...env }, stdio: ['ignore', 'pipe', 'pipe'], cwd: opts.cwd });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Starts `files-rest serve` (or `worker`) as a real process; resolves once it logs
 * `listening on http://…` (serve) or after it started (worker).
 */
export function spawnFilesRest(command: 'serve' | 'worker', env: Record<string, string>): Promise<ServerProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, command], {
      env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'info', FILES_REST_S3_PORT: 'off', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let done = false;
    const timer = setTimeout(() => {
      if (!done) {
        done = true;
        child.kill('SIGKILL');
        reject(new Error(`files-rest ${command} did not start:\n${out}`));
      }
    }, 20_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/[^\s"]+)/.exec(out);
      const ready = command === 'serve' ? m : /task worker started/.test(out);
      if (ready && !done) {
        done = true;
        clearTimeout(timer);
        const url = m ? m[1]! : '';
        resolve({
          url,
          files: `${url}${env.FILES_REST_URL_PREFIX ?? ''}/files`,
          child,
          output: () => out,
          waitFor: (re, ms = 10_000) =>
            new Promise<void>((res, rej) => {
              if (re.test(out)) return res();
              const t = setTimeout(() => {
                child.stdout!.off('data', check);
                child.stderr!.off('data', check);
                rej(new Error(`files-rest ${command} never printed ${re}:\n${out}`));
              }, ms);
              function check() {
                // onData (registered first) has already appended this chunk to out.
                if (!re.test(out)) return;
                clearTimeout(t);
                child.stdout!.off('data', check);
                child.stderr!.off('data', check);
                res();
              }
              child.stdout!.on('data', check);
              child.stderr!.on('data', check);
            }),
          peakRss: () => {
            const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
            return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
          },
          kill: (signal = 'SIGTERM') =>
            new Promise((res) => {
              if (child.exitCode !== null || child.signalCode !== null) return res(child.exitCode);
              child.once('exit', (code) => res(code));
              child.kill(signal);
            }),
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      if (!done) {
        done = true;
        clearTimeout(timer);
        reject(new Error(`files-rest ${command} exited with ${code}:\n${out}`));
      }
    });
  });
}
