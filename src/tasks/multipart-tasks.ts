import type { DomainContext } from '../domain/context.js';
import { completeUpload, expireUploads } from '../domain/multipart.js';
import type { TaskDefinition } from './worker.js';

export function multipartTasks(ctx: DomainContext): TaskDefinition<never>[] {
  const complete: TaskDefinition<{ uploadId: string }> = {
    name: 'complete-multipart',
    async run({ uploadId }, { signal, log }) {
      const v = await completeUpload(ctx, uploadId, signal);
      if (v) log.info({ uploadId, versionId: v.versionId, key: v.key }, 'multipart upload completed');
    },
  };
  const expire: TaskDefinition<Record<string, never>> = {
    name: 'expire-uploads',
    // Often enough that a tiny FILES_REST_MULTIPART_EXPIRES is honoured promptly.
    periodicSeconds: Math.max(1, Math.min(600, Math.floor((ctx.config.multipartExpires * 86400) / 4))),
    async run(_p, { log }) {
      const n = await expireUploads(ctx);
      if (n) log.info({ removed: n }, 'expired multipart uploads removed');
    },
  };
  return [complete, expire] as TaskDefinition<never>[];
}
