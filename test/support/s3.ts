// The S3 server for tests: fauxqs (npm devDependency), an S3 emulator that runs inside the test
// process, so the suites need no Docker and no download. Chosen over s3rver (3.7.1 and its maintained
// fork @20minutes/s3rver), which has no AbortMultipartUpload (405), completes uploads whose part ETags
// do not match, and refuses the signatures of current AWS SDK v3 releases. fauxqs treats multipart
// uploads as S3 does: NoSuchUpload, ETag checks, and EntityTooSmall for parts under 5 MiB but the last.
// Pinned to 1.9.2, the last release that runs on Node 20. Its limits: objects live in memory, request
// bodies are capped at 11 MiB, signatures are not checked, and UploadPartCopy is missing.
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { buildApp } from 'fauxqs';
import { loadConfig } from '../../src/config.js';
import { createS3Client } from '../../src/storage/s3/s3-backend.js';

export interface TestS3 {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  /** Settings that point files-rest at this server (for startTestServer or loadConfig). */
  env: Record<string, string>;
  /** A client configured as the service configures its own. */
  client: S3Client;
  createBucket(name: string): Promise<void>;
  close(): Promise<void>;
}

/** Starts an S3-compatible server on 127.0.0.1, on a free port. */
export async function startTestS3(): Promise<TestS3> {
  const app = buildApp({ logger: false, host: '127.0.0.1' });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('S3 test server has no TCP address');
  const endpoint = `http://127.0.0.1:${addr.port}`;
  const env = {
    FILES_REST_S3_ENDPOINT: endpoint,
    FILES_REST_S3_REGION: 'us-east-1',
    FILES_REST_S3_ACCESS_KEY_ID: 'test',
    FILES_REST_S3_SECRET_ACCESS_KEY: 'test',
  };
  const client = createS3Client(loadConfig(env));
  return {
    endpoint,
    env,
    client,
    async createBucket(name: string) {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    },
    async close() {
      client.destroy();
      await app.close();
    },
  };
}

export interface StartedUpload {
  Bucket: string;
  Key: string;
  UploadId: string;
}

/**
 * Records every multipart upload this client starts (lib-storage starts its own inside `save`), so a
 * test can check that none is left open.
 */
export function recordUploads(client: S3Client): StartedUpload[] {
  const started: StartedUpload[] = [];
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const r = await next(args);
      if (context.commandName === 'CreateMultipartUploadCommand') {
        const input = args.input as { Bucket?: string; Key?: string };
        const id = (r.output as { UploadId?: string }).UploadId;
        if (id && input.Bucket && input.Key) started.push({ Bucket: input.Bucket, Key: input.Key, UploadId: id });
      }
      return r;
    },
    { step: 'initialize', name: 'recordUploads' },
  );
  return started;
}
