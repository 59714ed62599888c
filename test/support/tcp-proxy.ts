// A TCP proxy on 127.0.0.1 that a test can cut: it stands between files-rest and PostgreSQL, so
// the database can "go away" for files-rest without touching the machine's PostgreSQL.
import net from 'node:net';
import type { AddressInfo } from 'node:net';

/**
 * - `forward`: connections are passed through to the target.
 * - `reset`: new connections are accepted and closed at once (like a stopped server's refusals).
 * - `blackhole`: new connections are accepted and never answered (like a silent network).
 */
export type TcpProxyMode = 'forward' | 'reset' | 'blackhole';

export interface TcpProxy {
  port: number;
  mode: TcpProxyMode;
  /** Connections currently passed through. */
  open(): number;
  setMode(mode: TcpProxyMode): void;
  /** Closes every connection passed through so far (the server went away). */
  cutAll(): void;
  /** Stops passing bytes on every open connection, without closing it (the network went silent). */
  freezeAll(): void;
  close(): Promise<void>;
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket | null;
}

// destroy(), not resetAndDestroy(): on Node 20 a reset of these sockets now and then left the
// process's event loop spinning after the test.
function kill(s: net.Socket | null): void {
  if (!s || s.destroyed) return;
  s.destroy();
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  const held = new Set<net.Socket>();
  let mode: TcpProxyMode = 'forward';
  const server = net.createServer((client) => {
    client.on('error', () => {});
    if (mode === 'reset') return kill(client);
    if (mode === 'blackhole') {
      held.add(client);
      client.on('close', () => held.delete(client));
      client.pause();
      return;
    }
    const pair: Pair = { client, upstream: null };
    pairs.add(pair);
    const upstream = net.connect({ host: targetHost, port: targetPort });
    pair.upstream = upstream;
    upstream.on('error', () => kill(client));
    client.on('error', () => kill(upstream));
    upstream.on('close', () => {
      kill(client);
      pairs.delete(pair);
    });
    client.on('close', () => {
      kill(upstream);
      pairs.delete(pair);
    });
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const proxy: TcpProxy = {
    port,
    get mode() {
      return mode;
    },
    open: () => pairs.size,
    setMode(m) {
      mode = m;
      // Leaving a silent network: what was held is gone for good, as after a TCP timeout.
      if (m !== 'blackhole') for (const s of held) kill(s);
    },
    cutAll() {
      for (const p of pairs) {
        kill(p.client);
        kill(p.upstream);
      }
      pairs.clear();
    },
    freezeAll() {
      for (const p of pairs) {
        p.client.unpipe();
        p.upstream?.unpipe();
        p.client.pause();
        p.upstream?.pause();
        held.add(p.client);
        if (p.upstream) held.add(p.upstream);
      }
      pairs.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        proxy.cutAll();
        for (const s of held) kill(s);
        // server.close() waits for every connection to end; a socket still open must not hang teardown.
        const timer = setTimeout(resolve, 3000);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
      }),
  };
  return proxy;
}
