import net from 'node:net';

/** The first final (non-1xx) response read from a raw socket, or none. */
export interface RawSocketResult {
  /** 0 when the server closed the connection without answering. */
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The server did not answer within `waitMs` and the client ended its side. */
  gaveUp: boolean;
}

/** Parses the first final response in `buf`, or returns null while it is incomplete. */
function parseResponse(buf: Buffer, head: boolean, closed = false): { status: number; headers: Record<string, string>; body: string } | null {
  let at = 0;
  for (;;) {
    const end = buf.indexOf('\r\n\r\n', at);
    if (end === -1) return null;
    const lines = buf.subarray(at, end).toString('latin1').split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
    if (!m) throw new Error(`not an HTTP response: ${JSON.stringify(buf.subarray(at, at + 200).toString('latin1'))}`);
    const status = Number(m[1]);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(':');
      if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    if (status < 200) {
      at = end + 4;
      continue;
    }
    const length = head || status === 204 || status === 304 ? 0 : Number(headers['content-length'] ?? NaN);
    // No length: the body is what comes until the server closes.
    if (Number.isNaN(length)) return closed ? { status, headers, body: buf.subarray(end + 4).toString('utf8') } : null;
    if (buf.length < end + 4 + length) return null;
    return { status, headers, body: buf.subarray(end + 4, end + 4 + length).toString('utf8') };
  }
}

/**
 * Sends `bytes` exactly as given on a new TCP connection and reads the first final response.
 * `endAfterSend`: half-close right away (the request is incomplete on purpose and the server would
 * wait for the rest). Otherwise, when nothing complete has arrived after `waitMs`, the client ends
 * its side and takes whatever the server still sends; `hardMs` bounds the whole exchange.
 */
export function rawExchange(
  port: number,
  bytes: Buffer,
  opts: { head?: boolean; endAfterSend?: boolean; waitMs?: number; hardMs?: number } = {},
): Promise<RawSocketResult> {
  const { head = false, endAfterSend = false, waitMs = 2000, hardMs = 15_000 } = opts;
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    let settled = false;
    let gaveUp = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(soft);
      clearTimeout(hard);
      socket.destroy();
      fn();
    };
    const soft = setTimeout(() => {
      gaveUp = true;
      socket.end();
    }, waitMs);
    const hard = setTimeout(() => finish(() => reject(new Error(`no answer and no close within ${hardMs} ms: ${JSON.stringify(bytes.subarray(0, 300).toString('latin1'))}`))), hardMs);
    socket.on('connect', () => {
      socket.write(bytes);
      if (endAfterSend) socket.end();
    });
    socket.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      let r: ReturnType<typeof parseResponse>;
      try {
        r = parseResponse(buf, head);
      } catch (e) {
        finish(() => reject(e));
        return;
      }
      if (r) finish(() => resolve({ ...r, gaveUp }));
    });
    // A reset after the server answered and closed (it had not read all we sent) is not a failure.
    socket.on('error', () => {});
    socket.on('close', () => {
      if (settled) return;
      let r: ReturnType<typeof parseResponse> = null;
      try {
        r = parseResponse(buf, head, true);
      } catch (e) {
        return finish(() => reject(e));
      }
      if (r) return finish(() => resolve({ ...r, gaveUp }));
      if (buf.length > 0) return finish(() => reject(new Error(`incomplete response: ${JSON.stringify(buf.toString('latin1').slice(0, 300))}`)));
      finish(() => resolve({ status: 0, headers: {}, body: '', gaveUp }));
    });
  });
}

/** A request head, with CRLF line ends, as bytes. */
export function requestHead(method: string, target: string, headers: Array<[string, string]>): Buffer {
  return Buffer.from(`${method} ${target} HTTP/1.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`, 'latin1');
}
