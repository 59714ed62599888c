// A real nginx in front of files-rest, as docs/security.md describes it: the API proxied, and one
// internal location per files-rest location for X-Accel-Redirect.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort, waitForPort } from './system.js';

/**
 * Headers files-rest puts on a download that nginx does not carry over an X-Accel-Redirect by
 * itself: they are copied from the upstream's answer in each internal location.
 */
export const ACCEL_COPIED_HEADERS = [
  'ETag', 'Last-Modified', 'Content-MD5', 'Repr-Digest', 'Content-Security-Policy', 'X-Content-Type-Options',
  'X-Download-Options', 'X-Permitted-Cross-Domain-Policies', 'X-Frame-Options', 'X-XSS-Protection', 'X-Request-Id',
];

export interface NginxSite {
  /** `http://127.0.0.1:<port>` of files-rest. */
  upstream: string;
  /** The API path nginx proxies (FILES_REST_URL_PREFIX + '/files'). */
  apiPath: string;
  /** FILES_REST_XSENDFILE_PREFIX. */
  accelPrefix: string;
  /** files-rest locations served from disk: name and base directory. */
  locations: { name: string; dir: string }[];
  /** Also proxy `<prefix>_remote/<scheme>/<host>/<path>` (presigned S3 URLs). */
  remote?: boolean;
}

const varName = (h: string) => h.toLowerCase().replaceAll('-', '_');

/** add_header lines copying files-rest's headers; `captured` uses the variables `set` by captureHeaders. */
function accelHeaders(indent: string, captured = false): string {
  return ACCEL_COPIED_HEADERS.map((h) => `${indent}add_header ${h} $${captured ? 'files_rest_' : 'upstream_http_'}${varName(h)} always;`).join('\n');
}

/** Before proxy_pass replaces the upstream, keep files-rest's headers in variables (rewrite phase). */
function captureHeaders(indent: string): string {
  return ACCEL_COPIED_HEADERS.map((h) => `${indent}set $files_rest_${varName(h)} $upstream_http_${varName(h)};`).join('\n');
}

/** The server block: the same directives as the example in docs/security.md. */
export function nginxServerBlock(site: NginxSite, listen: string): string {
  const locs = site.locations
    .map(
      (l) => `
    location ${site.accelPrefix}${l.name}/ {
        internal;
        alias ${l.dir.replace(/\/?$/, '/')};
        etag off;
${accelHeaders('        ')}
    }`,
    )
    .join('\n');
  const remote = site.remote
    ? `
    location ~ ^${site.accelPrefix}_remote/(https?)/([^/]+)/(.*)$ {
        internal;
        set $accel_scheme $1;
        set $accel_host $2;
        set $accel_path $3;
        proxy_set_header Host $accel_host;
        proxy_set_header Authorization "";
        proxy_set_header Cookie "";
${captureHeaders('        ')}
        proxy_hide_header Content-Type;
        proxy_hide_header Content-Disposition;
        proxy_hide_header ETag;
        proxy_hide_header Last-Modified;
        proxy_hide_header Cache-Control;
        proxy_hide_header x-amz-request-id;
        proxy_hide_header x-amz-id-2;
        proxy_pass $accel_scheme://$accel_host/$accel_path$is_args$args;
${accelHeaders('        ', true)}
    }`
    : '';
  return `
  server {
    listen ${listen};
    client_max_body_size 0;

    location ${site.apiPath} {
        proxy_pass ${site.upstream};
        proxy_set_header Host $http_host;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_http_version 1.1;
        proxy_request_buffering off;
        proxy_buffering off;
    }
${locs}
${remote}
  }`;
}

export interface RunningNginx {
  url: string;
  child: ChildProcess;
  errorLog(): Promise<string>;
  stop(): Promise<void>;
}

/** Starts nginx (foreground, its own prefix dir) on a free 127.0.0.1 port. */
export async function startNginx(binary: string, dir: string, site: NginxSite): Promise<RunningNginx> {
  await mkdir(dir, { recursive: true });
  const port = await freePort();
  const asRoot = process.getuid?.() === 0;
  const conf = `
${asRoot ? 'user root;' : ''}
daemon off;
worker_processes 1;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'error.log')} warn;
events { worker_connections 128; }
http {
  access_log off;
  default_type application/octet-stream;
  client_body_temp_path ${join(dir, 'client_body')};
  proxy_temp_path ${join(dir, 'proxy')};
  fastcgi_temp_path ${join(dir, 'fastcgi')};
  uwsgi_temp_path ${join(dir, 'uwsgi')};
  scgi_temp_path ${join(dir, 'scgi')};
${nginxServerBlock(site, `127.0.0.1:${port}`)}
}
`;
  const confPath = join(dir, 'nginx.conf');
  await writeFile(confPath, conf);
  const child = spawn(binary, ['-c', confPath, '-p', dir, '-e', join(dir, 'error.log')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await Promise.race([
      waitForPort(port),
      exited.then(() => {
        throw new Error(`nginx exited at start: ${out}`);
      }),
    ]);
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    errorLog: () => readFile(join(dir, 'error.log'), 'utf8').catch(() => ''),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await exited;
      }
    },
  };
}
