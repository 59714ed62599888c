// A web application for browser tests of the S3 door: an HTTP server on another origin (another
// port) than the door, serving a page (and any extra files), and headless Chromium (Debian's, driven
// by playwright-core) to open it in. When Chromium cannot be had, `context` is null and `skip` says why.
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { findOrInstall } from './system.js';

export interface WebApp {
  /** The page's origin, `http://127.0.0.1:<port>`; its `/` is the page. */
  origin: string;
  context: BrowserContext | null;
  skip: string | undefined;
  close(): Promise<void>;
}

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Starts the page's server (`files`: path → [content type, body]) and Chromium. */
export async function startWebApp(files: Record<string, [string, string]> = {}, head = ''): Promise<WebApp> {
  const server = http.createServer((rq, rs) => {
    const file = files[(rq.url ?? '/').split('?')[0]!];
    if (file) return void rs.writeHead(200, { 'content-type': file[0] }).end(file[1]);
    rs.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>app</title>${head}`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const origin = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const found = await findOrInstall('chromium', ['/usr/bin/chromium', '/usr/bin/chromium-browser']);
  let context: BrowserContext | null = null;
  let profile = '';
  if (found.path !== undefined) {
    const { chromium } = await import('playwright-core');
    profile = await mkdtemp(join(tmpdir(), 'files-rest-chromium-'));
    context = await chromium.launchPersistentContext(profile, { executablePath: found.path, headless: true, args: ARGS });
  }
  return {
    origin,
    context,
    skip: found.skip,
    async close() {
      await context?.close();
      if (profile) await rm(profile, { recursive: true, force: true });
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
