import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { AppError } from '../errors.js';

/**
 * The web console (FILES_REST_CONSOLE, on by default): the static files `scripts/build-console.mjs`
 * bundled into dist/console/, served at `{prefix}/console/`. Read once at start (a few hundred kB),
 * served from memory. The page runs in the browser and talks to the REST API with the token the
 * user types; the server gives it nothing else.
 *
 * Headers: a strict Content-Security-Policy (scripts and styles only from this origin: no inline
 * script, no eval; connections only to this origin, where the API is), no framing, no referrer
 * (a signed link in a page URL never leaks), and `Cache-Control: no-cache` (revalidate by ETag:
 * a new release is seen at once; the files are small).
 */
const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "form-action 'none'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** dist/console/, beside dist/src/ (this module is dist/src/http/console.js once compiled). */
export const CONSOLE_DIR = fileURLToPath(new URL('../../console/', import.meta.url));

function loadAssets(dir: string): Map<string, Asset> {
  const out = new Map<string, Asset>();
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of names) {
    const type = TYPES[extname(name)];
    if (!type) continue;
    const body = readFileSync(join(dir, name));
    out.set(name, { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` });
  }
  return out;
}

function send(reply: FastifyReply, asset: Asset, ifNoneMatch: string | undefined, head: boolean) {
  reply
    .header('content-security-policy', CSP)
    .header('x-frame-options', 'deny')
    .header('referrer-policy', 'no-referrer')
    .header('cross-origin-opener-policy', 'same-origin')
    .header('cache-control', 'no-cache')
    .header('etag', asset.etag)
    .type(asset.type);
  if (ifNoneMatch === asset.etag) return reply.code(304).send();
  reply.header('content-length', asset.body.length);
  return reply.code(200).send(head ? undefined : asset.body);
}

/** Registers `{prefix}/console` (redirect), `{prefix}/console/` (the page) and its assets; nothing when off. */
export function registerConsole(app: FastifyInstance, prefix: string, enabled: boolean, dir = CONSOLE_DIR): void {
  if (!enabled) return;
  const assets = loadAssets(dir);
  const base = `${prefix}/console`;
  app.route({
    method: ['GET', 'HEAD'],
    url: base,
    handler: async (_req, reply) => reply.code(308).header('location', `${base}/`).header('cache-control', 'no-cache').send(),
  });
  app.route<{ Params: { asset?: string } }>({
    method: ['GET', 'HEAD'],
    url: `${base}/:asset`,
    handler: async (req, reply) => {
      const name = req.params.asset || 'index.html';
      const asset = assets.get(name);
      if (!asset) throw new AppError('NOT_FOUND');
      return send(reply, asset, req.headers['if-none-match'], req.method === 'HEAD');
    },
  });
}
