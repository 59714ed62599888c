/** Admin commands of the S3 door: access key pairs (`key create|list|revoke|rewrap`) and bucket name checks. */
import type { Command } from 'commander';
import { AppError } from '../errors.js';
import { createAccessKey, listAccessKeys, revokeAccessKey, rewrapAccessKeys } from '../s3/access-keys.js';
import { bucketNameProblem, isBucketId } from '../s3/names.js';
import { requireServerKeys } from '../auth/server-key.js';
import { isoMicros } from '../util/time.js';
import type { WithCore } from './admin.js';

/** Refuses a name that breaks S3's bucket naming rules (INVALID_BUCKET_NAME). */
export function checkBucketName(name: string): void {
  const problem = bucketNameProblem(name);
  if (problem) throw new AppError('INVALID_BUCKET_NAME', { reason: problem });
  if (isBucketId(name)) throw new AppError('INVALID_BUCKET_NAME', { reason: 'names shaped as a bucket id (a UUID) are reserved' });
}

export function s3KeyCommands(program: Command, withCore: WithCore): void {
  const key = program.command('key').description('S3 access keys (the S3-compatible API)');
  key
    .command('create')
    .description('create an S3 access key pair; prints the secret once')
    .option('--bucket <id>', 'limit the key to one bucket')
    .option('--actions <list>', 'comma-separated actions (default: all)')
    .option('--expires-in-days <days>', 'expiry in days')
    .action((o: { bucket?: string; actions?: string; expiresInDays?: string }) =>
      withCore(async (core, out) => {
        const days = o.expiresInDays === undefined ? null : Number(o.expiresInDays);
        if (days !== null && !(days > 0)) throw new AppError('VALIDATION_ERROR', {}, { errors: [{ field: 'expires-in-days', message: 'must be a positive number' }] });
        const keys = requireServerKeys(core.config, core.log, { create: true });
        const { info, secret } = await createAccessKey(core.ctx.db, keys, {
          bucket: o.bucket ?? null,
          actions: o.actions ? o.actions.split(',').map((s) => s.trim()).filter(Boolean) : null,
          expiresInDays: days,
        });
        const expires = info.expires === null ? null : isoMicros(info.expires);
        out.print(
          [
            `access key id      ${info.accessKeyId}`,
            `secret access key  ${secret}`,
            `(key id ${info.id}; ${info.bucket ? `bucket ${info.bucket}` : 'all buckets'}; actions ${info.actions.join(',')}; expires ${expires ?? 'never'}; the secret is shown only now)`,
          ].join('\n'),
          { id: info.id, access_key_id: info.accessKeyId, secret_access_key: secret, bucket: info.bucket, actions: info.actions, expires },
        );
      }),
    );
  key
    .command('list')
    .description('S3 access keys (never their secrets)')
    .action(() =>
      withCore(async (core, out) => {
        const all = await listAccessKeys(core.ctx.db);
        const docs = all.map((k) => ({
          id: k.id,
          access_key_id: k.accessKeyId,
          bucket: k.bucket,
          actions: k.actions,
          expires: k.expires === null ? null : isoMicros(k.expires),
          revoked: k.revoked,
          created: isoMicros(k.created),
        }));
        out.print(
          docs.map((d) => `${d.access_key_id}\t${d.id}\t${d.bucket ?? 'all buckets'}\t${d.revoked ? 'revoked' : d.expires ? `expires ${d.expires}` : 'active'}\t${d.actions.join(',')}`).join('\n') || 'no access keys',
          docs,
        );
      }),
    );
  key
    .command('revoke <id>')
    .description('revoke an access key (by its id or its access key id)')
    .action((id: string) =>
      withCore(async (core, out) => {
        await revokeAccessKey(core.ctx.db, id);
        out.print(`access key ${id} revoked`, { id, revoked: true });
      }),
    );
  key
    .command('rewrap')
    .description('re-encrypt every secret under FILES_REST_SERVER_KEY (after a rotation; the old key in FILES_REST_SERVER_KEY_PREVIOUS)')
    .action(() =>
      withCore(async (core, out) => {
        const keys = requireServerKeys(core.config, core.log);
        const r = await rewrapAccessKeys(core.ctx.db, keys);
        const lines = [`${r.rewrapped} secret(s) re-encrypted under the current server key`];
        if (r.unreadable.length) lines.push(`no configured key opens: ${r.unreadable.join(', ')}`);
        out.print(lines.join('\n'), { rewrapped: r.rewrapped, unreadable: r.unreadable });
      }),
    );
}
