// The checkpoint thread (see checkpointer.ts): its own connection to the server's SQLite database,
// a PASSIVE checkpoint every few milliseconds while there is something to copy, nothing else.
import { parentPort, workerData } from 'node:worker_threads';
import { openNodeSqlite, type SqliteConnection } from './node-sqlite.js';
import { nameThisThread } from '../util/thread-name.js';

const { file, driver, intervalMs, idleTicks, restartBytes, pauseWaitMs } = workerData as {
  file: string;
  driver: 'better-sqlite3' | 'node';
  intervalMs: number;
  idleTicks: number;
  restartBytes: number;
  pauseWaitMs: number;
};
nameThisThread('files-rest-ckpt');

const db: Pick<SqliteConnection, 'prepare' | 'pragma' | 'close'> =
  driver === 'node' ? openNodeSqlite(file) : (new (await import('better-sqlite3')).default(file) as unknown as SqliteConnection);
db.pragma('busy_timeout = 5000');
// Flush the WAL before copying from it, as the server's connection does.
db.pragma('synchronous = NORMAL');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const restart = db.prepare('PRAGMA wal_checkpoint(RESTART)');
const pageSize = Number((db.prepare('PRAGMA page_size').all()[0] as { page_size: number }).page_size);
// The WAL's length, in frames, from which the next tick restarts it.
const restartFrames = Math.max(1, Math.floor(restartBytes / pageSize));

interface CheckpointRow {
  busy: number;
  log: number;
  checkpointed: number;
}

let timer: NodeJS.Timeout | null = null;
let quiet = 0;
let lastLog = -1;
let ended = false;
/** Set while the thread waits for the server's writer to pause before a restart. */
let awaitingPause = false;

function end(): void {
  ended = true;
  if (timer) clearTimeout(timer);
  timer = null;
  db.close();
  parentPort!.close();
}

/** Runs a checkpoint; SQLITE_BUSY (another process's checkpoint under way) is no failure: the next tick tries again. */
function run(statement: typeof checkpoint): CheckpointRow | undefined {
  try {
    return statement.all()[0] as CheckpointRow | undefined;
  } catch (e) {
    if (!/busy|locked/i.test(String((e as Error)?.message))) throw e;
    return undefined;
  }
}

/** Counts a checkpoint's outcome toward the thread's end: nothing new twice in a row is quiet. */
function record(row: CheckpointRow | undefined): void {
  // Nothing new: every frame of the WAL is in the database file, and the WAL did not move.
  const idle = row !== undefined && row.log === row.checkpointed && row.log === lastLog;
  lastLog = row?.log ?? -1;
  quiet = idle ? quiet + 1 : 0;
}

function next(): void {
  if (ended) return;
  if (quiet >= idleTicks) {
    parentPort!.postMessage('idle');
    end();
    return;
  }
  timer = setTimeout(tick, intervalMs);
}

function tick(): void {
  timer = null;
  const row = run(checkpoint);
  // Under steady writes a PASSIVE checkpoint never catches up with the last frame, and SQLite
  // starts the WAL over only once every frame is in the database file: the WAL grew without end
  // (2.4 GB in 20 s of 4 KiB uploads, for a 290 MB database), and every read looked a page up in
  // an ever longer WAL index. Past restartFrames, a RESTART checkpoint holds writers back while it
  // copies what the passive one left (a tick's worth of commits) and syncs the database file; the
  // next commit then writes from the start of the WAL, which journal_size_limit cuts back. The
  // server's writer is asked to pause first (checkpointer.ts), and the restart runs once it has,
  // or after pauseWaitMs without an answer.
  if (row !== undefined && row.log >= restartFrames) {
    awaitingPause = true;
    parentPort!.postMessage('pause');
    timer = setTimeout(() => restartNow(false), pauseWaitMs);
    return;
  }
  record(row);
  next();
}

function restartNow(paused: boolean): void {
  if (!awaitingPause || ended) return;
  awaitingPause = false;
  if (timer) clearTimeout(timer);
  timer = null;
  let row: CheckpointRow | undefined;
  try {
    row = run(restart);
  } finally {
    parentPort!.postMessage(paused ? 'resume' : 'restarted-unpaused');
  }
  record(row);
  next();
}
timer = setTimeout(tick, intervalMs);

parentPort!.on('message', (m) => {
  if (m === 'stop') end();
  else if (m === 'paused') restartNow(true);
});
