// Helpers for tests that drive the S3 door with the AWS SDK.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { GetObjectCommand, HeadObjectCommand, ListMultipartUploadsCommand, ListObjectsV2Command, S3Client, S3ServiceException, type S3ClientConfig } from '@aws-sdk/client-s3';
import { requireServerKeys } from '../../src/auth/server-key.js';
import { createAccessKey } from '../../src/s3/access-keys.js';
import type { TestServer } from './server.js';

/** The S3 error a call fails with (its code and HTTP status); fails the test if the call succeeds. */
export async function s3Code(p: Promise<unknown>): Promise<{ name: string; status: number | undefined }> {
  try {
    await p;
  } catch (e) {
    if (e instanceof S3ServiceException) return { name: e.name, status: e.$metadata.httpStatusCode };
    throw e;
  }
  assert.fail('expected an S3 error');
}

/** S3's ETag of an object uploaded in these parts: `"<md5 of the parts' binary MD5s>-N"`. */
export function multipartEtag(parts: Buffer[]): string {
  const h = createHash('md5');
  for (const p of parts) h.update(createHash('md5').update(p).digest());
  return `"${h.digest('hex')}-${parts.length}"`;
}

/** A byte stream of `buf` in 1 MiB pieces, whose length a client cannot know in advance. */
export function streamOfUnknownLength(buf: Buffer): Readable {
  const MiB = 1024 * 1024;
  let at = 0;
  return new Readable({
    read() {
      if (at >= buf.length) {
        this.push(null);
        return;
      }
      this.push(buf.subarray(at, at + MiB));
      at += MiB;
    },
  });
}

/**
 * What a call that must fail rejects with, within `ms`: a hang rejects with `no answer within`, a
 * success fails the test.
 */
export async function rejectionWithin(p: Promise<unknown>, ms: number): Promise<unknown> {
  const hung = new Error(`no answer within ${ms} ms`);
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(hung), ms);
  });
  try {
    await Promise.race([p, hang]);
  } catch (e) {
    if (e === hung) throw e;
    return e;
  } finally {
    clearTimeout(timer);
  }
  assert.fail('expected the call to fail');
}

/** A new access key of the test server (every action, every bucket), with its secret. */
export async function newDoorKey(t: TestServer): Promise<{ accessKeyId: string; secret: string }> {
  const k = await createAccessKey(t.server.core.ctx.db, requireServerKeys(t.config, null, { create: true }));
  return { accessKeyId: k.info.accessKeyId, secret: k.secret };
}

/** The AWS SDK v3 on the test server's S3 door with that key: path-style, us-east-1, its defaults otherwise. */
export function doorClient(t: TestServer, key: { accessKeyId: string; secret: string }, extra: Partial<S3ClientConfig> = {}): S3Client {
  return new S3Client({ endpoint: t.s3Url, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: key.accessKeyId, secretAccessKey: key.secret }, ...extra });
}

/** An object's bytes, read through the door with the SDK. */
export async function getBytes(s3: S3Client, bucket: string, key: string): Promise<Buffer> {
  const r = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return Buffer.from(await r.Body!.transformToByteArray());
}

/** Every key under `prefix`, following ListObjectsV2's pages. */
export async function listKeys(s3: S3Client, bucket: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  let token: string | undefined;
  do {
    const r = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    out.push(...(r.Contents ?? []).map((c) => c.Key!));
    token = r.IsTruncated ? r.NextContinuationToken : undefined;
  } while (token);
  return out;
}

/** Fails the test unless the key has no current object (HeadObject: 404). */
export async function assertAbsent(s3: S3Client, bucket: string, key: string): Promise<void> {
  assert.deepEqual(await s3Code(s3.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))), { name: 'NotFound', status: 404 }, key);
}

/** Fails the test if a multipart upload is open in the bucket. */
export async function assertNoOpenUploads(s3: S3Client, bucket: string): Promise<void> {
  const r = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  assert.deepEqual((r.Uploads ?? []).map((u) => u.Key), [], 'no multipart upload is left open');
}
