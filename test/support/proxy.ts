import http from 'node:http';
import { Transform, type TransformCallback } from 'node:stream';
import type { AddressInfo } from 'node:net';

/** One request seen by the proxy. */
export interface ProxiedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  range: string | undefined;
  status: number | null;
  /** request body bytes forwarded upstream */
  bytesUp: number;
  /** response body bytes forwarded to the client */
  bytesDown: number;
  /** the exchange finished (response fully sent) */
  done: boolean;
}

export interface CountingProxy {
  url: string;
  files: string;
  requests: ProxiedRequest[];
  /** Completed part uploads (PUT ?uploadId&partNumber answered 200). */
  partPuts(): number;
  /** Part uploads started (whatever became of them). */
  partPutsStarted(): number;
  bytesDown(): number;
  reset(): void;
  setRates(r: { up?: number | null; down?: number | null }): void;
  close(): Promise<void>;
}

/** Bytes per second shared by every connection in one direction; null = unlimited. */
class Throttle {
  private nextFree = 0;
  constructor(public rate: number | null) {}
  /** How long to wait before `n` more bytes may go. */
  reserve(n: number): number {
    if (!this.rate) return 0;
    const now = Date.now();
    const t = Math.max(now, this.nextFree);
    this.nextFree = t + (n / this.rate) * 1000;
    return t - now;
  }
}

function throttled(th: Throttle, count: (n: number) => void): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback) {
      const pieces: Buffer[] = [];
      for (let o = 0; o < chunk.length; o += 16 * 1024) pieces.push(chunk.subarray(o, o + 16 * 1024));
      const step = (i: number) => {
        if (i >= pieces.length) return cb();
        const p = pieces[i]!;
        const wait = th.reserve(p.length);
        const go = () => {
          if (this.destroyed) return;
          count(p.length);
          this.push(p);
          step(i + 1);
        };
        if (wait > 0) setTimeout(go, wait);
        else go();
      };
      step(0);
    },
  });
}

/**
 * A reverse proxy on 127.0.0.1 in front of a files-rest server: counts requests (the test's view
 * of what the server received), can throttle bodies in either direction, and passes a client's
 * disconnect on to the server. The Host header is kept, so the server's links point at the proxy.
 */
export async function startProxy(target: string, rates: { up?: number | null; down?: number | null } = {}): Promise<CountingProxy> {
  const t = new URL(target);
  const up = new Throttle(rates.up ?? null);
  const down = new Throttle(rates.down ?? null);
  const requests: ProxiedRequest[] = [];
  const sockets = new Set<import('node:net').Socket>();
  const server = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://proxy');
    const rec: ProxiedRequest = {
      method: req.method ?? 'GET',
      path: u.pathname,
      query: u.searchParams,
      range: req.headers.range,
      status: null,
      bytesUp: 0,
      bytesDown: 0,
      done: false,
    };
    requests.push(rec);
    const upstream = http.request(
      { host: t.hostname, port: t.port, method: req.method, path: req.url, headers: req.headers },
      (ures) => {
        rec.status = ures.statusCode ?? 0;
        res.writeHead(ures.statusCode ?? 502, ures.headers);
        const tx = throttled(down, (n) => (rec.bytesDown += n));
        ures.pipe(tx).pipe(res);
        res.on('finish', () => (rec.done = true));
        res.on('close', () => {
          if (!res.writableFinished) {
            tx.destroy();
            ures.destroy();
          }
        });
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    const tx = throttled(up, (n) => (rec.bytesUp += n));
    req.pipe(tx).pipe(upstream);
    req.on('close', () => {
      // The client went away before its body was complete: the server must see a disconnect.
      if (!req.complete) {
        tx.destroy();
        upstream.destroy();
      }
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  const isPart = (r: ProxiedRequest) => r.method === 'PUT' && r.query.has('uploadId');
  return {
    url,
    files: `${url}/files`,
    requests,
    partPuts: () => requests.filter((r) => isPart(r) && r.status === 200 && r.done).length,
    partPutsStarted: () => requests.filter(isPart).length,
    bytesDown: () => requests.reduce((a, r) => a + r.bytesDown, 0),
    reset: () => void requests.splice(0),
    setRates: (r) => {
      if (r.up !== undefined) up.rate = r.up;
      if (r.down !== undefined) down.rate = r.down;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
