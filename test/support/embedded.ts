// files-rest embedded in a test process the way an application embeds it: the package's own
// exports (createServer, startServer, loadConfig), a config object, and a logger whose lines the
// test can read.
import { rm } from 'node:fs/promises';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createServer, loadConfig, startServer, type Server } from '../../src/index.js';
import { testEnvironment } from './server.js';

export interface Embedded {
  server: Server;
  files: string;
  /** Every log line so far, parsed. */
  logs: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function startEmbedded(settings: Record<string, string> = {}): Promise<Embedded> {
  const { dir, drop, env } = await testEnvironment('files-rest-embed-');
  const logs: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) logs.push(JSON.parse(line) as Record<string, unknown>);
      cb();
    },
  });
  const config = loadConfig({ ...env, LOG_LEVEL: 'warn', ...settings });
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
