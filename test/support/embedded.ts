// files-rest embedded in a test process the way an application embeds it: the package's own
// exports (createServer, startServer, loadConfig), a config object, and a logger whose lines the
// test can read.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createServer, loadConfig, startServer, type Server } from '../../src/index.js';
import { createPgDatabase, testDatabase } from './server.js';

export interface Embedded {
  server: Server;
  files: string;
  /** Every log line so far, parsed. */
  logs: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function startEmbedded(settings: Record<string, string> = {}): Promise<Embedded> {
  const dir = await mkdtemp(join(tmpdir(), 'files-rest-embed-'));
  let databaseUrl = `sqlite:${join(dir, 'db.sqlite')}`;
  let drop = async () => {};
  if (testDatabase() === 'postgres') {
    const pg = await createPgDatabase();
    databaseUrl = pg.url;
    drop = pg.drop;
  }
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  const config = loadConfig({
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_URL: databaseUrl,
    FILES_REST_DATA_DIR: join(dir, 'data'),
    FILES_REST_PERMISSION_FACTORY: 'allow-all',
    FILES_REST_TASK_POLL_INTERVAL: '50',
    LOG_LEVEL: 'warn',
    ...settings,
  });
  const server = await createServer(config, { log: pino({ level: config.logLevel }, sink) });
  const url = await startServer(server);
  return {
    server,
    files: `${url}${config.urlPrefix}/files`,
    logs,
    async close() {
      await server.stop();
      await drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
