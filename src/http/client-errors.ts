import { STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ERRORS, type ErrorCode } from '../errors.js';

/** The catalogue's JSON body for `code`. */
function errorBody(code: ErrorCode): { status: number; body: string } {
  const { status, message } = ERRORS[code];
  return { status, body: JSON.stringify({ status, message }) };
}

/**
 * Writes a complete HTTP/1.1 refusal straight onto a socket and closes it: for requests Node refuses
 * before any request object exists. A HEAD request gets the headers only, or the client would read
 * the body as a next response.
 */
function refuseOnSocket(socket: Duplex, code: ErrorCode, head: boolean): void {
  const { status, body } = errorBody(code);
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n${head ? '' : body}`,
    );
  }
  socket.destroy();
}

/** What a door writes on a socket for a request Node's parser refused: a complete answer, then it closes the socket. */
export type SocketRefusal = (socket: Duplex, kind: 'malformed' | 'headers-too-large' | 'timeout', head: boolean) => void;

/**
 * Node's HTTP parser refused bytes on a connection (broken framing, bad chunked encoding, a malformed
 * request line, NUL in a header, headers too large, a client that is too slow): the door's refusal
 * (`refuse`), after the answer to a complete request still being answered on it (pipelining, or a
 * body longer than its Content-Length: the surplus is parsed as the next request).
 */
export function handleClientError(err: Error & { code?: string; rawPacket?: unknown }, socket: Duplex, refuse: SocketRefusal): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const kind = err.code === 'HPE_HEADER_OVERFLOW' ? 'headers-too-large' : err.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'timeout' : 'malformed';
  const head = Buffer.isBuffer(err.rawPacket) && err.rawPacket.subarray(0, 5).toString('latin1') === 'HEAD ';
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (inFlight && !inFlight.writableFinished && inFlight.req?.complete) {
    // The broken bytes follow a complete request still being answered: its answer goes first, or the
    // client would take this refusal for it; then the refusal, and the connection closes.
    const after = () => (socket.destroyed ? undefined : refuse(socket, kind, head));
    inFlight.once('finish', after);
    inFlight.once('close', after);
    return;
  }
  // A response already under way on this connection: writing another would corrupt it.
  if (inFlight?.headersSent) {
    socket.destroy();
    return;
  }
  // The request being answered is the broken one (its body's framing failed): it is refused.
  refuse(socket, kind, head);
}

/** The REST door's: the catalogue's JSON, `{"status", "message"}`, instead of Node's empty body. */
export function clientErrorHandler(err: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void {
  handleClientError(err, socket, (s, kind, head) =>
    refuseOnSocket(s, kind === 'headers-too-large' ? 'HEADERS_TOO_LARGE' : kind === 'timeout' ? 'REQUEST_TIMEOUT' : 'MALFORMED_REQUEST', head),
  );
}

/**
 * The refusals Node's HTTP server would otherwise write itself, with an empty body: an Expect header
 * other than 100-continue (417) and CONNECT (Node drops the connection). A missing Host header is
 * refused by the application (Node's own check is turned off with requireHostHeader: false).
 */
export function answerNodeRefusals(server: Server): void {
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    const { status, body } = errorBody('EXPECTATION_FAILED');
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-content-type-options': 'nosniff', connection: 'close' });
    res.end(body);
  });
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => {});
    refuseOnSocket(socket, 'METHOD_NOT_ALLOWED', false);
  });
}
