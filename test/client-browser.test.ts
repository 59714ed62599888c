import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestServer, type TestServer } from './support/server.js';
import { NodeFilesClient } from '../src/client/node.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const KiB = 1024;

/** The same deterministic bytes in Node and in the page. */
function bytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = x >>> 24;
  }
  return out;
}

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>files-rest client</title></head>
<body><p id="state">loading</p>
<script type="module">
  import * as sdk from '/client.js';
  window.sdk = sdk;
  document.getElementById('state').textContent = 'ready';
</script></body></html>`;

/**
 * Serves the test page and the bundled browser entry, and forwards /files to the files-rest server:
 * one origin, so the page needs no CORS.
 */
async function pageServer(bundle: string, target: string): Promise<{ url: string; close: () => Promise<void> }> {
  const t = new URL(target);
  const server = http.createServer((req, res) => {
    if (req.url === '/' || req.url === '/index.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
      return;
    }
    if (req.url === '/client.js') {
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(bundle);
      return;
    }
    if (req.url?.startsWith('/files')) {
      const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers }, (ures) => {
        res.writeHead(ures.statusCode ?? 502, ures.headers);
        ures.pipe(res);
      });
      up.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
      req.pipe(up);
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('Client SDK in a browser', () => {
  let s: TestServer;
  before(async () => {
    s = await startTestServer({ FILES_REST_MULTIPART_CHUNKSIZE_MIN: String(16 * KiB), FILES_REST_SHUTDOWN_GRACE: '2' });
  });
  after(() => s.close());

  it('the browser entry bundles without Node built-ins', async () => {
    const esbuild = await import('esbuild');
    const r = await esbuild.build({
      entryPoints: [join(ROOT, 'src/client/index.ts')],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: ['chrome110', 'firefox110', 'safari16'],
      write: false,
      logLevel: 'silent',
    });
    const code = r.outputFiles[0]!.text;
    assert.ok(code.length > 10_000);
    assert.doesNotMatch(code, /from ["']node:/);
    assert.doesNotMatch(code, /require\(["'](fs|crypto|path|node:)/);
  });

  it('headless Chromium uploads a Blob in parallel parts, downloads it back and gets typed errors', { timeout: 120_000 }, async (t) => {
    if (!existsSync(CHROMIUM)) {
      t.skip(`no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);
      return;
    }
    let playwright: typeof import('playwright-core');
    try {
      playwright = await import('playwright-core');
    } catch (e) {
      t.skip(`playwright-core is not installed: ${(e as Error).message}`);
      return;
    }
    const esbuild = await import('esbuild');
    const built = await esbuild.build({
      entryPoints: [join(ROOT, 'src/client/index.ts')],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      write: false,
      logLevel: 'silent',
    });
    const page$ = await pageServer(built.outputFiles[0]!.text, s.url);
    const profile = await mkdtemp(join(tmpdir(), 'files-rest-chromium-'));
    let context: Awaited<ReturnType<typeof playwright.chromium.launchPersistentContext>> | null = null;
    try {
      context = await playwright.chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
        timeout: 60_000,
      });
      const page = context.pages()[0] ?? (await context.newPage());
      const consoleErrors: string[] = [];
      page.on('pageerror', (e) => consoleErrors.push(String(e)));
      await page.goto(`${page$.url}/`);
      await page.waitForFunction(() => document.getElementById('state')?.textContent === 'ready', undefined, { timeout: 30_000 });

      const size = 300 * KiB + 7;
      const seed = 4242;
      const result = await page.evaluate(
        async ({ size, seed }) => {
          // eslint-disable-next-line @typescript-eslint/no-explicit-any
          const sdk = (window as any).sdk as typeof import('../src/client/index.js');
          const data = new Uint8Array(size);
          let x = seed >>> 0;
          for (let i = 0; i < size; i++) {
            x = (Math.imul(x, 1103515245) + 12345) >>> 0;
            data[i] = x >>> 24;
          }
          const client = new sdk.FilesClient({ url: location.origin });
          const bucket = await client.createBucket();
          const progress: number[] = [];
          let concurrent = 0;
          let maxConcurrent = 0;
          const counting = new sdk.FilesClient({
            url: location.origin,
            fetch: async (input, init) => {
              const part = init?.method === 'PUT' && String(input).includes('uploadId=');
              if (part) maxConcurrent = Math.max(maxConcurrent, ++concurrent);
              try {
                return await fetch(input, init);
              } finally {
                if (part) concurrent--;
              }
            },
          });
          const r = await counting.upload(bucket.id, 'from-browser.bin', new Blob([data]), {
            partSize: 32 * 1024,
            parallel: 3,
            onProgress: (p) => progress.push(p.loaded),
          });
          const back = await client.downloadBlob(bucket.id, 'from-browser.bin');
          let status = 0;
          let message = '';
          try {
            await client.getObject(bucket.id, 'missing');
          } catch (e) {
            if (e instanceof sdk.FilesError) {
              status = e.status;
              message = e.message;
            }
          }
          return {
            bucket: bucket.id, md5: r.md5, checksum: r.object.checksum, multipart: r.multipart, partsSent: r.partsSent, partsTotal: r.partsTotal,
            maxConcurrent, lastProgress: progress[progress.length - 1], backMd5: back.md5, backSize: back.blob.size, status, message,
          };
        },
        { size, seed },
      );
      const expected = createHash('md5').update(bytes(size, seed)).digest('hex');
      assert.deepEqual(consoleErrors, []);
      assert.equal(result.multipart, true);
      assert.equal(result.partsTotal, 10);
      assert.equal(result.partsSent, 10);
      assert.equal(result.maxConcurrent, 3);
      assert.equal(result.md5, expected);
      assert.equal(result.checksum, `md5:${expected}`);
      assert.equal(result.lastProgress, size);
      assert.equal(result.backMd5, expected);
      assert.equal(result.backSize, size);
      assert.equal(result.status, 404);
      assert.equal(result.message, 'Object does not exist.');
      // The object arrived, as Node sees it.
      const node = new NodeFilesClient({ url: s.url });
      const res = await node.getObject(result.bucket, 'from-browser.bin');
      assert.equal(createHash('md5').update(new Uint8Array(await res.arrayBuffer())).digest('hex'), expected);
    } finally {
      await context?.close().catch(() => undefined);
      await page$.close();
      await rm(profile, { recursive: true, force: true });
    }
  });
});
