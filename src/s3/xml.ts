/**
 * The little XML the S3 door reads and writes: documents built from escaped strings, and a strict
 * reader for the small request bodies S3 operations take (CreateBucketConfiguration,
 * VersioningConfiguration). No DTDs, no entities beyond the five predefined and character references.
 */
import { S3Error, xmlEscape } from './errors.js';

export const S3_XMLNS = 'http://s3.amazonaws.com/doc/2006-03-01/';

/** `<name>escaped text</name>`. */
export function el(name: string, text: string | number | boolean): string {
  return `<${name}>${xmlEscape(String(text))}</${name}>`;
}

/** A whole document: the declaration and a root element in S3's namespace around `inner`. */
export function doc(root: string, inner: string): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root} xmlns="${S3_XMLNS}">${inner}</${root}>`;
}

/** An element read from a request body: its local name, children and text. */
export interface XmlElement {
  name: string;
  children: XmlElement[];
  text: string;
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** A character reference's character; MalformedXML for a code point XML does not allow. */
function charRef(code: number): string {
  const ok = code === 0x9 || code === 0xa || code === 0xd || (code >= 0x20 && code <= 0xd7ff) || (code >= 0xe000 && code <= 0xfffd) || (code >= 0x10000 && code <= 0x10ffff);
  if (!ok) throw malformed();
  return String.fromCodePoint(code);
}

function decodeText(raw: string): string {
  // A bare `&` (not starting a reference) is not well-formed.
  if (/&(?!(#x[0-9a-fA-F]{1,8}|#\d{1,10}|\w+);)/.test(raw)) throw malformed();
  return raw.replace(/&(#x[0-9a-fA-F]{1,8}|#\d{1,10}|\w+);/g, (m, e: string) => {
    if (e.startsWith('#x')) return charRef(parseInt(e.slice(2), 16));
    if (e.startsWith('#')) return charRef(parseInt(e.slice(1), 10));
    const v = ENTITIES[e];
    if (v === undefined) throw malformed();
    return v;
  });
}

function malformed(): S3Error {
  return new S3Error('MalformedXML');
}

const NAME = '[A-Za-z_][A-Za-z0-9_.:-]*';
/** A reference inside an attribute value (a bare `&` is not well-formed). */
const REF = '&(?:#x[0-9a-fA-F]{1,8}|#\\d{1,10}|\\w+);';
const TOKEN = new RegExp(`<\\?xml[^?]*\\?>|<!--[\\s\\S]*?-->|<(/?)(${NAME})((?:\\s+${NAME}\\s*=\\s*(?:"(?:[^"<&]|${REF})*"|'(?:[^'<&]|${REF})*'))*)\\s*(/?)>|([^<]+)`, 'y');

/** Parses a small XML document strictly; MalformedXML when it is not well-formed. */
export function parseXml(body: string): XmlElement {
  const stack: XmlElement[] = [];
  let root: XmlElement | null = null;
  TOKEN.lastIndex = 0;
  let pos = 0;
  const text = body.replace(/^\uFEFF/, '');
  // Characters XML 1.0 does not allow anywhere (NUL and the other C0 controls but tab, LF, CR; U+FFFE/F; lone surrogates).
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text)) throw malformed();
  while (pos < text.length) {
    TOKEN.lastIndex = pos;
    const m = TOKEN.exec(text);
    if (!m || m.index !== pos) throw malformed();
    pos = TOKEN.lastIndex;
    const [whole, close, name, , selfClose, chars] = m;
    if (whole.startsWith('<?') || whole.startsWith('<!--')) continue;
    if (chars !== undefined) {
      if (stack.length === 0) {
        if (chars.trim() !== '') throw malformed();
        continue;
      }
      stack[stack.length - 1]!.text += decodeText(chars);
      continue;
    }
    const local = name!.includes(':') ? name!.slice(name!.indexOf(':') + 1) : name!;
    if (close) {
      const top = stack.pop();
      if (!top || top.name !== local || selfClose) throw malformed();
      continue;
    }
    if (stack.length === 0 && root !== null) throw malformed();
    const node: XmlElement = { name: local, children: [], text: '' };
    if (stack.length > 0) stack[stack.length - 1]!.children.push(node);
    else root = node;
    if (!selfClose) stack.push(node);
  }
  if (!root || stack.length > 0) throw malformed();
  return root;
}

/** The text of the only child `name` of `parent`, or undefined; MalformedXML when repeated. */
export function childText(parent: XmlElement, name: string): string | undefined {
  const found = parent.children.filter((c) => c.name === name);
  if (found.length > 1) throw malformed();
  return found[0]?.text.trim();
}
