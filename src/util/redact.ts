import pino from 'pino';

/**
 * Query parameters that carry a credential: OAuth-style tokens and the S3 presigned-URL family
 * (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token), and anything else named like a
 * signature, a token, a key or a secret. Matched case-insensitively on the (decoded) name.
 */
const CREDENTIAL_NAME = /^(access[_-]?token|token|id[_-]?token|refresh[_-]?token|api[_-]?key|key[_-]?id|secret|password|passwd|auth|authorization|credential|x-amz-(signature|credential|security-token)|x-goog-(signature|credential)|(.*[_-])?(signature|sig|token|secret|credential|password))$/i;

const REDACTED = '[redacted]';

function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    return name;
  }
}

/**
 * Replaces the value of every credential-like query parameter in `text` with `[redacted]`. `text`
 * may be a URL, a path with a query string or any message that quotes one; the rest is unchanged.
 * The one redaction every log serializer uses.
 */
export function redactCredentials(text: string): string {
  if (!text.includes('=')) return text;
  return text.replace(/([?&;])([^=&;#\s?"']+)=([^&;#\s"']*)/g, (all, sep: string, name: string) =>
    CREDENTIAL_NAME.test(decodedName(name)) ? `${sep}${name}=${REDACTED}` : all,
  );
}

/** Strings of a serialized value with credentials redacted (nested objects, a few levels deep). */
function redactDeep(v: unknown, depth = 0): unknown {
  if (typeof v === 'string') return redactCredentials(v);
  if (depth > 4 || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((x) => redactDeep(x, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v)) out[k] = redactDeep(x, depth + 1);
  return out;
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  headers?: Record<string, unknown>;
  socket?: { remoteAddress?: string; remotePort?: number } | null;
}

/**
 * The log serializers of every logger of the service (the server's, Fastify's request loggers):
 * a request is logged with its URL redacted, an error with credentials redacted from its message
 * and stack (a message may quote a URL).
 */
export const logSerializers = {
  req(req: LoggedRequest) {
    return {
      method: req.method,
      url: typeof req.url === 'string' ? redactCredentials(req.url) : req.url,
      host: req.host ?? req.headers?.host,
      remoteAddress: req.ip ?? req.socket?.remoteAddress,
      remotePort: req.socket?.remotePort,
    };
  },
  err(err: Error) {
    return redactDeep(pino.stdSerializers.err(err));
  },
};
