// Uppy's S3 plugin (@uppy/aws-s3, unmodified, bundled with esbuild) in headless Chromium, uploading
// from a page of another origin straight to the S3 door: a small file as a presigned POST form
// (PostObject), a large one as a multipart upload of presigned parts, each request signed by the
// page's backend (here the test, through the AWS SDK's presigners) as Uppy's `signRequest` asks.
// The browser enforces CORS: the bucket's rules must allow the page and expose ETag.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListPartsCommand,
  PutBucketCorsCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import { startTestServer, type TestServer } from './support/server.js';
import { startWebApp, type WebApp } from './support/web-app.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const BUCKET = 'uppy-uploads';

/** One request Uppy asks its backend to sign (@uppy/aws-s3's PresignableRequest). */
interface SignRequest {
  method: 'PUT' | 'POST' | 'GET' | 'DELETE';
  key: string;
  uploadId?: string;
  partNumber?: number;
  contentType?: string;
}

describe("Uppy's S3 plugin in headless Chromium against the S3 door", () => {
  let t: TestServer;
  let s3: S3Client;
  let app: WebApp;
  const signed: string[] = [];

  /** The page's backend: presigns what Uppy asks (a POST form for a whole small file, URLs for multipart). */
  async function sign(req: SignRequest): Promise<{ url: string; fields?: Record<string, string> }> {
    const p = { Bucket: BUCKET, Key: req.key };
    const what = req.uploadId === undefined ? (req.method === 'PUT' ? 'form' : 'create') : req.partNumber !== undefined ? 'part' : req.method === 'POST' ? 'complete' : req.method;
    signed.push(what);
    if (req.method === 'PUT' && req.uploadId === undefined) {
      const post = await createPresignedPost(s3, { ...p, Fields: req.contentType ? { 'Content-Type': req.contentType } : {}, Conditions: req.contentType ? [{ 'Content-Type': req.contentType }] : [], Expires: 300 });
      return { url: post.url, fields: post.fields };
    }
    const command =
      req.method === 'PUT'
        ? new UploadPartCommand({ ...p, UploadId: req.uploadId, PartNumber: req.partNumber })
        : req.method === 'POST' && req.uploadId === undefined
          ? new CreateMultipartUploadCommand({ ...p, ...(req.contentType ? { ContentType: req.contentType } : {}) })
          : req.method === 'POST'
            ? new CompleteMultipartUploadCommand({ ...p, UploadId: req.uploadId })
            : req.method === 'GET'
              ? new ListPartsCommand({ ...p, UploadId: req.uploadId })
              : new AbortMultipartUploadCommand({ ...p, UploadId: req.uploadId });
    // Signed without the SDK's checksum headers: the browser sends the body, the URL carries the signature.
    const headers = new Set(['host']);
    return { url: await getSignedUrl(s3, command as unknown as Parameters<typeof getSignedUrl>[1], { expiresIn: 300, unhoistableHeaders: new Set(), signableHeaders: headers }) };
  }

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: randomBytes(32).toString('base64') });
    const k = await createAccessKey(t.server.core.ctx.db, requireServerKeys(t.config, null, { create: true }));
    s3 = new S3Client({
      endpoint: t.s3Url,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: k.info.accessKeyId, secretAccessKey: k.secret },
      // Presigned URLs a browser will use: no checksum the browser would have to send.
      requestChecksumCalculation: 'WHEN_REQUIRED',
    });
    await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
    const { build } = await import('esbuild');
    const bundle = await build({
      stdin: { contents: "import Uppy from '@uppy/core'; import AwsS3 from '@uppy/aws-s3'; globalThis.Uppy = Uppy; globalThis.AwsS3 = AwsS3;", resolveDir: ROOT, loader: 'js' },
      bundle: true,
      format: 'iife',
      platform: 'browser',
      write: false,
      logLevel: 'silent',
      define: { 'process.env.NODE_ENV': '"production"' },
    });
    app = await startWebApp({ '/uppy.js': ['text/javascript', bundle.outputFiles[0]!.text] }, '<script src="/uppy.js"></script>');
    if (!app.context) return;
    await app.context.exposeBinding('signRequest', (_source, req: SignRequest) => sign(req));
  });
  after(async () => {
    await app?.close();
    s3?.destroy();
    await t?.close();
  });

  it('uploads a small file as a POST form and a 12 MiB file in multipart parts; the objects are byte-identical', async (tt) => {
    const { context, origin } = app;
    if (!context) return tt.skip(app.skip ?? 'chromium did not start');
    await s3.send(
      new PutBucketCorsCommand({
        Bucket: BUCKET,
        CORSConfiguration: { CORSRules: [{ AllowedOrigins: [origin], AllowedMethods: ['GET', 'PUT', 'POST', 'DELETE'], AllowedHeaders: ['*'], ExposeHeaders: ['ETag', 'Location'] }] },
      }),
    );
    const small = randomBytes(50_000);
    const large = randomBytes(12 * 1024 * 1024 + 12345);
    const tab = await context.newPage();
    try {
      await tab.goto(origin);
      const result = await tab.evaluate(
        async ({ small, large }) => {
          const w = window as unknown as {
            Uppy: new (o: object) => { use(p: unknown, o: object): void; addFile(f: object): string; upload(): Promise<{ successful?: { name: string; meta: object; response?: { body?: { key?: string } } }[]; failed?: { name: string; error?: string }[] }> };
            AwsS3: unknown;
            signRequest: (r: unknown) => Promise<unknown>;
          };
          const b64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
          const uppy = new w.Uppy({ autoProceed: false });
          uppy.use(w.AwsS3, {
            signRequest: (req: unknown) => w.signRequest(req),
            shouldUseMultipart: (file: { size: number }) => file.size > 5 * 1024 * 1024,
            getChunkSize: () => 5 * 1024 * 1024,
            generateObjectKey: (file: { name: string }) => `from-uppy/${file.name}`,
          });
          uppy.addFile({ name: 'small.bin', type: 'application/octet-stream', data: new Blob([b64(small)], { type: 'application/octet-stream' }) });
          uppy.addFile({ name: 'large.bin', type: 'application/octet-stream', data: new Blob([b64(large)], { type: 'application/octet-stream' }) });
          const r = await uppy.upload();
          return {
            successful: (r.successful ?? []).map((f) => f.name).sort(),
            failed: (r.failed ?? []).map((f) => `${f.name}: ${String(f.error)}`),
          };
        },
        { small: small.toString('base64'), large: large.toString('base64') },
      );
      assert.deepEqual(result, { successful: ['large.bin', 'small.bin'], failed: [] });
    } finally {
      await tab.close();
    }
    assert.ok(signed.includes('form'), `a POST form for the small file: ${signed.join(', ')}`);
    assert.equal(signed.filter((s) => s === 'part').length, 3, `three parts for the large file: ${signed.join(', ')}`);
    assert.ok(signed.includes('create') && signed.includes('complete'), signed.join(', '));
    const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
    for (const [key, body] of [['from-uppy/small.bin', small], ['from-uppy/large.bin', large]] as const) {
      const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
      assert.equal(sha(await got.Body!.transformToByteArray()), sha(body), key);
    }
    // The multipart object has S3's multipart ETag; the form's is its MD5.
    const largeHead = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'from-uppy/large.bin', Range: 'bytes=0-0' }));
    assert.match(largeHead.ETag ?? '', /^"[0-9a-f]{32}-3"$/);
    await largeHead.Body!.transformToByteArray();
  });
});
