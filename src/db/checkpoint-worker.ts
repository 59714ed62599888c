// The checkpoint thread (see checkpointer.ts): its own connection to the server's SQLite database,
// a PASSIVE checkpoint every few milliseconds, nothing else.
import { parentPort, workerData } from 'node:worker_threads';
import { openNodeSqlite, type SqliteConnection } from './node-sqlite.js';
import { nameThisThread } from '../util/thread-name.js';

const { file, driver, intervalMs } = workerData as { file: string; driver: 'better-sqlite3' | 'node'; intervalMs: number };
nameThisThread('files-rest-ckpt');

const db: Pick<SqliteConnection, 'prepare' | 'pragma' | 'close'> =
  driver === 'node' ? openNodeSqlite(file) : (new (await import('better-sqlite3')).default(file) as unknown as SqliteConnection);
db.pragma('busy_timeout = 5000');
// Flush the WAL before copying from it, as the server's connection does.
db.pragma('synchronous = NORMAL');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

let timer: NodeJS.Timeout | null = null;
function tick(): void {
  // SQLITE_BUSY (another process's checkpoint under way) is no failure: the next tick tries again.
  try {
    checkpoint.all();
  } catch (e) {
    if (!/busy|locked/i.test(String((e as Error)?.message))) throw e;
  }
  timer = setTimeout(tick, intervalMs);
}
timer = setTimeout(tick, intervalMs);

parentPort!.on('message', (m) => {
  if (m !== 'stop') return;
  if (timer) clearTimeout(timer);
  db.close();
  parentPort!.close();
});
