// Helpers for tests that drive the S3 door with the AWS SDK.
import assert from 'node:assert/strict';
import { S3ServiceException } from '@aws-sdk/client-s3';

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
