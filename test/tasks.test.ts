import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { startTestServer, type TestServer } from './support/server.js';
import type { Core } from '../src/service.js';
import { Worker, type TaskDefinition } from '../src/tasks/worker.js';
import { waitFor } from './support/http.js';

describe('The task queue and worker', () => {
  let s: TestServer;
  let core: Core;
  const log = pino({ level: 'silent' });
  before(async () => {
    s = await startTestServer({ FILES_REST_WORKER: '0' });
    core = s.server.core;
  });
  after(async () => {
    await s.close();
  });

  it('a task enqueued in a rolled-back transaction never exists', async () => {
    await assert.rejects(
      core.ctx.db.transaction().execute(async (tx) => {
        await core.ctx.queue.enqueue(tx, 'remove-file-data', { uri: '/nowhere' });
        throw new Error('rollback');
      }),
    );
    assert.equal((await core.ctx.queue.list()).filter((t) => (t.payload as { uri?: string }).uri === '/nowhere').length, 0);
  });

  it('retries with backoff, ends failed with its error, and can be retried', async () => {
    let calls = 0;
    const flaky: TaskDefinition<{ n: number }> = {
      name: 'test-flaky',
      async run() {
        calls++;
        throw new Error(`boom ${calls}`);
      },
    };
    const w = new Worker(core.ctx.queue, [flaky as TaskDefinition<never>], log, { pollIntervalMs: 20 });
    const id = await core.ctx.queue.enqueue(core.ctx.db, 'test-flaky', { n: 1 }, { maxAttempts: 2 });
    w.start();
    try {
      // The first failure schedules a retry a couple of seconds later (backoff), then it fails for good.
      await waitFor(async () => (await core.ctx.queue.get(id)).state === 'failed', 15_000);
      const t = await core.ctx.queue.get(id);
      assert.equal(t.attempts, 2);
      assert.match(t.lastError ?? '', /boom 2/);
      assert.equal(calls, 2);
      const failed = await core.ctx.queue.list({ state: 'failed' });
      assert.ok(failed.some((x) => x.id === id));
      const again = await core.ctx.queue.retry(id);
      assert.equal(again.state, 'queued');
      assert.equal(again.attempts, 0);
      await waitFor(async () => calls === 3, 10_000);
    } finally {
      await w.stop(1000);
    }
  });

  it('two workers never run one task twice, and each task runs exactly once', async () => {
    const runs = new Map<number, number>();
    const def: TaskDefinition<{ i: number }> = {
      name: 'test-once',
      async run({ i }) {
        runs.set(i, (runs.get(i) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 5));
      },
    };
    const w1 = new Worker(core.ctx.queue, [def as TaskDefinition<never>], log, { pollIntervalMs: 10, concurrency: 3 });
    const w2 = new Worker(core.ctx.queue, [def as TaskDefinition<never>], log, { pollIntervalMs: 10, concurrency: 3 });
    for (let i = 0; i < 60; i++) await core.ctx.queue.enqueue(core.ctx.db, 'test-once', { i });
    w1.start();
    w2.start();
    try {
      await waitFor(async () => runs.size === 60, 20_000);
      await new Promise((r) => setTimeout(r, 100));
      assert.ok([...runs.values()].every((n) => n === 1));
    } finally {
      await Promise.all([w1.stop(1000), w2.stop(1000)]);
    }
  });

  it('a periodic task is scheduled once per period however many workers ask', async () => {
    const results = await Promise.all(Array.from({ length: 6 }, () => core.ctx.queue.schedulePeriodic('test-periodic', 3_600_000_000)));
    assert.equal(results.filter(Boolean).length, 1);
    const queued = (await core.ctx.queue.list({ limit: 1000 })).filter((t) => t.name === 'test-periodic');
    assert.equal(queued.length, 1);
  });

  it('a task whose lease expired (its worker died) is claimed again', async () => {
    const id = await core.ctx.queue.enqueue(core.ctx.db, 'test-lease', {});
    const first = await core.ctx.queue.claim('dead-worker', 1, ['test-lease']);
    assert.equal(first?.id, id);
    await new Promise((r) => setTimeout(r, 5));
    const second = await core.ctx.queue.claim('live-worker', 60_000_000, ['test-lease']);
    assert.equal(second?.id, id);
    assert.equal(second?.attempts, 2);
    // the dead worker can no longer complete it
    await core.ctx.queue.complete(id, 'dead-worker');
    assert.equal((await core.ctx.queue.get(id)).state, 'running');
    await core.ctx.queue.complete(id, 'live-worker');
    assert.equal((await core.ctx.queue.get(id)).state, 'done');
  });
});
