import { Command, CommanderError } from 'commander';
import { ConfigError, loadConfig } from '../config.js';
import { AppError } from '../errors.js';
import { createLogger, createServer, createWorker, openCore, prepareLocations, startServer } from '../service.js';
import { DatabaseMissingError, describeDatabaseUrl } from '../db/presence.js';
import { listLocations } from '../domain/locations.js';
import type { WithCore } from './admin.js';
import { output } from './output.js';
import { loadServerKeys } from '../auth/server-key.js';
import { isClusterPrimary, onPrimaryGone, runClusterPrimary } from './cluster.js';
import { limitHeapGrowth } from '../util/heap-growth.js';
import { collectAfterStartup } from '../util/startup-gc.js';

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
      limitHeapGrowth(config.heapGrowthPercent);
      if (isClusterPrimary(config)) {
        process.exitCode = await runClusterPrimary(config, createLogger(config));
        return;
      }
      const server = await createServer(config);
      await startServer(server);
      collectAfterStartup();
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
      onPrimaryGone(() => stop('the primary process is gone'));
    });

  program
    .command('worker')
    .description('run the background task worker alone')
    .option('--concurrency <n>', 'tasks at once', '2')
    .action(async (o: { concurrency: string }) => {
      const config = loadConfig();
      limitHeapGrowth(config.heapGrowthPercent);
      const core = await openCore(config, createLogger(config, 'files-rest-worker'));
      // The worker sweeps storage: it adopts the locations (owner markers) as the server does.
      await prepareLocations(core.ctx, { autoLocation: false });
      const worker = createWorker(core, { concurrency: Math.max(1, Number(o.concurrency) || 2) });
      worker.start();
      collectAfterStartup();
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
    // Admin commands never create a database: run elsewhere, they would act on a new, empty one.
    const core = await openCore(config, log, null, { create: false });
    try {
      await fn(core, output(json));
    } finally {
      await core.close();
    }
  };
  program
    .command('init')
    .description('create the database (and, unless FILES_REST_AUTO_LOCATION=0, the default location) without serving')
    .action(async () => {
      const config = loadConfig();
      const log = createLogger(config);
      log.level = 'warn';
      let created = false;
      let core;
      try {
        core = await openCore(config, log, null, { create: false });
      } catch (e) {
        if (!(e instanceof DatabaseMissingError)) throw e;
        core = await openCore(config, log, null, { create: true });
        created = true;
      }
      try {
        await prepareLocations(core.ctx);
        // A SQLite installation without FILES_REST_SERVER_KEY gets its key file now (S3 access keys).
        const keys = loadServerKeys(config, log, { create: true });
        if (keys?.created) process.stderr.write(`files-rest: generated the server key for S3 access keys in ${keys.source} (mode 0600); back it up with the database\n`);
        const where = describeDatabaseUrl(config.databaseUrl);
        const ls = await listLocations(core.ctx.db);
        output(json).print(
          [
            created ? `created the files-rest database at ${where}` : `the files-rest database at ${where} already exists`,
            ...ls.map((l) => `${l.isDefault ? '*' : ' '} ${l.name}\t${l.uri}`),
          ].join('\n'),
          { database: where, created, locations: ls.map((l) => ({ name: l.name, uri: l.uri, default: l.isDefault })) },
        );
      } finally {
        await core.close();
      }
    });
  // `serve` runs without the admin and client commands: their modules (the client, its progress
  // bars, its hashing) are not loaded into a server process (an idle server: 2–4 MB less RSS).
  if (args.find((a) => !a.startsWith('-')) !== 'serve') {
    const [{ adminCommands }, { clientCommands }] = await Promise.all([import('./admin.js'), import('./client-commands.js')]);
    adminCommands(program, withCore);
    clientCommands(program);
  }

  try {
    await program.parseAsync(args, { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) process.exit(e.exitCode);
    fail(e);
  }
}
