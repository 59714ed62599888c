/**
 * The ceilings: what a bare Node HTTP server does on this machine, with no framework, no database and
 * no checks. The benchmark runs it as a child process and measures it with the same client as
 * files-rest, so each files-rest figure can be read as a fraction of what Node itself allows.
 *
 *   PUT /hash-write/NAME  MD5-hash the body while writing it to DIR/NAME.tmp in 1 MiB writes, fsync
 *                         the file, rename it to DIR/NAME, fsync the directory; answer the checksum.
 *                         (W1's ceiling: the same durable work files-rest must do for an upload.)
 *   GET  /stream/NAME     stream DIR/NAME with 1 MiB reads (W2's ceiling).
 *   PUT  /mem/…           read the body, answer a small JSON document (W3's ceiling).
 *   GET  /mem/…           answer a 4 KiB body from memory (W4's ceiling).
 *   GET  /healthz
 *
 * Usage: node dist/bench/ceiling-server.js PORT DIR
 */
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { constants, createReadStream } from 'node:fs';
import { open, rename, stat, type FileHandle } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { pipeline } from 'node:stream/promises';

const port = Number(process.argv[2]);
const dir = process.argv[3];
if (!Number.isInteger(port) || !dir) {
  process.stderr.write('usage: ceiling-server PORT DIR\n');
  process.exit(2);
}

const MEM_BODY = randomBytes(4096);
const CHUNK = 1024 * 1024;

async function writeAll(fh: FileHandle, bufs: Buffer[], position: number): Promise<number> {
  let total = 0;
  for (const b of bufs) total += b.length;
  let { bytesWritten } = await fh.writev(bufs, position);
  if (bytesWritten < total) {
    // Rare short write: finish from a single buffer.
    const rest = Buffer.concat(bufs).subarray(bytesWritten);
    let off = 0;
    while (off < rest.length) {
      const r = await fh.write(rest, off, rest.length - off, position + bytesWritten + off);
      off += r.bytesWritten;
    }
    bytesWritten = total;
  }
  return total;
}

async function hashWrite(req: http.IncomingMessage, res: http.ServerResponse, name: string): Promise<void> {
  const path = join(dir!, basename(name));
  const tmp = `${path}.tmp`;
  const fh = await open(tmp, 'w');
  const hash = createHash('md5');
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let pos = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      hash.update(chunk);
      pending.push(chunk);
      pendingBytes += chunk.length;
      if (pendingBytes >= CHUNK) {
        pos += await writeAll(fh, pending, pos);
        pending = [];
        pendingBytes = 0;
      }
    }
    if (pendingBytes) pos += await writeAll(fh, pending, pos);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, path);
  const d = await open(dir!, constants.O_RDONLY);
  try {
    await d.sync();
  } finally {
    await d.close();
  }
  const body = JSON.stringify({ checksum: `md5:${hash.digest('hex')}`, size: pos });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function streamFile(res: http.ServerResponse, name: string): Promise<void> {
  const path = join(dir!, basename(name));
  const st = await stat(path);
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': st.size });
  await pipeline(createReadStream(path, { highWaterMark: CHUNK }), res);
}

const server = http.createServer((req, res) => {
  const url = req.url ?? '/';
  const name = decodeURIComponent(url.slice(url.indexOf('/', 1) + 1));
  let work: Promise<void>;
  if (req.method === 'PUT' && url.startsWith('/hash-write/')) work = hashWrite(req, res, name);
  else if (req.method === 'GET' && url.startsWith('/stream/')) work = streamFile(res, name);
  else if (url.startsWith('/mem/') && req.method === 'PUT') {
    work = (async () => {
      let n = 0;
      for await (const c of req as AsyncIterable<Buffer>) n += c.length;
      const body = JSON.stringify({ key: url.slice(5), size: n });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    })();
  } else if (url.startsWith('/mem/') && req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': MEM_BODY.length });
    res.end(MEM_BODY);
    return;
  } else if (url === '/healthz') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"status":"ok"}');
    return;
  } else {
    res.writeHead(404);
    res.end();
    return;
  }
  work.catch((e: unknown) => {
    if (!res.headersSent) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(String((e as Error)?.message ?? e));
    } else res.destroy();
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1');

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
