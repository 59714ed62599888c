// The S3 door as a research user's object store for geospatial data: Debian's GDAL command-line tools
// (gdal-bin: gdal_translate, gdalinfo, gdallocationinfo, gdalbuildvrt, gdalmanage, ogr2ogr, ogrinfo;
// unmodified, path-style, SigV4) read and write the bucket through GDAL's /vsis3/ virtual file
// system, while the AWS SDK v3 checks through the door what the bucket holds. GDAL is a demanding S3
// client: it lists the "directory" of every file it opens (ListObjects v1, delimiter, marker pages)
// and trusts that listing to decide that a file is absent, reads files with ranged GETs (16 KiB
// probes, then the byte ranges of the tiles it needs, several at once), writes with one PUT or, past
// VSIS3_CHUNK_SIZE, a multipart upload (from a temporary file, or streamed), renames by CopyObject
// and DELETE, and maps the door's S3 error codes to its own error numbers (NoSuchKey, NoSuchBucket,
// AccessDenied, SignatureDoesNotMatch). Covered: a GeoTIFF written with one PUT and with a multipart
// upload of 5 MiB parts, byte for byte what GDAL writes to a local file, and gdalinfo (with checksums)
// the same through /vsis3/ as locally; a Cloud-Optimized GeoTIFF whose overview and pixel reads fetch
// only small ranges (206); /vsis3_streaming/; vectors (GeoJSON by PUT and as a streamed multipart
// upload, GeoPackage, FlatGeobuf with a spatial filter, a zipped shapefile read in place); a
// "directory" of shapefiles found by paging through a listing; odd key names, gdalmanage rename and
// delete; a .aux.xml sidecar and a VRT mosaic written next to their rasters; a presigned URL read with
// /vsicurl/; a wrong secret, an unknown key, an unsigned request, a skewed clock, a missing key and a
// missing bucket failing with the S3 error GDAL understands.
//
// What the door received and answered is read from GDAL's own trace (CPL_CURL_VERBOSE=YES: libcurl's
// "> METHOD path" request lines and "< HTTP/1.1 status" answers on stderr), so nothing stands between
// GDAL and the door. GDAL runs in child processes (execFile, with timeouts): the server runs in this
// process. GDAL is installed with apt-get when it can be (root on Debian), else the tests are skipped
// with the reason. Local-disk storage only, as in s3-tools.test.ts: these tests are about the S3 door.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { startTestServer, testStorage, type TestServer } from './support/server.js';
import { assertAbsent, assertNoOpenUploads, doorClient, getBytes, listKeys, multipartEtag, newDoorKey } from './support/s3-door.js';
import { findOrInstall } from './support/system.js';

const SERVER_KEY = randomBytes(32).toString('base64');
const PATH = '/usr/bin:/bin:/usr/sbin:/sbin';
const MiB = 1024 * 1024;
/** The test raster: 4000 x 1500 Int16 (12 000 000 bytes), over 5°E–9°E, 46.5°N–48°N. */
const W = 4000;
const H = 1500;
const GEOREF = ['-a_srs', 'EPSG:4326', '-a_ullr', '5', '48', '9', '46.5'];
/** GDAL writes a GeoTIFF (random access) through /vsis3/ by way of a local temporary file. */
const TEMP_WRITE = ['--config', 'CPL_VSIL_USE_TEMP_FILE_FOR_RANDOM_WRITE', 'YES'];
/** Not the access key's secret (the door's secrets are random). */
const WRONG_SECRET = 'wrongWRONGwrongWRONGwrongWRONGwrongWRONG';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** One HTTP exchange in GDAL's trace (CPL_CURL_VERBOSE=YES). */
interface Exchange {
  method: string;
  /** The request target as sent (percent-encoded). */
  target: string;
  /** The decoded path: /bucket/key. */
  path: string;
  query: URLSearchParams;
  headers: Record<string, string>;
  /** The final status (not 100 Continue); paired in order, so exact for one connection at a time. */
  status?: number;
  /** The answer's Content-Length. */
  length?: number;
}

/**
 * The exchanges in libcurl's verbose output: a request is a "> METHOD target HTTP/1.1" line and its
 * header lines, an answer a "< HTTP/1.1 NNN" line and "< name: value" lines. Answers are paired with
 * requests in order, which is exact while GDAL uses one connection at a time.
 */
function exchanges(stderr: string): Exchange[] {
  const out: Exchange[] = [];
  const waiting: Exchange[] = [];
  let req: Exchange | undefined;
  let answer: Exchange | undefined;
  for (const line of stderr.split(/\r?\n/)) {
    const r = /^> ([A-Z]+) (\S+) HTTP\/1\.1$/.exec(line);
    if (r) {
      const u = new URL(r[2]!, 'http://door');
      req = { method: r[1]!, target: r[2]!, path: decodeURIComponent(u.pathname), query: u.searchParams, headers: {} };
      out.push(req);
      waiting.push(req);
      continue;
    }
    if (req) {
      const h = /^([A-Za-z0-9-]+): (.*)$/.exec(line);
      if (h) {
        req.headers[h[1]!.toLowerCase()] = h[2]!;
        continue;
      }
      req = undefined;
    }
    const s = /^< HTTP\/1\.1 (\d{3})/.exec(line);
    if (s) {
      if (s[1] === '100') continue;
      answer = waiting.shift();
      if (answer) answer.status = Number(s[1]);
      continue;
    }
    const cl = /^< content-length: (\d+)/i.exec(line);
    if (cl && answer && answer.length === undefined) answer.length = Number(cl[1]);
  }
  return out;
}

/** "METHOD /path?query -> status" lines, for assertion messages. */
function show(xs: Exchange[]): string {
  return xs.map((x) => `${x.method} ${x.target}${x.headers.range ? ` [${x.headers.range}]` : ''} -> ${x.status ?? '?'}`).join('\n');
}

function md5(b: Buffer): string {
  return createHash('md5').update(b).digest('hex');
}

/** ogrinfo's report without the lines that name the data source (its path differs by design). */
function report(out: string, ...paths: string[]): string {
  return out
    .split('\n')
    .filter((l) => !paths.some((p) => l.includes(p)) && !/^\s*using driver /.test(l))
    .join('\n');
}

/** gdalinfo -json without the dataset's name and file list. */
function info(json: string): Record<string, unknown> {
  const j = JSON.parse(json) as Record<string, unknown>;
  delete j.description;
  delete j.files;
  return j;
}

/** The test raster's values: smooth relief plus a little deterministic texture, little-endian Int16. */
function gridBytes(): Buffer {
  const b = Buffer.alloc(W * H * 2);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const v = Math.round(1500 * Math.sin(x / 97) * Math.cos(y / 61)) + ((x * 31 + y * 17) % 23);
      b.writeInt16LE(v, (y * W + x) * 2);
    }
  }
  return b;
}

const ENVI_HEADER = `ENVI\nsamples = ${W}\nlines = ${H}\nbands = 1\nheader offset = 0\nfile type = ENVI Standard\ndata type = 2\ninterleave = bsq\nbyte order = 0\n`;

/** Points and a polygon with non-ASCII attributes. */
const PLACES = {
  type: 'FeatureCollection',
  features: [
    { type: 'Feature', properties: { name: 'Zürich', pop: 421878 }, geometry: { type: 'Point', coordinates: [8.5417, 47.3769] } },
    { type: 'Feature', properties: { name: 'Bern', pop: 134794 }, geometry: { type: 'Point', coordinates: [7.4474, 46.948] } },
    { type: 'Feature', properties: { name: 'Genève', pop: 203856 }, geometry: { type: 'Point', coordinates: [6.1432, 46.2044] } },
    { type: 'Feature', properties: { name: 'Zürichsee', pop: 0 }, geometry: { type: 'Polygon', coordinates: [[[8.55, 47.35], [8.75, 47.22], [8.82, 47.24], [8.6, 47.36], [8.55, 47.35]]] } },
  ],
};

/** 40 000 points (about 6.5 MB of GeoJSON once GDAL writes it): more than one 5 MiB part. */
function manyPoints(): string {
  const features = [];
  for (let i = 0; i < 40_000; i++) {
    features.push({ type: 'Feature', properties: { id: i, name: `p${i}`, v: Math.round(Math.sin(i) * 1e6) / 1e6 }, geometry: { type: 'Point', coordinates: [(i % 360) - 179.5, ((i * 7) % 170) - 84.75] } });
  }
  return JSON.stringify({ type: 'FeatureCollection', features });
}

const skipOnS3 = testStorage() === 's3' ? 'local-disk storage only (the S3-storage pass keeps objects in memory)' : false;

describe('GDAL reads and writes geospatial data through the S3 door (/vsis3/)', { skip: skipOnS3 }, () => {
  let t: TestServer | undefined;
  let s3: S3Client | undefined;
  let skip: string | false = false;
  let work = '';
  let bucket = '';
  let endpoint = '';
  let accessKeyId = '';
  let secret = '';
  /** Local files made once in before(): the raster (ENVI), its GeoTIFF and COG, and vector sources. */
  let grid = '';
  let gridTif = '';
  let cogTif = '';
  let places = '';
  let many = '';

  /**
   * Runs a GDAL tool with the door's credentials (or `env` overriding them; undefined removes one).
   * HOME is the work directory, so no ~/.aws file is read; temporary files go there too.
   */
  function gdal(cmd: string, args: string[], env: Record<string, string | undefined> = {}, timeout = 30_000): Promise<Run> {
    const full: Record<string, string | undefined> = {
      PATH,
      HOME: work,
      LC_ALL: 'C.UTF-8',
      CPL_TMPDIR: work,
      AWS_ACCESS_KEY_ID: accessKeyId,
      AWS_SECRET_ACCESS_KEY: secret,
      AWS_S3_ENDPOINT: endpoint,
      AWS_HTTPS: 'NO',
      AWS_VIRTUAL_HOSTING: 'FALSE',
      AWS_REGION: 'us-east-1',
      GDAL_HTTP_TIMEOUT: '20',
      ...env,
    };
    const clean = Object.fromEntries(Object.entries(full).filter((e): e is [string, string] => e[1] !== undefined));
    return new Promise((resolve) => {
      execFile(cmd, args, { env: clean, cwd: work, timeout, maxBuffer: 256 * MiB, encoding: 'utf8' }, (err, stdout, stderr) => {
        const status = (err as { code?: unknown } | null)?.code;
        const code = !err ? 0 : typeof status === 'number' ? status : 1;
        // Killed (the timeout) or not started: say so after whatever the tool printed.
        const note = err && typeof status !== 'number' ? `\n[${cmd}: ${err.killed ? `killed after ${timeout} ms` : String(err)}]` : '';
        resolve({ code, stdout, stderr: stderr + note });
      });
    });
  }

  /** The same, with GDAL's HTTP trace on; returns the run and its exchanges. */
  async function traced(cmd: string, args: string[], env: Record<string, string | undefined> = {}): Promise<Run & { xs: Exchange[] }> {
    const r = await gdal(cmd, args, { CPL_CURL_VERBOSE: 'YES', ...env });
    return { ...r, xs: exchanges(r.stderr) };
  }

  function ok<R extends Run>(r: R, what: string): R {
    assert.equal(r.code, 0, `${what}: exit ${r.code}\n${r.stderr.slice(-6000)}\n${r.stdout.slice(0, 2000)}`);
    return r;
  }

  const vsis3 = (key: string) => `/vsis3/${bucket}/${key}`;

  const get = (key: string) => getBytes(s3!, bucket, key);

  const keys = (prefix: string) => listKeys(s3!, bucket, prefix);

  const absent = (key: string) => assertAbsent(s3!, bucket, key);

  const noPendingUploads = () => assertNoOpenUploads(s3!, bucket);

  /** The exchanges whose path is this key of the bucket. */
  const onKey = (xs: Exchange[], key: string) => xs.filter((x) => x.path === `/${bucket}/${key}`);

  before(async () => {
    const found = await findOrInstall('gdal-bin', ['/usr/bin/gdalinfo']);
    if (found.skip) {
      skip = found.skip;
      console.log(`# GDAL tests skipped: ${skip}`);
      return;
    }
    t = await startTestServer({ FILES_REST_S3_PORT: 'auto', FILES_REST_PERMISSION_FACTORY: 'token', FILES_REST_SERVER_KEY: SERVER_KEY });
    const k = await newDoorKey(t);
    accessKeyId = k.accessKeyId;
    secret = k.secret;
    endpoint = new URL(t.s3Url).host;
    s3 = doorClient(t, k);
    bucket = `gdal-${randomBytes(4).toString('hex')}`;
    await s3.send(new CreateBucketCommand({ Bucket: bucket }));
    work = await mkdtemp(join(tmpdir(), 'files-rest-gdal-'));
    grid = join(work, 'grid.bin');
    await writeFile(grid, gridBytes());
    await writeFile(join(work, 'grid.hdr'), ENVI_HEADER);
    gridTif = join(work, 'grid.tif');
    ok(await gdal('gdal_translate', ['-q', ...GEOREF, grid, gridTif]), 'local GeoTIFF');
    cogTif = join(work, 'cog.tif');
    ok(await gdal('gdal_translate', ['-q', '-of', 'COG', '-co', 'BLOCKSIZE=256', '-co', 'COMPRESS=DEFLATE', '-co', 'OVERVIEWS=AUTO', ...GEOREF, grid, cogTif]), 'local COG');
    places = join(work, 'places.geojson');
    await writeFile(places, JSON.stringify(PLACES));
    many = join(work, 'many.geojson');
    await writeFile(many, manyPoints());
  });

  after(async () => {
    s3?.destroy();
    await t?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('gdal_translate writes a GeoTIFF with one PUT: the object is byte for byte the local file; gdalinfo -json -checksum is the same through /vsis3/', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const args = ['-q', '-srcwin', '0', '0', '600', '400', '-co', 'COMPRESS=DEFLATE', ...GEOREF, grid];
    const local = join(work, 'small.tif');
    ok(await gdal('gdal_translate', [...args, local]), 'local');
    const w = ok(await traced('gdal_translate', [...TEMP_WRITE, ...args, vsis3('rasters/small.tif')]), 'gdal_translate to /vsis3/');
    const writes = w.xs.filter((x) => x.method !== 'GET');
    assert.deepEqual(writes.map((x) => `${x.method} ${x.target} ${x.status}`), [`PUT /${bucket}/rasters/small.tif 200`], show(w.xs));
    const bytes = await readFile(local);
    const stored = await get('rasters/small.tif');
    assert.equal(stored.length, bytes.length);
    assert.ok(stored.equals(bytes), 'the object holds what GDAL wrote locally');
    const head = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'rasters/small.tif' }));
    assert.equal(head.ETag, `"${md5(bytes)}"`);
    const there = ok(await gdal('gdalinfo', ['-json', '-checksum', vsis3('rasters/small.tif')]), 'gdalinfo /vsis3/');
    const here = ok(await gdal('gdalinfo', ['-json', '-checksum', local]), 'gdalinfo local');
    const j = info(there.stdout);
    assert.deepEqual(j, info(here.stdout));
    assert.deepEqual(j.size, [600, 400]);
    assert.equal(typeof (j.bands as { checksum?: unknown }[])[0]!.checksum, 'number');
  });

  it('a GeoTIFF larger than VSIS3_CHUNK_SIZE=5 goes as a multipart upload of 5 MiB parts: S3 multipart ETag, the same bytes, no upload left open', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const w = ok(await traced('gdal_translate', ['-q', ...TEMP_WRITE, '--config', 'VSIS3_CHUNK_SIZE', '5', ...GEOREF, grid, vsis3('rasters/grid.tif')]), 'gdal_translate');
    const writes = w.xs.filter((x) => x.method !== 'GET');
    const upload = writes[0]?.query.has('uploads') ? writes[1]?.query.get('uploadId') : undefined;
    assert.ok(upload, show(w.xs));
    assert.deepEqual(
      writes.map((x) => `${x.method} ${x.path} ${[...x.query.keys()].join('&')} ${x.query.get('partNumber') ?? ''} ${x.status}`),
      [
        `POST /${bucket}/rasters/grid.tif uploads  200`,
        `PUT /${bucket}/rasters/grid.tif partNumber&uploadId 1 200`,
        `PUT /${bucket}/rasters/grid.tif partNumber&uploadId 2 200`,
        `PUT /${bucket}/rasters/grid.tif partNumber&uploadId 3 200`,
        `POST /${bucket}/rasters/grid.tif uploadId  200`,
      ],
      show(w.xs),
    );
    const bytes = await readFile(gridTif);
    assert.ok(bytes.length > 10 * MiB);
    const stored = await get('rasters/grid.tif');
    assert.ok(stored.equals(bytes), 'the object holds what GDAL wrote locally');
    const head = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'rasters/grid.tif' }));
    assert.equal(head.ETag, multipartEtag([bytes.subarray(0, 5 * MiB), bytes.subarray(5 * MiB, 10 * MiB), bytes.subarray(10 * MiB)]));
    await noPendingUploads();
    const there = ok(await gdal('gdalinfo', ['-json', '-checksum', vsis3('rasters/grid.tif')]), 'gdalinfo /vsis3/');
    const here = ok(await gdal('gdalinfo', ['-json', '-checksum', gridTif]), 'gdalinfo local');
    assert.deepEqual(info(there.stdout), info(here.stdout));
  });

  it('a Cloud-Optimized GeoTIFF: same bytes and overviews; an overview and single pixels are read with small ranged GETs (206), the full band too', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const key = 'cog/relief.tif';
    ok(await gdal('gdal_translate', ['-q', ...TEMP_WRITE, '-of', 'COG', '-co', 'BLOCKSIZE=256', '-co', 'COMPRESS=DEFLATE', '-co', 'OVERVIEWS=AUTO', ...GEOREF, grid, vsis3(key)]), 'COG to /vsis3/');
    const bytes = await readFile(cogTif);
    assert.ok((await get(key)).equals(bytes), 'the object holds what GDAL wrote locally');
    // -checksum reads every tile of the full-resolution band and of each overview (parallel ranges).
    const there = info(ok(await gdal('gdalinfo', ['-json', '-checksum', vsis3(key)]), 'gdalinfo /vsis3/').stdout);
    assert.deepEqual(there, info(ok(await gdal('gdalinfo', ['-json', '-checksum', cogTif]), 'gdalinfo local').stdout));
    const overviews = (there.bands as { overviews?: { size: number[] }[] }[])[0]!.overviews ?? [];
    assert.deepEqual(overviews.map((o) => o.size), [[2000, 750], [1000, 375], [500, 187], [250, 93]]);

    // Overview 2 (1000 x 375) alone: GDAL probes the header, then fetches only that level's tiles.
    const ovr = join(work, 'ovr2.tif');
    const r = ok(await traced('gdal_translate', ['-q', '-ovr', '2', vsis3(key), ovr], { GDAL_DISABLE_READDIR_ON_OPEN: 'EMPTY_DIR' }), 'gdal_translate -ovr 2');
    const reads = onKey(r.xs, key);
    assert.ok(reads.length >= 2, show(r.xs));
    assert.deepEqual(reads.map((x) => [x.method, /^bytes=\d+-\d+$/.test(x.headers.range ?? ''), x.status]), reads.map(() => ['GET', true, 206]), show(r.xs));
    const fetched = reads.reduce((n, x) => n + (x.length ?? Infinity), 0);
    assert.ok(fetched < bytes.length / 10, `fetched ${fetched} of ${bytes.length} bytes:\n${show(r.xs)}`);
    const localOvr = join(work, 'ovr2-local.tif');
    ok(await gdal('gdal_translate', ['-q', '-ovr', '2', cogTif, localOvr]), 'local -ovr 2');
    const sum = (j: string) => (JSON.parse(j) as { bands: { checksum: number }[] }).bands[0]!.checksum;
    assert.equal(sum(ok(await gdal('gdalinfo', ['-json', '-checksum', ovr]), 'ovr').stdout), sum(ok(await gdal('gdalinfo', ['-json', '-checksum', localOvr]), 'local ovr').stdout));

    // Pixel values, as a point query reads them.
    for (const [x, y] of [[0, 0], [1234, 567], [3999, 1499]]) {
      const p = ok(await traced('gdallocationinfo', ['-valonly', vsis3(key), String(x), String(y)], { GDAL_DISABLE_READDIR_ON_OPEN: 'EMPTY_DIR' }), 'gdallocationinfo');
      const v = ok(await gdal('gdallocationinfo', ['-valonly', cogTif, String(x), String(y)]), 'local gdallocationinfo');
      assert.equal(p.stdout.trim(), v.stdout.trim());
      assert.match(p.stdout.trim(), /^-?\d+$/);
      assert.ok(onKey(p.xs, key).every((e) => e.status === 206 && (e.length ?? Infinity) < 256 * 1024), show(p.xs));
    }
  });

  it('/vsis3_streaming/ reads the object with whole-object GETs, no Range; the copy has the checksum of the original', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const key = 'stream/grid.tif';
    await s3!.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: await readFile(gridTif) }));
    const copy = join(work, 'streamed.tif');
    const r = ok(await traced('gdal_translate', ['-q', `/vsis3_streaming/${bucket}/${key}`, copy]), 'gdal_translate /vsis3_streaming/');
    // Each open of the dataset streams the object again from its start (gdal_translate opens it more
    // than once): every request for it is a whole-object GET, never a Range.
    const reads = onKey(r.xs, key);
    assert.ok(reads.length >= 1, show(r.xs));
    assert.deepEqual(reads.map((x) => [x.method, x.headers.range, x.status]), reads.map(() => ['GET', undefined, 200]), show(r.xs));
    const sum = async (f: string) => (JSON.parse(ok(await gdal('gdalinfo', ['-json', '-checksum', f]), f).stdout) as { bands: { checksum: number }[] }).bands[0]!.checksum;
    assert.equal(await sum(copy), await sum(gridTif));
  });

  it('vectors: GeoJSON (one PUT) and GeoPackage written by ogr2ogr read back with ogrinfo -al as locally; a streamed GeoJSON past the chunk size is a multipart upload', async (ctx) => {
    if (skip) return ctx.skip(skip);
    // GeoJSON: written sequentially, no temporary file.
    const localJson = join(work, 'places-out.geojson');
    ok(await gdal('ogr2ogr', ['-f', 'GeoJSON', localJson, places]), 'local GeoJSON');
    const wj = ok(await traced('ogr2ogr', ['-f', 'GeoJSON', vsis3('vector/places.geojson'), places]), 'ogr2ogr GeoJSON');
    assert.deepEqual(wj.xs.filter((x) => x.method !== 'GET').map((x) => `${x.method} ${x.path} ${x.status}`), [`PUT /${bucket}/vector/places.geojson 200`], show(wj.xs));
    assert.ok((await get('vector/places.geojson')).equals(await readFile(localJson)));
    const jThere = ok(await gdal('ogrinfo', ['-al', vsis3('vector/places.geojson')]), 'ogrinfo /vsis3/ GeoJSON');
    const jHere = ok(await gdal('ogrinfo', ['-al', localJson]), 'ogrinfo local GeoJSON');
    assert.equal(report(jThere.stdout, vsis3('vector/places.geojson')), report(jHere.stdout, localJson));
    assert.match(jThere.stdout, /name \(String\) = Zürich/);
    assert.match(jThere.stdout, /^Feature Count: 4$/m);

    // GeoPackage (SQLite: random access, so through a temporary file); read back page by page.
    const localGpkg = join(work, 'places.gpkg');
    ok(await gdal('ogr2ogr', ['-f', 'GPKG', localGpkg, places]), 'local GPKG');
    ok(await gdal('ogr2ogr', [...TEMP_WRITE, '-f', 'GPKG', vsis3('vector/places.gpkg'), places]), 'ogr2ogr GPKG');
    const gThere = ok(await gdal('ogrinfo', ['-al', vsis3('vector/places.gpkg')]), 'ogrinfo /vsis3/ GPKG');
    const gHere = ok(await gdal('ogrinfo', ['-al', localGpkg]), 'ogrinfo local GPKG');
    assert.equal(report(gThere.stdout, vsis3('vector/places.gpkg')), report(gHere.stdout, localGpkg));
    assert.match(gThere.stdout, /name \(String\) = Genève/);
    const sql = ok(await gdal('ogrinfo', ['-ro', '-q', '-sql', 'SELECT name FROM places WHERE pop > 200000 ORDER BY name', vsis3('vector/places.gpkg')]), 'ogrinfo -sql');
    assert.deepEqual([...sql.stdout.matchAll(/name \(String\) = (.*)/g)].map((m) => m[1]), ['Genève', 'Zürich']);

    // 40 000 points: GDAL streams the GeoJSON as parts of VSIS3_CHUNK_SIZE (5 MiB).
    const localMany = join(work, 'many-out.geojson');
    ok(await gdal('ogr2ogr', ['-f', 'GeoJSON', localMany, many]), 'local many');
    const wm = ok(await traced('ogr2ogr', ['--config', 'VSIS3_CHUNK_SIZE', '5', '-f', 'GeoJSON', vsis3('vector/many.geojson'), many]), 'ogr2ogr many');
    assert.deepEqual(
      wm.xs.filter((x) => x.method !== 'GET').map((x) => `${x.method} ${[...x.query.keys()].join('&')} ${x.query.get('partNumber') ?? ''} ${x.status}`),
      ['POST uploads  200', 'PUT partNumber&uploadId 1 200', 'PUT partNumber&uploadId 2 200', 'POST uploadId  200'],
      show(wm.xs),
    );
    const manyBytes = await readFile(localMany);
    assert.ok((await get('vector/many.geojson')).equals(manyBytes), 'the object holds what GDAL wrote locally');
    const head = await s3!.send(new HeadObjectCommand({ Bucket: bucket, Key: 'vector/many.geojson' }));
    assert.equal(head.ETag, multipartEtag([manyBytes.subarray(0, 5 * MiB), manyBytes.subarray(5 * MiB)]));
    await noPendingUploads();
    const so = ok(await gdal('ogrinfo', ['-so', '-al', vsis3('vector/many.geojson')]), 'ogrinfo -so');
    assert.match(so.stdout, /Feature Count: 40000\n/);
  });

  it('FlatGeobuf: a spatial filter reads the index and the matching features with ranged GETs, and finds what it finds locally', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const localFgb = join(work, 'many.fgb');
    ok(await gdal('ogr2ogr', ['-f', 'FlatGeobuf', localFgb, many]), 'local FlatGeobuf');
    ok(await gdal('ogr2ogr', ['-f', 'FlatGeobuf', vsis3('vector/many.fgb'), many]), 'ogr2ogr FlatGeobuf');
    const bytes = await readFile(localFgb);
    assert.ok((await get('vector/many.fgb')).equals(bytes), 'the object holds what GDAL wrote locally');
    const spat = ['-ro', '-al', '-q', '-spat', '10', '10', '12', '30'];
    const there = ok(await traced('ogrinfo', [...spat, vsis3('vector/many.fgb')], { GDAL_DISABLE_READDIR_ON_OPEN: 'EMPTY_DIR' }), 'ogrinfo -spat /vsis3/');
    const here = ok(await gdal('ogrinfo', [...spat, localFgb]), 'ogrinfo -spat local');
    const features = (s: string) => [...s.matchAll(/^OGRFeature\(many\):(\d+)$/gm)].map((m) => m[1]);
    assert.ok(features(here.stdout).length > 10, here.stdout.slice(0, 2000));
    assert.deepEqual(features(there.stdout), features(here.stdout));
    assert.equal(report(there.stdout), report(here.stdout));
    const reads = onKey(there.xs, 'vector/many.fgb');
    assert.ok(reads.length >= 2 && reads.every((x) => x.status === 206 && x.headers.range), show(there.xs));
    const fetched = reads.reduce((n, x) => n + (x.length ?? Infinity), 0);
    assert.ok(fetched < bytes.length / 2, `fetched ${fetched} of ${bytes.length} bytes:\n${show(there.xs)}`);
  });

  it('a "directory" of shapefiles among 250 other objects: GDAL pages through the listing (AWS_MAX_KEYS=90, marker) and opens both layers; a zipped shapefile is read in place', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const dir = join(work, 'shapes');
    await mkdir(dir);
    ok(await gdal('ogr2ogr', ['-f', 'ESRI Shapefile', join(dir, 'zz_cities.shp'), places, '-where', 'pop > 0', '-nlt', 'POINT']), 'cities');
    ok(await gdal('ogr2ogr', ['-f', 'ESRI Shapefile', join(dir, 'zz_lakes.shp'), places, '-where', 'pop = 0', '-nlt', 'POLYGON']), 'lakes');
    const files = await readdir(dir);
    assert.equal(files.length, 8, files.join(' ')); // .shp .shx .dbf .prj of each
    const names = [...files.map((f) => `shapes/${f}`), ...Array.from({ length: 250 }, (_, i) => `shapes/f${String(i).padStart(4, '0')}.txt`)];
    let next = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < names.length) {
          const k = names[next++]!;
          const f = k.slice('shapes/'.length);
          const body = files.includes(f) ? await readFile(join(dir, f)) : Buffer.from(`filler ${f}\n`);
          await s3!.send(new PutObjectCommand({ Bucket: bucket, Key: k, Body: body }));
        }
      }),
    );
    assert.equal((await keys('shapes/')).length, 258);
    const r = ok(await traced('ogrinfo', ['-ro', '-al', `${vsis3('shapes')}/`], { AWS_MAX_KEYS: '90' }), 'ogrinfo on the prefix');
    const pages = r.xs.filter((x) => x.method === 'GET' && x.path === `/${bucket}/` && x.query.get('prefix') === 'shapes/' && x.query.get('max-keys') === '90' && x.query.get('delimiter') === '/');
    // GDAL may list the prefix more than once (opening, then reading the directory); every pass
    // follows the door's NextMarker: the pages start after f0089.txt and f0179.txt.
    assert.deepEqual([...new Set(pages.map((x) => x.query.get('marker')))], [null, 'shapes/f0089.txt', 'shapes/f0179.txt'], show(r.xs));
    assert.ok(pages.every((x) => x.status === 200), show(r.xs));
    const here = ok(await gdal('ogrinfo', ['-ro', '-al', dir]), 'ogrinfo local directory');
    assert.match(r.stdout, /^Layer name: zz_cities$/m);
    assert.match(r.stdout, /^Layer name: zz_lakes$/m);
    assert.equal(report(r.stdout, `${vsis3('shapes')}/`), report(here.stdout, dir));

    // The same two layers' cities as a .shp.zip put with the SDK, read through the zip's ranges.
    const zip = join(work, 'cities.shp.zip');
    ok(await gdal('ogr2ogr', ['-f', 'ESRI Shapefile', zip, places, '-where', 'pop > 0', '-nlt', 'POINT', '-nln', 'cities']), 'local .shp.zip');
    await s3!.send(new PutObjectCommand({ Bucket: bucket, Key: 'zipped/cities.shp.zip', Body: await readFile(zip) }));
    const z = ok(await gdal('ogrinfo', ['-ro', '-al', `/vsizip/${vsis3('zipped/cities.shp.zip')}`]), 'ogrinfo /vsizip//vsis3/');
    const zHere = ok(await gdal('ogrinfo', ['-ro', '-al', `/vsizip/${zip}`]), 'ogrinfo local zip');
    assert.equal(report(z.stdout, vsis3('zipped/cities.shp.zip')), report(zHere.stdout, zip));
    assert.deepEqual([...z.stdout.matchAll(/name \(String\) = (.*)/g)].map((m) => m[1]), ['Zürich', 'Bern', 'Genève']);
  });

  it("names with spaces, non-ASCII and reserved characters; gdalmanage rename (CopyObject, then DELETE) and delete", async (ctx) => {
    if (skip) return ctx.skip(skip);
    const src = join(work, 'odd-src.tif');
    ok(await gdal('gdal_translate', ['-q', '-srcwin', '100', '100', '200', '100', ...GEOREF, grid, src]), 'local');
    const sum = async (f: string) => (JSON.parse(ok(await gdal('gdalinfo', ['-json', '-checksum', f]), f).stdout) as { bands: { checksum: number }[] }).bands[0]!.checksum;
    const expected = await sum(src);
    const names = ["données été (1)+a=b,c;d@e!f'g*h&$~.tif", '日本語 ☃ a%20b.tif', 'q?x=1#frag[br]{c}.tif'];
    for (const n of names) {
      ok(await gdal('gdal_translate', ['-q', ...TEMP_WRITE, src, vsis3(`odd/${n}`)]), `write ${n}`);
      assert.equal(await sum(vsis3(`odd/${n}`)), expected, n);
    }
    assert.deepEqual((await keys('odd/')).sort(), names.map((n) => `odd/${n}`).sort());
    const from = vsis3(`odd/${names[0]}`);
    const to = 'odd/renamed ü.tif';
    const mv = ok(await traced('gdalmanage', ['rename', from, vsis3(to)]), 'gdalmanage rename');
    const changes = mv.xs.filter((x) => x.method !== 'GET');
    assert.deepEqual(changes.map((x) => [x.method, x.path, x.headers['x-amz-copy-source'] && decodeURIComponent(x.headers['x-amz-copy-source']), x.status]), [
      ['PUT', `/${bucket}/${to}`, `/${bucket}/odd/${names[0]}`, 200],
      ['DELETE', `/${bucket}/odd/${names[0]}`, undefined, 204],
    ], show(mv.xs));
    assert.equal(await sum(vsis3(to)), expected);
    await absent(`odd/${names[0]}`);
    const gone = await gdal('gdalinfo', [from]);
    assert.notEqual(gone.code, 0, 'the old name no longer opens');
    const rmr = ok(await traced('gdalmanage', ['delete', vsis3(to)]), 'gdalmanage delete');
    assert.deepEqual(rmr.xs.filter((x) => x.method === 'DELETE').map((x) => [x.path, x.status]), [[`/${bucket}/${to}`, 204]], show(rmr.xs));
    await absent(to);
    assert.deepEqual((await keys('odd/')).sort(), names.slice(1).map((n) => `odd/${n}`).sort());
  });

  it('files written next to a raster: gdalinfo -stats puts a .aux.xml sidecar that the next open reads; a VRT mosaic refers to its tiles relatively', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const west = vsis3('mosaic/west.tif');
    const east = vsis3('mosaic/east.tif');
    ok(await gdal('gdal_translate', ['-q', ...TEMP_WRITE, '-srcwin', '0', '0', '2000', '1500', gridTif, west]), 'west');
    ok(await gdal('gdal_translate', ['-q', ...TEMP_WRITE, '-srcwin', '2000', '0', '2000', '1500', gridTif, east]), 'east');

    const stats = ok(await traced('gdalinfo', ['-stats', west]), 'gdalinfo -stats');
    assert.deepEqual(stats.xs.filter((x) => x.method === 'PUT').map((x) => [x.path, x.status]), [[`/${bucket}/mosaic/west.tif.aux.xml`, 200]], show(stats.xs));
    const aux = (await get('mosaic/west.tif.aux.xml')).toString();
    const mean = /<MDI key="STATISTICS_MEAN">([^<]+)<\/MDI>/.exec(aux)?.[1];
    assert.ok(mean, aux);
    const localWest = join(work, 'west.tif');
    ok(await gdal('gdal_translate', ['-q', '-srcwin', '0', '0', '2000', '1500', gridTif, localWest]), 'local west');
    const localStats = ok(await gdal('gdalinfo', ['-stats', localWest]), 'local -stats');
    assert.match(localStats.stdout, new RegExp(`STATISTICS_MEAN=${mean.replace(/[.]/g, '\\.')}\\n`));
    const again = ok(await traced('gdalinfo', [west]), 'gdalinfo again');
    assert.match(again.stdout, new RegExp(`STATISTICS_MEAN=${mean.replace(/[.]/g, '\\.')}\\n`), 'the statistics come from the sidecar');
    assert.ok(onKey(again.xs, 'mosaic/west.tif.aux.xml').some((x) => x.method === 'GET' && x.status === 206), show(again.xs));

    const vrt = vsis3('mosaic/all.vrt');
    ok(await gdal('gdalbuildvrt', ['-q', vrt, west, east]), 'gdalbuildvrt');
    const text = (await get('mosaic/all.vrt')).toString();
    assert.deepEqual([...text.matchAll(/<SourceFilename relativeToVRT="1">([^<]+)</g)].map((m) => m[1]), ['west.tif', 'east.tif']);
    const sum = async (f: string) => (JSON.parse(ok(await gdal('gdalinfo', ['-json', '-checksum', f]), f).stdout) as { size: number[]; bands: { checksum: number }[] });
    const whole = await sum(vrt);
    const orig = await sum(gridTif);
    assert.deepEqual(whole.size, [W, H]);
    assert.equal(whole.bands[0]!.checksum, orig.bands[0]!.checksum);
  });

  it('a presigned URL read with /vsicurl/ and no credentials: the same checksum; a tampered signature is refused', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const url = await getSignedUrl(s3!, new GetObjectCommand({ Bucket: bucket, Key: 'rasters/grid.tif' }), { expiresIn: 600 });
    const anon = { AWS_ACCESS_KEY_ID: undefined, AWS_SECRET_ACCESS_KEY: undefined, AWS_S3_ENDPOINT: undefined };
    const r = ok(await gdal('gdalinfo', ['-json', '-checksum', `/vsicurl/${url}`], anon), 'gdalinfo /vsicurl/ presigned');
    const local = JSON.parse(ok(await gdal('gdalinfo', ['-json', '-checksum', gridTif]), 'local').stdout) as { bands: { checksum: number }[] };
    assert.equal((JSON.parse(r.stdout) as { bands: { checksum: number }[] }).bands[0]!.checksum, local.bands[0]!.checksum);
    const bad = url.replace(/X-Amz-Signature=([0-9a-f])/, (_, c: string) => `X-Amz-Signature=${c === '0' ? '1' : '0'}`);
    assert.notEqual(bad, url);
    const refused = await traced('gdalinfo', [`/vsicurl/${bad}`], anon);
    assert.notEqual(refused.code, 0);
    const mine = refused.xs.filter((x) => x.path === `/${bucket}/rasters/grid.tif`);
    assert.ok(mine.length >= 1 && mine.every((x) => x.status === 403), show(refused.xs));
  });

  it('a wrong secret, an unknown access key, an unsigned request and a skewed clock fail with the S3 error GDAL maps; refused writes store nothing', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const key = 'rasters/small.tif';
    /** gdalinfo with CPL_DEBUG: GDAL logs the door's XML error body ("S3: <?xml …"). */
    const fails = async (env: Record<string, string | undefined>, args: string[] = []) => {
      const r = await gdal('gdalinfo', [...args, vsis3(key)], { CPL_DEBUG: 'ON', GDAL_DISABLE_READDIR_ON_OPEN: 'EMPTY_DIR', ...env });
      assert.notEqual(r.code, 0, r.stderr);
      assert.ok(r.stderr.includes(`HTTP response code on http://${endpoint}/${bucket}/${key}: 403`), r.stderr);
      return r.stderr;
    };
    const wrong = await fails({ AWS_SECRET_ACCESS_KEY: WRONG_SECRET });
    assert.match(wrong, /<Code>SignatureDoesNotMatch<\/Code>/);
    assert.match(wrong, /ERROR 16: The request signature we calculated does not match the signature you provided/);
    const unknown = await fails({ AWS_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE' });
    assert.match(unknown, /<Code>InvalidAccessKeyId<\/Code>/);
    assert.match(unknown, /ERROR 17: The AWS Access Key Id you provided does not exist in our records/);
    const unsigned = await fails({ AWS_NO_SIGN_REQUEST: 'YES' });
    assert.match(unsigned, /<Code>AccessDenied<\/Code>/);
    assert.match(unsigned, /ERROR 14: /);
    const skewed = await fails({ AWS_TIMESTAMP: '20200101T000000Z' });
    assert.match(skewed, /<Code>RequestTimeTooSkewed<\/Code>/);
    assert.match(skewed, /ERROR 17: The difference between the request time and the server('|&apos;)s time is too large/);

    // Writes: ogr2ogr's PUT and its multipart upload are refused; nothing is stored, no upload is left.
    const bad = { AWS_SECRET_ACCESS_KEY: WRONG_SECRET };
    const put = await traced('ogr2ogr', ['-f', 'GeoJSON', vsis3('refused/places.geojson'), places], bad);
    assert.notEqual(put.code, 0, put.stderr);
    assert.deepEqual(put.xs.filter((x) => x.method === 'PUT').map((x) => x.status), [403], show(put.xs));
    assert.match(put.stderr, /DoSinglePartPUT of \/vsis3\/.*refused\/places\.geojson failed/);
    // Past the chunk size the refusal comes at InitiateMultipartUpload. ogr2ogr 3.6 still exits with
    // status 0 then (it does not check that the write failed): only its error message tells.
    const mp = await traced('ogr2ogr', ['--config', 'VSIS3_CHUNK_SIZE', '5', '-f', 'GeoJSON', vsis3('refused/many.geojson'), many], bad);
    assert.match(mp.stderr, /InitiateMultipartUpload of \/vsis3\/.*refused\/many\.geojson failed/);
    assert.deepEqual(mp.xs.filter((x) => x.method === 'POST').map((x) => [[...x.query.keys()].join('&'), x.status]), [['uploads', 403]], show(mp.xs));
    await absent('refused/places.geojson');
    await absent('refused/many.geojson');
    await noPendingUploads();
  });

  it('a missing key and a missing bucket fail cleanly: NoSuchKey (GET 404), absence from the listing without a GET, NoSuchBucket', async (ctx) => {
    if (skip) return ctx.skip(skip);
    const direct = await traced('gdalinfo', [vsis3('rasters/missing.tif')], { GDAL_DISABLE_READDIR_ON_OPEN: 'EMPTY_DIR' });
    assert.notEqual(direct.code, 0);
    assert.match(direct.stderr, /ERROR 13: The specified key does not exist\./);
    assert.ok(onKey(direct.xs, 'rasters/missing.tif').some((x) => x.method === 'GET' && x.status === 404), show(direct.xs));

    // The default: GDAL lists rasters/ first and, not finding the name there, does not ask for it.
    const listed = await traced('gdalinfo', [vsis3('rasters/missing.tif')]);
    assert.notEqual(listed.code, 0);
    assert.match(listed.stderr, /does not exist in the file system/);
    assert.deepEqual(onKey(listed.xs, 'rasters/missing.tif'), [], show(listed.xs));
    assert.ok(listed.xs.some((x) => x.path === `/${bucket}/` && x.query.get('prefix') === 'rasters/' && x.status === 200), show(listed.xs));

    const nob = await traced('gdalinfo', [`/vsis3/no-such-bucket-${randomBytes(3).toString('hex')}/x.tif`]);
    assert.notEqual(nob.code, 0);
    assert.match(nob.stderr, /ERROR 12: The specified bucket does not exist\./);
    assert.ok(nob.xs.length > 0 && nob.xs.every((x) => x.status === 404), show(nob.xs));
  });
});
