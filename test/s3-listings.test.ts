// The S3 door's listings (src/s3/listings.ts over src/domain/listing.ts), on a real database: objects
// are made through the REST API, the listing functions are called with the server's own domain
// context, and every page walk is compared with a listing computed here by brute force. A few walks
// go through the AWS SDK (against a small HTTP server answering with these functions) to check that
// real clients read the XML.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from 'kysely';
import { ListObjectsCommand, ListObjectsV2Command, ListObjectVersionsCommand, S3Client } from '@aws-sdk/client-s3';
import { startTestServer, type TestServer } from './support/server.js';
import { createBucket, md5, put, req } from './support/http.js';
import { handleListing, s3UrlEncode } from '../src/s3/listings.js';
import { S3Error, renderS3ErrorXml } from '../src/s3/errors.js';
import type { DomainContext } from '../src/domain/context.js';
import { newId } from '../src/util/ids.js';
import { nowMicros } from '../src/util/time.js';

interface ModelVersion {
  versionId: string;
  marker: boolean;
  md5?: string;
}

/** One listed entry, as the tests compare them: a key (and version) or a common prefix. */
type Entry = { kind: 'key'; key: string; versionId?: string; marker?: boolean; latest?: boolean } | { kind: 'prefix'; prefix: string };

function byteCompare(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

function commonPrefix(key: string, prefix: string, delimiter: string): string | null {
  if (!delimiter) return null;
  const at = key.indexOf(delimiter, prefix.length);
  return at === -1 ? null : key.slice(0, at + delimiter.length);
}

/** The brute-force listing: group the (sorted) entries under `prefix` by `delimiter`. */
function expectedListing(model: Map<string, ModelVersion[]>, versions: boolean, prefix: string, delimiter: string): Entry[] {
  const out: Entry[] = [];
  const keys = [...model.keys()].filter((k) => k.startsWith(prefix)).sort(byteCompare);
  for (const key of keys) {
    const vs = model.get(key)!;
    const listed = versions ? [...vs].reverse() : vs[vs.length - 1]!.marker ? [] : [vs[vs.length - 1]!];
    if (listed.length === 0) continue;
    const cp = commonPrefix(key, prefix, delimiter);
    if (cp !== null) {
      const last = out[out.length - 1];
      if (!(last?.kind === 'prefix' && last.prefix === cp)) out.push({ kind: 'prefix', prefix: cp });
      continue;
    }
    for (const v of listed) {
      out.push(versions ? { kind: 'key', key, versionId: v.versionId, marker: v.marker, latest: v === vs[vs.length - 1] } : { kind: 'key', key });
    }
  }
  return out;
}

// ---------------------------------------------------------------- a small reader of the XML

function unescape(s: string): string {
  return s.replace(/&(lt|gt|amp|quot|apos);/g, (_, e: string) => ({ lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" })[e]!);
}

/** Checks well-formedness as far as these documents go: declaration, balanced tags, text without raw `<`/`&`, only XML 1.0 characters. */
function assertWellFormed(xml: string): void {
  assert.ok(xml.startsWith('<?xml version="1.0" encoding="UTF-8"?>'), 'XML declaration');
  const body = xml.slice(xml.indexOf('?>') + 2);
  assert.doesNotMatch(body, /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/, 'a character XML 1.0 cannot carry');
  const stack: string[] = [];
  const re = /<(\/?)([A-Za-z][A-Za-z0-9]*)(?: xmlns="[^"<&]*")?>|([^<]+)/gy;
  let m: RegExpExecArray | null;
  let at = 0;
  while ((m = re.exec(body)) !== null) {
    at = re.lastIndex;
    if (m[3] !== undefined) {
      assert.doesNotMatch(m[3], /&(?!(lt|gt|amp|quot|apos);)/, `raw & in ${m[3]}`);
      assert.ok(stack.length > 0, 'text outside the root');
    } else if (m[1]) assert.equal(stack.pop(), m[2], 'balanced tags');
    else stack.push(m[2]!);
  }
  assert.equal(at, body.length, `unparsable XML at ${body.slice(at, at + 40)}`);
  assert.equal(stack.length, 0);
}

function field(xml: string, name: string): string | null {
  const m = new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml);
  return m ? unescape(m[1]!) : null;
}

interface ParsedPage {
  entries: Entry[];
  top: (name: string) => string | null;
  raw: string;
}

/** Entries in document order (each kind of element keeps its order) and the top-level fields. */
function parsePage(xml: string, url: boolean): ParsedPage {
  assertWellFormed(xml);
  const decode = (s: string) => (url ? decodeURIComponent(s.replace(/\+/g, ' ')) : s);
  const entries: Entry[] = [];
  const items = /<(Contents|Version|DeleteMarker|CommonPrefixes)>(.*?)<\/\1>/g;
  let m: RegExpExecArray | null;
  while ((m = items.exec(xml)) !== null) {
    const body = m[2]!;
    if (m[1] === 'CommonPrefixes') entries.push({ kind: 'prefix', prefix: decode(field(body, 'Prefix')!) });
    else if (m[1] === 'Contents') entries.push({ kind: 'key', key: decode(field(body, 'Key')!) });
    else entries.push({ kind: 'key', key: decode(field(body, 'Key')!), versionId: field(body, 'VersionId')!, marker: m[1] === 'DeleteMarker', latest: field(body, 'IsLatest') === 'true' });
  }
  const rest = xml.replace(items, '');
  return { entries, top: (name) => field(rest, name), raw: xml };
}

/** A page's entries in listing order: the document lists the objects, then the prefixes. */
function inKeyOrder(entries: Entry[]): Entry[] {
  const pos = (e: Entry) => (e.kind === 'prefix' ? e.prefix : e.key);
  // A stable sort: the versions of one key keep their order.
  return [...entries].sort((a, b) => byteCompare(pos(a), pos(b)));
}

type Kind = 'v1' | 'v2' | 'versions';

/** Walks every page of a listing; checks each page's size and truncation; returns all entries and the page count. */
async function walk(ctx: DomainContext, bucketId: string, kind: Kind, params: Record<string, string>, maxKeys: number): Promise<{ entries: Entry[]; pages: number }> {
  const url = params['encoding-type'] === 'url';
  const all: Entry[] = [];
  const next: Record<string, string> = {};
  for (let pages = 1; pages < 500; pages++) {
    const q = new URLSearchParams({ ...params, 'max-keys': String(maxKeys), ...next });
    if (kind === 'v2') q.set('list-type', '2');
    if (kind === 'versions') q.set('versions', '');
    const page = parsePage((await handleListing(ctx, bucketId, q, { bucketName: 'bkt' })).xml, url);
    const truncated = page.top('IsTruncated') === 'true';
    assert.ok(page.entries.length <= maxKeys, 'page too long');
    if (truncated) assert.equal(page.entries.length, maxKeys, 'a truncated page is full');
    if (kind === 'v2') assert.equal(page.top('KeyCount'), String(page.entries.length));
    all.push(...inKeyOrder(page.entries));
    if (!truncated) return { entries: all, pages };
    const dec = (s: string) => (url ? decodeURIComponent(s.replace(/\+/g, ' ')) : s);
    if (kind === 'v2') next['continuation-token'] = page.top('NextContinuationToken')!;
    else if (kind === 'v1') {
      const nm = page.top('NextMarker');
      assert.equal(nm !== null, !!params.delimiter, 'NextMarker only with a delimiter');
      const last = all[all.length - 1]!;
      next.marker = nm !== null ? dec(nm) : last.kind === 'key' ? last.key : last.prefix;
    } else {
      next['key-marker'] = dec(page.top('NextKeyMarker')!);
      const vm = page.top('NextVersionIdMarker');
      if (vm !== null) next['version-id-marker'] = vm;
      else delete next['version-id-marker'];
    }
  }
  throw new Error(`the walk does not end: ${kind} ${JSON.stringify(params)} ${maxKeys} ${JSON.stringify(next)}`);
}

async function s3Code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof S3Error, String(e));
    return e.code;
  }
  return 'no error';
}

/** Counts the statements run through a Kysely instance and the rows they returned. */
class Counter implements KyselyPlugin {
  queries = 0;
  rows = 0;
  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    return args.node;
  }
  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    this.queries++;
    this.rows += args.result.rows.length;
    return args.result;
  }
}

function path(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

describe('S3 listings', () => {
  let s: TestServer;
  let ctx: DomainContext;
  let bucket: string;
  const model = new Map<string, ModelVersion[]>();

  async function putKey(key: string, body = `${key} ${model.get(key)?.length ?? 0}`): Promise<void> {
    const r = await put(`${s.files}/${bucket}/${path(key)}`, body);
    assert.equal(r.status, 200, r.text);
    const vs = model.get(key) ?? [];
    vs.push({ versionId: r.json.version_id, marker: false, md5: md5(body) });
    model.set(key, vs);
  }
  async function deleteKey(key: string): Promise<void> {
    const r = await req(`${s.files}/${bucket}/${path(key)}`, { method: 'DELETE' });
    assert.equal(r.status, 204, r.text);
    // The marker's version id, from the versions listing of the REST API.
    const l = await req(`${s.files}/${bucket}?versions&prefix=${encodeURIComponent(key)}`);
    assert.equal(l.status, 200, l.text);
    const marker = (l.json.contents as { key: string; version_id: string; is_head: boolean; delete_marker?: boolean }[]).find((c) => c.key === key && c.is_head)!;
    model.get(key)!.push({ versionId: marker.version_id, marker: true });
  }

  const KEYS = [
    'a', 'a/', 'a/b', 'a/b/c', 'a/b/d', 'a/c', 'a+b', 'a b', 'ab', 'b/x', 'b/y/z', 'c', 'dir/',
    'données/été 2026/żółć.dat', 'données/x', `x&y<z>"q'`, 'emoji/\u{1F600}.txt', '\uFF46x', '\u{1F600}x',
    'p-q-r', 'p-q', 'x.y.z', 'dm', 'gone/x', 'gone/y',
  ];

  before(async () => {
    s = await startTestServer();
    ctx = s.server.core.ctx;
    bucket = await createBucket(s.files);
    for (const k of KEYS) await putKey(k);
    await putKey('a/b');
    await putKey('c');
    await putKey('c');
    await deleteKey('a/c');
    await deleteKey('gone/x');
    await deleteKey('gone/y');
    await deleteKey('dm');
    await putKey('dm');
  });
  after(async () => {
    await s?.close();
  });

  it('the REST listing used to learn delete markers lists them', () => {
    assert.equal(model.get('dm')!.map((v) => v.marker).join(), 'false,true,false');
  });

  it('every listing, walked page by page with max-keys 1 to 3, yields exactly the brute-force listing', async () => {
    const prefixes = ['', 'a', 'a/', 'a/b', 'b/', 'données/', 'gone/', 'p-', 'zz'];
    const delimiters = ['', '/', '-', 'b', 'é'];
    for (const kind of ['v1', 'v2', 'versions'] as Kind[]) {
      for (const prefix of prefixes) {
        for (const delimiter of delimiters) {
          const expected = expectedListing(model, kind === 'versions', prefix, delimiter);
          for (const maxKeys of [1, 2, 3, 1000]) {
            const params: Record<string, string> = {};
            if (prefix) params.prefix = prefix;
            if (delimiter) params.delimiter = delimiter;
            const { entries } = await walk(ctx, bucket, kind, params, maxKeys);
            assert.deepEqual(entries, expected, `${kind} prefix=${JSON.stringify(prefix)} delimiter=${JSON.stringify(delimiter)} max-keys=${maxKeys}`);
          }
        }
      }
    }
  });

  it('the same walks with encoding-type=url decode to the same listing, a key XML cannot carry included', async () => {
    for (const kind of ['v1', 'v2', 'versions'] as Kind[]) {
      for (const delimiter of ['', '/', 'é']) {
        for (const maxKeys of [2, 1000]) {
          const params: Record<string, string> = { 'encoding-type': 'url' };
          if (delimiter) params.delimiter = delimiter;
          const { entries } = await walk(ctx, bucket, kind, params, maxKeys);
          assert.deepEqual(entries, expectedListing(model, kind === 'versions', '', delimiter), `${kind} delimiter=${delimiter} max-keys=${maxKeys}`);
        }
      }
    }
    assert.equal(s3UrlEncode(`a b+c/d*e~f&é`), 'a+b%2Bc/d*e%7Ef%26%C3%A9');
  });

  it('a key XML 1.0 cannot carry is listed right with encoding-type=url (plain, it shows as U+FFFD; the V2 token still continues past it)', async () => {
    const odd = await createBucket(s.files);
    const oddModel = new Map<string, ModelVersion[]>();
    for (const k of ['k', 'k\uFFFFk', 'k\uFFFF/x', 'kz']) {
      const r = await put(`${s.files}/${odd}/${path(k)}`, k);
      assert.equal(r.status, 200, r.text);
      oddModel.set(k, [{ versionId: r.json.version_id, marker: false }]);
    }
    for (const kind of ['v1', 'v2', 'versions'] as Kind[]) {
      for (const delimiter of ['', '/']) {
        for (const maxKeys of [1, 2, 1000]) {
          const params: Record<string, string> = { 'encoding-type': 'url' };
          if (delimiter) params.delimiter = delimiter;
          const { entries } = await walk(ctx, odd, kind, params, maxKeys);
          assert.deepEqual(entries, expectedListing(oddModel, kind === 'versions', '', delimiter), `${kind} delimiter=${delimiter} max-keys=${maxKeys}`);
        }
      }
    }
    const { xml } = await handleListing(ctx, odd, new URLSearchParams({ 'list-type': '2', 'encoding-type': 'url', prefix: 'k\uFFFF', delimiter: '/' }), {});
    assert.match(xml, /<Key>k%EF%BF%BFk<\/Key>/);
    assert.match(xml, /<Prefix>k%EF%BF%BF<\/Prefix><Delimiter>\/<\/Delimiter>/);
    assert.match(xml, /<CommonPrefixes><Prefix>k%EF%BF%BF\/<\/Prefix><\/CommonPrefixes>/);
    assert.match(xml, /<EncodingType>url<\/EncodingType>/);
    // Without encoding the key cannot be carried (XML 1.0 has no U+FFFF), but the document stays well-formed.
    const plain = (await handleListing(ctx, odd, new URLSearchParams({ 'list-type': '2', prefix: 'k\uFFFFk' }), {})).xml;
    assertWellFormed(plain);
    assert.match(plain, /<Key>k\uFFFDk<\/Key>/);
    const walked = await walk(ctx, odd, 'v2', {}, 1);
    assert.equal(walked.entries.length, 4);
  });

  it('keys are ordered by UTF-8 bytes: U+FF46 before U+1F600', async () => {
    const { xml } = await handleListing(ctx, bucket, new URLSearchParams({ 'list-type': '2' }), {});
    const keys = parsePage(xml, false).entries.map((e) => (e.kind === 'key' ? e.key : ''));
    assert.ok(keys.indexOf('\uFF46x') < keys.indexOf('\u{1F600}x'), keys.join('|'));
  });

  it('contents carry the MD5 ETag, size, LastModified with milliseconds and STANDARD; owner as S3 gives it', async () => {
    const body = 'c 2';
    const v2 = await handleListing(ctx, bucket, new URLSearchParams({ 'list-type': '2', prefix: 'c', 'max-keys': '1' }), { bucketName: 'my-bucket' });
    assert.match(v2.xml, /^<\?xml version="1.0" encoding="UTF-8"\?><ListBucketResult xmlns="http:\/\/s3.amazonaws.com\/doc\/2006-03-01\/"><Name>my-bucket<\/Name>/);
    assert.match(v2.xml, new RegExp(`<Contents><Key>c</Key><LastModified>\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z</LastModified><ETag>&quot;${md5(body)}&quot;</ETag><Size>3</Size><StorageClass>STANDARD</StorageClass></Contents>`));
    assert.doesNotMatch(v2.xml, /<Owner>/);
    const owned = await handleListing(ctx, bucket, new URLSearchParams({ 'list-type': '2', prefix: 'c', 'fetch-owner': 'true' }), { owner: { id: 'abc', displayName: 'me' } });
    assert.match(owned.xml, /<Owner><ID>abc<\/ID><DisplayName>me<\/DisplayName><\/Owner>/);
    const v1 = await handleListing(ctx, bucket, new URLSearchParams({ prefix: 'c' }), {});
    assert.match(v1.xml, /<Owner><ID>[0-9a-f]{64}<\/ID><DisplayName>files-rest<\/DisplayName><\/Owner>/);
    assert.match(v1.xml, /<Marker><\/Marker>/);
    // Special characters are escaped.
    const amp = await handleListing(ctx, bucket, new URLSearchParams({ 'list-type': '2', prefix: 'x&' }), {});
    assert.match(amp.xml, /<Key>x&amp;y&lt;z&gt;&quot;q&apos;<\/Key>/);
    assert.match(amp.xml, /<Prefix>x&amp;<\/Prefix>/);
  });

  it('the versions listing interleaves versions and delete markers newest first, with IsLatest', async () => {
    const { xml } = await handleListing(ctx, bucket, new URLSearchParams({ versions: '', prefix: 'dm' }), {});
    assertWellFormed(xml);
    const dm = model.get('dm')!;
    const seq = [...xml.matchAll(/<(Version|DeleteMarker)><Key>dm<\/Key><VersionId>([^<]+)<\/VersionId><IsLatest>(true|false)<\/IsLatest>/g)].map((m) => `${m[1]}:${m[2]}:${m[3]}`);
    assert.deepEqual(seq, [`Version:${dm[2]!.versionId}:true`, `DeleteMarker:${dm[1]!.versionId}:false`, `Version:${dm[0]!.versionId}:false`]);
    assert.match(xml, /^<\?xml version="1.0" encoding="UTF-8"\?><ListVersionsResult xmlns="http:\/\/s3.amazonaws.com\/doc\/2006-03-01\/">/);
    // A deleted folder has no objects, only versions.
    const latest = await handleListing(ctx, bucket, new URLSearchParams({ 'list-type': '2', delimiter: '/' }), {});
    assert.doesNotMatch(latest.xml, /<Prefix>gone\/<\/Prefix>/);
    const versions = await handleListing(ctx, bucket, new URLSearchParams({ versions: '', delimiter: '/' }), {});
    assert.match(versions.xml, /<CommonPrefixes><Prefix>gone\/<\/Prefix><\/CommonPrefixes>/);
  });

  it('markers: key-marker alone skips every version of the key; with version-id-marker the older versions follow', async () => {
    const dm = model.get('dm')!;
    const page = async (p: Record<string, string>) => parsePage((await handleListing(ctx, bucket, new URLSearchParams({ versions: '', prefix: 'd', ...p }), {})).xml, false);
    const afterKey = await page({ 'key-marker': 'dm' });
    assert.ok(afterKey.entries.every((e) => e.kind === 'key' && e.key !== 'dm'));
    const afterNewest = await page({ 'key-marker': 'dm', 'version-id-marker': dm[2]!.versionId });
    assert.deepEqual(afterNewest.entries.filter((e) => e.kind === 'key' && e.key === 'dm').map((e) => e.kind === 'key' && e.versionId), [dm[1]!.versionId, dm[0]!.versionId]);
    assert.equal(afterNewest.top('KeyMarker'), 'dm');
    assert.equal(afterNewest.top('VersionIdMarker'), dm[2]!.versionId);
    // start-after and marker start after a key; one inside a folder skips the folder (it was listed).
    const v2 = parsePage((await handleListing(ctx, bucket, new URLSearchParams({ 'list-type': '2', 'start-after': 'a/b', delimiter: '/' }), {})).xml, false);
    assert.equal(v2.top('StartAfter'), 'a/b');
    assert.ok(!v2.entries.some((e) => e.kind === 'prefix' && e.prefix === 'a/'));
    assert.equal((v2.entries[0] as { key: string }).key, 'ab');
    const inside = parsePage((await handleListing(ctx, bucket, new URLSearchParams({ marker: 'a/b', prefix: 'a/' }), {})).xml, false);
    assert.deepEqual(inside.entries.map((e) => e.kind === 'key' && e.key), ['a/b/c', 'a/b/d']);
  });

  it('max-keys: 0 lists nothing, more than the limit is capped, the limit is the default', async () => {
    const zero = parsePage((await handleListing(ctx, bucket, new URLSearchParams({ 'list-type': '2', 'max-keys': '0' }), {})).xml, false);
    assert.equal(zero.entries.length, 0);
    assert.equal(zero.top('IsTruncated'), 'false');
    assert.equal(zero.top('KeyCount'), '0');
    const big = parsePage((await handleListing(ctx, bucket, new URLSearchParams({ 'max-keys': '5000' }), {})).xml, false);
    assert.equal(big.top('MaxKeys'), '1000');
    const limited = parsePage((await handleListing(ctx, bucket, new URLSearchParams({ 'list-type': '2' }), { maxKeysLimit: 3 })).xml, false);
    assert.equal(limited.top('MaxKeys'), '3');
    assert.equal(limited.entries.length, 3);
    assert.equal(limited.top('IsTruncated'), 'true');
  });

  it('bad parameters are S3 InvalidArgument errors', async () => {
    const code = (p: Record<string, string>) => s3Code(handleListing(ctx, bucket, new URLSearchParams(p), {}));
    for (const mk of ['-1', 'abc', '1.5', '', ' 1', '99999999999']) {
      assert.equal(await code({ 'list-type': '2', 'max-keys': mk }), 'InvalidArgument', `max-keys=${mk}`);
      assert.equal(await code({ versions: '', 'max-keys': mk }), 'InvalidArgument', `max-keys=${mk}`);
    }
    assert.equal(await code({ 'encoding-type': 'base64' }), 'InvalidArgument');
    assert.equal(await code({ 'list-type': '2', 'continuation-token': 'garbage!!' }), 'InvalidArgument');
    assert.equal(await code({ 'list-type': '2', 'continuation-token': Buffer.from('not json').toString('base64') }), 'InvalidArgument');
    assert.equal(await code({ 'list-type': '2', 'continuation-token': Buffer.from('{"k":"a\\u0000"}').toString('base64') }), 'InvalidArgument');
    assert.equal(await code({ versions: '', 'version-id-marker': model.get('c')![0]!.versionId }), 'InvalidArgument');
    assert.equal(await code({ versions: '', 'key-marker': 'c', 'version-id-marker': 'not-a-version' }), 'InvalidArgument');
    assert.equal(await code({ 'list-type': '3' }), 'InvalidArgument');
    assert.equal(await code({ prefix: 'a\u0000' }), 'InvalidArgument');
    assert.equal(await code({ delimiter: '\u0000' }), 'InvalidArgument');
    assert.equal(await code({ 'list-type': '2', 'start-after': 'a\u0000' }), 'InvalidArgument');
    // Fine ones.
    assert.equal(await code({ 'list-type': '2', 'max-keys': '0' }), 'no error');
    const emptyToken = parsePage((await handleListing(ctx, bucket, new URLSearchParams({ 'list-type': '2', 'continuation-token': '', 'max-keys': '2' }), {})).xml, false);
    assert.equal(emptyToken.top('ContinuationToken'), '');
    assert.equal(emptyToken.entries.length, 2, 'an empty continuation token lists from the start');
    assert.equal(await code({ versions: '', 'key-marker': 'c', 'version-id-marker': model.get('c')![1]!.versionId }), 'no error');
    // A version id that is not (or no longer) one of the key's is a position, as on S3, not an error.
    assert.equal(await code({ versions: '', 'key-marker': 'c', 'version-id-marker': newId() }), 'no error');
    assert.equal(await code({ versions: '', 'key-marker': 'a', 'version-id-marker': model.get('c')![0]!.versionId }), 'no error');
  });

  it('control characters in a prefix, delimiter or marker: no key holds one, so they match nothing (as S3 answers them)', async () => {
    const b = await createBucket(s.files);
    for (const k of ['bar', 'baz', 'cab', 'foo']) assert.equal((await put(`${s.files}/${b}/${k}`, k)).status, 200);
    const list = async (p: Record<string, string>) => parsePage((await handleListing(ctx, b, new URLSearchParams(p), {})).xml, false);
    const keys = (page: ParsedPage) => page.entries.map((e) => (e.kind === 'key' ? e.key : `prefix:${e.prefix}`));
    const byDelimiter = await list({ 'list-type': '2', delimiter: '\n' });
    assert.deepEqual(keys(byDelimiter), ['bar', 'baz', 'cab', 'foo']);
    assert.equal(byDelimiter.top('Delimiter'), '\n');
    assert.deepEqual(keys(await list({ prefix: '\n' })), []);
    assert.deepEqual(keys(await list({ prefix: 'ba\u0001' })), []);
    assert.deepEqual(keys(await list({ marker: '\n' })), ['bar', 'baz', 'cab', 'foo']);
    assert.deepEqual(keys(await list({ 'list-type': '2', 'start-after': 'c\u001f' })), ['cab', 'foo']);
    assert.deepEqual(keys(await list({ versions: '', 'key-marker': 'bar\u0001' })), ['baz', 'cab', 'foo']);
  });

  it('a version-id-marker deleted since its page: the next page starts at the key\'s versions left, none skipped', async () => {
    const b = await createBucket(s.files);
    const ids: Record<string, string[]> = { k: [], l: [] };
    for (const [key, n] of [['k', 3], ['l', 1]] as const) {
      for (let i = 0; i < n; i++) ids[key]!.push((await put(`${s.files}/${b}/${key}`, `${key}${i}`)).json.version_id);
    }
    const page = async (p: Record<string, string>) => parsePage((await handleListing(ctx, b, new URLSearchParams({ versions: '', 'max-keys': '2', ...p }), {})).xml, false);
    const first = await page({});
    const listed = first.entries.map((e) => e.kind === 'key' && e.versionId);
    assert.deepEqual(listed, [ids.k![2], ids.k![1]]);
    // Delete the page, as a client emptying a bucket does, then ask for the next one.
    for (const v of listed) assert.equal((await req(`${s.files}/${b}/k?versionId=${v}`, { method: 'DELETE' })).status, 204);
    const second = await page({ 'key-marker': first.top('NextKeyMarker')!, 'version-id-marker': first.top('NextVersionIdMarker')! });
    assert.deepEqual(second.entries.map((e) => e.kind === 'key' && e.versionId), [ids.k![0], ids.l![0]]);
  });

  it('a folder of 2,000 keys costs one seek: listing with a delimiter reads a few rows, not the folder', async () => {
    const big = await createBucket(s.files);
    for (const k of ['a', 'big0', 'c/d', 'c/e', 'z']) assert.equal((await put(`${s.files}/${big}/${k}`, k)).status, 200);
    // The 2,000 keys under big/ share one file: only the listing is under test, and this is quick.
    const now = nowMicros();
    const fileId = newId();
    await ctx.db
      .insertInto('files')
      .values({ id: fileId, location_id: null, uri: null, storage_class: 'S', size: 1, checksum: `md5:${md5('x')}`, readable: 1, writable: 0, last_check_at: null, last_check: null, created: now, updated: now })
      .execute();
    for (let i = 0; i < 2000; i += 200) {
      const rows = Array.from({ length: 200 }, (_, j) => ({
        version_id: newId(), bucket_id: big, key: `big/${String(i + j).padStart(5, '0')}`, file_id: fileId, mimetype: 'text/plain', is_head: 1, tags: '{}', created: now, updated: now,
      }));
      await ctx.db.insertInto('object_versions').values(rows).execute();
    }
    const counter = new Counter();
    const counted: DomainContext = { ...ctx, db: ctx.db.withPlugin(counter) };
    for (const kind of ['v1', 'v2', 'versions'] as Kind[]) {
      counter.queries = 0;
      counter.rows = 0;
      const { entries, pages } = await walk(counted, big, kind, { delimiter: '/' }, 2);
      const names = entries.map((e) => (e.kind === 'prefix' ? e.prefix : e.key));
      assert.deepEqual(names, ['a', 'big/', 'big0', 'c/', 'z'], kind);
      assert.equal(pages, 3);
      assert.ok(counter.queries <= 3 * pages, `${kind}: ${counter.queries} queries`);
      assert.ok(counter.rows <= 20, `${kind}: ${counter.rows} rows read`);
    }
    // Without a delimiter the folder's keys are listed, in order.
    const { entries } = await walk(ctx, big, 'v2', { prefix: 'big/' }, 1000);
    assert.equal(entries.length, 2000);
    const bigModel = new Map<string, ModelVersion[]>();
    for (const e of entries) if (e.kind === 'key') bigModel.set(e.key, [{ versionId: '', marker: false }]);
    for (const [prefix, delimiter, maxKeys] of [['big/01', '0', 3], ['big/', '9', 97], ['big/0', '1', 2]] as const) {
      const walked = await walk(ctx, big, 'v1', { prefix, delimiter }, maxKeys);
      assert.deepEqual(walked.entries, expectedListing(bigModel, false, prefix, delimiter), `${prefix} ${delimiter}`);
    }
  });

  describe('through the AWS SDK', () => {
    let sdkServer: http.Server;
    let client: S3Client;

    before(async () => {
      // A stand-in for the S3 door: GET /bkt?… answers with handleListing, or S3's error document.
      sdkServer = http.createServer((rq, rs) => {
        const u = new URL(rq.url ?? '/', 'http://localhost');
        handleListing(ctx, bucket, u.searchParams, { bucketName: 'bkt' }).then(
          ({ xml }) => rs.writeHead(200, { 'content-type': 'application/xml' }).end(xml),
          (e: unknown) => {
            const err = e instanceof S3Error ? e : new S3Error('InternalError');
            rs.writeHead(err.status, { 'content-type': 'application/xml' }).end(renderS3ErrorXml(err, { resource: u.pathname, requestId: 'test' }));
          },
        );
      });
      await new Promise<void>((r) => sdkServer.listen(0, '127.0.0.1', r));
      const { port } = sdkServer.address() as AddressInfo;
      client = new S3Client({ endpoint: `http://127.0.0.1:${port}`, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'a', secretAccessKey: 'b' }, maxAttempts: 1 });
    });
    after(async () => {
      client?.destroy();
      await new Promise((r) => sdkServer?.close(r));
    });

    const decode = (s: string | undefined, url: boolean) => (s === undefined ? s : url ? decodeURIComponent(s.replace(/\+/g, ' ')) : s);

    it('ListObjectsV2 pages read back as the full listing, with and without encoding-type=url', async () => {
      for (const url of [false, true]) {
        const keys: string[] = [];
        const prefixes: string[] = [];
        let token: string | undefined;
        do {
          const r = await client.send(new ListObjectsV2Command({ Bucket: 'bkt', Delimiter: '/', MaxKeys: 3, ContinuationToken: token, ...(url ? { EncodingType: 'url' } : {}) }));
          assert.equal(r.Name, 'bkt');
          assert.equal(r.KeyCount, (r.Contents?.length ?? 0) + (r.CommonPrefixes?.length ?? 0));
          for (const c of r.Contents ?? []) {
            keys.push(decode(c.Key, url)!);
            assert.equal(c.StorageClass, 'STANDARD');
            assert.ok(c.LastModified instanceof Date && !isNaN(c.LastModified.getTime()));
            assert.match(c.ETag!, /^"[0-9a-f]{32}"$/);
          }
          for (const p of r.CommonPrefixes ?? []) prefixes.push(decode(p.Prefix, url)!);
          token = r.IsTruncated ? r.NextContinuationToken : undefined;
        } while (token);
        const expected = expectedListing(model, false, '', '/');
        assert.deepEqual(keys, expected.filter((e) => e.kind === 'key').map((e) => (e as { key: string }).key));
        assert.deepEqual(prefixes, expected.filter((e) => e.kind === 'prefix').map((e) => (e as { prefix: string }).prefix));
      }
    });

    it('ListObjects and ListObjectVersions read back; a bad parameter is an InvalidArgument error', async () => {
      const v1 = await client.send(new ListObjectsCommand({ Bucket: 'bkt', Prefix: 'a/', Delimiter: '/', MaxKeys: 1 }));
      assert.equal(v1.IsTruncated, true);
      assert.equal(v1.Contents?.[0]?.Key, 'a/');
      assert.equal(v1.NextMarker, 'a/');
      assert.equal(v1.Contents?.[0]?.Owner?.DisplayName, 'files-rest');
      const vs = await client.send(new ListObjectVersionsCommand({ Bucket: 'bkt', Prefix: 'dm', EncodingType: 'url' }));
      const dm = model.get('dm')!;
      assert.deepEqual(vs.Versions?.map((v) => [v.VersionId, v.IsLatest, v.Size]), [[dm[2]!.versionId, true, 4], [dm[0]!.versionId, false, 4]]);
      assert.deepEqual(vs.DeleteMarkers?.map((v) => [v.Key, v.VersionId, v.IsLatest]), [['dm', dm[1]!.versionId, false]]);
      assert.equal(vs.Versions?.[0]?.ETag, `"${dm[2]!.md5}"`);
      await assert.rejects(client.send(new ListObjectsV2Command({ Bucket: 'bkt', MaxKeys: -1 })), (e: Error) => e.name === 'InvalidArgument');
    });
  });
});
