import type { DomainContext } from '../domain/context.js';
import type { ServerKeys } from '../auth/server-key.js';
import { Authorizer } from './auth.js';
import { rawUploadAdapter, type UploadAdapter } from './upload.js';
import { rawPartAdapter, type PartAdapter } from './part-adapters.js';
import { ngFileUploadAdapter, ngFileUploadPartAdapter } from './ng-file-upload.js';

/** What the REST handlers are given: the domain, the authoriser, the URL prefix and the body adapters. */
export interface HttpDeps {
  readonly ctx: DomainContext;
  readonly auth: Authorizer;
  readonly prefix: string;
  readonly uploadAdapters: readonly UploadAdapter[];
  readonly partAdapters: readonly PartAdapter[];
  /** The server keys signed URLs are signed and verified with (null: none configured, signing refused). */
  readonly serverKeys: ServerKeys | null;
}

const UPLOAD_ADAPTERS: Record<string, UploadAdapter> = { raw: rawUploadAdapter, 'ng-file-upload': ngFileUploadAdapter };
const PART_ADAPTERS: Record<string, PartAdapter> = { raw: rawPartAdapter, 'ng-file-upload': ngFileUploadPartAdapter };

function pick<T>(names: readonly string[], table: Record<string, T>, setting: string): T[] {
  return names.map((n) => {
    const a = table[n];
    if (!a) throw new Error(`${setting}: unknown adapter ${JSON.stringify(n)} (known: ${Object.keys(table).join(', ')})`);
    return a;
  });
}

/** Builds the dependencies in one go (adapters named by FILES_REST_UPLOAD_FACTORIES and …_MULTIPART_PART_FACTORIES). */
export function httpDeps(ctx: DomainContext, auth: Authorizer, serverKeys: ServerKeys | null = null): HttpDeps {
  return {
    serverKeys,
    ctx,
    auth,
    prefix: ctx.config.urlPrefix,
    uploadAdapters: pick(ctx.config.uploadFactories, UPLOAD_ADAPTERS, 'FILES_REST_UPLOAD_FACTORIES'),
    partAdapters: pick(ctx.config.multipartPartFactories, PART_ADAPTERS, 'FILES_REST_MULTIPART_PART_FACTORIES'),
  };
}

