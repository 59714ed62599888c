import { Command, CommanderError } from 'commander';
import { ConfigError, loadConfig } from '../config.js';
import { AppError } from '../errors.js';
import { createLogger, createServer, createWorker, openCore, startServer } from '../service.js';
import { adminCommands, type WithCore } from './admin.js';
import { clientCommands } from './client-commands.js';
import { output } from './output.js';

function fail(e: unknown): never {
  let msg: string;
  if (e instanceof ConfigError) msg = `invalid setting ${e.message}`;
  else if (e instanceof AppError) msg = e.errors?.length ? `${e.message} ${e.errors.map((x) => `${x.field}: ${x.message}`).join('; ')}` : e.message;
  else msg = (e as Error)?.message ?? String(e);
  process.stderr.write(`files-rest: ${msg.split('\n')[0]}\n`);
  process.exit(1);
}

export async function main(argv: string[]): Promise<void> {
  const json = argv.includes('--json');
  const args = argv.filter((a) => a !== '--json');
  const program = new Command('files-rest')
    .description('files-rest: a file storage service (buckets of versioned objects over REST)')
    .option('--json', 'print one JSON document')
    .exitOverride()
    .showHelpAfterError();

  program
    .command('serve')
    .description('serve the HTTP API (and, unless FILES_REST_WORKER=0, the background worker)')
    .action(async () => {
      const config = loadConfig();
      const server = await createServer(config);
      await startServer(server);
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        server.core.log.info({ signal }, 'shutting down');
        server.stop().then(
          () => process.exit(0),
          (e) => {
            server.core.log.error({ err: e }, 'shutdown failed');
            process.exit(1);
          },
        );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
    });

  program
    .command('worker')
    .description('run the background task worker alone')
    .option('--concurrency <n>', 'tasks at once', '2')
    .action(async (o: { concurrency: string }) => {
      const config = loadConfig();
      const core = await openCore(config, createLogger(config, 'files-rest-worker'));
      const worker = createWorker(core.ctx, { concurrency: Math.max(1, Number(o.concurrency) || 2) });
      worker.start();
      let stopping = false;
      // Stop claiming; the current tasks finish within FILES_REST_SHUTDOWN_GRACE or are given back.
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        core.log.info({ signal }, 'shutting down');
        worker
          .stop(config.shutdownGrace * 1000)
          .then(() => core.close())
          .then(
            () => process.exit(0),
            (e) => {
              core.log.error({ err: e }, 'shutdown failed');
              process.exit(1);
            },
          );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
    });

  const withCore: WithCore = async (fn) => {
    const config = loadConfig();
    const log = createLogger(config);
    log.level = 'warn';
    const core = await openCore(config, log);
    try {
      await fn(core, output(json));
    } finally {
      await core.close();
    }
  };
  adminCommands(program, withCore);
  clientCommands(program);

  try {
    await program.parseAsync(args, { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) process.exit(e.exitCode);
    fail(e);
  }
}
