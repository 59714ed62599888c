/**
 * What hashing costs on this machine, one core: MD5, SHA-1 and SHA-256 in MiB/s over 1 MiB updates
 * (what a digest thread does with a large body), and one HMAC-SHA256 of a SigV4 string to sign with
 * Node's `createHmac` against a key prepared once (src/util/hmac.ts). Says whether the CPU has SHA
 * extensions (x86 `sha_ni`), without which SHA-256 is several times slower: it is what bounds the S3
 * door's upload with a signed payload (README, Performance, "Session 18").
 *
 * Usage (after `npm run build`): node dist/bench/hash-speed.js [--mib N] [--hmacs N]
 */
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { HmacSha256Key } from '../src/util/hmac.js';

const { values } = parseArgs({ options: { mib: { type: 'string', default: '512' }, hmacs: { type: 'string', default: '200000' } } });
const MIB = Number(values.mib);
const HMACS = Number(values.hmacs);

function cpuFlags(): string {
  try {
    const info = readFileSync('/proc/cpuinfo', 'utf8');
    const model = /^model name\s*:\s*(.*)$/m.exec(info)?.[1] ?? 'unknown CPU';
    const flags = new Set((/^flags\s*:\s*(.*)$/m.exec(info)?.[1] ?? '').split(' '));
    return `${model}; SHA extensions (sha_ni): ${flags.has('sha_ni') ? 'yes' : 'no'}; AVX2: ${flags.has('avx2') ? 'yes' : 'no'}`;
  } catch {
    return 'CPU flags unknown (no /proc/cpuinfo)';
  }
}

console.log(`${process.version}, OpenSSL ${process.versions.openssl}; ${cpuFlags()}`);
const block = randomBytes(1024 * 1024);
for (const algorithm of ['md5', 'sha1', 'sha256']) {
  const h = createHash(algorithm);
  const t0 = performance.now();
  for (let i = 0; i < MIB; i++) h.update(block);
  h.digest();
  const s = (performance.now() - t0) / 1000;
  console.log(`${algorithm.padEnd(7)} ${(MIB / s).toFixed(0).padStart(5)} MiB/s  (${(s / (MIB / 1024)).toFixed(2)} s of CPU per GiB)`);
}

const key = randomBytes(32);
const message = `AWS4-HMAC-SHA256\n20261128T030000Z\n20261128/us-east-1/s3/aws4_request\n${'0'.repeat(64)}`;
const prepared = new HmacSha256Key(key);
let sink = 0;
const time = (sign: () => Buffer): number => {
  const t0 = performance.now();
  for (let i = 0; i < HMACS; i++) sink ^= sign()[0]!;
  return ((performance.now() - t0) * 1000) / HMACS;
};
const fresh = time(() => createHmac('sha256', key).update(message, 'utf8').digest());
const kept = time(() => prepared.sign(message));
console.log(`HMAC-SHA256 of a ${message.length}-byte string to sign: createHmac ${fresh.toFixed(1)} µs, prepared key ${kept.toFixed(1)} µs (${sink >= 0 ? HMACS : 0} each)`);
