/**
 * The policy of an S3 POST form (PostObject): a base64 JSON document, signed by the form, with an
 * expiration and the conditions every field of the form must meet, as S3 defines them:
 * `{"field": "value"}` and `["eq", "$field", "value"]` (exact), `["starts-with", "$field", "prefix"]`,
 * and `["content-length-range", min, max]` (the file's size). Every field of the form but the
 * signature's own, `file`, `policy` and `x-ignore-*` must be named by a condition.
 */
import { S3Error } from './errors.js';

export type PolicyCondition =
  | { op: 'eq' | 'starts-with'; field: string; value: string; text: string }
  | { op: 'content-length-range'; min: number; max: number; text: string };

export interface PostPolicy {
  expiration: number;
  conditions: PolicyCondition[];
}

/** Form fields no condition needs to name (lower case). */
const EXEMPT = new Set(['x-amz-signature', 'signature', 'awsaccesskeyid', 'file', 'policy']);

const invalid = (why: string) => new S3Error('InvalidPolicyDocument', `Invalid Policy: ${why}`);
const refused = (why: string) => new S3Error('AccessDenied', `Invalid according to Policy: ${why}`);

function fieldName(v: unknown, text: string): string {
  if (typeof v !== 'string' || !v.startsWith('$') || v.length < 2) throw invalid(`Invalid condition ${text}: a field is named $<name>.`);
  return v.slice(1).toLowerCase();
}

function sizeOf(v: unknown, text: string): number {
  const n = typeof v === 'string' && /^\d{1,16}$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw invalid(`Invalid content-length-range ${text}.`);
  return n;
}

function parseCondition(c: unknown): PolicyCondition {
  const text = JSON.stringify(c) ?? String(c);
  if (Array.isArray(c)) {
    const op = typeof c[0] === 'string' ? c[0].toLowerCase() : '';
    if (op === 'content-length-range') {
      if (c.length !== 3) throw invalid(`Invalid condition ${text}.`);
      const min = sizeOf(c[1], text);
      const max = sizeOf(c[2], text);
      return { op, min, max, text };
    }
    if ((op === 'eq' || op === 'starts-with') && c.length === 3 && typeof c[2] === 'string') return { op, field: fieldName(c[1], text), value: c[2], text };
    throw invalid(`Invalid condition ${text}.`);
  }
  if (c !== null && typeof c === 'object') {
    const entries = Object.entries(c);
    if (entries.length === 1 && typeof entries[0]![1] === 'string') return { op: 'eq', field: entries[0]![0].toLowerCase(), value: entries[0]![1], text };
  }
  throw invalid(`Invalid condition ${text}.`);
}

/** Reads a form's `policy` field (base64 of JSON); InvalidPolicyDocument when it is not one. */
export function parsePostPolicy(base64: string): PostPolicy {
  let doc: unknown;
  try {
    if (!/^[A-Za-z0-9+/\s]*={0,2}\s*$/.test(base64)) throw new Error('not base64');
    doc = JSON.parse(Buffer.from(base64, 'base64').toString('utf8'));
  } catch {
    throw invalid('Invalid JSON.');
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw invalid('Invalid JSON.');
  const { expiration, conditions } = doc as { expiration?: unknown; conditions?: unknown };
  if (expiration === undefined) throw invalid('Policy missing expiration.');
  const at = typeof expiration === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(expiration) ? Date.parse(expiration) : NaN;
  if (Number.isNaN(at)) throw invalid(`Invalid 'expiration' value: ${JSON.stringify(expiration)}.`);
  if (conditions === undefined) throw invalid('Policy missing conditions.');
  if (!Array.isArray(conditions)) throw invalid("'conditions' must be a list.");
  return { expiration: at, conditions: conditions.map(parseCondition) };
}

/**
 * Checks a form against its policy: not expired, every condition met, every field named by one.
 * `fields` by lower-case name; `bucket` is the bucket's name as addressed. AccessDenied names the
 * first failure, as S3 does.
 */
export function checkPostPolicy(policy: PostPolicy, fields: ReadonlyMap<string, string>, bucket: string, now = Date.now()): void {
  if (policy.expiration <= now) throw refused('Policy expired.');
  const named = new Set<string>();
  for (const c of policy.conditions) {
    if (c.op === 'content-length-range') continue;
    named.add(c.field);
    const value = c.field === 'bucket' ? bucket : fields.get(c.field);
    if (value === undefined) throw refused(`Policy Condition failed: ${c.text}`);
    const ok =
      c.op === 'eq'
        ? value === c.value
        : // Content-Type may list several types: each must start with the prefix.
          (c.field === 'content-type' ? value.split(',').map((v) => v.trim()) : [value]).every((v) => v.startsWith(c.value));
    if (!ok) throw refused(`Policy Condition failed: ${c.text}`);
  }
  // A checksum of the file needs no condition (as RGW): it can only refuse an upload, never change it.
  const extra = [...fields.keys()].filter((f) => !EXEMPT.has(f) && !f.startsWith('x-ignore-') && !f.startsWith('x-amz-checksum-') && f !== 'content-md5' && !named.has(f));
  if (extra.length > 0) throw refused(`Extra input fields: ${extra.join(', ')}`);
}

/** The file sizes the policy allows (its content-length-range conditions, all of them), or null. */
export function policySizeRange(policy: PostPolicy): { min: number; max: number } | null {
  let range: { min: number; max: number } | null = null;
  for (const c of policy.conditions) {
    if (c.op !== 'content-length-range') continue;
    range = range ? { min: Math.max(range.min, c.min), max: Math.min(range.max, c.max) } : { min: c.min, max: c.max };
  }
  return range;
}
