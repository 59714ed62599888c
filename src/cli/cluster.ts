/**
 * `serve` with FILES_REST_PROCESSES > 1: this process becomes a node:cluster primary that serves
 * nothing itself and runs that many server processes sharing the HTTP (and S3) ports, so that
 * small requests use every core. Each server process has its own database connections; SQLite's
 * WAL lets them read at once and serialises their writes (busy_timeout), as it does for a separate
 * worker process. Every rule that must hold across processes is already held by the database
 * (one head per key, the quota, part claims), as it is for several API hosts on PostgreSQL.
 *
 * - The first process starts alone: it migrates the database, creates the default location and the
 *   first token, and runs the background worker (unless FILES_REST_WORKER=0). The others start
 *   once it listens, with FILES_REST_WORKER=0.
 * - A process that dies is replaced (the first one's role included) after a second; one that dies
 *   before it ever listened stops the whole server (a setting or a port is wrong: restarting would
 *   not help).
 * - SIGTERM or SIGINT to the primary stops every process gracefully; the primary exits 0 when all
 *   exited 0. A server process whose primary is gone (kill -9) stops by itself.
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import type { Config } from '../config.js';

const RESTART_DELAY_MS = 1000;

export function runClusterPrimary(config: Config, log: Logger): Promise<number> {
  return new Promise((resolve) => {
    const first = new Set<Worker>();
    const listened = new Set<Worker>();
    let stopping = false;
    let failed = false;

    const fork = (isFirst: boolean): Worker => {
      const w = cluster.fork(isFirst ? {} : { FILES_REST_WORKER: '0' });
      if (isFirst) first.add(w);
      w.on('error', (err) => log.error({ err, pid: w.process.pid }, 'server process: IPC error'));
      w.once('listening', () => {
        listened.add(w);
        if (isFirst && !startedOthers) {
          startedOthers = true;
          for (let i = 1; i < config.processes; i++) fork(false);
        }
      });
      return w;
    };
    let startedOthers = false;

    const stopAll = (why: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ reason: why, processes: Object.keys(cluster.workers ?? {}).length }, 'stopping the server processes');
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
      if (Object.keys(cluster.workers ?? {}).length === 0) resolve(failed ? 1 : 0);
    };

    cluster.on('exit', (w, code, signal) => {
      const wasFirst = first.delete(w);
      const everListened = listened.delete(w);
      const remaining = Object.keys(cluster.workers ?? {}).length;
      if (stopping) {
        // A process still starting when the signal came has no handler yet: the signal ends it, as asked.
        if (code !== 0 && signal !== 'SIGTERM' && signal !== 'SIGINT') {
          failed = true;
          log.error({ pid: w.process.pid, code, signal }, 'a server process failed to stop cleanly');
        }
        if (remaining === 0) resolve(failed ? 1 : 0);
        return;
      }
      if (!everListened) {
        // It could not start: the same start would fail again.
        log.error({ pid: w.process.pid, code, signal }, 'a server process exited before it listened; stopping');
        failed = true;
        stopAll('a server process could not start');
        return;
      }
      log.error({ pid: w.process.pid, code, signal }, `a server process exited; starting another in ${RESTART_DELAY_MS} ms`);
      setTimeout(() => {
        if (!stopping) fork(wasFirst);
      }, RESTART_DELAY_MS).unref();
    });

    process.on('SIGTERM', () => stopAll('SIGTERM'));
    process.on('SIGINT', () => stopAll('SIGINT'));
    log.info({ processes: config.processes }, 'starting the server processes');
    fork(true);
  });
}

/** In a server process of the cluster: stop when the primary is gone (its IPC channel closed). */
export function onPrimaryGone(stop: () => void): void {
  if (cluster.isWorker) process.on('disconnect', stop);
}

export const isClusterPrimary = (config: Config): boolean => config.processes > 1 && cluster.isPrimary;
