/**
 * Client commands of the `files-rest` program: they talk to a server over HTTP with the SDK
 * (src/client), unlike the admin commands, which open the database.
 *
 *   files-rest mb
 *   files-rest upload FILE... --bucket ID [--key K] [--prefix P] [--recursive] [--skip-unchanged] [--parallel N] [--jobs N]
 *   files-rest download KEY [DEST] --bucket ID [--version V]
 *   files-rest ls --bucket ID [--prefix P] [--versions] [--uploads]
 *   files-rest rm KEY --bucket ID [--version V]
 *
 * URL and token come from --url/--token or FILES_REST_URL/FILES_REST_TOKEN. On a terminal, uploads
 * and downloads show a progress bar per file (bytes, rate, ETA) and a summary; otherwise plain lines,
 * or one JSON document with --json. Nothing but printable text is written when not on a terminal.
 */
import { readdir, stat } from 'node:fs/promises';
import { basename, join, relative, resolve, sep } from 'node:path';
import { Option, type Command } from 'commander';
import cliProgress from 'cli-progress';
import {
  ChecksumMismatchError, ConnectionError, FilesError, NodeFilesClient, UploadStoppedError, isAbortError, type ObjectVersion, type UploadResult,
} from '../client/node.js';
import { commonPrefix, headsByKey, unchangedMd5 } from './unchanged.js';

// ---- shared ----------------------------------------------------------------------------------

interface ConnOpts {
  url?: string;
  token?: string;
}

function jsonWanted(): boolean {
  // main() strips --json from the arguments before commander sees them.
  return process.argv.includes('--json');
}

function connect(o: ConnOpts): NodeFilesClient {
  if (!o.url) throw new Error('no server URL: give --url URL or set FILES_REST_URL');
  try {
    return new NodeFilesClient({ url: o.url, ...(o.token ? { token: o.token } : {}) });
  } catch {
    throw new Error(`invalid server URL ${JSON.stringify(o.url)}`);
  }
}

function withConn(cmd: Command): Command {
  return cmd
    .addOption(new Option('--url <url>', 'server URL (or FILES_REST_URL)').env('FILES_REST_URL'))
    .addOption(new Option('--token <token>', 'API token (or FILES_REST_TOKEN)').env('FILES_REST_TOKEN'));
}

/** One line, no control characters: safe on any output. */
function clean(s: string): string {
  return s.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
}

function errorText(e: unknown): string {
  if (e instanceof FilesError) return `${e.message} (HTTP ${e.status})`;
  if (e instanceof ChecksumMismatchError || e instanceof ConnectionError || e instanceof UploadStoppedError) return clean(e.message);
  const err = e as Error & { cause?: { code?: string; message?: string } };
  const cause = err?.cause ? `: ${err.cause.code ?? err.cause.message ?? ''}` : '';
  return clean(`${err?.message ?? String(e)}${cause}`);
}

/** Errors of a simple command: one line through main()'s handler. */
async function simple(fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    throw new Error(errorText(e));
  }
}

export function parseSize(v: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)$/i.exec(v.trim());
  if (!m) throw new Error(`not a size: ${v} (bytes, or with K, M, G: 8M, 16MiB)`);
  const mult = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g' | 't'];
  const n = Math.round(Number(m[1]) * mult);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`not a size: ${v}`);
  return n;
}

function intOption(name: string, min: number) {
  return (v: string): number => {
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > 1000) throw new Error(`${name} must be a whole number from ${min} to 1000, got ${v}`);
    return Number(v);
  };
}

function secondsOption(v: string): number {
  if (!/^\d{1,9}$/.test(v) || Number(v) < 1) throw new Error(`--expires-in must be a whole number of seconds, got ${v}`);
  return Number(v);
}

export function humanBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

function humanDuration(s: number): string {
  if (!Number.isFinite(s) || s < 0) return '--';
  if (s < 60) return `${Math.ceil(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

// ---- progress --------------------------------------------------------------------------------

/** Bytes per second over the last few seconds. */
class Rate {
  private samples: [number, number][] = [];
  sample(loaded: number): number {
    const now = Date.now();
    this.samples.push([now, loaded]);
    while (this.samples.length > 2 && now - this.samples[0]![0] > 5000) this.samples.shift();
    const [t0, l0] = this.samples[0]!;
    return now > t0 ? ((loaded - l0) * 1000) / (now - t0) : 0;
  }
}

interface Task {
  update(loaded: number, total?: number): void;
  finish(line: string): void;
  fail(line: string): void;
  /** The user stopped it: the bar stays where it got to (no FAILED); later updates are ignored. */
  interrupt(line: string): void;
}

interface Reporter {
  task(label: string, total: number): Task;
  /** A line for people (resume, retry, restart…). */
  note(line: string): void;
  stop(): void;
}

/** On a terminal: one bar per file, redrawn in place. */
function barReporter(): Reporter {
  const multi = new cliProgress.MultiBar(
    {
      format: ' {label} |{bar}| {percentage}% | {amount} | {rate} | ETA {left}',
      barCompleteChar: '\u2588',
      barIncompleteChar: '\u2591',
      barsize: 24,
      hideCursor: true,
      clearOnComplete: false,
      stopOnComplete: false,
      autopadding: true,
      fps: 8,
      // Lines logged above the bars move them down a row: without a full redraw a bar that did not
      // change is not drawn again at its new place (cli-progress 3.12).
      forceRedraw: true,
      stream: process.stdout,
    },
    cliProgress.Presets.shades_classic,
  );
  return {
    task(label, total) {
      const name = label.length > 28 ? `…${label.slice(-27)}` : label.padEnd(28);
      const rate = new Rate();
      const bar = multi.create(Math.max(total, 1), 0, { label: name, amount: `0 B/${humanBytes(total)}`, rate: '-- /s', left: '--' });
      const payload = (loaded: number, t: number, r: number) => ({
        label: name,
        amount: `${humanBytes(loaded)}/${humanBytes(t)}`,
        rate: `${humanBytes(Math.round(r))}/s`,
        left: r > 0 ? humanDuration((t - loaded) / r) : '--',
      });
      let last = 0;
      let frozen = false;
      const started = Date.now();
      return {
        update(loaded, t = total) {
          if (frozen) return;
          const r = rate.sample(loaded);
          if (t !== total) {
            total = t;
            bar.setTotal(Math.max(t, 1));
          }
          last = loaded;
          bar.update(loaded, payload(loaded, t, r));
        },
        finish(line) {
          const secs = (Date.now() - started) / 1000;
          bar.update(Math.max(total, 1), { ...payload(total, total, secs > 0 ? total / secs : 0), left: 'done' });
          multi.log(`${clean(line)}\n`);
        },
        fail(line) {
          bar.update(last, { ...payload(last, total, 0), left: 'FAILED' });
          multi.log(`${clean(line)}\n`);
        },
        interrupt(line) {
          frozen = true;
          bar.update(last, { ...payload(last, total, 0), left: 'interrupted' });
          multi.log(`${clean(line)}\n`);
        },
      };
    },
    note(line) {
      multi.log(`${clean(line)}\n`);
    },
    stop() {
      // stop() draws the bars but not the lines logged since the last redraw (the last file's).
      multi.update();
      multi.stop();
    },
  };
}

/** Not on a terminal: plain lines, a progress line at each quarter. */
function lineReporter(out: NodeJS.WritableStream): Reporter {
  const say = (s: string) => out.write(`${clean(s)}\n`);
  return {
    task(label, total) {
      const rate = new Rate();
      let quarter = 0;
      return {
        update(loaded, t = total) {
          total = t;
          const r = rate.sample(loaded);
          const q = total > 0 ? Math.floor((loaded / total) * 4) : 0;
          if (q > quarter && q < 4) {
            quarter = q;
            say(`${label}: ${q * 25}% (${humanBytes(loaded)} of ${humanBytes(total)}, ${humanBytes(Math.round(r))}/s)`);
          }
        },
        finish: say,
        fail: say,
        interrupt: say,
      };
    },
    note: say,
    stop() {},
  };
}

function makeReporter(json: boolean): Reporter {
  if (json) return lineReporter(process.stderr);
  if (process.stdout.isTTY) return barReporter();
  return lineReporter(process.stdout);
}

/**
 * Ctrl-C (or SIGTERM). With `onStop`, the first one only stops: no new file or part starts, the parts
 * in flight finish (so the server keeps every part sent); the second aborts the transfers at once;
 * the third exits. Without it, the first one aborts.
 */
function interruptible(onStop?: () => void): { stop: AbortSignal; signal: AbortSignal; interrupted: () => boolean; dispose: () => void } {
  const stop = new AbortController();
  const ac = new AbortController();
  let count = 0;
  const on = () => {
    count++;
    if (count === 1 && onStop) {
      stop.abort(new DOMException('interrupted', 'AbortError'));
      onStop();
      return;
    }
    if (ac.signal.aborted) process.exit(130);
    stop.abort(new DOMException('interrupted', 'AbortError'));
    ac.abort(new DOMException('interrupted', 'AbortError'));
  };
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
  return {
    stop: stop.signal,
    signal: ac.signal,
    interrupted: () => count > 0,
    dispose: () => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
    },
  };
}

/** Runs `fn` over items, at most `limit` at once. */
async function eachLimited<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

// ---- upload ----------------------------------------------------------------------------------

interface UploadItem {
  path: string;
  key: string;
  size: number;
}

async function walk(dir: string, out: string[], depth = 0): Promise<void> {
  if (depth > 64) throw new Error(`${dir}: directories nested too deep`);
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) await walk(p, out, depth + 1);
    else if (e.isFile()) out.push(p);
    else if (e.isSymbolicLink()) {
      // Links to files are followed; links to directories are not (no loops).
      const st = await stat(p).catch(() => null);
      if (st?.isFile()) out.push(p);
    }
  }
}

async function collect(paths: string[], o: { key?: string; prefix?: string; recursive?: boolean }): Promise<UploadItem[]> {
  const items: UploadItem[] = [];
  const prefix = o.prefix ?? '';
  for (const p of paths) {
    const st = await stat(p).catch(() => {
      throw new Error(`${p}: no such file or directory`);
    });
    if (st.isDirectory()) {
      if (!o.recursive) throw new Error(`${p} is a directory: add --recursive to upload what it holds`);
      const files: string[] = [];
      await walk(p, files);
      for (const f of files) {
        const rel = relative(p, f).split(sep).join('/');
        items.push({ path: f, key: `${prefix}${rel}`, size: (await stat(f)).size });
      }
    } else if (st.isFile()) {
      items.push({ path: p, key: o.key ?? `${prefix}${basename(p)}`, size: st.size });
    } else {
      throw new Error(`${p} is not a regular file`);
    }
  }
  if (o.key !== undefined && items.length !== 1) throw new Error('--key names one file; use --prefix for several files or a directory');
  const seen = new Set<string>();
  for (const it of items) {
    if (seen.has(it.key)) throw new Error(`two files would go to the same key ${it.key}`);
    seen.add(it.key);
  }
  return items;
}

interface UploadCmdOpts extends ConnOpts {
  bucket: string;
  key?: string;
  prefix?: string;
  recursive?: boolean;
  skipUnchanged?: boolean;
  parallel: number;
  jobs: number;
  partSize?: number;
  resume: boolean;
  retries: number;
}

/** One file's outcome, as `--json` reports it. */
interface FileResult {
  file: string; key: string; size: number; ok: boolean; error?: string; skipped?: boolean; interrupted?: boolean;
  version_id?: string; checksum?: string; multipart?: boolean; upload_id?: string | null; parts_total?: number; parts_sent?: number;
  parts_skipped?: number; parts_on_server?: number; retries?: number; restarts?: number; resumed?: boolean; seconds?: number;
}

async function uploadCommand(files: string[], o: UploadCmdOpts): Promise<void> {
  const json = jsonWanted();
  const client = connect(o);
  const items = await collect(files, o);
  let heads = new Map<string, { size: number; checksum: string }>();
  if (o.skipUnchanged) {
    try {
      heads = await headsByKey(client, o.bucket, commonPrefix(items.map((it) => it.key)));
    } catch (e) {
      throw new Error(errorText(e));
    }
  }
  const reporter = makeReporter(json);
  const intr = interruptible(() => reporter.note('stopping: finishing the parts in flight (Ctrl-C again to stop at once)'));
  const started = Date.now();
  const results: FileResult[] = [];
  try {
    await eachLimited(items, o.jobs, async (it) => {
      if (intr.stop.aborted) return;
      const head = heads.get(it.key);
      const same = head ? await unchangedMd5(head, it.path, it.size) : null;
      if (same) {
        reporter.note(`skipped (unchanged) ${it.path} -> ${it.key} (${humanBytes(it.size)}, md5 ${same})`);
        results.push({ file: it.path, key: it.key, size: it.size, ok: true, skipped: true, checksum: head!.checksum });
        return;
      }
      if (intr.stop.aborted) return;
      const label = it.key;
      const task = reporter.task(label, it.size);
      const t0 = Date.now();
      try {
        const r: UploadResult = await client.upload(o.bucket, it.key, it.path, {
          signal: intr.signal,
          stopSignal: intr.stop,
          parallel: o.parallel,
          retries: o.retries,
          resume: o.resume,
          ...(o.partSize ? { partSize: o.partSize } : {}),
          // After a hard stop the parts in flight drop out of the count: the bar keeps what it showed.
          onProgress: (p) => {
            if (!intr.signal.aborted) task.update(p.loaded, p.total);
          },
          onEvent: (e) => {
            if (e.type === 'start') {
              if (!process.stdout.isTTY || json) {
                reporter.note(`upload ${it.path} -> ${it.key}: ${humanBytes(e.size)}${e.multipart ? ` in ${e.parts} parts of ${humanBytes(e.partSize)}` : ''}`);
              }
            } else if (e.type !== 'complete') reporter.note(`${it.key}: ${e.message}`);
          },
        });
        const secs = (Date.now() - t0) / 1000;
        const parts = r.multipart ? `, ${r.partsSent} part(s) sent${r.partsSkipped ? `, ${r.partsSkipped} already on the server` : ''}` : '';
        task.finish(`uploaded ${it.path} -> ${it.key} (${humanBytes(it.size)}, md5 ${r.md5}${parts}) in ${secs.toFixed(1)} s`);
        results.push({
          file: it.path, key: it.key, size: it.size, ok: true, version_id: r.object.version_id, checksum: r.object.checksum!, multipart: r.multipart,
          upload_id: r.uploadId, parts_total: r.partsTotal, parts_sent: r.partsSent, parts_skipped: r.partsSkipped, retries: r.retries,
          restarts: r.restarts, resumed: r.resumed, seconds: secs,
        });
      } catch (e) {
        if (e instanceof UploadStoppedError) {
          const held = e.uploadId ? `the server holds ${e.partsOnServer} of ${e.partsTotal} parts of upload ${e.uploadId}` : 'nothing stored yet';
          task.interrupt(`interrupted ${it.path} -> ${it.key}: ${held}`);
          results.push({
            file: it.path, key: it.key, size: it.size, ok: false, interrupted: true, error: 'interrupted',
            upload_id: e.uploadId, parts_on_server: e.partsOnServer, parts_total: e.partsTotal,
          });
        } else if (intr.interrupted() && (isAbortError(e) || intr.signal.aborted)) {
          task.interrupt(`interrupted ${it.path} -> ${it.key}: the parts in flight were cut off`);
          results.push({ file: it.path, key: it.key, size: it.size, ok: false, interrupted: true, error: 'interrupted' });
        } else {
          const msg = errorText(e);
          task.fail(`FAILED ${it.path} -> ${it.key}: ${msg}`);
          results.push({ file: it.path, key: it.key, size: it.size, ok: false, error: msg });
        }
      }
    });
  } finally {
    reporter.stop();
    intr.dispose();
  }
  const secs = (Date.now() - started) / 1000;
  const uploaded = results.filter((r) => r.ok && !r.skipped);
  const skipped = results.filter((r) => r.skipped).length;
  const stopped = results.filter((r) => r.interrupted);
  const failed = results.filter((r) => !r.ok && !r.interrupted).length;
  const bytes = uploaded.reduce((a, r) => a + r.size, 0);
  const notStarted = items.length - results.length;
  const partsHeld = stopped.reduce((a, r) => a + (r.parts_on_server ?? 0), 0);
  const partsOf = stopped.reduce((a, r) => a + (r.parts_total ?? 0), 0);
  if (json) {
    process.stdout.write(
      `${JSON.stringify(
        {
          bucket: o.bucket, uploaded: uploaded.length, skipped, failed, interrupted_files: stopped.length, not_started: notStarted, bytes, seconds: secs,
          interrupted: intr.interrupted(), files: results,
        },
        null,
        2,
      )}\n`,
    );
  } else {
    const rate = secs > 0 ? ` (${humanBytes(Math.round(bytes / secs))}/s)` : '';
    const held = partsOf > 0 ? ` (the server holds ${partsHeld} of ${partsOf} parts; the same command resumes)` : '';
    process.stdout.write(
      `${uploaded.length} file(s) uploaded${o.skipUnchanged ? `, ${skipped} skipped (unchanged)` : ''}, ${failed} failed` +
        `${stopped.length ? `, ${stopped.length} interrupted${held}` : ''}${notStarted ? `, ${notStarted} not started` : ''}: ` +
        `${humanBytes(bytes)} in ${secs.toFixed(1)} s${rate}\n`,
    );
  }
  if (intr.interrupted()) {
    const held = partsOf > 0 ? `the server holds ${partsHeld} of ${partsOf} parts; ` : '';
    process.stderr.write(`files-rest: interrupted; ${held}run the same command again to resume\n`);
    process.exit(130);
  }
  if (failed || notStarted) process.exit(1);
}

// ---- download --------------------------------------------------------------------------------

interface DownloadCmdOpts extends ConnOpts {
  bucket: string;
  version?: string;
  retries: number;
  resume: boolean;
}

async function downloadCommand(key: string, dest: string | undefined, o: DownloadCmdOpts): Promise<void> {
  const json = jsonWanted();
  const client = connect(o);
  let target = resolve(dest ?? basename(key));
  const st = await stat(target).catch(() => null);
  if (st?.isDirectory()) target = join(target, basename(key));
  const reporter = makeReporter(json);
  const intr = interruptible();
  const t0 = Date.now();
  let task: Task | null = null;
  let result;
  try {
    if (!process.stdout.isTTY || json) reporter.note(`download ${key} -> ${target}`);
    task = reporter.task(key, 0);
    result = await client.download(o.bucket, key, target, {
      signal: intr.signal,
      retries: o.retries,
      resume: o.resume,
      ...(o.version ? { versionId: o.version } : {}),
      onProgress: (p) => task!.update(p.loaded, p.total),
      onEvent: (e) => reporter.note(e.message),
    });
    const secs = (Date.now() - t0) / 1000;
    task.finish(
      `downloaded ${key} -> ${target} (${humanBytes(result.size)}, md5 ${result.md5} verified${result.resumedFrom ? `, resumed at byte ${result.resumedFrom}` : ''}) in ${secs.toFixed(1)} s`,
    );
  } catch (e) {
    const stopped = isAbortError(e) && intr.interrupted();
    const msg = stopped ? 'interrupted' : errorText(e);
    if (stopped) {
      const kept = await stat(`${target}.part`).then((s) => s.size, () => 0);
      task?.interrupt(`interrupted ${key} -> ${target}: ${humanBytes(kept)} kept in ${target}.part`);
    } else task?.fail(`FAILED ${key}: ${msg}`);
    reporter.stop();
    intr.dispose();
    if (json) process.stdout.write(`${JSON.stringify({ key, file: target, ok: false, error: msg }, null, 2)}\n`);
    if (intr.interrupted()) {
      process.stderr.write('files-rest: interrupted; run the same command again to resume the download\n');
      process.exit(130);
    }
    process.stderr.write(`files-rest: ${msg}\n`);
    process.exit(1);
  }
  reporter.stop();
  intr.dispose();
  const secs = (Date.now() - t0) / 1000;
  if (json) {
    process.stdout.write(
      `${JSON.stringify({ key, file: target, ok: true, size: result.size, md5: result.md5, resumed_from: result.resumedFrom, transferred: result.transferred, seconds: secs }, null, 2)}\n`,
    );
  } else {
    process.stdout.write(`1 file downloaded: ${humanBytes(result.size)} in ${secs.toFixed(1)} s (${humanBytes(result.transferred)} transferred)\n`);
  }
}

// ---- ls, rm, mb ------------------------------------------------------------------------------

function versionLine(v: ObjectVersion, versions: boolean): string {
  const size = v.delete_marker ? '(deleted)' : String(v.size ?? 0);
  const when = v.updated.slice(0, 19).replace('T', ' ');
  if (!versions) return `${size.padStart(12)}  ${when}  ${clean(v.key)}`;
  return `${size.padStart(12)}  ${when}  ${v.version_id}  ${v.is_head ? 'head' : '    '}  ${clean(v.key)}`;
}

export function clientCommands(program: Command): void {
  withConn(program.command('mb').description('make a bucket (on the server at --url); prints its id')).action((o: ConnOpts) =>
    simple(async () => {
      const b = await connect(o).createBucket();
      process.stdout.write(jsonWanted() ? `${JSON.stringify(b, null, 2)}\n` : `${b.id}\n`);
    }),
  );

  withConn(
    program
      .command('upload <file...>')
      .description('upload files (or, with --recursive, directories) to a bucket; resumes interrupted multipart uploads')
      .requiredOption('--bucket <id>', 'bucket id')
      .option('--key <key>', 'object key for a single file (default: its file name)')
      .option('--prefix <prefix>', 'prepended to every key (e.g. "photos/")')
      .option('-r, --recursive', 'upload directories, keys from paths relative to each directory')
      .option('--skip-unchanged', "skip files whose size and MD5 match the key's head version (one listing of the bucket)")
      .option('--parallel <n>', 'parts sent at once per file', intOption('--parallel', 1), 4)
      .option('--jobs <n>', 'files uploaded at once', intOption('--jobs', 1), 2)
      .option('--part-size <size>', 'multipart part size (e.g. 16M); default max(8 MiB, size/9000)', parseSize)
      .option('--retries <n>', 'attempts per part after the first', intOption('--retries', 0), 5)
      .option('--no-resume', 'start new uploads instead of continuing ones the server holds'),
  ).action((files: string[], o: UploadCmdOpts) => uploadCommand(files, o));

  withConn(
    program
      .command('download <key> [dest]')
      .description('download an object to a file (default: its name in the current directory); resumes interrupted downloads')
      .requiredOption('--bucket <id>', 'bucket id')
      .option('--version <versionId>', 'a specific version')
      .option('--retries <n>', 'attempts after an interrupted transfer', intOption('--retries', 0), 5)
      .option('--no-resume', 'ignore a partial file from an earlier run'),
  ).action((key: string, dest: string | undefined, o: DownloadCmdOpts) => downloadCommand(key, dest, o));

  withConn(
    program
      .command('ls')
      .description("list a bucket's objects (or all versions, or multipart uploads in progress)")
      .requiredOption('--bucket <id>', 'bucket id')
      .option('--prefix <prefix>', 'only keys starting with this')
      .option('--versions', 'all versions, delete markers included')
      .option('--uploads', 'multipart uploads in progress'),
  ).action((o: ConnOpts & { bucket: string; prefix?: string; versions?: boolean; uploads?: boolean }) =>
    simple(async () => {
      const client = connect(o);
      const json = jsonWanted();
      if (o.uploads) {
        const ups = (await client.listUploads(o.bucket)).filter((u) => !o.prefix || u.key.startsWith(o.prefix));
        if (json) process.stdout.write(`${JSON.stringify(ups, null, 2)}\n`);
        else for (const u of ups) process.stdout.write(`${u.id}  ${String(u.size).padStart(12)}  ${String(u.part_size).padStart(10)}  ${u.created.slice(0, 19).replace('T', ' ')}  ${clean(u.key)}\n`);
        return;
      }
      const all: ObjectVersion[] = [];
      for await (const v of client.objects(o.bucket, { versions: !!o.versions, ...(o.prefix ? { prefix: o.prefix } : {}) })) {
        if (json) all.push(v);
        else process.stdout.write(`${versionLine(v, !!o.versions)}\n`);
      }
      if (json) process.stdout.write(`${JSON.stringify(all, null, 2)}\n`);
    }),
  );

  withConn(
    program
      .command('sign <key>')
      .description('a URL allowing one download (or, with --upload, one upload) of an object without a credential, until it expires; prints it')
      .requiredOption('--bucket <id>', 'bucket id')
      .option('--upload', 'a single-use upload (PUT) URL')
      .option('--version <versionId>', 'a download of that version')
      .option('--expires-in <seconds>', "validity in seconds (default: the server's)", secondsOption),
  ).action((key: string, o: ConnOpts & { bucket: string; upload?: boolean; version?: string; expiresIn?: number }) =>
    simple(async () => {
      const s = await connect(o).sign(o.bucket, key, {
        action: o.upload ? 'upload' : 'download',
        ...(o.version ? { versionId: o.version } : {}),
        ...(o.expiresIn !== undefined ? { expiresIn: o.expiresIn } : {}),
      });
      process.stdout.write(jsonWanted() ? `${JSON.stringify(s, null, 2)}\n` : `${s.url}\n`);
    }),
  );

  withConn(
    program
      .command('rm <key>')
      .description('delete an object (a delete marker; the versions stay), or with --version that version for good')
      .requiredOption('--bucket <id>', 'bucket id')
      .option('--version <versionId>', 'hard-delete this version'),
  ).action((key: string, o: ConnOpts & { bucket: string; version?: string }) =>
    simple(async () => {
      const client = connect(o);
      const json = jsonWanted();
      if (o.version) {
        await client.deleteVersion(o.bucket, key, o.version);
        process.stdout.write(json ? `${JSON.stringify({ key, version_id: o.version, deleted: true }, null, 2)}\n` : `deleted version ${o.version} of ${clean(key)}\n`);
      } else {
        const r = await client.deleteObject(o.bucket, key);
        process.stdout.write(json ? `${JSON.stringify({ key, delete_marker: r.versionId }, null, 2)}\n` : `deleted ${clean(key)} (delete marker ${r.versionId ?? '?'})\n`);
      }
    }),
  );
}
