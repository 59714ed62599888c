/**
 * The S3 door's error table: the error codes Amazon S3 answers with, each with its HTTP status and
 * S3's default message, plus the XML error document S3 renders them as. The S3 door maps domain
 * errors into these codes from one table; the protocol primitives in `src/s3/` return them as values.
 */

/** One S3 error code: its HTTP status and the message S3 gives by default. */
export interface S3ErrorSpec {
  readonly status: number;
  readonly message: string;
}

export const S3_ERRORS = {
  // Authentication and signing
  AccessDenied: { status: 403, message: 'Access Denied' },
  InvalidObjectState: { status: 403, message: 'The operation is not valid for the object\'s storage class' },
  InvalidAccessKeyId: { status: 403, message: 'The AWS Access Key Id you provided does not exist in our records.' },
  SignatureDoesNotMatch: {
    status: 403,
    message: 'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
  },
  RequestTimeTooSkewed: { status: 403, message: "The difference between the request time and the server's time is too large." },
  AuthorizationHeaderMalformed: { status: 400, message: 'The authorization header is malformed.' },
  AuthorizationQueryParametersError: { status: 400, message: 'Error parsing the X-Amz-Credential parameter.' },
  MissingSecurityHeader: { status: 400, message: 'Your request is missing a required header.' },
  InvalidToken: { status: 400, message: 'The provided token is malformed or otherwise invalid.' },
  ExpiredToken: { status: 400, message: 'The provided token has expired.' },
  // The request and its body
  InvalidArgument: { status: 400, message: 'Invalid Argument' },
  InvalidStorageClass: { status: 400, message: 'The storage class you specified is not valid' },
  BadRequest: { status: 400, message: 'Bad Request' },
  InvalidRequest: { status: 400, message: 'Invalid Request' },
  XAmzContentSHA256Mismatch: {
    status: 400,
    message: "The provided 'x-amz-content-sha256' header does not match what was computed.",
  },
  BadDigest: { status: 400, message: 'The Content-MD5 or checksum value that you specified did not match what the server received.' },
  InvalidDigest: { status: 400, message: 'The Content-MD5 or checksum value that you specified is not valid.' },
  IncompleteBody: { status: 400, message: 'You did not provide the number of bytes specified by the Content-Length HTTP header.' },
  MissingContentLength: { status: 411, message: 'You must provide the Content-Length HTTP header.' },
  EntityTooLarge: { status: 400, message: 'Your proposed upload exceeds the maximum allowed object size.' },
  EntityTooSmall: { status: 400, message: 'Your proposed upload is smaller than the minimum allowed object size.' },
  KeyTooLongError: { status: 400, message: 'Your key is too long.' },
  InvalidLocationConstraint: { status: 400, message: 'The specified location-constraint is not valid.' },
  MalformedACLError: { status: 400, message: 'The XML you provided was not well-formed or did not validate against our published schema.' },
  UnresolvableGrantByEmailAddress: { status: 400, message: 'The email address you provided does not match any account on record.' },
  UnexpectedContent: { status: 400, message: 'This request does not support content.' },
  MalformedPOSTRequest: { status: 400, message: 'The body of your POST request is not well-formed multipart/form-data.' },
  InvalidPolicyDocument: { status: 400, message: 'The content of the form does not meet the conditions specified in the policy document.' },
  MalformedXML: { status: 400, message: 'The XML you provided was not well-formed or did not validate against our published schema.' },
  InvalidTag: { status: 400, message: 'The tag provided was not a valid tag.' },
  InvalidBucketName: { status: 400, message: 'The specified bucket is not valid.' },
  InvalidPart: { status: 400, message: 'One or more of the specified parts could not be found.' },
  InvalidPartOrder: { status: 400, message: 'The list of parts was not in ascending order.' },
  RequestTimeout: {
    status: 400,
    message: 'Your socket connection to the server was not read from or written to within the timeout period.',
  },
  // Resources
  NoSuchBucket: { status: 404, message: 'The specified bucket does not exist.' },
  NoSuchKey: { status: 404, message: 'The specified key does not exist.' },
  NoSuchUpload: { status: 404, message: 'The specified multipart upload does not exist.' },
  NoSuchVersion: { status: 404, message: 'The specified version does not exist.' },
  NoSuchCORSConfiguration: { status: 404, message: 'The CORS configuration does not exist' },
  NoSuchTagSet: { status: 404, message: 'The TagSet does not exist' },
  AccessForbidden: {
    status: 403,
    message:
      "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
  },
  MethodNotAllowed: { status: 405, message: 'The specified method is not allowed against this resource.' },
  BucketAlreadyExists: { status: 409, message: 'The requested bucket name is not available.' },
  BucketAlreadyOwnedByYou: { status: 409, message: 'Your previous request to create the named bucket succeeded and you already own it.' },
  BucketNotEmpty: { status: 409, message: 'The bucket you tried to delete is not empty.' },
  PreconditionFailed: { status: 412, message: 'At least one of the preconditions you specified did not hold.' },
  InvalidRange: { status: 416, message: 'The requested range is not satisfiable.' },
  InvalidPartNumber: { status: 416, message: 'The requested partnumber is not satisfiable.' },
  // The service
  InternalError: { status: 500, message: 'We encountered an internal error. Please try again.' },
  NotImplemented: { status: 501, message: 'A header you provided implies functionality that is not implemented.' },
  ServiceUnavailable: { status: 503, message: 'Please reduce your request rate.' },
  SlowDown: { status: 503, message: 'Please reduce your request rate.' },
} as const satisfies Record<string, S3ErrorSpec>;

/** An S3 error code, such as `SignatureDoesNotMatch`. */
export type S3ErrorCode = keyof typeof S3_ERRORS;

/**
 * An S3 refusal: S3's error code, its HTTP status and a message. The protocol primitives return
 * these as values (or end a stream with one); they never throw them at the caller.
 *
 * `details` become extra elements of the XML error document, as S3 adds them (for example
 * `StringToSign` and `CanonicalRequest` on `SignatureDoesNotMatch`, `HeadersNotSigned` on
 * `AccessDenied`).
 *
 * @example
 * ```ts
 * const err = new S3Error('AccessDenied', 'Request has expired');
 * reply.code(err.status).type('application/xml').send(renderS3ErrorXml(err, { resource: '/b/k', requestId }));
 * ```
 */
export class S3Error extends Error {
  readonly code: S3ErrorCode;
  readonly status: number;
  readonly details: Readonly<Record<string, string>>;

  constructor(code: S3ErrorCode, message?: string, details: Record<string, string> = {}) {
    super(message ?? S3_ERRORS[code].message);
    this.name = 'S3Error';
    this.code = code;
    this.status = S3_ERRORS[code].status;
    this.details = Object.freeze({ ...details });
  }
}

/** Whether a value is an {@link S3Error}: the type guard for the `parsed | S3Error` results here. */
export function isS3Error(value: unknown): value is S3Error {
  return value instanceof S3Error;
}

// Characters XML 1.0 cannot carry at all, not even as a character reference (C0 controls but tab,
// LF and CR; lone surrogates; U+FFFE/U+FFFF). Keys may contain them; they become U+FFFD.
const XML_INVALID = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const XML_SPECIAL: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' };

/** Escapes text for an XML element or attribute; characters XML cannot carry become U+FFFD. */
export function xmlEscape(text: string): string {
  return text.replace(XML_INVALID, '\uFFFD').replace(/[&<>"']/g, (c) => XML_SPECIAL[c]!);
}

const ELEMENT_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/**
 * Renders S3's XML error document:
 * `<?xml version="1.0" encoding="UTF-8"?><Error><Code>…</Code><Message>…</Message>…<Resource>…</Resource><RequestId>…</RequestId></Error>`.
 * Detail elements come between Message and Resource; a detail whose name is not a valid element
 * name is left out.
 */
export function renderS3ErrorXml(err: S3Error, where: { resource?: string; requestId?: string } = {}): string {
  let xml = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${err.code}</Code><Message>${xmlEscape(err.message)}</Message>`;
  for (const [name, value] of Object.entries(err.details)) {
    if (ELEMENT_NAME.test(name)) xml += `<${name}>${xmlEscape(value)}</${name}>`;
  }
  if (where.resource !== undefined) xml += `<Resource>${xmlEscape(where.resource)}</Resource>`;
  if (where.requestId !== undefined) xml += `<RequestId>${xmlEscape(where.requestId)}</RequestId>`;
  return `${xml}</Error>`;
}
