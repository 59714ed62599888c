import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { startTestServer, type TestServer } from './support/server.js';
import type { Core } from '../src/service.js';
import { Worker, type TaskDefinition } from '../src/tasks/worker.js';
import { waitFor } from './support/http.js';
import { TaskQueue } from '../src/tasks/queue.js';
import type { JobPayloads, PeriodicPayload } from '../src/domain/jobs.js';

/** The service's job catalogue plus the made-up jobs these tests run. */
interface TestJobs extends JobPayloads {
  'test-flaky': { n: number };
  'test-once': { i: number };
  'test-periodic': PeriodicPayload;
  'test-lease': Record<string, never>;
}

describe('The task queue and worker', () => {
  let s: TestServer;
  let core: Core;
  let queue: TaskQueue<TestJobs>;
  const log = pino({ level: 'silent' });
  before(async () => {
    s = await startTestServer({ FILES_REST_WORKER: '0' });
    core = s.server.core;
    queue = new TaskQueue<TestJobs>(core.ctx.db, core.ctx.dialect);
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
    assert.equal((await queue.list()).filter((t) => (t.payload as { uri?: string }).uri === '/nowhere').length, 0);
  });

  it('retries with backoff, ends failed with its error, and can be retried', async () => {
    let calls = 0;
    const flaky: TaskDefinition<'test-flaky', TestJobs> = {
      name: 'test-flaky',
      async run() {
        calls++;
        throw new Error(`boom ${calls}`);
      },
    };
    const w = new Worker(queue, [flaky], log, { pollIntervalMs: 20 });
    const id = await queue.enqueue(core.ctx.db, 'test-flaky', { n: 1 }, { maxAttempts: 2 });
    w.start();
    try {
      // The first failure schedules a retry a couple of seconds later (backoff), then it fails for good.
      await waitFor(async () => (await queue.get(id)).state === 'failed', 15_000);
      const t = await queue.get(id);
      assert.equal(t.attempts, 2);
      assert.match(t.lastError ?? '', /boom 2/);
      assert.equal(calls, 2);
      const failed = await queue.list({ state: 'failed' });
      assert.ok(failed.some((x) => x.id === id));
      const again = await queue.retry(id);
      assert.equal(again.state, 'queued');
      assert.equal(again.attempts, 0);
      await waitFor(async () => calls === 3, 10_000);
    } finally {
      await w.stop(1000);
    }
  });

  it('two workers never run one task twice, and each task runs exactly once', async () => {
    const runs = new Map<number, number>();
    const def: TaskDefinition<'test-once', TestJobs> = {
      name: 'test-once',
      async run({ i }) {
        runs.set(i, (runs.get(i) ?? 0) + 1);
        await new Promise((r) => setTimeout(r, 5));
      },
    };
    const w1 = new Worker(queue, [def], log, { pollIntervalMs: 10, concurrency: 3 });
    const w2 = new Worker(queue, [def], log, { pollIntervalMs: 10, concurrency: 3 });
    for (let i = 0; i < 60; i++) await queue.enqueue(core.ctx.db, 'test-once', { i });
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
    const results = await Promise.all(Array.from({ length: 6 }, () => queue.schedulePeriodic('test-periodic', 3_600_000_000)));
    assert.equal(results.filter(Boolean).length, 1);
    const queued = (await queue.list({ limit: 1000 })).filter((t) => t.name === 'test-periodic');
    assert.equal(queued.length, 1);
  });

  it('a task whose lease expired (its worker died) is claimed again', async () => {
    const id = await queue.enqueue(core.ctx.db, 'test-lease', {});
    const first = await queue.claim('dead-worker', 1, ['test-lease']);
    assert.equal(first?.id, id);
    await new Promise((r) => setTimeout(r, 5));
    const second = await queue.claim('live-worker', 60_000_000, ['test-lease']);
    assert.equal(second?.id, id);
    assert.equal(second?.attempts, 2);
    // the dead worker can no longer complete it
    await queue.complete(id, 'dead-worker');
    assert.equal((await queue.get(id)).state, 'running');
    await queue.complete(id, 'live-worker');
    assert.equal((await queue.get(id)).state, 'done');
  });
});

describe('The job catalogue', () => {
  it('makes a misspelt job name or a wrong payload a compile error', () => {
    // Checked by the compiler when the suite is built: each line below must fail to type-check,
    // or `@ts-expect-error` itself is an error and the build (and so this suite) fails.
    const check = (q: TaskQueue) => {
      // @ts-expect-error: no job of that name
      void q.enqueue(null as never, 'remove-file-dta', { uri: 'x' });
      // @ts-expect-error: the payload of remove-file-data needs a uri
      void q.enqueue(null as never, 'remove-file-data', { url: 'x' });
      // @ts-expect-error: a handler's payload follows from its name
      const bad: TaskDefinition<'migrate-file'> = { name: 'migrate-file', run: async (p: { uploadId: string }) => void p };
      return bad;
    };
    assert.equal(typeof check, 'function');
  });
});
