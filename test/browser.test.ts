// Hardening: uploaded HTML, SVG, JavaScript and XML are never rendered or run by a browser from the
// service's origin (sanitized Content-Type, CSP `default-src 'none'`, nosniff). Checked in a real
// headless Chromium (Debian's package, driven by playwright-core): every script in those files
// would call a function the test exposes to the page, or load something from a beacon server;
// neither may happen. A control page that is allowed to run scripts shows the detection works.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { startTestServer, type TestServer } from './support/server.js';
import { put, req } from './support/http.js';
import { findOrInstall, type Found } from './support/system.js';

const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];

/** A server on 127.0.0.1 that records every request (a script that ran would call it) and serves the control pages. */
async function startBeacon(pages: Record<string, { type: string; body: () => string }>) {
  const hits: string[] = [];
  const srv = http.createServer((rq, rs) => {
    const path = (rq.url ?? '').split('?')[0]!;
    const page = pages[path];
    if (page) {
      rs.writeHead(200, { 'content-type': page.type }).end(page.body());
      return;
    }
    if (path === '/favicon.ico') {
      rs.writeHead(404).end();
      return;
    }
    hits.push(path);
    rs.writeHead(204).end();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(srv.address() as { port: number }).port}`;
  return { url, hits, close: () => new Promise<void>((r) => srv.close(() => r())) };
}

/** Uploaded files: each tries every way its type has of running a script. */
function payloads(beacon: string): Record<string, { body: string; contentType?: string }> {
  const html = `<!doctype html><html><head><title>original</title>
<script>document.title = 'pwned'; window.pwned && window.pwned('inline script');</script>
<script src="${beacon}/external.js"></script>
<link rel="stylesheet" href="${beacon}/style.css">
</head><body onload="window.pwned && window.pwned('onload')">
<img src="/no-such-image" onerror="window.pwned && window.pwned('onerror')">
<img src="${beacon}/img">
<iframe src="javascript:parent.pwned && parent.pwned('javascript: url')"></iframe>
</body></html>`;
  return {
    'evil.html': { body: html },
    'evil.htm': { body: html },
    // No extension: the client's Content-Type is stored (text/html), and still never served as such.
    'page-without-extension': { body: html, contentType: 'text/html' },
    'evil.xhtml': { body: `<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><script>window.pwned &amp;&amp; window.pwned('xhtml')</script><img src="${beacon}/img-xhtml"/></body></html>` },
    'evil.svg': {
      body: `<svg xmlns="http://www.w3.org/2000/svg" onload="window.pwned &amp;&amp; window.pwned('svg onload')">
<script>document.title = 'pwned'; window.pwned &amp;&amp; window.pwned('svg script')</script>
<image href="${beacon}/img-svg" width="10" height="10"/></svg>`,
    },
    'evil.js': { body: `document.title = 'pwned'; window.pwned && window.pwned('js'); fetch('${beacon}/js');` },
    'evil.xml': {
      body: `<?xml version="1.0"?><?xml-stylesheet type="text/xsl" href="${beacon}/style.xsl"?>
<root xmlns:h="http://www.w3.org/1999/xhtml"><h:script>window.pwned &amp;&amp; window.pwned('xml')</h:script><h:img src="${beacon}/img-xml"/></root>`,
    },
  };
}

describe('Uploaded active content in a real browser (headless Chromium)', () => {
  let found: Found;
  let s: TestServer;
  let beacon: Awaited<ReturnType<typeof startBeacon>>;
  let context: BrowserContext | null = null;
  let profile: string;
  let bucket: string;
  const ran: string[] = [];
  const urls: Record<string, string> = {};

  before(async () => {
    s = await startTestServer();
    bucket = (await req(s.files, { method: 'POST' })).json.id as string;
    beacon = await startBeacon({
      // Control: the same HTML served as HTML from an origin without our headers must run.
      '/control.html': { type: 'text/html', body: () => payloads(beacon.url)['evil.html']!.body },
      '/control.js': { type: 'application/javascript', body: () => "window.pwned && window.pwned('control script');" },
      // A page of another origin that includes the uploaded .js as a script (XSSI): nosniff refuses it.
      '/includes-upload.html': {
        type: 'text/html',
        body: () => `<!doctype html><title>host</title><script src="${urls['evil.js']}"></script><script src="/control.js"></script>`,
      },
    });
    for (const [key, p] of Object.entries(payloads(beacon.url))) {
      const r = await put(`${s.files}/${bucket}/${key}`, p.body, p.contentType ? { 'content-type': p.contentType } : {});
      assert.equal(r.status, 200, r.text);
      urls[key] = `${s.files}/${bucket}/${key}`;
    }
    found = await findOrInstall('chromium', ['/usr/bin/chromium', '/usr/bin/chromium-browser']);
    const executablePath = found.path;
    if (executablePath === undefined) {
      console.log(`# SKIP browser tests: ${found.skip}`);
      return;
    }
    const { chromium } = await import('playwright-core');
    profile = await mkdtemp(join(tmpdir(), 'files-rest-chromium-'));
    context = await chromium.launchPersistentContext(profile, { executablePath, headless: true, args: ARGS, acceptDownloads: false });
    await context.exposeBinding('pwned', (_source, tag: string) => {
      ran.push(tag);
    });
  });
  after(async () => {
    await context?.close();
    if (profile) await rm(profile, { recursive: true, force: true });
    await beacon?.close();
    await s?.close();
  });

  it('the detection works: HTML allowed to run scripts calls back and loads from the beacon', async (t) => {
    if (!context) return t.skip(found.skip ?? 'chromium did not start');
    ran.length = 0;
    const page = await context.newPage();
    try {
      await page.goto(`${beacon.url}/control.html`, { waitUntil: 'load' });
      assert.equal(await page.title(), 'pwned');
      assert.ok(ran.includes('inline script'), `ran: ${ran.join(', ')}`);
      assert.ok(beacon.hits.includes('/img'));
    } finally {
      await page.close();
    }
  });

  for (const key of ['evil.html', 'evil.htm', 'page-without-extension', 'evil.xhtml', 'evil.svg', 'evil.js', 'evil.xml']) {
    it(`${key} opened from the service is shown as text: no script runs, nothing is fetched`, async (t) => {
      if (!context) return t.skip(found.skip ?? 'chromium did not start');
      ran.length = 0;
      beacon.hits.length = 0;
      const page = await context.newPage();
      try {
        const res = await page.goto(urls[key]!, { waitUntil: 'load' });
        assert.equal(res?.status(), 200);
        const headers = res!.headers();
        assert.equal(headers['content-type'], 'text/plain; charset=utf-8');
        assert.equal(headers['content-security-policy'], "default-src 'none';");
        assert.equal(headers['x-content-type-options'], 'nosniff');
        assert.equal(await page.evaluate(() => document.contentType), 'text/plain');
        assert.notEqual(await page.title(), 'pwned');
        assert.match(await page.evaluate(() => document.body.innerText), /pwned/, 'the source is displayed as text');
        // Give a script that did run no more chances than the load: every callback above is synchronous to it.
        await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(null))));
        assert.deepEqual(ran, []);
        assert.deepEqual(beacon.hits, []);
      } finally {
        await page.close();
      }
    });
  }

  it('?download makes the browser download, not display', async (t) => {
    if (!context) return t.skip(found.skip ?? 'chromium did not start');
    ran.length = 0;
    const page = await context.newPage();
    try {
      await assert.rejects(page.goto(`${urls['evil.html']}?download`), /Download is starting|ERR_ABORTED/);
      assert.deepEqual(ran, []);
    } finally {
      await page.close();
    }
  });

  it('a page of another origin cannot run the uploaded .js as a script (nosniff), while its own script runs', async (t) => {
    if (!context) return t.skip(found.skip ?? 'chromium did not start');
    ran.length = 0;
    beacon.hits.length = 0;
    const page = await context.newPage();
    try {
      await page.goto(`${beacon.url}/includes-upload.html`, { waitUntil: 'load' });
      assert.deepEqual(ran, ['control script']);
      assert.notEqual(await page.title(), 'pwned');
      assert.deepEqual(beacon.hits, []);
    } finally {
      await page.close();
    }
  });
});
