// A read thread (see read-threads.ts): its own connection to the server's SQLite database, which
// runs the SELECT statements it is sent, in order, and answers each batch in one message.
import { parentPort, workerData } from 'node:worker_threads';
import { openNodeSqlite, type SqliteConnection, type SqliteStatement } from './node-sqlite.js';
import { nameThisThread } from '../util/thread-name.js';
import { registerSqlFunctions } from './sqlite-functions.js';
import type { ReadAnswer, ReadRequest } from './read-threads.js';

const { file, driver, mmapSize } = workerData as { file: string; driver: 'better-sqlite3' | 'node'; mmapSize: number };
nameThisThread('files-rest-read');

const db: Pick<SqliteConnection, 'prepare' | 'pragma' | 'close' | 'function'> =
  driver === 'node' ? openNodeSqlite(file) : (new (await import('better-sqlite3')).default(file, { fileMustExist: true }) as unknown as SqliteConnection);
// This connection reads and never writes: a statement that would write fails here instead.
db.pragma('query_only = ON');
db.pragma('busy_timeout = 15000');
db.pragma('temp_store = MEMORY');
db.pragma(`mmap_size = ${mmapSize}`);
registerSqlFunctions(db);

/** Prepared statements by the id the server gave their SQL text (it sends each text once). */
const statements = new Map<number, SqliteStatement>();

function answer(r: ReadRequest): ReadAnswer {
  try {
    let st = statements.get(r.sqlId);
    if (!st) {
      if (r.sql === undefined) throw new Error(`read thread: no SQL text for statement ${r.sqlId}`);
      st = db.prepare(r.sql);
      statements.set(r.sqlId, st);
    }
    if (!st.reader) throw new Error('read thread: the statement returns no rows');
    const rows = st.all(r.params) as Record<string, unknown>[];
    // Blobs arrive on the other side as plain Uint8Arrays: name their columns, so that it can make
    // them Buffers again (as the server's own connection returns them).
    let blobs: string[] | undefined;
    for (const row of rows) {
      for (const k in row) {
        if (row[k] instanceof Uint8Array && !blobs?.includes(k)) (blobs ??= []).push(k);
      }
    }
    return { id: r.id, rows, blobs };
  } catch (e) {
    const err = e as { message?: string; code?: string; name?: string };
    return { id: r.id, error: { message: String(err?.message ?? e), code: err?.code, name: err?.name } };
  }
}

parentPort!.on('message', (m: ReadRequest[] | 'stop') => {
  if (m === 'stop') {
    statements.clear();
    db.close();
    parentPort!.close();
    return;
  }
  parentPort!.postMessage(m.map(answer));
});
