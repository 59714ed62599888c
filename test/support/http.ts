import { createHash } from 'node:crypto';
import http from 'node:http';

export interface Res {
  status: number;
  headers: Headers;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json: any;
}

/** A fetch that reads the whole body and parses JSON when it is JSON. */
export async function req(url: string, init: RequestInit = {}): Promise<Res> {
  const r = await fetch(url, { ...init, ...(init.body instanceof ReadableStream ? { duplex: 'half' } : {}) } as RequestInit);
  const text = await r.text();
  let json: unknown = undefined;
  if ((r.headers.get('content-type') ?? '').includes('json') && text.trim()) json = JSON.parse(text);
  return { status: r.status, headers: r.headers, text, json };
}

export async function createBucket(files: string, headers: Record<string, string> = {}): Promise<string> {
  const r = await req(files, { method: 'POST', headers });
  if (r.status !== 200) throw new Error(`bucket creation failed: ${r.status} ${r.text}`);
  return r.json.id as string;
}

export function md5(data: Buffer | string): string {
  return createHash('md5').update(data).digest('hex');
}

export async function put(url: string, body: Buffer | string, headers: Record<string, string> = {}): Promise<Res> {
  return req(url, { method: 'PUT', body: typeof body === 'string' ? body : new Uint8Array(body), headers });
}

/**
 * A raw HTTP request where the test controls the socket: sends headers and `send` bytes of the body,
 * then destroys the connection (a client that disconnects mid-upload).
 */
export function putAndDisconnect(url: string, declared: number, send: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const u = new URL(url);
    const r = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: 'PUT', headers: { 'content-length': String(declared) } });
    r.on('error', () => resolve());
    r.write(send, () => {
      setTimeout(() => {
        r.destroy();
        resolve();
      }, 100);
    });
  });
}

export async function waitFor<T>(fn: () => Promise<T | null | undefined | false>, timeoutMs = 10_000, stepMs = 50): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** Streams `body` as a request with an exact Content-Length; resolves with status and parsed JSON. */
export function streamRequest(
  url: string,
  method: string,
  body: NodeJS.ReadableStream,
  length: number,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: any; text: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const r = http.request(
      { host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers: { 'content-length': String(length), ...headers } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let json: unknown;
          try {
            json = text.trim() ? JSON.parse(text) : undefined;
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json, text });
        });
      },
    );
    r.on('error', reject);
    body.pipe(r);
  });
}

/** Downloads a URL, hashing it as it streams; returns status, byte count and MD5 hex. */
export function downloadMd5(url: string, headers: Record<string, string> = {}): Promise<{ status: number; bytes: number; md5: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    http
      .get({ host: u.hostname, port: u.port, path: u.pathname + u.search, headers }, (res) => {
        const h = createHash('md5');
        let bytes = 0;
        res.on('data', (d: Buffer) => {
          bytes += d.length;
          h.update(d);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, md5: h.digest('hex') }));
      })
      .on('error', reject);
  });
}
