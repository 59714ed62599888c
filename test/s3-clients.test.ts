// The S3 door against real, unmodified command-line and library clients: the AWS CLI, boto3,
// s3cmd and rclone (the AWS SDK for JavaScript v3 with its defaults is in s3-door.test.ts). Each
// client runs in a temporary HOME holding its own configuration, never the user's, and goes through
// the same scenarios where it can express them: make a bucket (named through the client), put, list
// with and without a delimiter, get whole and ranged, head, delete (a delete marker), versions,
// presigned GET and PUT fetched with curl (an expired one refused), a wrong secret
// (SignatureDoesNotMatch) and a key scoped to another bucket (AccessDenied). A client that is not
// installed is skipped with the reason; `.ci/run` installs them (Debian: awscli, python3-boto3,
// s3cmd, rclone, curl). Each block stays at a few dozen invocations: these CLIs start slowly.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createBucket } from '../src/domain/buckets.js';
import { createAccessKey } from '../src/s3/access-keys.js';
import { requireServerKeys } from '../src/auth/server-key.js';
import { startTestServer, type TestServer } from './support/server.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const AWS = '/usr/bin/aws';
const PYTHON = '/usr/bin/python3';
const S3CMD = '/usr/bin/s3cmd';
const RCLONE = '/usr/bin/rclone';
const CURL = '/usr/bin/curl';
const PATH = '/usr/bin:/bin';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

function ok(r: Run, what: string): Run {
  assert.equal(r.code, 0, `${what}: ${r.stderr}${r.stdout}`);
  return r;
}

function md5(b: Buffer | string): string {
  return createHash('md5').update(b).digest('hex');
}

/** curl: status and body of a URL (GET, or PUT of a file). */
async function curl(url: string, put?: string): Promise<{ status: number; body: string }> {
  const r = await run(CURL, ['-s', '-g', '-o', '-', '-w', '\n%{http_code}', ...(put ? ['-T', put] : []), url], { PATH });
  ok(r, `curl ${url}`);
  const i = r.stdout.lastIndexOf('\n');
  return { status: Number(r.stdout.slice(i + 1)), body: r.stdout.slice(0, i) };
}

describe('S3 door with real clients', () => {
  let t: TestServer;
  let id: string;
  let secret: string;
  /** A key scoped to `scopedBucket` only. */
  let scoped: { id: string; secret: string };
  let otherBucket: string;
  let home: string;
  let curlMissing: string | null;

  before(async () => {
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const ctx = t.server.core.ctx;
    const keys = requireServerKeys(t.config, null, { create: true });
    const k = await createAccessKey(ctx.db, keys);
    id = k.info.accessKeyId;
    secret = k.secret;
    const mine = await createBucket(ctx, {});
    otherBucket = (await createBucket(ctx, {})).id;
    const s = await createAccessKey(ctx.db, keys, { bucket: mine.id });
    scoped = { id: s.info.accessKeyId, secret: s.secret };
    home = await mkdtemp(join(tmpdir(), 'files-rest-s3-clients-'));
    curlMissing = existsSync(CURL) ? null : `${CURL} is not installed (Debian package curl)`;
  });
  after(async () => {
    await t?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  /** A fresh HOME for one client, with a small tree of files to upload. */
  async function clientHome(name: string): Promise<{ dir: string; files: Record<string, Buffer> }> {
    const dir = join(home, name);
    await mkdir(join(dir, 'up', 'docs'), { recursive: true });
    const files: Record<string, Buffer> = {
      'top.txt': Buffer.from('0123456789abcdefghij'),
      'docs/one.bin': randomBytes(70_000),
      'docs/two.txt': Buffer.from(`two from ${name}`),
    };
    for (const [k, v] of Object.entries(files)) await writeFile(join(dir, 'up', k), v);
    return { dir, files };
  }

  it('the AWS CLI: s3 mb/cp/ls/rm, s3api list-objects-v2 --delimiter, get-object --range, head-object, list-object-versions, presign', async (ctx) => {
    if (!existsSync(AWS)) return ctx.skip(`${AWS} is not installed (Debian package awscli)`);
    const { dir, files } = await clientHome('awscli');
    const env = (key = id, sec = secret) => ({
      PATH,
      HOME: dir,
      AWS_ACCESS_KEY_ID: key,
      AWS_SECRET_ACCESS_KEY: sec,
      AWS_DEFAULT_REGION: 'us-east-1',
      AWS_EC2_METADATA_DISABLED: 'true',
      AWS_CONFIG_FILE: join(dir, 'aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(dir, 'aws-credentials'),
    });
    const aws = (args: string[], e = env()) => run(AWS, ['--endpoint-url', t.s3Url, ...args], e);
    const json = async (args: string[]) => JSON.parse(ok(await aws(args), args.join(' ')).stdout) as Record<string, unknown>;

    ok(await aws(['s3', 'mb', 's3://aws-cli-bucket']), 'mb');
    ok(await aws(['s3', 'cp', '--recursive', join(dir, 'up'), 's3://aws-cli-bucket/']), 'cp --recursive');
    const ls = ok(await aws(['s3', 'ls', 's3://aws-cli-bucket/']), 'ls').stdout;
    assert.match(ls, /PRE docs\//);
    assert.match(ls, /\s20 top\.txt/);
    const lsr = ok(await aws(['s3', 'ls', '--recursive', 's3://aws-cli-bucket/']), 'ls --recursive').stdout;
    assert.deepEqual(lsr.trim().split('\n').map((l) => l.split(/\s+/).pop()), ['docs/one.bin', 'docs/two.txt', 'top.txt']);
    const v2 = (await json(['s3api', 'list-objects-v2', '--bucket', 'aws-cli-bucket', '--delimiter', '/'])) as { Contents: Array<{ Key: string; ETag: string }>; CommonPrefixes: Array<{ Prefix: string }> };
    assert.deepEqual(v2.Contents.map((c) => c.Key), ['top.txt']);
    assert.equal(v2.Contents[0]!.ETag, `"${md5(files['top.txt']!)}"`);
    assert.deepEqual(v2.CommonPrefixes.map((p) => p.Prefix), ['docs/']);

    const whole = join(dir, 'whole.bin');
    ok(await aws(['s3', 'cp', 's3://aws-cli-bucket/docs/one.bin', whole]), 'cp down');
    assert.deepEqual(await readFile(whole), files['docs/one.bin']);
    const part = join(dir, 'part.txt');
    const ranged = (await json(['s3api', 'get-object', '--bucket', 'aws-cli-bucket', '--key', 'top.txt', '--range', 'bytes=5-9', part])) as { ContentRange: string };
    assert.equal(ranged.ContentRange, 'bytes 5-9/20');
    assert.equal(await readFile(part, 'utf8'), '56789');
    const head = (await json(['s3api', 'head-object', '--bucket', 'aws-cli-bucket', '--key', 'docs/one.bin'])) as { ContentLength: number; ETag: string };
    assert.equal(head.ContentLength, 70_000);
    assert.equal(head.ETag, `"${md5(files['docs/one.bin']!)}"`);

    ok(await aws(['s3', 'rm', 's3://aws-cli-bucket/top.txt']), 'rm');
    const gone = await aws(['s3api', 'head-object', '--bucket', 'aws-cli-bucket', '--key', 'top.txt']);
    assert.notEqual(gone.code, 0);
    assert.match(gone.stderr, /404|Not Found/);
    const versions = (await json(['s3api', 'list-object-versions', '--bucket', 'aws-cli-bucket', '--prefix', 'top'])) as { Versions: Array<{ IsLatest: boolean }>; DeleteMarkers: Array<{ IsLatest: boolean; VersionId: string }> };
    assert.deepEqual(versions.Versions.map((v) => v.IsLatest), [false]);
    assert.deepEqual(versions.DeleteMarkers.map((v) => v.IsLatest), [true]);

    if (!curlMissing) {
      const url = ok(await aws(['s3', 'presign', 's3://aws-cli-bucket/docs/two.txt', '--expires-in', '300']), 'presign').stdout.trim();
      assert.deepEqual(await curl(url), { status: 200, body: 'two from awscli' });
      const short = ok(await aws(['s3', 'presign', 's3://aws-cli-bucket/docs/two.txt', '--expires-in', '1']), 'presign').stdout.trim();
      await sleep(2100);
      const expired = await curl(short);
      assert.equal(expired.status, 403);
      assert.match(expired.body, /<Code>AccessDenied<\/Code>.*expired/s);
    }

    const wrong = await aws(['s3', 'ls', 's3://aws-cli-bucket/'], env(id, 'wrong-secret'));
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /SignatureDoesNotMatch/);
    const denied = await aws(['s3', 'ls', `s3://${otherBucket}/`], env(scoped.id, scoped.secret));
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /AccessDenied/);
  });

  it('boto3 (default settings: checksum trailers): the same scenarios from one script, presigned URLs fetched with curl', async (ctx) => {
    const probe = await run(PYTHON, ['-c', 'import boto3'], { PATH });
    if (probe.code !== 0) return ctx.skip(`boto3 is not importable by ${PYTHON} (Debian package python3-boto3)`);
    if (curlMissing) return ctx.skip(curlMissing);
    const { dir, files } = await clientHome('boto3');
    const script = `
import boto3, json, sys, hashlib
from botocore.config import Config
from botocore.exceptions import ClientError
endpoint, key, secret, skey, ssecret, other = sys.argv[1:7]
def client(k, s):
    return boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=k, aws_secret_access_key=s, region_name='us-east-1')
def code(f):
    try:
        f()
    except ClientError as e:
        return e.response['Error']['Code']
    return None
s3 = client(key, secret)
out = {}
s3.create_bucket(Bucket='boto3-bucket')
big = open(sys.argv[7], 'rb').read()
out['put'] = s3.put_object(Bucket='boto3-bucket', Key='docs/one.bin', Body=big)['ETag']
s3.put_object(Bucket='boto3-bucket', Key='docs/two.txt', Body=b'two')
s3.upload_file(sys.argv[8], 'boto3-bucket', 'top.txt')
flat = s3.list_objects_v2(Bucket='boto3-bucket')
out['flat'] = [c['Key'] for c in flat['Contents']]
d = s3.list_objects_v2(Bucket='boto3-bucket', Delimiter='/')
out['delimited'] = [[c['Key'] for c in d.get('Contents', [])], [p['Prefix'] for p in d.get('CommonPrefixes', [])]]
out['get'] = hashlib.md5(s3.get_object(Bucket='boto3-bucket', Key='docs/one.bin')['Body'].read()).hexdigest()
r = s3.get_object(Bucket='boto3-bucket', Key='top.txt', Range='bytes=0-3')
out['range'] = [r['Body'].read().decode(), r['ContentRange']]
out['head'] = s3.head_object(Bucket='boto3-bucket', Key='docs/one.bin')['ContentLength']
out['delete'] = s3.delete_object(Bucket='boto3-bucket', Key='docs/two.txt').get('DeleteMarker')
out['after_delete'] = code(lambda: s3.head_object(Bucket='boto3-bucket', Key='docs/two.txt'))
v = s3.list_object_versions(Bucket='boto3-bucket', Prefix='docs/two')
out['versions'] = [[x['IsLatest'] for x in v.get('Versions', [])], [x['IsLatest'] for x in v.get('DeleteMarkers', [])]]
# boto3 presigns with SigV2 unless told (s3v4): both are accepted.
v4 = boto3.client('s3', endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret, region_name='us-east-1', config=Config(signature_version='s3v4'))
out['presigned_v2'] = s3.generate_presigned_url('get_object', Params={'Bucket': 'boto3-bucket', 'Key': 'top.txt', 'ResponseContentDisposition': 'attachment; filename="a b.txt"'}, ExpiresIn=300)
out['presigned_v2_put'] = s3.generate_presigned_url('put_object', Params={'Bucket': 'boto3-bucket', 'Key': 'v2 put+.txt'}, ExpiresIn=300)
out['presigned_v2_list'] = s3.generate_presigned_url('list_objects', Params={'Bucket': 'boto3-bucket', 'Prefix': 'docs/'}, ExpiresIn=300)
out['presigned_v2_short'] = s3.generate_presigned_url('get_object', Params={'Bucket': 'boto3-bucket', 'Key': 'top.txt'}, ExpiresIn=1)
s3 = v4
out['presigned_get'] = s3.generate_presigned_url('get_object', Params={'Bucket': 'boto3-bucket', 'Key': 'top.txt'}, ExpiresIn=300)
out['presigned_put'] = s3.generate_presigned_url('put_object', Params={'Bucket': 'boto3-bucket', 'Key': 'curl-put.txt'}, ExpiresIn=300)
out['presigned_short'] = s3.generate_presigned_url('get_object', Params={'Bucket': 'boto3-bucket', 'Key': 'top.txt'}, ExpiresIn=1)
s3 = client(key, secret)
out['wrong_secret'] = code(lambda: client(key, 'wrong-secret').list_buckets())
out['scoped_other'] = code(lambda: client(skey, ssecret).put_object(Bucket=other, Key='k', Body=b'x'))
out['buckets'] = [b['Name'] for b in s3.list_buckets()['Buckets'] if b['Name'] == 'boto3-bucket']
# A metadata value that is not ASCII, set as Ceph's s3-tests sets it: sent as its UTF-8 bytes, signed as UTF-8.
def accented(params, **kwargs):
    params['headers']['x-amz-meta-meta1'] = u'Hello World\xe9'
s3.meta.events.register('before-call.s3.PutObject', accented)
s3.put_object(Bucket='boto3-bucket', Key='accented.txt', Body=b'bar')
s3.meta.events.unregister('before-call.s3.PutObject', accented)
got = s3.head_object(Bucket='boto3-bucket', Key='accented.txt')['Metadata']['meta1']
# boto3 reads header bytes as latin1: the same bytes back are the UTF-8 of the value.
out['accented'] = got.encode('latin1').decode('utf8')
print(json.dumps(out))
`;
    await writeFile(join(dir, 'run.py'), script);
    const r = ok(
      await run(PYTHON, [join(dir, 'run.py'), t.s3Url, id, secret, scoped.id, scoped.secret, otherBucket, join(dir, 'up', 'docs', 'one.bin'), join(dir, 'up', 'top.txt')], {
        PATH,
        HOME: dir,
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_CONFIG_FILE: join(dir, 'aws-config'),
        AWS_SHARED_CREDENTIALS_FILE: join(dir, 'aws-credentials'),
      }),
      'boto3 script',
    );
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.equal(out.put, `"${md5(files['docs/one.bin']!)}"`);
    assert.deepEqual(out.flat, ['docs/one.bin', 'docs/two.txt', 'top.txt']);
    assert.deepEqual(out.delimited, [['top.txt'], ['docs/']]);
    assert.equal(out.get, md5(files['docs/one.bin']!));
    assert.deepEqual(out.range, ['0123', 'bytes 0-3/20']);
    assert.equal(out.head, 70_000);
    assert.equal(out.delete, true);
    assert.equal(out.after_delete, '404');
    assert.deepEqual(out.versions, [[false], [true]]);
    assert.equal(out.wrong_secret, 'SignatureDoesNotMatch');
    assert.equal(out.scoped_other, 'AccessDenied');
    assert.deepEqual(out.buckets, ['boto3-bucket']);
    assert.equal(out.accented, 'Hello World\u00e9', 'a non-ASCII metadata value is accepted (it was SignatureDoesNotMatch) and its bytes come back');
    assert.deepEqual(await curl(out.presigned_get as string), { status: 200, body: '0123456789abcdefghij' });
    // boto3's default presigned URLs (SigV2): served, the response override signed with them; refused once altered.
    assert.deepEqual(await curl(out.presigned_v2 as string), { status: 200, body: '0123456789abcdefghij' });
    const disposition = await run(CURL, ['-s', '-g', '-D', '-', '-o', '/dev/null', out.presigned_v2 as string], { PATH });
    assert.match(disposition.stdout, /content-disposition: attachment; filename="a b\.txt"/i);
    const altered = await curl((out.presigned_v2 as string).replace('top.txt', 'docs/one.bin'));
    assert.equal(altered.status, 403);
    assert.match(altered.body, /<Code>SignatureDoesNotMatch<\/Code>/);
    await writeFile(join(dir, 'put-v2.txt'), 'put through a SigV2 URL');
    assert.equal((await curl(out.presigned_v2_put as string, join(dir, 'put-v2.txt'))).status, 200);
    const listed = await curl(out.presigned_v2_list as string);
    assert.equal(listed.status, 200);
    assert.match(listed.body, /<Key>docs%2Fone\.bin<\/Key>|<Key>docs\/one\.bin<\/Key>/);
    await writeFile(join(dir, 'put.txt'), 'put with curl');
    assert.equal((await curl(out.presigned_put as string, join(dir, 'put.txt'))).status, 200);
    assert.deepEqual(await curl(out.presigned_get as string), { status: 200, body: '0123456789abcdefghij' });
    await sleep(2100);
    const expired = await curl(out.presigned_short as string);
    assert.equal(expired.status, 403);
    assert.match(expired.body, /<Code>AccessDenied<\/Code>/);
    const expiredV2 = await curl(out.presigned_v2_short as string);
    assert.equal(expiredV2.status, 403);
    assert.match(expiredV2.body, /<Code>AccessDenied<\/Code><Message>Request has expired/);
    const got = await run(PYTHON, ['-c', `import boto3,sys
s3=boto3.client('s3',endpoint_url=sys.argv[1],aws_access_key_id=sys.argv[2],aws_secret_access_key=sys.argv[3],region_name='us-east-1')
print(s3.get_object(Bucket='boto3-bucket',Key='curl-put.txt')['Body'].read().decode())`, t.s3Url, id, secret], { PATH, HOME: dir, AWS_EC2_METADATA_DISABLED: 'true', AWS_CONFIG_FILE: join(dir, 'aws-config'), AWS_SHARED_CREDENTIALS_FILE: join(dir, 'aws-credentials') });
    assert.equal(ok(got, 'get of the curl PUT').stdout.trim(), 'put with curl');
  });

  it('s3cmd (signature v4, path style, no TLS): mb, put, ls with and without delimiter, get, info, del; signurl (SigV2) fetched with curl; the same with signature_v2 = True, multipart too', async (ctx) => {
    if (!existsSync(S3CMD)) return ctx.skip(`${S3CMD} is not installed (Debian package s3cmd)`);
    const { dir, files } = await clientHome('s3cmd');
    const host = new URL(t.s3Url).host;
    const config = (key: string, sec: string, v2 = false) =>
      ['[default]', `access_key = ${key}`, `secret_key = ${sec}`, `host_base = ${host}`, `host_bucket = ${host}`, 'use_https = False', `signature_v2 = ${v2 ? 'True' : 'False'}`, 'bucket_location = us-east-1', ''].join('\n');
    await writeFile(join(dir, '.s3cfg'), config(id, secret));
    await writeFile(join(dir, 'v2.s3cfg'), config(id, secret, true));
    await writeFile(join(dir, 'v2-wrong.s3cfg'), config(id, 'wrong-secret', true));
    await writeFile(join(dir, 'wrong.s3cfg'), config(id, 'wrong-secret'));
    await writeFile(join(dir, 'scoped.s3cfg'), config(scoped.id, scoped.secret));
    const s3cmd = (args: string[], cfg = '.s3cfg') => run(S3CMD, ['-c', join(dir, cfg), ...args], { PATH, HOME: dir });

    ok(await s3cmd(['mb', 's3://s3cmd-bucket']), 'mb');
    ok(await s3cmd(['put', '--recursive', join(dir, 'up') + '/', 's3://s3cmd-bucket/']), 'put --recursive');
    const ls = ok(await s3cmd(['ls', 's3://s3cmd-bucket/']), 'ls').stdout;
    assert.match(ls, /DIR\s+s3:\/\/s3cmd-bucket\/docs\//);
    assert.match(ls, /\s20\s+s3:\/\/s3cmd-bucket\/top\.txt/);
    const lsr = ok(await s3cmd(['ls', '--recursive', 's3://s3cmd-bucket/']), 'ls --recursive').stdout;
    assert.deepEqual(lsr.trim().split('\n').map((l) => l.split(/\s+/).pop()), ['s3://s3cmd-bucket/docs/one.bin', 's3://s3cmd-bucket/docs/two.txt', 's3://s3cmd-bucket/top.txt']);
    ok(await s3cmd(['get', 's3://s3cmd-bucket/docs/one.bin', join(dir, 'one.bin')]), 'get');
    assert.deepEqual(await readFile(join(dir, 'one.bin')), files['docs/one.bin']);
    const info = ok(await s3cmd(['info', 's3://s3cmd-bucket/docs/one.bin']), 'info').stdout;
    assert.match(info, /File size:\s+70000/);
    assert.match(info, new RegExp(`MD5 sum:\\s+${md5(files['docs/one.bin']!)}`));
    ok(await s3cmd(['del', 's3://s3cmd-bucket/top.txt']), 'del');
    const after = ok(await s3cmd(['ls', 's3://s3cmd-bucket/']), 'ls').stdout;
    assert.doesNotMatch(after, /top\.txt/);

    if (!curlMissing) {
      // s3cmd signs URLs with SigV2 only.
      const url = ok(await s3cmd(['signurl', 's3://s3cmd-bucket/docs/two.txt', '+300']), 'signurl').stdout.trim();
      assert.match(url, /[?&]Signature=/);
      assert.deepEqual(await curl(url), { status: 200, body: files['docs/two.txt']!.toString() });
    }

    // Every request signed with SigV2 (signature_v2 = True): put (a 12 MiB file in 5 MiB parts), ls, get, del.
    const big = randomBytes(12 * 1024 * 1024 + 3);
    await writeFile(join(dir, 'big.bin'), big);
    ok(await s3cmd(['put', '--multipart-chunk-size-mb=5', join(dir, 'big.bin'), 's3://s3cmd-bucket/v2/big file.bin'], 'v2.s3cfg'), 'v2 put (multipart)');
    ok(await s3cmd(['put', join(dir, 'up', 'top.txt'), 's3://s3cmd-bucket/v2/top+odd %.txt'], 'v2.s3cfg'), 'v2 put');
    const v2ls = ok(await s3cmd(['ls', 's3://s3cmd-bucket/v2/'], 'v2.s3cfg'), 'v2 ls').stdout;
    assert.match(v2ls, /12582915\s+s3:\/\/s3cmd-bucket\/v2\/big file\.bin/);
    ok(await s3cmd(['get', 's3://s3cmd-bucket/v2/big file.bin', join(dir, 'big-back.bin')], 'v2.s3cfg'), 'v2 get');
    assert.ok((await readFile(join(dir, 'big-back.bin'))).equals(big));
    const v2info = ok(await s3cmd(['info', 's3://s3cmd-bucket/v2/top+odd %.txt'], 'v2.s3cfg'), 'v2 info').stdout;
    assert.match(v2info, /File size:\s+20/);
    ok(await s3cmd(['del', 's3://s3cmd-bucket/v2/top+odd %.txt'], 'v2.s3cfg'), 'v2 del');
    const v2wrong = await s3cmd(['ls', 's3://s3cmd-bucket/'], 'v2-wrong.s3cfg');
    assert.notEqual(v2wrong.code, 0);
    assert.match(v2wrong.stderr + v2wrong.stdout, /SignatureDoesNotMatch/);

    const wrong = await s3cmd(['ls', 's3://s3cmd-bucket/'], 'wrong.s3cfg');
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr + wrong.stdout, /SignatureDoesNotMatch/);
    const denied = await s3cmd(['put', join(dir, 'up', 'top.txt'), `s3://${otherBucket}/k`], 'scoped.s3cfg');
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr + denied.stdout, /AccessDenied|403/);
  });

  it('rclone (provider Other, path style, config from the environment): mkdir, copy, ls, lsf, cat --offset --count, check, deletefile, --s3-versions', async (ctx) => {
    if (!existsSync(RCLONE)) return ctx.skip(`${RCLONE} is not installed (Debian package rclone)`);
    const { dir, files } = await clientHome('rclone');
    const env = (key = id, sec = secret) => ({
      PATH,
      HOME: dir,
      RCLONE_CONFIG: join(dir, 'rclone.conf'),
      RCLONE_CONFIG_FR_TYPE: 's3',
      RCLONE_CONFIG_FR_PROVIDER: 'Other',
      RCLONE_CONFIG_FR_ACCESS_KEY_ID: key,
      RCLONE_CONFIG_FR_SECRET_ACCESS_KEY: sec,
      RCLONE_CONFIG_FR_ENDPOINT: t.s3Url,
      RCLONE_CONFIG_FR_REGION: 'us-east-1',
      RCLONE_CONFIG_FR_FORCE_PATH_STYLE: 'true',
    });
    const rclone = (args: string[], e = env()) => run(RCLONE, ['--retries', '1', '--low-level-retries', '1', ...args], e);

    ok(await rclone(['mkdir', 'fr:rclone-bucket']), 'mkdir');
    ok(await rclone(['copy', join(dir, 'up'), 'fr:rclone-bucket']), 'copy');
    const ls = ok(await rclone(['ls', 'fr:rclone-bucket']), 'ls').stdout;
    assert.deepEqual(ls.trim().split('\n').map((l) => l.trim().split(/\s+/)).sort((a, b) => a[1]!.localeCompare(b[1]!)), [['70000', 'docs/one.bin'], ['15', 'docs/two.txt'], ['20', 'top.txt']]);
    const lsf = ok(await rclone(['lsf', 'fr:rclone-bucket']), 'lsf').stdout;
    assert.deepEqual(lsf.trim().split('\n').sort(), ['docs/', 'top.txt']);
    const cat = ok(await rclone(['cat', '--offset', '3', '--count', '4', 'fr:rclone-bucket/top.txt']), 'cat').stdout;
    assert.equal(cat, '3456');
    ok(await rclone(['cat', 'fr:rclone-bucket/docs/two.txt']), 'cat whole');
    ok(await rclone(['check', join(dir, 'up'), 'fr:rclone-bucket']), 'check');
    ok(await rclone(['deletefile', 'fr:rclone-bucket/top.txt']), 'deletefile');
    assert.deepEqual(ok(await rclone(['lsf', 'fr:rclone-bucket']), 'lsf').stdout.trim().split('\n').sort(), ['docs/']);
    // The old version is still there, listed by ListObjectVersions.
    const versions = ok(await rclone(['lsf', '--s3-versions', 'fr:rclone-bucket']), 'lsf --s3-versions').stdout;
    assert.match(versions, /^top-v\d{4}-\d\d-\d\d-\d{6}-\d{3}\.txt$/m);
    void files;

    const wrong = await rclone(['lsf', 'fr:rclone-bucket'], env(id, 'wrong-secret'));
    assert.notEqual(wrong.code, 0);
    assert.match(wrong.stderr, /SignatureDoesNotMatch/);
    const denied = await rclone(['lsf', `fr:${otherBucket}`], env(scoped.id, scoped.secret));
    assert.notEqual(denied.code, 0);
    assert.match(denied.stderr, /AccessDenied/);
  });
});
