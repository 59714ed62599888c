// The web console (/console) in a real headless Chromium (Debian's package, driven by
// playwright-core), against a real server with the token permission factory. Each test saves a
// screenshot of its final page under test-output/console/ (gitignored) for a person to look at.
//
// The describe block "needs GET /files, ?sign and tus" drives the bucket list, signed links and the
// tus upload endpoint. Signed links need a server key: on PostgreSQL there is no key file beside the
// database, so the test server is given FILES_REST_SERVER_KEY, as a PostgreSQL installation must be.
import { after, before, describe, it, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createToken } from '../src/auth/tokens.js';
import { createLocation } from '../src/domain/locations.js';
import { verifyFile } from '../src/domain/integrity.js';
import { getTask } from '../src/domain/tasks.js';
import { startTestServer, testStorage, type TestServer, storeSmallObjectsAsFiles } from './support/server.js';
import { put, req, waitFor } from './support/http.js';
import { findOrInstall, type Found } from './support/system.js';

// These tests read, damage or count the files of uploads by path: small uploads too are files here.
storeSmallObjectsAsFiles();

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SHOTS = join(ROOT, 'test-output', 'console');
const ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const MiB = 1024 * 1024;

interface Env {
  s: TestServer;
  admin: string;
  browser: Browser | null;
  found: Found;
}

async function setup(): Promise<Env> {
  const s = await startTestServer({ FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: randomBytes(32).toString('base64') });
  const admin = (await createToken(s.server.core.ctx.db, {})).token;
  await mkdir(SHOTS, { recursive: true });
  const found = await findOrInstall('chromium', ['/usr/bin/chromium', '/usr/bin/chromium-browser']);
  if (found.path === undefined) {
    console.log(`# SKIP console browser tests: ${found.skip}`);
    return { s, admin, browser: null, found };
  }
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: found.path, headless: true, args: ARGS });
  return { s, admin, browser, found };
}

async function teardown(env: Env | undefined) {
  await env?.browser?.close();
  await env?.s.close();
}

function auth(token: string) {
  return { authorization: `Bearer ${token}` };
}

async function newBucket(env: Env): Promise<string> {
  const r = await req(env.s.files, { method: 'POST', headers: auth(env.admin) });
  assert.equal(r.status, 200, r.text);
  return r.json.id as string;
}

/** A fresh browser context (no storage shared with another test) and a page in it, errors collected. */
async function open(env: Env, opts: { width?: number } = {}): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await env.browser!.newContext({
    acceptDownloads: true,
    viewport: { width: opts.width ?? 1100, height: 800 },
    permissions: ['clipboard-read', 'clipboard-write'],
  });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => {
    // A CSP violation is reported on the console: the console must never need one.
    if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) errors.push(m.text());
  });
  return { context, page, errors };
}

async function login(env: Env, page: Page, hash = '', token = env.admin) {
  await page.goto(`${env.s.url}/console/${hash}`);
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('button', { name: 'Log out' }).waitFor();
}

async function shot(page: Page, name: string) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

function skipWithout(env: Env | undefined, t: TestContext): boolean {
  if (env?.browser) return false;
  t.skip(env?.found.skip ?? 'chromium did not start');
  return true;
}

describe('Web console (headless Chromium)', () => {
  let env: Env;
  before(async () => {
    env = await setup();
  });
  after(() => teardown(env));

  it('is served at /console/ with content types, no-cache and a strict CSP; /console redirects there', async () => {
    const r = await fetch(`${env.s.url}/console`, { redirect: 'manual' });
    assert.equal(r.status, 308);
    assert.equal(r.headers.get('location'), '/console/');
    const page = await fetch(`${env.s.url}/console/`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.equal(page.headers.get('cache-control'), 'no-cache');
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(page.headers.get('x-frame-options'), 'deny');
    const csp = page.headers.get('content-security-policy') ?? '';
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https?:/);
    const html = await page.text();
    assert.doesNotMatch(html, /<script>|<script [^>]*>[^<]/, 'no inline script');
    assert.doesNotMatch(html, /https?:\/\//, 'nothing from another origin');
    const js = await fetch(`${env.s.url}/console/console.js`);
    assert.equal(js.headers.get('content-type'), 'text/javascript; charset=utf-8');
    const etag = js.headers.get('etag')!;
    assert.ok(etag);
    assert.equal((await fetch(`${env.s.url}/console/console.js`, { headers: { 'if-none-match': etag } })).status, 304);
    const css = await fetch(`${env.s.url}/console/console.css`);
    assert.equal(css.headers.get('content-type'), 'text/css; charset=utf-8');
    assert.match(await css.text(), /uppy-Dashboard/, "Uppy's CSS is bundled");
    const missing = await req(`${env.s.url}/console/nope.js`);
    assert.equal(missing.status, 404);
    assert.equal(missing.json.status, 404);
  });

  it('FILES_REST_CONSOLE=0 turns it off: 404', async () => {
    const off = await startTestServer({ FILES_REST_CONSOLE: '0' });
    try {
      assert.equal((await req(`${off.url}/console/`)).status, 404);
      assert.equal((await req(`${off.url}/console/console.js`)).status, 404);
    } finally {
      await off.close();
    }
  });

  it('a wrong token is refused, and nothing is kept', async (t) => {
    if (skipWithout(env, t)) return;
    const { context, page, errors } = await open(env);
    try {
      await page.goto(`${env.s.url}/console/`);
      await page.getByLabel('API token').fill('fr_wrong_token');
      await page.getByRole('button', { name: 'Log in' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      assert.match(await alert.innerText(), /The token was refused/);
      assert.equal(await page.getByRole('button', { name: 'Log out' }).count(), 0);
      assert.equal(await page.evaluate(() => sessionStorage.length), 0);
      assert.doesNotMatch(page.url(), /fr_wrong_token/);
      await shot(page, 'wrong-token');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });

  it('logs in with the keyboard only, creates a bucket (admin), keeps the token across a reload but never in the URL', async (t) => {
    if (skipWithout(env, t)) return;
    const { context, page, errors } = await open(env);
    try {
      await page.goto(`${env.s.url}/console/`);
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'token');
      await page.keyboard.type(env.admin);
      await page.keyboard.press('Enter');
      await page.getByRole('button', { name: 'Log out' }).waitFor();
      await page.getByRole('button', { name: 'Create bucket' }).click();
      await page.waitForURL(/#\/b\/[0-9a-f-]{36}$/);
      const id = /#\/b\/([0-9a-f-]{36})$/.exec(page.url())![1]!;
      await page.getByText('(no quota)').waitFor();
      assert.equal((await req(`${env.s.files}/${id}`, { headers: auth(env.admin) })).status, 200);
      assert.ok(!page.url().includes(env.admin));
      assert.equal(await page.evaluate(() => sessionStorage.getItem('files-rest.token')), env.admin);
      await page.reload();
      await page.getByText('(no quota)').waitFor();
      await shot(page, 'new-bucket');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });

  it('browses folders, searches by prefix, sorts, sees versions, soft deletes, restores and hard deletes', async (t) => {
    if (skipWithout(env, t)) return;
    const bucket = await newBucket(env);
    const h = auth(env.admin);
    const obj = (k: string) => `${env.s.files}/${bucket}/${k}`;
    for (const [k, body] of [['docs/readme.txt', 'read me'], ['docs/guide/intro.txt', 'intro'], ['top.txt', 'one'], ['zz-big.bin', 'x'.repeat(5000)]] as const) {
      assert.equal((await put(obj(k), body, h)).status, 200);
    }
    const v2 = await put(obj('top.txt'), 'two, longer', h);
    assert.equal(v2.status, 200);
    const { context, page, errors } = await open(env);
    try {
      await login(env, page, `#/b/${bucket}`);
      const rows = page.getByRole('table', { name: 'Objects' }).locator('tbody tr');
      await page.getByRole('link', { name: 'docs/' }).waitFor();
      assert.deepEqual(await rows.locator('td:first-child').allInnerTexts(), ['docs/', 'top.txt', 'zz-big.bin']);
      // Sort by size, descending: the biggest first.
      await page.getByLabel('Sort by').selectOption('size');
      await page.getByLabel('descending').check();
      assert.deepEqual(await rows.locator('td:first-child').allInnerTexts(), ['docs/', 'zz-big.bin', 'top.txt']);
      await shot(page, 'browse');
      // Folders and breadcrumbs.
      await page.getByRole('link', { name: 'docs/' }).click();
      await page.getByRole('link', { name: 'guide/' }).click();
      await page.getByRole('link', { name: 'intro.txt' }).waitFor();
      const crumbs = page.getByRole('navigation', { name: 'Breadcrumbs' });
      assert.deepEqual(await crumbs.getByRole('link').allInnerTexts(), ['Buckets', bucket, 'docs', 'guide']);
      await crumbs.getByRole('link', { name: 'docs' }).click();
      await page.getByRole('link', { name: 'readme.txt' }).waitFor();
      // Search by prefix from the root.
      await crumbs.getByRole('link', { name: bucket }).click();
      await page.getByLabel('Search by prefix').fill('to');
      await page.getByRole('button', { name: 'Search' }).click();
      await waitFor(async () => (await rows.count()) === 1);
      assert.deepEqual(await rows.locator('td:first-child').allInnerTexts(), ['top.txt']);

      // Versions of top.txt; download the older one.
      await page.getByRole('link', { name: 'top.txt' }).click();
      const versions = page.getByRole('table', { name: 'Versions' }).locator('tbody tr');
      await waitFor(async () => (await versions.count()) === 2);
      assert.match(await versions.nth(0).innerText(), /latest/);
      const [download] = await Promise.all([page.waitForEvent('download'), versions.nth(1).getByRole('button', { name: /^Download/ }).click()]);
      assert.equal(download.suggestedFilename(), 'top.txt');
      const saved = await download.path();
      assert.equal((await import('node:fs/promises').then((f) => f.readFile(saved))).toString(), 'one');

      // Soft delete: a marker becomes the head; the key is gone from the listing.
      await page.getByRole('button', { name: 'Delete', exact: true }).click();
      await page.getByRole('button', { name: 'Restore' }).waitFor();
      await waitFor(async () => (await versions.count()) === 3);
      assert.match(await versions.nth(0).innerText(), /delete marker/);
      assert.equal((await req(obj('top.txt'), { headers: h })).status, 404);
      await shot(page, 'soft-deleted');
      // Restore: the marker is hard-deleted, the newest version is head again.
      await page.getByRole('button', { name: 'Restore' }).click();
      await page.getByRole('button', { name: 'Delete', exact: true }).waitFor();
      await waitFor(async () => (await versions.count()) === 2);
      const back = await req(obj('top.txt'), { headers: h });
      assert.equal(back.status, 200);
      assert.equal(back.text, 'two, longer');

      // Hard delete of the older version, after a confirmation (Cancel first: nothing happens).
      const oldId = (await req(`${env.s.files}/${bucket}?versions&prefix=top.txt`, { headers: h })).json.contents[1].version_id as string;
      await versions.nth(1).getByRole('button', { name: /permanently/ }).click();
      const dialog = page.getByRole('dialog');
      await dialog.waitFor();
      await dialog.getByRole('button', { name: 'Cancel' }).click();
      await dialog.waitFor({ state: 'hidden' });
      assert.equal(await versions.count(), 2);
      await versions.nth(1).getByRole('button', { name: /permanently/ }).click();
      await dialog.getByRole('button', { name: 'Delete permanently' }).click();
      await waitFor(async () => (await versions.count()) === 1);
      assert.equal((await req(`${obj('top.txt')}?versionId=${oldId}`, { headers: h })).status, 404);
      assert.equal((await req(obj('top.txt'), { headers: h })).text, 'two, longer');
      await shot(page, 'versions');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });

  it('is usable at phone width: nothing scrolls sideways', async (t) => {
    if (skipWithout(env, t)) return;
    const bucket = await newBucket(env);
    await put(`${env.s.files}/${bucket}/photos/2024/a-very-long-file-name-that-would-not-fit-on-a-phone.jpeg`, 'x', auth(env.admin));
    await put(`${env.s.files}/${bucket}/notes.md`, '# notes', auth(env.admin));
    const { context, page, errors } = await open(env, { width: 375 });
    try {
      await login(env, page, `#/b/${bucket}`);
      await page.getByRole('link', { name: 'photos/' }).waitFor();
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 0, `the page is ${overflow}px wider than the screen`);
      await page.getByRole('link', { name: 'notes.md' }).click();
      await page.getByRole('table', { name: 'Versions' }).locator('tbody tr').first().waitFor();
      assert.ok((await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)) <= 0);
      await shot(page, 'phone');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
});

describe('Web console: needs GET /files, ?sign and tus', () => {
  let env: Env;
  let dir: string;
  before(async () => {
    env = await setup();
    dir = await mkdtemp(join(tmpdir(), 'files-rest-console-'));
  });
  after(async () => {
    await teardown(env);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('lists the buckets the token may see', async (t) => {
    if (skipWithout(env, t)) return;
    const a = await newBucket(env);
    const b = await newBucket(env);
    const { context, page } = await open(env);
    try {
      await login(env, page);
      const table = page.getByRole('table', { name: 'Buckets' });
      await table.getByRole('link', { name: a }).waitFor();
      await table.getByRole('link', { name: b }).click();
      await page.waitForURL(new RegExp(`#/b/${b}$`));
      await page.getByText('(no quota)').waitFor();
      await page.goBack();
      await table.getByRole('link', { name: a }).waitFor();
      await shot(page, 'buckets');
    } finally {
      await context.close();
    }
  });

  it('uploads a dropped folder of files over tus, each under its path', async (t) => {
    if (skipWithout(env, t)) return;
    const bucket = await newBucket(env);
    const folder = join(dir, 'album');
    await mkdir(join(folder, 'raw'), { recursive: true });
    const files: Record<string, string> = { 'a.txt': 'alpha', 'b.txt': 'bravo', 'raw/c.bin': 'c'.repeat(100_000) };
    for (const [k, v] of Object.entries(files)) await writeFile(join(folder, k), v);
    const { context, page, errors } = await open(env);
    try {
      await login(env, page, `#/b/${bucket}`);
      // The Dashboard's folder picker (an <input webkitdirectory>), as a drop of the folder gives.
      await page.locator('.uppy-Dashboard input[webkitdirectory]').setInputFiles(folder);
      await page.getByRole('link', { name: 'album/' }).waitFor({ timeout: 60_000 });
      for (const [k, v] of Object.entries(files)) {
        const got = await waitFor(async () => {
          const r = await req(`${env.s.files}/${bucket}/album/${k}`, { headers: auth(env.admin) });
          return r.status === 200 ? r : null;
        }, 60_000);
        assert.equal(got.text, v, k);
      }
      await shot(page, 'folder-upload');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });

  it('uploads 200 MiB over tus, survives a reload mid-way and resumes where it stopped', async (t) => {
    if (skipWithout(env, t)) return;
    const bucket = await newBucket(env);
    const file = join(dir, 'big.bin');
    const md5 = createHash('md5');
    await new Promise<void>((resolve, reject) => {
      const out = createWriteStream(file);
      out.on('error', reject);
      out.on('finish', resolve);
      let seed = 1;
      for (let i = 0; i < 200; i++) {
        const chunk = Buffer.alloc(MiB);
        for (let j = 0; j < MiB; j += 4) chunk.writeUInt32LE((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0), j);
        md5.update(chunk);
        out.write(chunk);
      }
      out.end();
    });
    const digest = md5.digest('hex');
    const { context, page, errors } = await open(env);
    try {
      await login(env, page, `#/b/${bucket}`);
      const fileInput = page.locator('.uppy-Dashboard input[type=file]:not([webkitdirectory])').first();
      // Wait until the server has acknowledged at least one chunk, then reload the page mid-upload.
      const firstChunk = page.waitForResponse((r) => r.request().method() === 'PATCH' && r.status() === 204, { timeout: 60_000 });
      await fileInput.setInputFiles(file);
      await firstChunk;
      await page.reload();
      // The token survived the reload (session storage); add the same file again: it resumes.
      const offsets: number[] = [];
      let created = 0;
      page.on('request', (r) => {
        if (r.method() === 'PATCH') offsets.push(Number(r.headers()['upload-offset']));
        if (r.method() === 'POST' && r.url().includes('/tus')) created++;
      });
      await fileInput.setInputFiles(file);
      await page.getByRole('link', { name: 'big.bin' }).waitFor({ timeout: 300_000 });
      assert.equal(created, 0, 'no new upload was created: the first one was resumed');
      assert.ok(offsets.length > 0 && offsets[0]! > 0, `resumed at offset ${offsets[0]}`);
      const head = await req(`${env.s.files}/${bucket}?prefix=big.bin`, { headers: auth(env.admin) });
      assert.equal(head.json.contents[0].size, 200 * MiB);
      assert.equal(head.json.contents[0].checksum, `md5:${digest}`);
      await shot(page, 'large-upload');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });

  it('copies a signed link that opens in a fresh browser without credentials', async (t) => {
    if (skipWithout(env, t)) return;
    const bucket = await newBucket(env);
    await put(`${env.s.files}/${bucket}/shared/report.txt`, 'the report', auth(env.admin));
    const { context, page, errors } = await open(env);
    try {
      await login(env, page, `#/o/${bucket}?k=${encodeURIComponent('shared/report.txt')}`);
      await page.getByRole('button', { name: 'Copy signed link' }).click();
      const field = page.getByLabel('Signed link');
      await field.waitFor();
      const url = await field.inputValue();
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), url);
      assert.ok(!url.includes(env.admin), 'the link does not carry the token');
      await shot(page, 'signed-link');
      // A fresh context: no session storage, no token.
      const stranger = await env.browser!.newContext();
      try {
        const p = await stranger.newPage();
        const res = await p.goto(url);
        assert.equal(res?.status(), 200);
        assert.equal(await res!.text(), 'the report');
      } finally {
        await stranger.close();
      }
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
});

describe('Web console: admin pages and integrity state', () => {
  let env: Env;
  before(async () => {
    env = await setup();
  });
  after(() => teardown(env));

  /** The file instance of a version (id and stored URI). */
  const fileOf = async (versionId: string) =>
    env.s.server.core.ctx.db.selectFrom('object_versions').innerJoin('files', 'files.id', 'object_versions.file_id')
      .select(['files.id', 'files.uri']).where('object_versions.version_id', '=', versionId).executeTakeFirstOrThrow();

  /** A migrate-file task towards a location that does not exist yet, tried once: it fails, deterministically. */
  async function failedMigration(fileId: string, location: string): Promise<number> {
    const { ctx } = env.s.server.core;
    const id = await ctx.db.transaction().execute((tx) => ctx.queue.enqueue(tx, 'migrate-file', { fileId, location }, { maxAttempts: 1 }));
    ctx.queue.wake();
    await waitFor(async () => (await getTask(ctx.db, id)).state === 'failed', 20_000);
    return id;
  }

  it('an admin sees locations and migrations, and retries a failed task with the result confirmed', async (t) => {
    if (skipWithout(env, t)) return;
    const bucket = await newBucket(env);
    const v = await put(`${env.s.files}/${bucket}/to-archive.txt`, 'archive me', auth(env.admin));
    assert.equal(v.status, 200);
    const file = await fileOf(v.json.version_id as string);
    const taskId = await failedMigration(file.id, 'archive');
    const { context, page, errors } = await open(env);
    try {
      await login(env, page);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Admin' }).click();
      await page.waitForURL(/#\/admin\/locations$/);
      const locations = page.getByRole('table', { name: 'Locations' }).locator('tbody tr');
      await locations.first().waitFor();
      assert.match(await locations.first().innerText(), /default \(default\)[\s\S]*fs|default \(default\)[\s\S]*s3/);
      const tabs = page.getByRole('navigation', { name: 'Admin' });
      await tabs.getByRole('link', { name: 'Migrations' }).click();
      const migrations = page.getByRole('table', { name: 'Migrations' }).locator('tbody tr');
      await migrations.first().waitFor();
      assert.deepEqual(await migrations.first().locator('td').allInnerTexts(), ['archive', '0', '0', '0', '1']);

      // The failed task, listed with its job, payload and error; the keyboard reaches its Retry button.
      await tabs.getByRole('link', { name: 'Failed tasks' }).click();
      const row = page.getByRole('table', { name: 'Failed tasks' }).locator('tbody tr', { hasText: `#${taskId} migrate-file` });
      await row.waitFor();
      assert.match(await row.innerText(), new RegExp(`file ${file.id} → location archive`));
      assert.match(await row.innerText(), /archive/);
      assert.match(await row.innerText(), /1 of 1/);
      await shot(page, 'admin-failed-tasks');

      // At phone width, the admin pages do not scroll sideways.
      const phone = await open(env, { width: 375 });
      try {
        await login(env, phone.page, '#/admin/tasks');
        await phone.page.getByRole('table', { name: 'Failed tasks' }).locator('tbody tr').first().waitFor();
        for (const section of ['tasks', 'locations', 'migrations']) {
          await phone.page.goto(`${env.s.url}/console/#/admin/${section}`);
          await phone.page.locator('tbody tr').first().waitFor();
          const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          assert.ok(overflow <= 0, `#/admin/${section} is ${overflow}px wider than the screen`);
        }
        await shot(phone.page, 'admin-phone');
        assert.deepEqual(phone.errors, []);
      } finally {
        await phone.context.close();
      }

      // Its cause removed (the location exists now), Retry queues it again and says so; the worker runs it.
      await createLocation(env.s.server.core.ctx, { name: 'archive', uri: join(env.s.dir, 'archive') });
      await row.getByRole('button', { name: `Retry task ${taskId}` }).focus();
      await page.keyboard.press('Enter');
      const status = page.getByRole('status');
      await status.waitFor();
      assert.match(await status.innerText(), new RegExp(`Task ${taskId} \\(migrate-file\\) was queued again`));
      await waitFor(async () => (await getTask(env.s.server.core.ctx.db, taskId)).state === 'done', 20_000);
      assert.equal((await req(`${env.s.files}/${bucket}/to-archive.txt`, { headers: auth(env.admin) })).text, 'archive me');
      await page.getByRole('button', { name: 'Refresh' }).click();
      await waitFor(async () => (await row.count()) === 0);
      await tabs.getByRole('link', { name: 'Locations' }).click();
      const archive = page.getByRole('table', { name: 'Locations' }).locator('tbody tr', { hasText: 'archive' });
      await archive.waitFor();
      assert.match(await archive.innerText(), /1 file, 10 B[\s\S]*0 left, 1 done/);
      await shot(page, 'admin-locations');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });

  it('a token that may not administer sees no Admin link, and the admin pages and endpoints refuse it', async (t) => {
    if (skipWithout(env, t)) return;
    const { token } = await createToken(env.s.server.core.ctx.db, { actions: ['bucket-read', 'bucket-read-versions', 'object-read', 'bucket-update'] });
    const { context, page, errors } = await open(env);
    try {
      await login(env, page, '', token);
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Buckets' }).waitFor();
      assert.equal(await page.getByRole('link', { name: 'Admin' }).count(), 0);
      await page.goto(`${env.s.url}/console/#/admin/tasks`);
      const alert = page.getByRole('alert');
      await alert.waitFor();
      assert.match(await alert.innerText(), /may not administer/);
      assert.equal(await page.getByRole('table', { name: 'Failed tasks' }).count(), 0);
      const r = await req(`${env.s.url}/admin/tasks?state=failed`, { headers: auth(token) });
      assert.equal(r.status, 403);
      await shot(page, 'admin-refused');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });

  it("the versions table shows each version's integrity state: never checked, ok with its time, failed", async (t) => {
    if (skipWithout(env, t)) return;
    const bucket = await newBucket(env);
    const url = `${env.s.files}/${bucket}/checked.txt`;
    const first = await put(url, 'first', auth(env.admin));
    const second = await put(url, 'second', auth(env.admin));
    assert.equal(second.status, 200);
    const { ctx } = env.s.server.core;
    const checked = await fileOf(first.json.version_id as string);
    assert.equal((await verifyFile(ctx, checked.id)).ok, true);
    const { context, page, errors } = await open(env);
    try {
      await login(env, page, `#/o/${bucket}?k=checked.txt`);
      const table = page.getByRole('table', { name: 'Versions' });
      const rows = table.locator('tbody tr');
      await waitFor(async () => (await rows.count()) === 2);
      const headers = await table.locator('thead th').allInnerTexts();
      const col = headers.indexOf('Integrity');
      assert.ok(col >= 0, headers.join(','));
      const cell = (i: number) => rows.nth(i).locator('td').nth(col).innerText();
      assert.equal(await cell(0), 'never checked');
      assert.match(await cell(1), /^ok, .+/);
      assert.equal(await rows.nth(1).locator('td').nth(col).locator('time').count(), 1);
      if (testStorage() === 'fs') {
        const latest = await fileOf(second.json.version_id as string);
        await writeFile(latest.uri!, 'tampered');
        assert.equal((await verifyFile(ctx, latest.id)).ok, false);
        await page.reload();
        await waitFor(async () => (await rows.count()) === 2 && /^failed/.test(await cell(0)));
      }
      await shot(page, 'integrity');
      assert.deepEqual(errors, []);
    } finally {
      await context.close();
    }
  });
});
