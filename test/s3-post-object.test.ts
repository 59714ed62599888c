// PostObject on the S3 door: browser form uploads signed inside the form. Forms made by real
// clients (the AWS SDK's createPresignedPost, boto3's generate_presigned_post posted with Python's
// requests, a page of another origin in headless Chromium), SigV2 forms as Ceph's s3-tests send
// them, and every refusal (policy, signature, size, malformed form) with nothing stored.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { CreateBucketCommand, GetObjectCommand, GetObjectTaggingCommand, HeadObjectCommand, ListObjectVersionsCommand, PutBucketCorsCommand, S3Client } from '@aws-sdk/client-s3';
import { createPresignedPost } from '@aws-sdk/s3-presigned-post';
import { signingKey } from '../src/s3/signing-key.js';
import { startTestServer, storedFiles, type TestServer } from './support/server.js';
import { doorClient, newDoorKey } from './support/s3-door.js';
import { startWebApp } from './support/web-app.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const PYTHON = '/usr/bin/python3';

const md5 = (b: string | Buffer) => createHash('md5').update(b).digest('hex');

/** A SigV4 POST form's signature fields for a policy document. */
function signV4(policy: object, id: string, secret: string, now = new Date()) {
  const date = now.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
  const day = date.slice(0, 8);
  const credential = `${id}/${day}/us-east-1/s3/aws4_request`;
  const full = { ...policy, conditions: [...(policy as { conditions: unknown[] }).conditions, { 'x-amz-algorithm': 'AWS4-HMAC-SHA256' }, { 'x-amz-credential': credential }, { 'x-amz-date': date }] };
  const b64 = Buffer.from(JSON.stringify(full)).toString('base64');
  return { Policy: b64, 'X-Amz-Algorithm': 'AWS4-HMAC-SHA256', 'X-Amz-Credential': credential, 'X-Amz-Date': date, 'X-Amz-Signature': signingKey(secret, day, 'us-east-1').sign(b64).toString('hex') };
}

/** A SigV2 POST form's signature fields (as Ceph's s3-tests sign them). */
function signV2(policy: object, id: string, secret: string) {
  const b64 = Buffer.from(JSON.stringify(policy)).toString('base64');
  return { AWSAccessKeyId: id, policy: b64, signature: createHmac('sha1', secret).update(b64).digest('base64') };
}

function form(fields: Record<string, string>, file: string | Buffer | null = 'file body', filename = 'upload.txt', after: Record<string, string> = {}): FormData {
  const f = new FormData();
  for (const [k, v] of Object.entries(fields)) f.append(k, v);
  if (file !== null) f.append('file', new Blob([typeof file === 'string' ? file : new Uint8Array(file)]), filename);
  for (const [k, v] of Object.entries(after)) f.append(k, v);
  return f;
}

const inAnHour = () => new Date(Date.now() + 3600_000).toISOString();

describe('S3 door: PostObject (browser form uploads)', () => {
  let t: TestServer;
  let s3: S3Client;
  let id: string;
  let secret: string;
  let bucketId: string;

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    id = k.accessKeyId;
    secret = k.secret;
    s3 = doorClient(t, k);
    await s3.send(new CreateBucketCommand({ Bucket: 'forms' }));
    bucketId = (await t.server.core.ctx.db.selectFrom('buckets').select('id').where('name', '=', 'forms').executeTakeFirstOrThrow()).id;
  });
  after(async () => {
    s3?.destroy();
    await t?.close();
  });

  const post = (f: FormData, bucket = 'forms') => fetch(`${t.s3Url}/${bucket}`, { method: 'POST', body: f, redirect: 'manual' });

  /** The bucket's versions and stored files, to show a refusal left nothing. */
  async function state() {
    const v = await s3.send(new ListObjectVersionsCommand({ Bucket: 'forms' }));
    const bucket = await t.server.core.ctx.db.selectFrom('buckets').select(['size']).where('id', '=', bucketId).executeTakeFirstOrThrow();
    return { versions: (v.Versions ?? []).length + (v.DeleteMarkers ?? []).length, size: Number(bucket.size), files: (await storedFiles(t)).length };
  }

  it("the AWS SDK's createPresignedPost: fields, conditions and a content-length-range; the object has its metadata", async () => {
    const { url, fields } = await createPresignedPost(s3, {
      Bucket: 'forms',
      Key: 'sdk/${filename}',
      Conditions: [['starts-with', '$key', 'sdk/'], ['content-length-range', 1, 1024], ['starts-with', '$Content-Type', 'text/'], { 'x-amz-meta-origin': 'sdk' }],
      Fields: { 'Content-Type': 'text/plain', 'x-amz-meta-origin': 'sdk' },
      Expires: 600,
    });
    assert.equal(url, `${t.s3Url}/forms`);
    const r = await fetch(url, { method: 'POST', body: form(fields, 'hello from a form', 'greeting.txt') });
    assert.equal(r.status, 204, await r.clone().text());
    assert.equal(r.headers.get('etag'), `"${md5('hello from a form')}"`);
    assert.ok(r.headers.get('x-amz-version-id'));
    assert.match(r.headers.get('location') ?? '', /\/forms\/sdk\/greeting\.txt$/);
    const got = await s3.send(new GetObjectCommand({ Bucket: 'forms', Key: 'sdk/greeting.txt' }));
    assert.equal(await got.Body!.transformToString(), 'hello from a form');
    assert.equal(got.ContentType, 'text/plain');
    assert.deepEqual(got.Metadata, { origin: 'sdk' });
    assert.equal(got.VersionId, r.headers.get('x-amz-version-id'));
    // Too large for the policy's range: EntityTooLarge, nothing stored.
    const before = await state();
    const big = await fetch(url, { method: 'POST', body: form(fields, Buffer.alloc(2048, 1), 'big.bin') });
    assert.equal(big.status, 400);
    assert.match(await big.text(), /<Code>EntityTooLarge<\/Code>/);
    const empty = await fetch(url, { method: 'POST', body: form(fields, '', 'empty.txt') });
    assert.equal(empty.status, 400);
    assert.match(await empty.text(), /<Code>EntityTooSmall<\/Code>/);
    assert.deepEqual(await state(), before);
  });

  it("boto3's generate_presigned_post, posted with Python's requests: 201 and S3's PostResponse", async (tt) => {
    if (!existsSync(PYTHON)) return tt.skip('python3 is not installed');
    const script = `
import sys, boto3, requests
from botocore.config import Config
s3 = boto3.client('s3', endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3], region_name='us-east-1', config=Config(s3={'addressing_style': 'path'}))
p = s3.generate_presigned_post('forms', 'boto/report.csv', Fields={'success_action_status': '201'}, Conditions=[{'success_action_status': '201'}], ExpiresIn=300)
r = requests.post(p['url'], data=p['fields'], files={'file': ('report.csv', b'a,b\\n1,2\\n')})
print(r.status_code)
print(r.text)
`;
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(PYTHON, ['-c', script, t.s3Url, id, secret], (err, stdout, stderr) => resolve({ code: err ? 1 : 0, stdout, stderr })),
    );
    if (out.code !== 0 && /No module named/.test(out.stderr)) return tt.skip(`boto3 or requests is missing: ${out.stderr.trim().split('\n').pop()}`);
    assert.equal(out.code, 0, out.stderr);
    const [status, ...body] = out.stdout.trim().split('\n');
    assert.equal(status, '201', out.stdout);
    const xml = body.join('\n');
    assert.match(xml, /<PostResponse>.*<Bucket>forms<\/Bucket><Key>boto\/report.csv<\/Key>/s);
    assert.match(xml, new RegExp(`<ETag>&quot;${md5('a,b\n1,2\n')}&quot;</ETag>`));
    const got = await s3.send(new GetObjectCommand({ Bucket: 'forms', Key: 'boto/report.csv' }));
    assert.equal(await got.Body!.transformToString(), 'a,b\n1,2\n');
  });

  it('SigV2 forms (as Ceph s3-tests sign them), tagging, a redirect on success, status 200', async () => {
    const policy = { expiration: inAnHour(), conditions: [{ bucket: 'forms' }, ['starts-with', '$key', 'v2/'], { success_action_redirect: 'https://app.example/done?x=1' }, ['starts-with', '$tagging', '']] };
    const tagging = '<Tagging><TagSet><Tag><Key>team</Key><Value>blue</Value></Tag></TagSet></Tagging>';
    let r = await post(form({ key: 'v2/a.txt', ...signV2(policy, id, secret), success_action_redirect: 'https://app.example/done?x=1', tagging }, 'v2 body'));
    assert.equal(r.status, 303);
    const to = new URL(r.headers.get('location')!);
    assert.equal(to.origin + to.pathname, 'https://app.example/done');
    assert.equal(to.searchParams.get('x'), '1');
    assert.equal(to.searchParams.get('bucket'), 'forms');
    assert.equal(to.searchParams.get('key'), 'v2/a.txt');
    assert.equal(to.searchParams.get('etag'), `"${md5('v2 body')}"`);
    assert.deepEqual((await s3.send(new GetObjectTaggingCommand({ Bucket: 'forms', Key: 'v2/a.txt' }))).TagSet, [{ Key: 'team', Value: 'blue' }]);
    const p200 = { expiration: inAnHour(), conditions: [{ bucket: 'forms' }, ['starts-with', '$key', ''], { success_action_status: '200' }] };
    r = await post(form({ key: 'v2/b.txt', ...signV2(p200, id, secret), success_action_status: '200' }, 'b'));
    assert.equal(r.status, 200);
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: 'forms', Key: 'v2/b.txt' }))).ContentLength, 1);
    // A checksum of the file (no condition needed for it, as RGW): verified, stored, answered; Content-MD5 too.
    const sha = createHash('sha256').update('checked').digest('base64');
    r = await post(form({ key: 'v2/sum.txt', ...signV2(p200, id, secret), success_action_status: '200', 'x-amz-checksum-sha256': sha, 'Content-MD5': createHash('md5').update('checked').digest('base64') }, 'checked'));
    assert.equal(r.status, 200, await r.clone().text());
    assert.equal(r.headers.get('x-amz-checksum-sha256'), sha);
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: 'forms', Key: 'v2/sum.txt', ChecksumMode: 'ENABLED' }))).ChecksumSHA256, sha);
    // The key a policy judges is the one `${filename}` makes (Ceph's test_post_object_set_key_from_filename).
    const byName = { expiration: inAnHour(), conditions: [{ bucket: 'forms' }, ['starts-with', '$key', 'foo']] };
    r = await post(form({ key: '${filename}', ...signV2(byName, id, secret) }, 'named', 'foo.txt'));
    assert.equal(r.status, 204, await r.clone().text());
    assert.equal((await s3.send(new HeadObjectCommand({ Bucket: 'forms', Key: 'foo.txt' }))).ContentLength, 5);
    // Fields after the file are not read (S3 ignores them): no policy condition names them, and it still passes.
    r = await post(form({ key: 'v2/c.txt', ...signV2(p200, id, secret), success_action_status: '200' }, 'c', 'c.txt', { 'x-amz-meta-late': 'ignored' }));
    assert.equal(r.status, 200, await r.clone().text());
    assert.deepEqual((await s3.send(new HeadObjectCommand({ Bucket: 'forms', Key: 'v2/c.txt' }))).Metadata, {});
  });

  it('refusals: policy, signature, key, form; each an S3 error in XML and nothing stored', async () => {
    const base = { expiration: inAnHour(), conditions: [{ bucket: 'forms' }, ['starts-with', '$key', 'ok/']] as unknown[] };
    const before = await state();
    const cases: [string, FormData, number, string][] = [
      ['expired', form({ key: 'ok/1', ...signV4({ ...base, expiration: new Date(Date.now() - 1000).toISOString() }, id, secret) }), 403, 'AccessDenied'],
      ['key outside the policy', form({ key: 'other/1', ...signV4(base, id, secret) }), 403, 'AccessDenied'],
      ['a field no condition names', form({ key: 'ok/1', 'x-amz-meta-extra': 'x', ...signV4(base, id, secret) }), 403, 'AccessDenied'],
      ['another bucket in the policy', form({ key: 'ok/1', ...signV4({ ...base, conditions: [{ bucket: 'elsewhere' }, ['starts-with', '$key', '']] }, id, secret) }), 403, 'AccessDenied'],
      ['wrong secret', form({ key: 'ok/1', ...signV4(base, id, 'not-the-secret') }), 403, 'SignatureDoesNotMatch'],
      ['wrong SigV2 secret', form({ key: 'ok/1', ...signV2(base, id, 'not-the-secret') }), 403, 'SignatureDoesNotMatch'],
      ['unknown key', form({ key: 'ok/1', ...signV4(base, 'AKIDOESNOTEXIST', secret) }), 403, 'InvalidAccessKeyId'],
      ['policy not JSON', form({ key: 'ok/1', AWSAccessKeyId: id, policy: Buffer.from('{not json').toString('base64'), signature: createHmac('sha1', secret).update(Buffer.from('{not json').toString('base64')).digest('base64') }), 400, 'InvalidPolicyDocument'],
      ['policy without expiration', form({ key: 'ok/1', ...signV2({ conditions: [] }, id, secret) }), 400, 'InvalidPolicyDocument'],
      ['no key field', form({ ...signV2({ expiration: inAnHour(), conditions: [{ bucket: 'forms' }] }, id, secret) }), 400, 'InvalidArgument'],
      ['signed without policy', form({ key: 'ok/1', AWSAccessKeyId: id, signature: 'x' }), 400, 'InvalidArgument'],
      ['no file part', form({ key: 'ok/1', ...signV4(base, id, secret) }, null), 400, 'MalformedPOSTRequest'],
      ['anonymous', form({ key: 'ok/1' }), 403, 'AccessDenied'],
      ['a session token', form({ key: 'ok/1', 'x-amz-security-token': 'tok', ...signV4({ ...base, conditions: [...base.conditions, { 'x-amz-security-token': 'tok' }] }, id, secret) }), 400, 'InvalidToken'],
      ['a checksum that does not match', form({ key: 'ok/1', 'x-amz-checksum-crc32': 'AAAAAA==', ...signV4(base, id, secret) }), 400, 'BadDigest'],
      ['a checksum that is not one', form({ key: 'ok/1', 'x-amz-checksum-sha256': 'sailorjerry', ...signV4(base, id, secret) }), 400, 'InvalidRequest'],
      ['a Content-MD5 that does not match', form({ key: 'ok/1', 'Content-MD5': createHash('md5').update('other').digest('base64'), ...signV4(base, id, secret) }), 400, 'BadDigest'],
      ['a line break in a field stored as a header', form({ key: 'ok/1', 'Content-Type': 'text/plain\r\nx-evil: 1', ...signV4({ ...base, conditions: [...base.conditions, ['starts-with', '$Content-Type', 'text/']] }, id, secret) }), 400, 'InvalidArgument'],
      ['encryption asked for', form({ key: 'ok/1', 'x-amz-server-side-encryption': 'AES256', ...signV4({ ...base, conditions: [...base.conditions, { 'x-amz-server-side-encryption': 'AES256' }] }, id, secret) }), 501, 'NotImplemented'],
    ];
    for (const [what, f, status, code] of cases) {
      const r = await post(f);
      const text = await r.text();
      assert.equal(r.status, status, `${what}: ${text}`);
      assert.match(text, new RegExp(`<Code>${code}</Code>`), what);
    }
    // A POST to a bucket that is neither a form nor DeleteObjects; a form to a bucket that does not exist.
    let r = await fetch(`${t.s3Url}/forms`, { method: 'POST', body: 'key=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.equal(r.status, 412);
    assert.match(await r.text(), /multipart\/form-data/);
    r = await post(form({ key: 'ok/1', ...signV4(base, id, secret) }), 'no-such-forms');
    assert.equal(r.status, 404);
    assert.match(await r.text(), /<Code>NoSuchBucket<\/Code>/);
    // A form cut short in its file part, and one whose multipart framing is broken.
    const boundary = 'XyZ';
    const fields = { key: 'ok/cut', ...signV4(base, id, secret) };
    let head = '';
    for (const [k, v] of Object.entries(fields)) head += `--${boundary}\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
    head += `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="x"\r\n\r\n`;
    r = await fetch(`${t.s3Url}/forms`, { method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${boundary}` }, body: `${head}partial file with no closing delimiter` });
    assert.equal(r.status, 400);
    assert.match(await r.text(), /<Code>MalformedPOSTRequest<\/Code>/);
    r = await fetch(`${t.s3Url}/forms`, { method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=' }, body: 'garbage' });
    assert.equal(r.status, 400);
    assert.match(await r.text(), /<Code>MalformedPOSTRequest<\/Code>/);
    assert.deepEqual(await state(), before);
  });

  it('fuzz: 300 mangled forms (framing, fields, signature, cut short) answer 4xx or store exactly what they acknowledged', async () => {
    const base = { expiration: inAnHour(), conditions: [{ bucket: 'forms' }, ['starts-with', '$key', 'fuzz/'], ['starts-with', '$Content-Type', '']] };
    const boundary = '----fuzzBoundary7MA4YWxk';
    const valid = () => {
      const fields: Record<string, string> = { key: `fuzz/${randomBytes(4).toString('hex')}`, 'Content-Type': 'text/plain', ...signV4(base, id, secret) };
      let body = '';
      for (const [k, v] of Object.entries(fields)) body += `--${boundary}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`;
      body += `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.txt"\r\nContent-Type: text/plain\r\n\r\n${randomBytes(64).toString('base64')}\r\n--${boundary}--\r\n`;
      return Buffer.from(body);
    };
    const mutate = (b: Buffer): Buffer => {
      const r = randomBytes(4);
      const at = r.readUInt16BE(0) % b.length;
      switch (r[2]! % 6) {
        case 0:
          return b.subarray(0, at); // cut short
        case 1: {
          const c = Buffer.from(b);
          c[at] = r[3]!; // one byte changed (a boundary, a header, a field, the signature, the file)
          return c;
        }
        case 2:
          return Buffer.concat([b.subarray(0, at), Buffer.from([0, 0x0d, 0x0a, 0x22, 0x2d, 0x2d]), b.subarray(at)]); // NUL, CRLF, quote, dashes inserted
        case 3:
          return Buffer.concat([b.subarray(0, at), b.subarray(at + 1 + (r[3]! % 40))]); // a run of bytes dropped
        case 4:
          return Buffer.from(b.toString('latin1').replace(/name="[^"]+"/, `name="${'x'.repeat(r[3]! * 200)}"`), 'latin1'); // a long field name
        default:
          return Buffer.concat([b, randomBytes(r[3]!)]); // trailing garbage after the closing delimiter
      }
    };
    let acknowledged = 0;
    for (let i = 0; i < 300; i++) {
      const body = mutate(valid());
      const r = await fetch(`${t.s3Url}/forms`, { method: "POST", headers: { "content-type": `multipart/form-data; boundary=${boundary}` }, body: new Uint8Array(body) });
      const text = await r.text();
      assert.ok(r.status < 500, `${r.status}: ${text}`);
      if (r.status === 204) acknowledged++;
      else assert.match(text, /<Error><Code>\w+<\/Code>/);
    }
    // Whatever was acknowledged is there, whole; the bucket's size is the sum of what it holds.
    const listed = await s3.send(new ListObjectVersionsCommand({ Bucket: 'forms', Prefix: 'fuzz/' }));
    assert.equal((listed.Versions ?? []).length, acknowledged);
    for (const v of listed.Versions ?? []) {
      const got = await s3.send(new GetObjectCommand({ Bucket: 'forms', Key: v.Key!, VersionId: v.VersionId! }));
      assert.equal((await got.Body!.transformToByteArray()).length, v.Size);
    }
    const all = await s3.send(new ListObjectVersionsCommand({ Bucket: 'forms' }));
    const bucket = await t.server.core.ctx.db.selectFrom('buckets').select(['size']).where('id', '=', bucketId).executeTakeFirstOrThrow();
    assert.equal(Number(bucket.size), (all.Versions ?? []).reduce((n, v) => n + (v.Size ?? 0), 0));
  });

  it('a page of another origin posts a presigned form from headless Chromium once the bucket allows it', async (tt) => {
    const app = await startWebApp();
    const { context, origin } = app;
    try {
      if (!context) return tt.skip(app.skip ?? 'chromium did not start');
      await s3.send(new PutBucketCorsCommand({ Bucket: 'forms', CORSConfiguration: { CORSRules: [{ AllowedOrigins: [origin], AllowedMethods: ['POST'], ExposeHeaders: ['ETag'] }] } }));
      const presigned = await createPresignedPost(s3, { Bucket: 'forms', Key: 'browser/${filename}', Conditions: [['starts-with', '$key', 'browser/']], Expires: 300 });
      const tab = await context.newPage();
      await tab.goto(origin);
      const result = await tab.evaluate(async ({ url, fields }) => {
        const f = new FormData();
        for (const [k, v] of Object.entries(fields)) f.append(k, v);
        f.append('file', new File(['picked in a browser'], 'photo.txt', { type: 'text/plain' }));
        const r = await fetch(url, { method: 'POST', body: f });
        return { status: r.status, etag: r.headers.get('etag') };
      }, presigned);
      assert.deepEqual(result, { status: 204, etag: `"${md5('picked in a browser')}"` });
      const got = await s3.send(new GetObjectCommand({ Bucket: 'forms', Key: 'browser/photo.txt' }));
      assert.equal(await got.Body!.transformToString(), 'picked in a browser');
    } finally {
      await app.close();
    }
  });
});
