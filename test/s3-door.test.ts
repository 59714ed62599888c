// The S3-compatible door against real, unmodified clients: the AWS SDK for JavaScript v3 with its
// default settings (CRC32 trailers over aws-chunked unsigned payloads), its presigner, the AWS CLI
// and boto3; both doors over the same objects and version ids; malformed requests answered 4xx in
// S3's XML and nothing stored.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetBucketAclCommand,
  GetBucketTaggingCommand,
  PutBucketTaggingCommand,
  DeleteBucketTaggingCommand,
  GetObjectAclCommand,
  PutBucketAclCommand,
  PutObjectAclCommand,
  GetObjectCommand,
  GetBucketLocationCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListMultipartUploadsCommand,
  AbortMultipartUploadCommand,
  RestoreObjectCommand,
  CreateMultipartUploadCommand,
  CopyObjectCommand,
  ListObjectVersionsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '@smithy/core/checksum';
import { HttpRequest } from '@smithy/core/protocols';
import { createBucket, getLiveBucket } from '../src/domain/buckets.js';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import { fileRemovalsSettled, startTestServer, storedFiles, type TestServer } from './support/server.js';
import { s3Code } from './support/s3-door.js';

const AWS_CLI = '/usr/bin/aws';
const SERVER_KEY = randomBytes(32).toString('base64');
const PYTHON = '/usr/bin/python3';

function client(t: TestServer, id: string, secret: string, extra: Record<string, unknown> = {}): S3Client {
  return new S3Client({ endpoint: t.s3Url, region: 'eu-central-1', forcePathStyle: true, credentials: { accessKeyId: id, secretAccessKey: secret }, ...extra });
}


function md5(b: Buffer): string {
  return createHash('md5').update(b).digest('hex');
}

function run(cmd: string, args: string[], env: Record<string, string>, input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { env, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

describe('S3 door', () => {
  let t: TestServer;
  let id: string;
  let secret: string;
  let s3: S3Client;
  let token: string;

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const keys = requireServerKeys(t.config, null, { create: true });
    const k = await createAccessKey(t.server.core.ctx.db, keys);
    id = k.info.accessKeyId;
    secret = k.secret;
    s3 = client(t, id, secret);
    const { createToken } = await import('../src/auth/tokens.js');
    token = (await createToken(t.server.core.ctx.db)).token;
  });
  after(async () => {
    s3?.destroy();
    await t?.close();
  });

  it('listens on its own port and tags every answer with x-amz-request-id', async () => {
    assert.match(t.s3Url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(t.s3Url, t.url);
    const r = await fetch(`${t.s3Url}/`);
    assert.equal(r.status, 403);
    assert.ok(r.headers.get('x-amz-request-id'));
    assert.match(await r.text(), /<Code>AccessDenied<\/Code>/);
  });

  it('SDK defaults: create bucket, put (aws-chunked CRC32 trailer), get whole and ranged, head, delete marker, versions', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'sdk-bucket' }));
    assert.equal((await s3Code(s3.send(new CreateBucketCommand({ Bucket: 'sdk-bucket' })))).name, 'BucketAlreadyOwnedByYou');
    await s3.send(new HeadBucketCommand({ Bucket: 'sdk-bucket' }));
    const body = randomBytes(100_000);
    const put = await s3.send(new PutObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin', Body: body, ContentType: 'application/x-test', Metadata: { colour: 'blue' } }));
    assert.equal(put.ETag, `"${md5(body)}"`);
    assert.ok(put.VersionId);
    const got = await s3.send(new GetObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin', ChecksumMode: 'ENABLED' }));
    assert.deepEqual(Buffer.from(await got.Body!.transformToByteArray()), body);
    assert.equal(got.ContentType, 'application/x-test');
    assert.equal(got.Metadata?.colour, 'blue');
    assert.equal(got.VersionId, put.VersionId);
    assert.ok(got.ChecksumCRC32, 'the CRC32 trailer was stored and is returned');
    // The standard headers come back as given (the SDK's aws-chunked framing is not the object's encoding).
    const given = { ContentEncoding: 'deflate, gzip', ContentDisposition: 'attachment; filename="a b.txt"', CacheControl: 'max-age=60,  public', ContentLanguage: 'en-GB' };
    await s3.send(new PutObjectCommand({ Bucket: 'sdk-bucket', Key: 'headers.txt', Body: 'headers', ...given }));
    const h = await s3.send(new HeadObjectCommand({ Bucket: 'sdk-bucket', Key: 'headers.txt' }));
    assert.deepEqual({ ContentEncoding: h.ContentEncoding, ContentDisposition: h.ContentDisposition, CacheControl: h.CacheControl, ContentLanguage: h.ContentLanguage }, given);
    const ranged = await s3.send(new GetObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin', Range: 'bytes=10-19' }));
    assert.deepEqual(Buffer.from(await ranged.Body!.transformToByteArray()), body.subarray(10, 20));
    assert.equal(ranged.ContentRange, `bytes 10-19/${body.length}`);
    // A Range that is no byte range is ignored, as S3 does (200, the whole object); one past the end is InvalidRange.
    for (const Range of ['bytes=abc', 'bytes=20-10', 'bytes=', 'bytes=1-2-3']) {
      const whole = await s3.send(new GetObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin', Range }));
      assert.equal(whole.$metadata.httpStatusCode, 200, Range);
      assert.equal(whole.ContentRange, undefined, Range);
      assert.deepEqual(Buffer.from(await whole.Body!.transformToByteArray()), body, Range);
    }
    assert.deepEqual(await s3Code(s3.send(new GetObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin', Range: `bytes=${body.length}-` }))), { name: 'InvalidRange', status: 416 });
    const head = await s3.send(new HeadObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin' }));
    assert.equal(head.ContentLength, body.length);
    assert.equal(head.ETag, put.ETag);

    const second = Buffer.from('second version');
    const put2 = await s3.send(new PutObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin', Body: second }));
    const del = await s3.send(new DeleteObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin' }));
    assert.equal(del.DeleteMarker, true);
    assert.ok(del.VersionId);
    assert.equal((await s3Code(s3.send(new GetObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin' })))).name, 'NoSuchKey');
    const old = await s3.send(new GetObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin', VersionId: put.VersionId }));
    assert.deepEqual(Buffer.from(await old.Body!.transformToByteArray()), body);
    const v2 = await s3.send(new GetObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin', VersionId: put2.VersionId }));
    assert.equal(await v2.Body!.transformToString(), 'second version');
    // Removing the delete marker by its version id brings the object back.
    await s3.send(new DeleteObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin', VersionId: del.VersionId }));
    const back = await s3.send(new GetObjectCommand({ Bucket: 'sdk-bucket', Key: 'dir/a b+é.bin' }));
    assert.equal(await back.Body!.transformToString(), 'second version');

    const listed = await s3.send(new ListBucketsCommand({}));
    assert.ok(listed.Buckets?.some((b) => b.Name === 'sdk-bucket'));
    // One owner everywhere: the buckets' owner is the objects' owner in a listing.
    const owned = await s3.send(new ListObjectsV2Command({ Bucket: 'sdk-bucket', FetchOwner: true }));
    assert.deepEqual(listed.Owner, owned.Contents?.[0]?.Owner);
    assert.match(listed.Owner?.ID ?? '', /^[0-9a-f]{64}$/);
    assert.equal((await s3Code(s3.send(new DeleteBucketCommand({ Bucket: 'sdk-bucket' })))).name, 'BucketNotEmpty');
  });

  it('presigned GET and PUT work with plain fetch; an expired one is AccessDenied', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'presigned' }));
    const putUrl = await getSignedUrl(s3, new PutObjectCommand({ Bucket: 'presigned', Key: 'p.txt' }), { expiresIn: 300 });
    const r = await fetch(putUrl, { method: 'PUT', body: 'presigned body' });
    assert.equal(r.status, 200, await r.text());
    const getUrl = await getSignedUrl(s3, new GetObjectCommand({ Bucket: 'presigned', Key: 'p.txt' }), { expiresIn: 300 });
    const g = await fetch(getUrl);
    assert.equal(g.status, 200);
    assert.equal(await g.text(), 'presigned body');
    const past = await getSignedUrl(s3, new GetObjectCommand({ Bucket: 'presigned', Key: 'p.txt' }), { expiresIn: 1, signingDate: new Date(Date.now() - 3600_000) });
    const e = await fetch(past);
    assert.equal(e.status, 403);
    const text = await e.text();
    assert.match(text, /<Code>AccessDenied<\/Code>/);
    assert.match(text, /expired/);
    // The SDK's presigner moves the metadata into the query (x-amz-meta-*, signed there): stored as
    // S3 stores it, where the door dropped it before session 25.
    const withMeta = await getSignedUrl(s3, new PutObjectCommand({ Bucket: 'presigned', Key: 'meta.txt', Metadata: { color: 'blue', shade: 'dark' } }), { expiresIn: 300 });
    assert.match(withMeta, /[?&]x-amz-meta-color=blue(&|$)/);
    const m = await fetch(withMeta, { method: 'PUT', body: 'with metadata', headers: { 'x-amz-meta-shade': 'light' } });
    assert.equal(m.status, 403, 'an x-amz-* header the URL did not sign is refused');
    const m2 = await fetch(withMeta, { method: 'PUT', body: 'with metadata' });
    assert.equal(m2.status, 200, await m2.text());
    assert.deepEqual((await s3.send(new HeadObjectCommand({ Bucket: 'presigned', Key: 'meta.txt' }))).Metadata, { color: 'blue', shade: 'dark' });
  });

  it('Expect: 100-continue: the 100 comes once the request is authenticated; a refused one is answered without it, its body never sent', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'continued' }));
    const body = randomBytes(256 * 1024);
    /** A PUT that sends its body only on 100 Continue: the status and whether a 100 came. */
    const put = (url: string) =>
      new Promise<{ status: number; text: string; continued: boolean }>((resolve, reject) => {
        const u = new URL(url);
        let continued = false;
        const rq = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: 'PUT', agent: false, headers: { 'content-length': String(body.length), expect: '100-continue' } });
        rq.on('continue', () => {
          continued = true;
          rq.end(body);
        });
        rq.on('response', (res) => {
          let text = '';
          res.on('data', (d) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text, continued }));
        });
        rq.on('error', reject);
        rq.flushHeaders();
      });
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: 'continued', Key: 'c.bin' }), { expiresIn: 300 });
    const forged = url.replace(/X-Amz-Signature=([0-9a-f])/, (_m, c: string) => `X-Amz-Signature=${c === '0' ? '1' : '0'}`);
    const refused = await put(forged);
    assert.equal(refused.status, 403, refused.text);
    assert.match(refused.text, /<Code>SignatureDoesNotMatch<\/Code>/);
    assert.equal(refused.continued, false);
    const noBucket = await put(await getSignedUrl(s3, new PutObjectCommand({ Bucket: 'no-such-bucket-here', Key: 'c.bin' }), { expiresIn: 300 }));
    assert.equal(noBucket.status, 404, noBucket.text);
    assert.equal(noBucket.continued, false);
    const ok = await put(url);
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.continued, true);
    const got = await s3.send(new GetObjectCommand({ Bucket: 'continued', Key: 'c.bin' }));
    assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(body));
  });

  it('what Node would refuse on its own: another Expect is ignored as S3 does, a body longer than its Content-Length is answered before the surplus is refused, CONNECT is 405; all in XML', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'framing' }));
    const port = Number(new URL(t.s3Url).port);
    /** Writes raw bytes, reads until the server closes: every answer on the connection. */
    const exchange = (bytes: string) =>
      new Promise<string>((resolve, reject) => {
        const sock = net.connect(port, '127.0.0.1', () => sock.write(bytes));
        let got = '';
        sock.setEncoding('latin1');
        sock.on('data', (d: string) => (got += d));
        sock.on('end', () => resolve(got));
        sock.on('error', reject);
        setTimeout(() => sock.end(), 3000).unref();
      });
    const target = async (key: string) => {
      const u = new URL(await getSignedUrl(s3, new PutObjectCommand({ Bucket: 'framing', Key: key }), { expiresIn: 300 }));
      return u.pathname + u.search;
    };
    for (const [key, expect] of [['expect-200', '200'], ['expect-empty', '']] as const) {
      const answer = await exchange(`PUT ${await target(key)} HTTP/1.1\r\nHost: ${new URL(t.s3Url).host}\r\nExpect: ${expect}\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc`);
      assert.match(answer, /^HTTP\/1\.1 200 /, answer);
      const got = await s3.send(new GetObjectCommand({ Bucket: 'framing', Key: key }));
      assert.equal(await got.Body!.transformToString(), 'abc');
    }
    // Content-Length 2, body "bar": the PUT of "ba" is answered first, then the "r" is refused.
    const both = await exchange(`PUT ${await target('short')} HTTP/1.1\r\nHost: ${new URL(t.s3Url).host}\r\nContent-Length: 2\r\n\r\nbar`);
    const answers = both.split(/(?=HTTP\/1\.1 )/);
    assert.equal(answers.length, 2, both);
    assert.match(answers[0]!, /^HTTP\/1\.1 200 /);
    assert.match(answers[1]!, /^HTTP\/1\.1 400 [\s\S]*<Code>InvalidRequest<\/Code>/);
    const short = await s3.send(new GetObjectCommand({ Bucket: 'framing', Key: 'short' }));
    assert.equal(await short.Body!.transformToString(), 'ba');
    const connect = await exchange(`CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n`);
    assert.match(connect, /^HTTP\/1\.1 405 [\s\S]*<Code>MethodNotAllowed<\/Code>/, connect);
  });

  it('x-amz-acl: a value S3 does not know is InvalidArgument; a known one files-rest does not offer NotImplemented', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'canned' }));
    assert.deepEqual(await s3Code(s3.send(new PutObjectCommand({ Bucket: 'canned', Key: 'k', Body: 'x', ACL: 'public-ready' as 'private' }))), { name: 'InvalidArgument', status: 400 });
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'canned', ACL: 'public-ready' as 'private' }))), { name: 'InvalidArgument', status: 400 });
    assert.deepEqual(await s3Code(s3.send(new CreateBucketCommand({ Bucket: 'canned-2', ACL: 'nope' as 'private' }))), { name: 'InvalidArgument', status: 400 });
    assert.deepEqual(await s3Code(s3.send(new PutObjectCommand({ Bucket: 'canned', Key: 'k', Body: 'x', ACL: 'authenticated-read' }))), { name: 'NotImplemented', status: 501 });
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'canned', ACL: 'public-read-write' }))), { name: 'NotImplemented', status: 501 });
    await s3.send(new PutObjectCommand({ Bucket: 'canned', Key: 'k', Body: 'x', ACL: 'bucket-owner-full-control' }));
    assert.deepEqual(await s3Code(s3.send(new HeadBucketCommand({ Bucket: 'canned-2' }))), { name: 'NotFound', status: 404 });
  });

  it('ListBuckets: buckets by name, pages of max-buckets with a continuation token, prefix', async () => {
    for (const n of ['page-c', 'page-a', 'page-b']) await s3.send(new CreateBucketCommand({ Bucket: n }));
    const names: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await s3.send(new ListBucketsCommand({ MaxBuckets: 1, Prefix: 'page-', ContinuationToken: token }));
      assert.equal(page.Prefix, 'page-');
      names.push(...(page.Buckets ?? []).map((b) => b.Name!));
      token = page.ContinuationToken;
      pages++;
    } while (token && pages < 10);
    assert.deepEqual(names, ['page-a', 'page-b', 'page-c']);
    const all = (await s3.send(new ListBucketsCommand({}))).Buckets!.map((b) => b.Name!);
    assert.deepEqual(all, [...all].sort());
    assert.equal((await s3.send(new ListBucketsCommand({ MaxBuckets: 2, Prefix: 'page-' }))).ContinuationToken !== undefined, true);
    assert.equal((await s3Code(s3.send(new ListBucketsCommand({ MaxBuckets: 0 })))).name, 'InvalidArgument');
    assert.equal((await s3Code(s3.send(new ListBucketsCommand({ ContinuationToken: '!!not a token' })))).name, 'InvalidArgument');
  });

  it('a wrong secret is SignatureDoesNotMatch, an unknown key InvalidAccessKeyId, a scoped key AccessDenied elsewhere', async () => {
    const wrong = client(t, id, 'not-the-secret');
    assert.deepEqual(await s3Code(wrong.send(new ListBucketsCommand({}))), { name: 'SignatureDoesNotMatch', status: 403 });
    wrong.destroy();
    const unknown = client(t, 'FRNOSUCHKEY000000000', secret);
    assert.equal((await s3Code(unknown.send(new ListBucketsCommand({})))).name, 'InvalidAccessKeyId');
    unknown.destroy();

    const ctx = t.server.core.ctx;
    const mine = await createBucket(ctx, {});
    const other = await createBucket(ctx, {});
    const k = await createAccessKey(ctx.db, requireServerKeys(t.config, null), { bucket: mine.id });
    const scoped = client(t, k.info.accessKeyId, k.secret);
    await scoped.send(new PutObjectCommand({ Bucket: mine.id, Key: 'k', Body: 'x' }));
    assert.deepEqual(await s3Code(scoped.send(new PutObjectCommand({ Bucket: other.id, Key: 'k', Body: 'x' }))), { name: 'AccessDenied', status: 403 });
    assert.equal((await s3Code(scoped.send(new GetObjectCommand({ Bucket: other.id, Key: 'k' })))).name, 'AccessDenied');
    assert.equal((await s3Code(scoped.send(new CreateBucketCommand({ Bucket: 'not-allowed' })))).name, 'AccessDenied');
    const seen = await scoped.send(new ListBucketsCommand({}));
    assert.deepEqual(seen.Buckets?.map((b) => b.Name), [mine.id]);
    // A read-only key may read, not write.
    const ro = await createAccessKey(ctx.db, requireServerKeys(t.config, null), { bucket: mine.id, actions: ['object-read', 'bucket-read'] });
    const reader = client(t, ro.info.accessKeyId, ro.secret);
    assert.equal(await (await reader.send(new GetObjectCommand({ Bucket: mine.id, Key: 'k' }))).Body!.transformToString(), 'x');
    assert.equal((await s3Code(reader.send(new DeleteObjectCommand({ Bucket: mine.id, Key: 'k' })))).name, 'AccessDenied');
    scoped.destroy();
    reader.destroy();
  });

  it('ACLs: the one there is (the owner, FULL_CONTROL) is answered and may be set again; any other grant is NotImplemented', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'acls' }));
    const owner = (await s3.send(new ListBucketsCommand({}))).Owner!;
    const expected = [{ Grantee: { Type: 'CanonicalUser' as const, ID: owner.ID, DisplayName: owner.DisplayName }, Permission: 'FULL_CONTROL' as const }];
    const bucketAcl = await s3.send(new GetBucketAclCommand({ Bucket: 'acls' }));
    assert.deepEqual(bucketAcl.Owner, owner);
    assert.deepEqual(bucketAcl.Grants, expected);
    await s3.send(new PutBucketAclCommand({ Bucket: 'acls', ACL: 'private' }));
    await s3.send(new PutBucketAclCommand({ Bucket: 'acls', AccessControlPolicy: { Owner: owner, Grants: expected } }));
    const put = await s3.send(new PutObjectCommand({ Bucket: 'acls', Key: 'k', Body: 'k' }));
    const objectAcl = await s3.send(new GetObjectAclCommand({ Bucket: 'acls', Key: 'k' }));
    assert.deepEqual(objectAcl.Grants, expected);
    await s3.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', VersionId: put.VersionId, ACL: 'bucket-owner-full-control' }));
    const publicGrant = [...expected, { Grantee: { Type: 'Group' as const, URI: 'http://acs.amazonaws.com/groups/global/AllUsers' }, Permission: 'READ' as const }];
    assert.deepEqual(await s3Code(s3.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', AccessControlPolicy: { Owner: owner, Grants: publicGrant } }))), { name: 'NotImplemented', status: 501 });
    assert.deepEqual(await s3Code(s3.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', ACL: 'public-read' }))), { name: 'NotImplemented', status: 501 });
    assert.deepEqual(await s3Code(s3.send(new PutObjectAclCommand({ Bucket: 'acls', Key: 'k', GrantRead: 'uri="http://acs.amazonaws.com/groups/global/AllUsers"' }))), { name: 'NotImplemented', status: 501 });
    // Grantees that cannot exist here are S3's 400s, before anything else is judged.
    const stranger = [...expected, { Grantee: { Type: 'CanonicalUser' as const, ID: '_foo' }, Permission: 'READ' as const }];
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'acls', AccessControlPolicy: { Owner: owner, Grants: stranger } }))), { name: 'InvalidArgument', status: 400 });
    const byEmail = [...expected, { Grantee: { Type: 'AmazonCustomerByEmail' as const, EmailAddress: 'nobody@example.com' }, Permission: 'READ' as const }];
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'acls', AccessControlPolicy: { Owner: owner, Grants: byEmail } }))), { name: 'UnresolvableGrantByEmailAddress', status: 400 });
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'acls', GrantRead: 'emailAddress="nobody@example.com"' }))), { name: 'UnresolvableGrantByEmailAddress', status: 400 });
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'acls', GrantWrite: 'id="_foo"' }))), { name: 'InvalidArgument', status: 400 });
    const badPermission = [{ Grantee: expected[0]!.Grantee, Permission: 'EVERYTHING' as 'READ' }];
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'acls', AccessControlPolicy: { Owner: owner, Grants: badPermission } }))), { name: 'MalformedACLError', status: 400 });
    // The owner's FULL_CONTROL as a grant header is the ACL there is.
    await s3.send(new PutBucketAclCommand({ Bucket: 'acls', GrantFullControl: `id="${owner.ID}"` }));
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'acls', GrantRead: `id="${owner.ID}"` }))), { name: 'NotImplemented', status: 501 });
    assert.deepEqual((await s3.send(new GetBucketAclCommand({ Bucket: 'acls' }))).Grants, expected);
    assert.deepEqual(await s3Code(s3.send(new GetObjectAclCommand({ Bucket: 'acls', Key: 'none' }))), { name: 'NoSuchKey', status: 404 });
    assert.deepEqual(await s3Code(s3.send(new GetObjectAclCommand({ Bucket: 'acls', Key: 'k', VersionId: '00000000-0000-4000-8000-000000000000' }))), { name: 'NoSuchVersion', status: 404 });
  });

  it('ACLs of a publicly readable bucket: its objects are answered public-read (AllUsers READ) and may be set so, never private; its listing stays private', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'public-acls' }));
    const owner = (await s3.send(new ListBucketsCommand({}))).Owner!;
    const ownerGrant = { Grantee: { Type: 'CanonicalUser' as const, ID: owner.ID, DisplayName: owner.DisplayName }, Permission: 'FULL_CONTROL' as const };
    const everyone = { Grantee: { Type: 'Group' as const, URI: 'http://acs.amazonaws.com/groups/global/AllUsers' }, Permission: 'READ' as const };
    // Private until the operator makes the bucket public: public-read is refused, not pretended.
    assert.deepEqual(await s3Code(s3.send(new PutObjectCommand({ Bucket: 'public-acls', Key: 'k', Body: 'k', ACL: 'public-read' }))), { name: 'NotImplemented', status: 501 });
    const { resolveBucket } = await import('../src/s3/names.js');
    const { setBucketPublicRead } = await import('../src/domain/buckets.js');
    const b = (await resolveBucket(t.server.core.ctx.db, 'public-acls'))!;
    await setBucketPublicRead(t.server.core.ctx, b.id, true);
    const put = await s3.send(new PutObjectCommand({ Bucket: 'public-acls', Key: 'k', Body: 'public body', ACL: 'public-read' }));
    const anonymous = await fetch(`${t.s3Url}/public-acls/k`);
    assert.equal(anonymous.status, 200);
    assert.equal(await anonymous.text(), 'public body');
    assert.deepEqual((await s3.send(new GetObjectAclCommand({ Bucket: 'public-acls', Key: 'k' }))).Grants, [ownerGrant, everyone]);
    await s3.send(new PutObjectAclCommand({ Bucket: 'public-acls', Key: 'k', VersionId: put.VersionId, ACL: 'public-read' }));
    await s3.send(new PutObjectAclCommand({ Bucket: 'public-acls', Key: 'k', AccessControlPolicy: { Owner: owner, Grants: [ownerGrant, everyone] } }));
    await s3.send(new PutObjectAclCommand({ Bucket: 'public-acls', Key: 'k', GrantFullControl: `id="${owner.ID}"`, GrantRead: 'uri="http://acs.amazonaws.com/groups/global/AllUsers"' }));
    // Asked to be private, an object of a public bucket would not be: refused.
    assert.deepEqual(await s3Code(s3.send(new PutObjectCommand({ Bucket: 'public-acls', Key: 'p', Body: 'p', ACL: 'private' }))), { name: 'NotImplemented', status: 501 });
    assert.deepEqual(await s3Code(s3.send(new PutObjectAclCommand({ Bucket: 'public-acls', Key: 'k', ACL: 'private' }))), { name: 'NotImplemented', status: 501 });
    assert.deepEqual(await s3Code(s3.send(new PutObjectAclCommand({ Bucket: 'public-acls', Key: 'k', AccessControlPolicy: { Owner: owner, Grants: [ownerGrant] } }))), { name: 'NotImplemented', status: 501 });
    assert.deepEqual(await s3Code(s3.send(new HeadObjectCommand({ Bucket: 'public-acls', Key: 'p' }))), { name: 'NotFound', status: 404 });
    // The bucket's own ACL: anyone may download, nobody but the owner may list.
    assert.deepEqual((await s3.send(new GetBucketAclCommand({ Bucket: 'public-acls' }))).Grants, [ownerGrant]);
    assert.equal((await fetch(`${t.s3Url}/public-acls`)).status, 403);
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'public-acls', ACL: 'public-read' }))), { name: 'NotImplemented', status: 501 });
    await s3.send(new PutBucketAclCommand({ Bucket: 'public-acls', ACL: 'private' }));
    // Back to private: so are its objects' ACLs.
    await setBucketPublicRead(t.server.core.ctx, b.id, false);
    assert.deepEqual((await s3.send(new GetObjectAclCommand({ Bucket: 'public-acls', Key: 'k' }))).Grants, [ownerGrant]);
    assert.equal((await fetch(`${t.s3Url}/public-acls/k`)).status, 403);
  });

  it('bucket tagging: NoSuchTagSet until set, the set replaced and read back by key, S3\'s limits, removed with 204 and with the bucket', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'tagged' }));
    assert.deepEqual(await s3Code(s3.send(new GetBucketTaggingCommand({ Bucket: 'tagged' }))), { name: 'NoSuchTagSet', status: 404 });
    const put = await s3.send(new PutBucketTaggingCommand({ Bucket: 'tagged', Tagging: { TagSet: [{ Key: 'project', Value: 'ölmühle' }, { Key: 'cost-centre', Value: '42' }] } }));
    assert.equal(put.$metadata.httpStatusCode, 204);
    assert.deepEqual((await s3.send(new GetBucketTaggingCommand({ Bucket: 'tagged' }))).TagSet, [{ Key: 'cost-centre', Value: '42' }, { Key: 'project', Value: 'ölmühle' }]);
    await s3.send(new PutBucketTaggingCommand({ Bucket: 'tagged', Tagging: { TagSet: [{ Key: 'only', Value: '' }] } }));
    assert.deepEqual((await s3.send(new GetBucketTaggingCommand({ Bucket: 'tagged' }))).TagSet, [{ Key: 'only', Value: '' }]);
    // Refused, and the set stays as it was.
    const fifty = Array.from({ length: 50 }, (_, i) => ({ Key: `k${i}`, Value: String(i) }));
    await s3.send(new PutBucketTaggingCommand({ Bucket: 'tagged', Tagging: { TagSet: fifty } }));
    for (const TagSet of [
      [...fifty, { Key: 'k50', Value: '50' }],
      [{ Key: 'aws:createdBy', Value: 'me' }],
      [{ Key: 'a', Value: '1' }, { Key: 'a', Value: '2' }],
      [{ Key: 'k'.repeat(129), Value: '1' }],
      [{ Key: 'v', Value: 'v'.repeat(257) }],
      [{ Key: '', Value: '1' }],
    ]) {
      assert.deepEqual(await s3Code(s3.send(new PutBucketTaggingCommand({ Bucket: 'tagged', Tagging: { TagSet } }))), { name: 'InvalidTag', status: 400 }, JSON.stringify(TagSet).slice(0, 80));
    }
    assert.equal((await s3.send(new GetBucketTaggingCommand({ Bucket: 'tagged' }))).TagSet?.length, 50);
    // A key that may read the bucket but not change it.
    const ro = await createAccessKey(t.server.core.ctx.db, requireServerKeys(t.config, null), { actions: ['bucket-read'] });
    const reader = client(t, ro.info.accessKeyId, ro.secret);
    try {
      assert.equal((await reader.send(new GetBucketTaggingCommand({ Bucket: 'tagged' }))).TagSet?.length, 50);
      assert.deepEqual(await s3Code(reader.send(new PutBucketTaggingCommand({ Bucket: 'tagged', Tagging: { TagSet: [] } }))), { name: 'AccessDenied', status: 403 });
      assert.deepEqual(await s3Code(reader.send(new DeleteBucketTaggingCommand({ Bucket: 'tagged' }))), { name: 'AccessDenied', status: 403 });
    } finally {
      reader.destroy();
    }
    const del = await s3.send(new DeleteBucketTaggingCommand({ Bucket: 'tagged' }));
    assert.equal(del.$metadata.httpStatusCode, 204);
    assert.deepEqual(await s3Code(s3.send(new GetBucketTaggingCommand({ Bucket: 'tagged' }))), { name: 'NoSuchTagSet', status: 404 });
    // An empty set removes them too; a deleted bucket's tags do not come back with a new one of that name.
    await s3.send(new PutBucketTaggingCommand({ Bucket: 'tagged', Tagging: { TagSet: [{ Key: 'a', Value: '1' }] } }));
    await s3.send(new PutBucketTaggingCommand({ Bucket: 'tagged', Tagging: { TagSet: [] } }));
    assert.deepEqual(await s3Code(s3.send(new GetBucketTaggingCommand({ Bucket: 'tagged' }))), { name: 'NoSuchTagSet', status: 404 });
    await s3.send(new PutBucketTaggingCommand({ Bucket: 'tagged', Tagging: { TagSet: [{ Key: 'a', Value: '1' }] } }));
    await s3.send(new DeleteBucketCommand({ Bucket: 'tagged' }));
    assert.deepEqual(await s3Code(s3.send(new GetBucketTaggingCommand({ Bucket: 'tagged' }))), { name: 'NoSuchBucket', status: 404 });
    await s3.send(new CreateBucketCommand({ Bucket: 'tagged' }));
    assert.deepEqual(await s3Code(s3.send(new GetBucketTaggingCommand({ Bucket: 'tagged' }))), { name: 'NoSuchTagSet', status: 404 });
  });

  it('x-amz-expected-bucket-owner: the owner the listings show is served, another is AccessDenied and nothing stored', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'owned' }));
    const owner = (await s3.send(new ListBucketsCommand({}))).Owner!.ID!;
    await s3.send(new PutObjectCommand({ Bucket: 'owned', Key: 'owned-a', Body: 'a', ExpectedBucketOwner: owner }));
    assert.deepEqual(await s3Code(s3.send(new PutObjectCommand({ Bucket: 'owned', Key: 'b', Body: 'b', ExpectedBucketOwner: '123456789012' }))), { name: 'AccessDenied', status: 403 });
    assert.deepEqual(await s3Code(s3.send(new ListObjectsV2Command({ Bucket: 'owned', ExpectedBucketOwner: `${owner}x` }))), { name: 'AccessDenied', status: 403 });
    assert.deepEqual((await s3.send(new ListObjectsV2Command({ Bucket: 'owned', ExpectedBucketOwner: owner }))).Contents?.map((c) => c.Key), ['owned-a']);
  });

  it('conditional PUT: If-None-Match * and a stale If-Match are 412 PreconditionFailed, nothing stored', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'cond' }));
    const first = await s3.send(new PutObjectCommand({ Bucket: 'cond', Key: 'c', Body: 'one', IfNoneMatch: '*' }));
    assert.deepEqual(await s3Code(s3.send(new PutObjectCommand({ Bucket: 'cond', Key: 'c', Body: 'two', IfNoneMatch: '*' }))), { name: 'PreconditionFailed', status: 412 });
    assert.equal((await s3Code(s3.send(new PutObjectCommand({ Bucket: 'cond', Key: 'c', Body: 'two', IfMatch: '"00000000000000000000000000000000"' })))).name, 'PreconditionFailed');
    // If-None-Match with ETags (HTTP's and RGW's meaning; AWS answers NotImplemented): 412 when the
    // current object has one of them, stored otherwise.
    assert.equal((await s3Code(s3.send(new PutObjectCommand({ Bucket: 'cond', Key: 'c', Body: 'two', IfNoneMatch: first.ETag })))).name, 'PreconditionFailed');
    assert.equal((await s3Code(s3.send(new PutObjectCommand({ Bucket: 'cond', Key: 'c', Body: 'two', IfNoneMatch: `"nope", ${first.ETag}` })))).name, 'PreconditionFailed');
    assert.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'cond', Key: 'c' }))).Body!.transformToString(), 'one');
    const second = await s3.send(new PutObjectCommand({ Bucket: 'cond', Key: 'c', Body: 'two', IfNoneMatch: '"00000000000000000000000000000000"' }));
    await s3.send(new PutObjectCommand({ Bucket: 'cond', Key: 'c', Body: 'three', IfMatch: second.ETag }));
    const got = await s3.send(new GetObjectCommand({ Bucket: 'cond', Key: 'c' }));
    assert.equal(await got.Body!.transformToString(), 'three');
    // On a key with no current object any ETag list is met.
    await s3.send(new PutObjectCommand({ Bucket: 'cond', Key: 'fresh', Body: 'x', IfNoneMatch: first.ETag }));
    // GET conditions.
    const etag = got.ETag!;
    assert.equal((await s3Code(s3.send(new GetObjectCommand({ Bucket: 'cond', Key: 'c', IfMatch: '"nope"' })))).status, 412);
    assert.equal((await s3Code(s3.send(new HeadObjectCommand({ Bucket: 'cond', Key: 'c', IfNoneMatch: etag })))).status, 304);
  });

  it('listings through the door: ListObjectsV2 with a delimiter and pages, ListObjects, ListObjectVersions with a delete marker', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'listed' }));
    for (const k of ['a.txt', 'docs/one.txt', 'docs/two.txt', 'docs/deep/three.txt', 'z.txt']) {
      await s3.send(new PutObjectCommand({ Bucket: 'listed', Key: k, Body: k }));
    }
    const top = await s3.send(new ListObjectsV2Command({ Bucket: 'listed', Delimiter: '/' }));
    assert.deepEqual(top.Contents?.map((c) => c.Key), ['a.txt', 'z.txt']);
    assert.deepEqual(top.CommonPrefixes?.map((p) => p.Prefix), ['docs/']);
    assert.equal(top.Contents?.[0]?.ETag, `"${md5(Buffer.from('a.txt'))}"`);
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: 'listed', MaxKeys: 2, ContinuationToken: token }));
      keys.push(...(page.Contents ?? []).map((c) => c.Key!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    assert.deepEqual(keys, ['a.txt', 'docs/deep/three.txt', 'docs/one.txt', 'docs/two.txt', 'z.txt']);
    const v1 = await s3.send(new ListObjectsCommand({ Bucket: 'listed', Prefix: 'docs/', Delimiter: '/' }));
    assert.deepEqual(v1.Contents?.map((c) => c.Key), ['docs/one.txt', 'docs/two.txt']);
    assert.deepEqual(v1.CommonPrefixes?.map((p) => p.Prefix), ['docs/deep/']);
    await s3.send(new DeleteObjectCommand({ Bucket: 'listed', Key: 'z.txt' }));
    const versions = await s3.send(new ListObjectVersionsCommand({ Bucket: 'listed', Prefix: 'z' }));
    assert.equal(versions.DeleteMarkers?.length, 1);
    assert.equal(versions.DeleteMarkers?.[0]?.IsLatest, true);
    assert.equal(versions.Versions?.length, 1);
    assert.equal(versions.Versions?.[0]?.IsLatest, false);
    assert.deepEqual((await s3.send(new ListObjectsV2Command({ Bucket: 'listed', Prefix: 'z' }))).KeyCount, 0);
  });

  it('operations files-rest does not offer answer NotImplemented in XML; an unsigned form upload is anonymous', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'noimpl' }));
    assert.deepEqual(await s3Code(s3.send(new PutBucketAclCommand({ Bucket: 'noimpl', ACL: 'public-read' }))), { name: 'NotImplemented', status: 501 });
    for (const sub of ['policy', 'lifecycle', 'website', 'object-lock']) {
      const url = `${t.s3Url}/noimpl?${sub}`;
      const signer = new SignatureV4({ credentials: { accessKeyId: id, secretAccessKey: secret }, region: 'us-east-1', service: 's3', sha256: Sha256 });
      const req = await signer.sign(new HttpRequest({ method: 'GET', protocol: 'http:', hostname: '127.0.0.1', port: Number(new URL(t.s3Url).port), path: '/noimpl', query: { [sub]: '' }, headers: { host: new URL(t.s3Url).host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } }));
      const r = await fetch(url, { headers: req.headers as Record<string, string> });
      assert.equal(r.status, 501, `${sub}: ${await r.clone().text()}`);
      assert.match(await r.text(), /<Code>NotImplemented<\/Code>/);
    }
    // PostObject without a signature in the form: anonymous, refused by the token policy (test/s3-post-object.test.ts has the rest).
    const form = new FormData();
    form.append('key', 'posted.txt');
    form.append('file', new Blob(['form body']), 'posted.txt');
    const posted = await fetch(`${t.s3Url}/noimpl`, { method: 'POST', body: form });
    assert.equal(posted.status, 403);
    assert.match(await posted.text(), /<Code>AccessDenied<\/Code>/);
    assert.equal((await s3Code(s3.send(new HeadObjectCommand({ Bucket: 'noimpl', Key: 'posted.txt' })))).status, 404);
  });

  it('headers asking for encryption, Object Lock, a public ACL or grants: NotImplemented, nothing stored; x-amz-acl: private is accepted', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'noimpl-headers' }));
    const port = Number(new URL(t.s3Url).port);
    const signer = new SignatureV4({ credentials: { accessKeyId: id, secretAccessKey: secret }, region: 'us-east-1', service: 's3', sha256: Sha256 });
    const send = async (method: string, path: string, headers: Record<string, string>, body?: string) => {
      const signed = await signer.sign(new HttpRequest({ method, protocol: 'http:', hostname: '127.0.0.1', port, path, headers: { host: new URL(t.s3Url).host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...headers } }));
      return fetch(`${t.s3Url}${path}`, { method, headers: signed.headers as Record<string, string>, body });
    };
    const refused: Record<string, string>[] = [
      { 'x-amz-server-side-encryption': 'AES256' },
      { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': 'k' },
      { 'x-amz-server-side-encryption-customer-algorithm': 'AES256', 'x-amz-server-side-encryption-customer-key': Buffer.alloc(32).toString('base64'), 'x-amz-server-side-encryption-customer-key-md5': 'x' },
      { 'x-amz-object-lock-mode': 'GOVERNANCE', 'x-amz-object-lock-retain-until-date': '2030-01-01T00:00:00Z' },
      { 'x-amz-object-lock-legal-hold': 'ON' },
      { 'x-amz-acl': 'public-read' },
      { 'x-amz-grant-read': 'uri="http://acs.amazonaws.com/groups/global/AllUsers"' },
      { 'x-amz-write-offset-bytes': '0' },
    ];
    for (const [i, h] of refused.entries()) {
      const r = await send('PUT', `/noimpl-headers/refused-${i}`, h, 'secret bytes');
      assert.equal(r.status, 501, `${JSON.stringify(h)}: ${await r.clone().text()}`);
      assert.match(await r.text(), /<Code>NotImplemented<\/Code>/);
      assert.equal((await s3Code(s3.send(new HeadObjectCommand({ Bucket: 'noimpl-headers', Key: `refused-${i}` })))).status, 404);
    }
    // A GET asking to decrypt with a customer key, and a bucket asking for Object Lock: refused too.
    assert.equal((await send('GET', '/noimpl-headers/refused-0', { 'x-amz-server-side-encryption-customer-algorithm': 'AES256' })).status, 501);
    assert.equal((await send('PUT', '/noimpl-locked', { 'x-amz-bucket-object-lock-enabled': 'true' })).status, 501);
    assert.equal((await s3Code(s3.send(new HeadBucketCommand({ Bucket: 'noimpl-locked' })))).status, 404);
    // What files-rest does anyway is accepted (tools such as rclone and s3cmd can be set to send x-amz-acl: private).
    await s3.send(new PutObjectCommand({ Bucket: 'noimpl-headers', Key: 'private', Body: 'ok', ACL: 'private' }));
    assert.equal((await send('PUT', '/noimpl-headers/owner', { 'x-amz-acl': 'bucket-owner-full-control' }, 'ok')).status, 200);
    assert.equal((await send('PUT', '/noimpl-unlocked', { 'x-amz-bucket-object-lock-enabled': 'false' })).status, 200);
  });

  it('x-amz-storage-class: classes of immediate access stored as STANDARD (a self-copy naming one is a change); archive classes NotImplemented, an unknown one InvalidStorageClass, nothing stored; RestoreObject InvalidObjectState', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'storage-classes' }));
    await s3.send(new PutObjectCommand({ Bucket: 'storage-classes', Key: 'std', Body: 'ok', StorageClass: 'STANDARD' }));
    await s3.send(new PutObjectCommand({ Bucket: 'storage-classes', Key: 'ia', Body: 'ok', StorageClass: 'STANDARD_IA' }));
    const mp = await s3.send(new CreateMultipartUploadCommand({ Bucket: 'storage-classes', Key: 'onezone', StorageClass: 'ONEZONE_IA' }));
    await s3.send(new AbortMultipartUploadCommand({ Bucket: 'storage-classes', Key: 'onezone', UploadId: mp.UploadId }));
    await s3.send(new CopyObjectCommand({ Bucket: 'storage-classes', Key: 'tiering', CopySource: 'storage-classes/std', StorageClass: 'INTELLIGENT_TIERING' }));
    // Stored as the one class there is, and said so (S3 omits the header for STANDARD).
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: 'storage-classes', Key: 'ia' }))).StorageClass, undefined);
    const tries: Array<[string, string, number]> = [
      ['GLACIER', 'NotImplemented', 501],
      ['DEEP_ARCHIVE', 'NotImplemented', 501],
      ['BOGUS', 'InvalidStorageClass', 400],
      ['standard_ia', 'InvalidStorageClass', 400],
    ];
    for (const [cls, code, status] of tries) {
      const key = `c-${cls}`;
      const results = [
        await s3Code(s3.send(new PutObjectCommand({ Bucket: 'storage-classes', Key: key, Body: 'x', StorageClass: cls as never }))),
        await s3Code(s3.send(new CreateMultipartUploadCommand({ Bucket: 'storage-classes', Key: key, StorageClass: cls as never }))),
        await s3Code(s3.send(new CopyObjectCommand({ Bucket: 'storage-classes', Key: key, CopySource: 'storage-classes/std', StorageClass: cls as never }))),
      ];
      for (const r of results) assert.deepEqual(r, { name: code, status }, cls);
      assert.equal((await s3Code(s3.send(new HeadObjectCommand({ Bucket: 'storage-classes', Key: key })))).status, 404);
    }
    assert.equal((await s3.send(new ListMultipartUploadsCommand({ Bucket: 'storage-classes' }))).Uploads, undefined);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'storage-classes' }));
    assert.deepEqual(listed.Contents?.map((c) => [c.Key, c.StorageClass]), [['ia', 'STANDARD'], ['std', 'STANDARD'], ['tiering', 'STANDARD']]);
    // A copy onto itself that names a class is how S3 changes one (rclone settier): a new version.
    const self = await s3.send(new CopyObjectCommand({ Bucket: 'storage-classes', Key: 'ia', CopySource: 'storage-classes/ia', StorageClass: 'STANDARD_IA' }));
    assert.ok(self.VersionId);
    assert.deepEqual(await s3Code(s3.send(new CopyObjectCommand({ Bucket: 'storage-classes', Key: 'ia', CopySource: 'storage-classes/ia' }))), { name: 'InvalidRequest', status: 400 });
    // Nothing is archived, so nothing can be restored: InvalidObjectState, as S3 answers for such an object.
    const restore = { Days: 1, GlacierJobParameters: { Tier: 'Standard' as const } };
    assert.deepEqual(await s3Code(s3.send(new RestoreObjectCommand({ Bucket: 'storage-classes', Key: 'ia', RestoreRequest: restore }))), { name: 'InvalidObjectState', status: 403 });
    assert.deepEqual(await s3Code(s3.send(new RestoreObjectCommand({ Bucket: 'storage-classes', Key: 'ia', VersionId: self.VersionId, RestoreRequest: restore }))), { name: 'InvalidObjectState', status: 403 });
    assert.deepEqual(await s3Code(s3.send(new RestoreObjectCommand({ Bucket: 'storage-classes', Key: 'missing', RestoreRequest: restore }))), { name: 'NoSuchKey', status: 404 });
  });

  it('cross-door: an S3 PUT is the REST object (same bytes, same version id) and the other way round; same bucket size', async () => {
    const ctx = t.server.core.ctx;
    const b = await createBucket(ctx, {});
    const auth = { authorization: `Bearer ${token}` };
    const body = randomBytes(5000);
    const put = await s3.send(new PutObjectCommand({ Bucket: b.id, Key: 'cross/one.bin', Body: body }));
    const rest = await fetch(`${t.files}/${b.id}/cross/one.bin`, { headers: auth });
    assert.equal(rest.status, 200);
    assert.deepEqual(Buffer.from(await rest.arrayBuffer()), body);
    const listing = (await (await fetch(`${t.files}/${b.id}?versions`, { headers: auth })).json()) as { size: number; contents: Array<{ key: string; version_id: string }> };
    assert.deepEqual(listing.contents.filter((v) => v.key === 'cross/one.bin').map((v) => v.version_id), [put.VersionId]);

    const other = randomBytes(3000);
    const r = await fetch(`${t.files}/${b.id}/cross/two.bin`, { method: 'PUT', headers: { ...auth, 'content-type': 'application/octet-stream' }, body: other });
    assert.equal(r.status, 200, await r.clone().text());
    const restVersion = ((await r.json()) as { version_id: string }).version_id;
    const got = await s3.send(new GetObjectCommand({ Bucket: b.id, Key: 'cross/two.bin' }));
    assert.deepEqual(Buffer.from(await got.Body!.transformToByteArray()), other);
    assert.equal(got.VersionId, restVersion);
    assert.equal(got.ETag, `"${md5(other)}"`);
    const bucket = await getLiveBucket(ctx.db, b.id);
    assert.equal(bucket.size, body.length + other.length);
    const json = (await (await fetch(`${t.files}/${b.id}`, { headers: auth })).json()) as { size: number };
    assert.equal(json.size, body.length + other.length);
  });

  it('version ids: one no version can have is InvalidArgument everywhere (a DELETE of it deletes nothing); an unknown well-formed one is NoSuchVersion, its DELETE 204', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'version-ids' }));
    const put = await s3.send(new PutObjectCommand({ Bucket: 'version-ids', Key: 'k', Body: 'kept' }));
    const unknown = '00000000-0000-4000-8000-000000000000';
    const invalid = { name: 'InvalidArgument', status: 400 };
    for (const bad of ['garbage', `${put.VersionId}x`, ' ']) {
      assert.deepEqual(await s3Code(s3.send(new GetObjectCommand({ Bucket: 'version-ids', Key: 'k', VersionId: bad }))), invalid, bad);
      // A HEAD's error has no body: only its status tells.
      assert.equal((await s3Code(s3.send(new HeadObjectCommand({ Bucket: 'version-ids', Key: 'k', VersionId: bad })))).status, 400, bad);
      assert.deepEqual(await s3Code(s3.send(new DeleteObjectCommand({ Bucket: 'version-ids', Key: 'k', VersionId: bad }))), invalid, bad);
      assert.deepEqual(await s3Code(s3.send(new GetObjectAclCommand({ Bucket: 'version-ids', Key: 'k', VersionId: bad }))), invalid, bad);
      assert.deepEqual(await s3Code(s3.send(new CopyObjectCommand({ Bucket: 'version-ids', Key: 'copy', CopySource: `version-ids/k?versionId=${encodeURIComponent(bad)}` }))), invalid, bad);
    }
    const raw = await fetch(await getSignedUrl(s3, new GetObjectCommand({ Bucket: 'version-ids', Key: 'k', VersionId: 'garbage' }), { expiresIn: 300 }));
    assert.equal(raw.status, 400);
    const text = await raw.text();
    assert.match(text, /<Code>InvalidArgument<\/Code><Message>Invalid version id specified<\/Message>/);
    assert.match(text, /<ArgumentName>versionId<\/ArgumentName><ArgumentValue>garbage<\/ArgumentValue>/);
    // Well-formed: not there.
    assert.deepEqual(await s3Code(s3.send(new GetObjectCommand({ Bucket: 'version-ids', Key: 'k', VersionId: unknown }))), { name: 'NoSuchVersion', status: 404 });
    assert.deepEqual(await s3Code(s3.send(new GetObjectCommand({ Bucket: 'version-ids', Key: 'k', VersionId: 'null' }))), { name: 'NoSuchVersion', status: 404 });
    assert.equal((await s3.send(new DeleteObjectCommand({ Bucket: 'version-ids', Key: 'k', VersionId: unknown }))).VersionId, unknown);
    assert.deepEqual(await s3Code(s3.send(new CopyObjectCommand({ Bucket: 'version-ids', Key: 'copy', CopySource: `version-ids/k?versionId=${unknown}` }))), { name: 'NoSuchVersion', status: 404 });
    // Nothing was deleted or copied: the one version is still there.
    const versions = await s3.send(new ListObjectVersionsCommand({ Bucket: 'version-ids' }));
    assert.deepEqual(versions.Versions?.map((v) => [v.Key, v.VersionId]), [['k', put.VersionId]]);
    assert.equal(versions.DeleteMarkers, undefined);
    assert.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'version-ids', Key: 'k', VersionId: put.VersionId }))).Body!.transformToString(), 'kept');
  });

  it('bucket names: CreateBucket names a bucket, the REST JSON shows it, the id addresses it too; rules enforced', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'named-one', CreateBucketConfiguration: { LocationConstraint: 'eu-west-1' } }));
    const row = await t.server.core.ctx.db.selectFrom('buckets').select('id').where('name', '=', 'named-one').executeTakeFirstOrThrow();
    // The region named at creation is answered (empty for none, S3's us-east-1), by name and by id.
    assert.equal((await s3.send(new GetBucketLocationCommand({ Bucket: 'named-one' }))).LocationConstraint, 'eu-west-1');
    assert.equal((await s3.send(new GetBucketLocationCommand({ Bucket: row.id }))).LocationConstraint, 'eu-west-1');
    assert.equal((await s3.send(new HeadBucketCommand({ Bucket: 'named-one' }))).BucketRegion, 'eu-west-1');
    // The SDK names its own region when the call names none.
    await s3.send(new CreateBucketCommand({ Bucket: 'named-default' }));
    assert.equal((await s3.send(new GetBucketLocationCommand({ Bucket: 'named-default' }))).LocationConstraint, await s3.config.region());
    await s3.send(new CreateBucketCommand({ Bucket: 'named-east', CreateBucketConfiguration: { LocationConstraint: 'us-east-1' as never } }));
    assert.equal((await s3.send(new GetBucketLocationCommand({ Bucket: 'named-east' }))).LocationConstraint, undefined);
    // Created again by its owner: in us-east-1 S3 answers 200 and changes nothing; elsewhere BucketAlreadyOwnedByYou.
    await s3.send(new PutObjectCommand({ Bucket: 'named-east', Key: 'kept', Body: 'kept' }));
    await s3.send(new CreateBucketCommand({ Bucket: 'named-east', CreateBucketConfiguration: { LocationConstraint: 'us-east-1' as never } }));
    assert.equal(await (await s3.send(new GetObjectCommand({ Bucket: 'named-east', Key: 'kept' }))).Body!.transformToString(), 'kept');
    assert.equal((await s3Code(s3.send(new CreateBucketCommand({ Bucket: 'named-one', CreateBucketConfiguration: { LocationConstraint: 'eu-west-1' } })))).name, 'BucketAlreadyOwnedByYou');
    assert.equal((await s3Code(s3.send(new CreateBucketCommand({ Bucket: 'named-east', CreateBucketConfiguration: { LocationConstraint: 'eu-west-1' } })))).name, 'BucketAlreadyOwnedByYou');
    const badRegion = await s3Code(s3.send(new CreateBucketCommand({ Bucket: 'named-bad-region', CreateBucketConfiguration: { LocationConstraint: 'eu west<1>' as never } })));
    assert.equal(badRegion.name, 'InvalidLocationConstraint');
    await s3.send(new PutObjectCommand({ Bucket: 'named-one', Key: 'k', Body: 'by name' }));
    const byId = await s3.send(new GetObjectCommand({ Bucket: row.id, Key: 'k' }));
    assert.equal(await byId.Body!.transformToString(), 'by name');
    const bjson = (await (await fetch(`${t.files}/${row.id}`, { headers: { authorization: `Bearer ${token}` } })).json()) as Record<string, unknown>;
    assert.equal(bjson.id, row.id);
    assert.equal(bjson.name, 'named-one');
    // Signed by hand: the SDK itself refuses some of these names before sending.
    const signer = new SignatureV4({ credentials: { accessKeyId: id, secretAccessKey: secret }, region: 'us-east-1', service: 's3', sha256: Sha256 });
    const u = new URL(t.s3Url);
    for (const bad of ['ab', 'UPPER', '-dash', 'a..b', 'foo.-bar', 'foo-.bar', '192.168.1.1', 'xn--abc', 'x'.repeat(64), '00000000-0000-4000-8000-000000000000']) {
      const req = await signer.sign(new HttpRequest({ method: 'PUT', protocol: 'http:', hostname: u.hostname, port: Number(u.port), path: `/${bad}`, headers: { host: u.host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } }));
      const r = await fetch(`${t.s3Url}/${bad}`, { method: 'PUT', headers: req.headers as Record<string, string> });
      const text = await r.text();
      assert.equal(r.status, 400, `${bad}: ${text}`);
      assert.match(text, /<Code>InvalidBucketName<\/Code>/, bad);
    }
    await s3.send(new CreateBucketCommand({ Bucket: 'to-delete' }));
    await s3.send(new DeleteBucketCommand({ Bucket: 'to-delete' }));
    assert.equal((await s3Code(s3.send(new HeadBucketCommand({ Bucket: 'to-delete' })))).status, 404);
    // Its name is free again.
    await s3.send(new CreateBucketCommand({ Bucket: 'to-delete' }));
  });

  it('malformed requests are 4xx S3 XML errors and store nothing', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'fuzz' }));
    await fileRemovalsSettled(t);
    const before = await storedFiles(t);
    const host = new URL(t.s3Url).host;
    const signer = new SignatureV4({ credentials: { accessKeyId: id, secretAccessKey: secret }, region: 'us-east-1', service: 's3', sha256: Sha256 });
    const sign = (method: string, path: string, headers: Record<string, string>, body?: string) =>
      signer.sign(new HttpRequest({ method, protocol: 'http:', hostname: '127.0.0.1', port: Number(new URL(t.s3Url).port), path, headers: { host, ...headers }, body }));

    const cases: Array<{ name: string; init: () => Promise<RequestInit & { path: string }> }> = [
      { name: 'garbage Authorization', init: async () => ({ path: '/fuzz/a', method: 'PUT', headers: { authorization: 'AWS4-HMAC-SHA256 garbage' }, body: 'x' }) },
      { name: 'old signature scheme', init: async () => ({ path: '/fuzz/a', method: 'PUT', headers: { authorization: 'AWS AKID:sig' }, body: 'x' }) },
      { name: 'bad date', init: async () => ({ path: '/fuzz/a', method: 'GET', headers: { authorization: `AWS4-HMAC-SHA256 Credential=${id}/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=${'0'.repeat(64)}`, 'x-amz-date': 'yesterday', 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } }) },
      {
        name: 'skewed date',
        init: async () => {
          const s = await signer.sign(new HttpRequest({ method: 'GET', protocol: 'http:', hostname: '127.0.0.1', path: '/fuzz/a', headers: { host, 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD' } }), { signingDate: new Date(Date.now() - 3600_000) });
          return { path: '/fuzz/a', method: 'GET', headers: s.headers as Record<string, string> };
        },
      },
      {
        name: 'payload hash mismatch',
        init: async () => {
          const s = await sign('PUT', '/fuzz/sha', { 'x-amz-content-sha256': createHash('sha256').update('other').digest('hex') });
          return { path: '/fuzz/sha', method: 'PUT', headers: s.headers as Record<string, string>, body: 'actual' };
        },
      },
      ...[
        ['bad chunk size', 'zz\r\nabc\r\n0\r\n\r\n'],
        ['truncated chunk', '10\r\nabc'],
        ['trailer without checksum', '3\r\nabc\r\n0\r\n\r\n'],
        ['wrong trailer checksum', '3\r\nabc\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n'],
      ].map(([name, body]) => ({
        name: name!,
        init: async () => {
          const s = await sign('PUT', '/fuzz/chunked', {
            'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER',
            'content-encoding': 'aws-chunked',
            'x-amz-decoded-content-length': '3',
            'x-amz-trailer': 'x-amz-checksum-crc32',
          });
          return { path: '/fuzz/chunked', method: 'PUT', headers: s.headers as Record<string, string>, body: body! };
        },
      })),
      {
        name: 'wrong chunk signature',
        init: async () => {
          const s = await sign('PUT', '/fuzz/signed', {
            'x-amz-content-sha256': 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
            'content-encoding': 'aws-chunked',
            'x-amz-decoded-content-length': '3',
          });
          return { path: '/fuzz/signed', method: 'PUT', headers: s.headers as Record<string, string>, body: `3;chunk-signature=${'a'.repeat(64)}\r\nabc\r\n0;chunk-signature=${'b'.repeat(64)}\r\n\r\n` };
        },
      },
      ...['<CreateBucketConfiguration>', '<Nope/>', 'not xml', '<CreateBucketConfiguration><LocationConstraint>a</LocationConstraint></Wrong>'].map((xml) => ({
        name: `CreateBucket body ${xml}`,
        init: async () => {
          const s = await sign('PUT', '/xml-bucket', { 'x-amz-content-sha256': createHash('sha256').update(xml).digest('hex') }, xml);
          return { path: '/xml-bucket', method: 'PUT', headers: s.headers as Record<string, string>, body: xml };
        },
      })),
      { name: 'Content-MD5 mismatch', init: async () => {
        const s = await sign('PUT', '/fuzz/md5', { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'content-md5': createHash('md5').update('other').digest('base64') });
        return { path: '/fuzz/md5', method: 'PUT', headers: s.headers as Record<string, string>, body: 'actual' };
      } },
      { name: 'x-amz-checksum-crc32 mismatch', init: async () => {
        const s = await sign('PUT', '/fuzz/crc', { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'x-amz-checksum-crc32': 'AAAAAA==' });
        return { path: '/fuzz/crc', method: 'PUT', headers: s.headers as Record<string, string>, body: 'actual' };
      } },
      { name: 'CopyObject', init: async () => {
        const s = await sign('PUT', '/fuzz/copy', { 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', 'x-amz-copy-source': '/fuzz/a' });
        return { path: '/fuzz/copy', method: 'PUT', headers: s.headers as Record<string, string> };
      } },
    ];
    for (const c of cases) {
      const { path, ...init } = await c.init();
      const r = await fetch(`${t.s3Url}${path}`, init as RequestInit);
      const text = await r.text();
      assert.ok(r.status >= 400 && (r.status < 500 || r.status === 501), `${c.name}: ${r.status} ${text}`);
      assert.match(text, /^<\?xml version="1.0" encoding="UTF-8"\?><Error><Code>\w+<\/Code>/, c.name);
      assert.ok(r.headers.get('x-amz-request-id'), c.name);
    }
    assert.deepEqual(await storedFiles(t), before, 'nothing stored');
    const rows = await t.server.core.ctx.db.selectFrom('object_versions').select('key').where('key', 'in', ['a', 'sha', 'chunked', 'signed', 'md5', 'crc', 'copy']).execute();
    assert.deepEqual(rows, []);
    assert.equal(await t.server.core.ctx.db.selectFrom('buckets').select('id').where('name', '=', 'xml-bucket').executeTakeFirst(), undefined);
  });

  it('the AWS CLI: s3api create-bucket, put-object, get-object, head-object, delete-object; s3 cp', async (ctx) => {
    if (!existsSync(AWS_CLI)) return ctx.skip(`${AWS_CLI} is not installed (Debian package awscli)`);
    const home = await mkdtemp(join(tmpdir(), 'files-rest-awscli-'));
    try {
      const env = {
        PATH: '/usr/bin:/bin',
        HOME: home,
        AWS_ACCESS_KEY_ID: id,
        AWS_SECRET_ACCESS_KEY: secret,
        AWS_DEFAULT_REGION: 'us-east-1',
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_CONFIG_FILE: join(home, 'config'),
        AWS_SHARED_CREDENTIALS_FILE: join(home, 'credentials'),
      };
      const aws = (...args: string[]) => run(AWS_CLI, ['--endpoint-url', t.s3Url, ...args], env);
      let r = await aws('s3api', 'create-bucket', '--bucket', 'cli-bucket');
      assert.equal(r.code, 0, r.stderr);
      const file = join(home, 'in.bin');
      const data = randomBytes(200_000);
      await writeFile(file, data);
      r = await aws('s3api', 'put-object', '--bucket', 'cli-bucket', '--key', 'x/y.bin', '--body', file, '--metadata', 'k=v');
      assert.equal(r.code, 0, r.stderr);
      const put = JSON.parse(r.stdout) as { ETag: string; VersionId: string };
      assert.equal(put.ETag, `"${md5(data)}"`);
      r = await aws('s3api', 'head-object', '--bucket', 'cli-bucket', '--key', 'x/y.bin');
      assert.equal(r.code, 0, r.stderr);
      assert.equal((JSON.parse(r.stdout) as { Metadata: Record<string, string> }).Metadata.k, 'v');
      const out = join(home, 'out.bin');
      r = await aws('s3api', 'get-object', '--bucket', 'cli-bucket', '--key', 'x/y.bin', out);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(await readFile(out), data);
      r = await aws('s3', 'cp', file, 's3://cli-bucket/copied.bin');
      assert.equal(r.code, 0, r.stderr);
      r = await aws('s3', 'cp', 's3://cli-bucket/copied.bin', join(home, 'copied.bin'));
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(await readFile(join(home, 'copied.bin')), data);
      r = await aws('s3api', 'put-bucket-tagging', '--bucket', 'cli-bucket', '--tagging', 'TagSet=[{Key=team,Value=archive}]');
      assert.equal(r.code, 0, r.stderr);
      r = await aws('s3api', 'get-bucket-tagging', '--bucket', 'cli-bucket');
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual((JSON.parse(r.stdout) as { TagSet: unknown }).TagSet, [{ Key: 'team', Value: 'archive' }]);
      r = await aws('s3api', 'delete-object', '--bucket', 'cli-bucket', '--key', 'x/y.bin');
      assert.equal(r.code, 0, r.stderr);
      assert.equal((JSON.parse(r.stdout) as { DeleteMarker: boolean }).DeleteMarker, true);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });

  it('boto3: create bucket, put, get, head, delete', async (ctx) => {
    const probe = await run(PYTHON, ['-c', 'import boto3'], { PATH: '/usr/bin:/bin' });
    if (probe.code !== 0) return ctx.skip(`boto3 is not importable by ${PYTHON}`);
    const home = await mkdtemp(join(tmpdir(), 'files-rest-boto3-'));
    try {
      const script = `
import boto3, sys, hashlib
s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], region_name='us-east-1')
s3.create_bucket(Bucket='boto-bucket')
body = b'hello from boto3' * 1000
put = s3.put_object(Bucket='boto-bucket', Key='b/o.txt', Body=body, Metadata={'m': 'n'})
assert put['ETag'] == '"%s"' % hashlib.md5(body).hexdigest(), put
got = s3.get_object(Bucket='boto-bucket', Key='b/o.txt')
assert got['Body'].read() == body
assert got['Metadata'] == {'m': 'n'}, got['Metadata']
head = s3.head_object(Bucket='boto-bucket', Key='b/o.txt')
assert head['ContentLength'] == len(body)
d = s3.delete_object(Bucket='boto-bucket', Key='b/o.txt')
assert d['DeleteMarker'] is True
print('ok')
`;
      const r = await run(PYTHON, ['-c', script, t.s3Url, id, secret], { PATH: '/usr/bin:/bin', HOME: home, AWS_EC2_METADATA_DISABLED: 'true', AWS_CONFIG_FILE: join(home, 'c'), AWS_SHARED_CREDENTIALS_FILE: join(home, 'k') });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.trim(), 'ok');
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});

describe('S3 access keys through the admin CLI', () => {
  it('key create --json, list, revoke; rotation with FILES_REST_SERVER_KEY_PREVIOUS and key rewrap', async () => {
    const oldKey = randomBytes(32).toString('base64');
    // A one-second key cache: `key revoke` runs in another process, which this one hears of when
    // the cached key's time is up.
    const t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: oldKey, FILES_REST_S3_KEY_CACHE_SECONDS: '1' });
    const { runCli } = await import('./support/process.js');
    try {
      const env = { ...t.env, FILES_REST_SERVER_KEY: oldKey };
      const created = await runCli(['key', 'create', '--json'], env);
      assert.equal(created.code, 0, created.stderr);
      const k = JSON.parse(created.stdout) as { id: string; access_key_id: string; secret_access_key: string; bucket: null; actions: string[]; expires: null };
      assert.deepEqual(Object.keys(k).sort(), ['access_key_id', 'actions', 'bucket', 'expires', 'id', 'secret_access_key']);
      const s3 = client(t, k.access_key_id, k.secret_access_key);
      await s3.send(new CreateBucketCommand({ Bucket: 'keyed' }));
      const listed = await runCli(['key', 'list', '--json'], env);
      assert.equal(listed.code, 0, listed.stderr);
      assert.ok(!listed.stdout.includes(k.secret_access_key), 'key list never shows a secret');
      // Rotation: the old key decrypts as a previous key until rewrap re-encrypts under the new one.
      const newKey = randomBytes(32).toString('base64');
      const rotated = { ...t.env, FILES_REST_SERVER_KEY: newKey, FILES_REST_SERVER_KEY_PREVIOUS: oldKey };
      const rewrap = await runCli(['key', 'rewrap', '--json'], rotated);
      assert.equal(rewrap.code, 0, rewrap.stderr);
      assert.deepEqual(JSON.parse(rewrap.stdout), { rewrapped: 1, unreadable: [] });
      const { lookupAccessKey } = await import('../src/s3/access-keys.js');
      const found = await lookupAccessKey(t.server.core.ctx.db, { current: Buffer.from(newKey, 'base64'), previous: [], source: 'test' }, k.access_key_id);
      assert.equal(found?.secret, k.secret_access_key);
      const revoked = await runCli(['key', 'revoke', k.access_key_id], rotated);
      assert.equal(revoked.code, 0, revoked.stderr);
      await new Promise((resolve) => setTimeout(resolve, 1100));
      assert.equal((await s3Code(s3.send(new ListBucketsCommand({})))).name, 'InvalidAccessKeyId');
      s3.destroy();
      if (!t.databaseUrl.startsWith('sqlite:')) {
        const noKey = await runCli(['key', 'create'], { ...t.env, FILES_REST_SERVER_KEY: '' });
        assert.notEqual(noKey.code, 0);
        assert.match(noKey.stderr, /FILES_REST_SERVER_KEY/);
      }
    } finally {
      await t.close();
    }
  });
});

describe('S3 door settings', () => {
  it('FILES_REST_S3_PORT=off starts no S3 listener', async () => {
    const t = await startTestServer({ FILES_REST_S3_PORT: 'off' });
    try {
      assert.equal(t.s3Url, '');
      assert.equal(t.server.s3, null);
    } finally {
      await t.close();
    }
  });

  it('allow-all: anonymous requests are allowed', async () => {
    const t = await startTestServer({ FILES_REST_S3_PORT: 'auto' });
    try {
      let r = await fetch(`${t.s3Url}/anon-bucket`, { method: 'PUT' });
      assert.equal(r.status, 200, await r.text());
      r = await fetch(`${t.s3Url}/anon-bucket/k`, { method: 'PUT', body: 'anonymous' });
      assert.equal(r.status, 200, await r.text());
      r = await fetch(`${t.s3Url}/anon-bucket/k`);
      assert.equal(await r.text(), 'anonymous');
    } finally {
      await t.close();
    }
  });
});
