// Webhooks (FILES_REST_WEBHOOK_URL): signals become signed POSTs, delivered by the task worker from
// the durable queue and retried with backoff, so a service in another process can react.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import http from 'node:http';
import { startEmbedded, type Embedded } from './support/embedded.js';
import { put, req, waitFor } from './support/http.js';
import { loadConfig } from '../src/config.js';
import type { WebhookBody } from '../src/index.js';

interface Delivery {
  headers: http.IncomingHttpHeaders;
  raw: string;
  body: WebhookBody;
}

/** A receiver on 127.0.0.1 that answers `failFirst` deliveries with 500, then 204. */
async function startReceiver(failFirst: number): Promise<{ url: string; got: Delivery[]; close(): Promise<void> }> {
  const got: Delivery[] = [];
  let failures = failFirst;
  const srv = http.createServer((rq, rs) => {
    let raw = '';
    rq.setEncoding('utf8');
    rq.on('data', (d) => (raw += d));
    rq.on('end', () => {
      got.push({ headers: rq.headers, raw, body: JSON.parse(raw) as WebhookBody });
      if (failures > 0) {
        failures--;
        rs.writeHead(500).end('not now');
      } else {
        rs.writeHead(204).end();
      }
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const addr = srv.address() as { port: number };
  return { url: `http://127.0.0.1:${addr.port}/hooks/files`, got, close: () => new Promise((r) => srv.close(() => r())) };
}

const SECRET = 'a-webhook-secret-of-some-length';
const sign = (raw: string) => `sha256=${createHmac('sha256', SECRET).update(raw).digest('hex')}`;

describe('Webhooks', () => {
  let rx: Awaited<ReturnType<typeof startReceiver>>;
  let e: Embedded;
  before(async () => {
    rx = await startReceiver(1);
    e = await startEmbedded({ FILES_REST_WEBHOOK_URL: rx.url, FILES_REST_WEBHOOK_SECRET: SECRET });
  });
  after(async () => {
    await e.close();
    await rx.close();
  });

  it('an upload is delivered as a signed POST; a failed delivery is retried by the worker with the same body', async () => {
    const b = (await req(e.files, { method: 'POST' })).json.id as string;
    const v = (await put(`${e.files}/${b}/report.pdf`, 'pdf bytes')).json;
    const [first, second] = await waitFor(async () => (rx.got.length >= 2 ? rx.got : null), 15_000);
    assert.equal(first!.headers['x-files-rest-attempt'], '1');
    assert.equal(second!.headers['x-files-rest-attempt'], '2');
    assert.equal(second!.raw, first!.raw, 'the retry sends the same bytes');
    assert.equal(second!.headers['x-files-rest-delivery'], first!.headers['x-files-rest-delivery']);
    for (const d of [first!, second!]) {
      assert.equal(d.headers['content-type'], 'application/json');
      assert.equal(d.headers['x-files-rest-event'], 'file-uploaded');
      assert.equal(d.headers['x-files-rest-signature'], sign(d.raw));
    }
    const body = second!.body;
    assert.equal(body.id, second!.headers['x-files-rest-delivery']);
    assert.equal(body.event, 'file-uploaded');
    assert.equal(body.object.bucket_id, b);
    assert.equal(body.object.key, 'report.pdf');
    assert.equal(body.object.version_id, v.version_id);
    assert.equal(body.object.size, 9);
    assert.equal(body.object.checksum, v.checksum);
    assert.equal(body.object.delete_marker, false);
    assert.ok(!Number.isNaN(Date.parse(body.created)));

    const tasks = await waitFor(async () => {
      const t = (await e.server.core.queue.list()).filter((x) => x.name === 'deliver-webhook');
      return t.length === 1 && t[0]!.state === 'done' ? t : null;
    });
    assert.equal(tasks[0]!.attempts, 2);
  });

  it('downloads and deletes are delivered too, each once when the receiver answers 2xx', async () => {
    const b = (await req(e.files, { method: 'POST' })).json.id as string;
    await put(`${e.files}/${b}/a.txt`, 'a');
    await req(`${e.files}/${b}/a.txt`);
    await req(`${e.files}/${b}/a.txt`, { method: 'DELETE' });
    const mine = () => rx.got.filter((d) => d.body.object.bucket_id === b);
    await waitFor(async () => mine().length === 3);
    assert.deepEqual(mine().map((d) => [d.body.event, d.body.kind ?? null, d.body.bytes ?? null]).sort(), [
      ['file-deleted', 'soft', null],
      ['file-downloaded', null, 1],
      ['file-uploaded', null, null],
    ]);
    for (const d of mine()) assert.equal(d.headers['x-files-rest-signature'], sign(d.raw));
  });
});

describe('Webhook settings', () => {
  it('are off by default: nothing is queued', async () => {
    const e = await startEmbedded();
    try {
      const b = (await req(e.files, { method: 'POST' })).json.id as string;
      await put(`${e.files}/${b}/a.txt`, 'a');
      await req(`${e.files}/${b}/a.txt`, { method: 'DELETE' });
      assert.deepEqual((await e.server.core.queue.list()).filter((t) => t.name === 'deliver-webhook'), []);
    } finally {
      await e.close();
    }
  });

  it('FILES_REST_WEBHOOK_EVENTS picks the signals that are delivered', async () => {
    const rx = await startReceiver(0);
    const e = await startEmbedded({ FILES_REST_WEBHOOK_URL: rx.url, FILES_REST_WEBHOOK_SECRET: SECRET, FILES_REST_WEBHOOK_EVENTS: 'file-deleted' });
    try {
      const b = (await req(e.files, { method: 'POST' })).json.id as string;
      await put(`${e.files}/${b}/a.txt`, 'a');
      await req(`${e.files}/${b}/a.txt`);
      await req(`${e.files}/${b}/a.txt`, { method: 'DELETE' });
      await waitFor(async () => rx.got.length >= 1);
      const queued = (await e.server.core.queue.list()).filter((t) => t.name === 'deliver-webhook');
      assert.deepEqual(queued.map((t) => (t.payload as { event: string }).event), ['file-deleted']);
      assert.deepEqual(rx.got.map((d) => d.body.event), ['file-deleted']);
    } finally {
      await e.close();
      await rx.close();
    }
  });

  it('upload and delete deliveries are committed with their change: queued when the answer comes, none for a refused change', async () => {
    // No worker: what is queued stays queued, and nothing is delivered behind the test's back.
    const e = await startEmbedded({ FILES_REST_WEBHOOK_URL: 'http://127.0.0.1:9/hooks', FILES_REST_WEBHOOK_SECRET: SECRET, FILES_REST_WORKER: '0' });
    try {
      const queued = async () =>
        (await e.server.core.queue.list())
          .filter((t) => t.name === 'deliver-webhook')
          .map((t) => JSON.parse((t.payload as { body: string }).body) as WebhookBody)
          .map((b) => `${b.event}${b.kind ? `/${b.kind}` : ''}:${b.object.key}`)
          .sort();
      const b = (await req(e.files, { method: 'POST' })).json.id as string;
      await put(`${e.files}/${b}/a.txt`, 'a');
      // Read at once, with no wait: the delivery was written in the upload's own transaction.
      assert.deepEqual(await queued(), ['file-uploaded:a.txt']);
      const v = (await put(`${e.files}/${b}/b.txt`, 'b')).json;
      await req(`${e.files}/${b}/a.txt`, { method: 'DELETE' });
      await req(`${e.files}/${b}/b.txt?versionId=${v.version_id}`, { method: 'DELETE' });
      assert.deepEqual(await queued(), ['file-deleted/hard:b.txt', 'file-deleted/soft:a.txt', 'file-uploaded:a.txt', 'file-uploaded:b.txt']);
      // Refused changes queue nothing: a quota that the upload would pass, a delete of nothing.
      await e.server.core.ctx.db.updateTable('buckets').set({ quota_size: 1 }).where('id', '=', b).execute();
      assert.notEqual((await put(`${e.files}/${b}/big.txt`, 'too big')).status, 200);
      assert.equal((await req(`${e.files}/${b}/none.txt`, { method: 'DELETE' })).status, 404);
      assert.equal((await queued()).length, 4);
    } finally {
      await e.close();
    }
  });

  it('a URL without a secret, a bad URL or an unknown event stops the start naming the setting', () => {
    assert.throws(() => loadConfig({ FILES_REST_WEBHOOK_URL: 'http://127.0.0.1:9/x' }), /^ConfigError: FILES_REST_WEBHOOK_SECRET: required/);
    assert.throws(() => loadConfig({ FILES_REST_WEBHOOK_URL: 'ftp://x', FILES_REST_WEBHOOK_SECRET: SECRET }), /FILES_REST_WEBHOOK_URL/);
    assert.throws(() => loadConfig({ FILES_REST_WEBHOOK_URL: 'http://x', FILES_REST_WEBHOOK_SECRET: 'short' }), /FILES_REST_WEBHOOK_SECRET: must be at least 16/);
    assert.throws(() => loadConfig({ FILES_REST_WEBHOOK_EVENTS: 'file-uploaded,file-renamed' }), /FILES_REST_WEBHOOK_EVENTS: unknown event "file-renamed"/);
  });
});
