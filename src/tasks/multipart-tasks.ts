import type { DomainContext } from '../domain/context.js';
import { completeUpload, expireUploads } from '../domain/multipart.js';
import { expireResumables } from '../domain/resumable.js';
import type { AnyTaskDefinition, TaskDefinition } from './worker.js';

export function multipartTasks(ctx: DomainContext): AnyTaskDefinition[] {
  const complete: TaskDefinition<'complete-multipart'> = {
    name: 'complete-multipart',
    async run({ uploadId, precondition }, { signal, log }) {
      const v = await completeUpload(ctx, uploadId, signal, precondition);
      if (v) log.info({ uploadId, versionId: v.versionId, key: v.key }, 'multipart upload completed');
    },
  };
  const expire: TaskDefinition<'expire-uploads'> = {
    name: 'expire-uploads',
    // Often enough that a tiny FILES_REST_MULTIPART_EXPIRES is honoured promptly.
    periodicSeconds: Math.max(1, Math.min(600, Math.floor((ctx.config.multipartExpires * 86400) / 4))),
    async run(_p, { log }) {
      const n = await expireUploads(ctx);
      if (n) log.info({ removed: n }, 'expired multipart uploads removed');
    },
  };
  const expireResumable: TaskDefinition<'expire-resumable-uploads'> = {
    name: 'expire-resumable-uploads',
    periodicSeconds: Math.max(1, Math.min(600, Math.floor((ctx.config.tusExpires * 86400) / 4))),
    async run(_p, { log }) {
      const n = await expireResumables(ctx);
      if (n) log.info({ removed: n }, 'expired resumable (tus) uploads removed');
    },
  };
  return [complete, expire, expireResumable];
}
