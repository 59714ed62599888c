import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Answers requests that Node's HTTP parser refuses before Fastify sees them (headers too large,
 * a malformed request line, a client that is too slow) with the service's usual error body,
 * `{"status", "message"}`, instead of the framework's own shape.
 */
export function clientErrorHandler(err: Error & { code?: string; rawPacket?: unknown }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  let status = 400;
  let message = 'The browser (or proxy) sent a request that this server could not understand.';
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    message = 'The request headers are too large.';
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    status = 408;
    message = 'The request was not received in time.';
  }
  const body = JSON.stringify({ status, message });
  // A HEAD request gets the headers only, or the client would read the body as a next response.
  const head = Buffer.isBuffer(err.rawPacket) && err.rawPacket.subarray(0, 5).toString('latin1') === 'HEAD ';
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${head ? '' : body}`,
    );
  }
  socket.destroy();
}
