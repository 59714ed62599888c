// HmacSha256Key (src/util/hmac.ts): a key prepared once signs every message as createHmac does.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { HmacSha256Key } from '../src/util/hmac.js';

const reference = (key: Uint8Array | string, data: string | Uint8Array) => createHmac('sha256', key).update(data).digest();

describe('HmacSha256Key', () => {
  it('gives createHmac’s value for keys shorter than, as long as and longer than a block, and for every message', () => {
    const messages: Array<string | Buffer> = ['', 'a', 'AWS4-HMAC-SHA256\n20261128T030000Z\n20261128/us-east-1/s3/aws4_request\n' + 'f'.repeat(64), 'ünïcödé ✓', randomBytes(1000), Buffer.alloc(0)];
    for (const length of [0, 1, 31, 32, 63, 64, 65, 128, 200]) {
      const key = randomBytes(length);
      const prepared = new HmacSha256Key(key);
      assert.ok(prepared.bytes.equals(key));
      for (const m of messages) assert.ok(prepared.sign(m).equals(reference(key, m)), `key of ${length} bytes, message ${String(m).slice(0, 20)}`);
    }
    const text = 'AWS4' + 'secret/with+chars=';
    assert.ok(new HmacSha256Key(text).sign('20261128').equals(reference(text, '20261128')));
  });

  it('keeps its prepared state: the same message signed again, after others, gives the same value', () => {
    const key = randomBytes(32);
    const prepared = new HmacSha256Key(key);
    const first = prepared.sign('one');
    for (let i = 0; i < 100; i++) prepared.sign(randomBytes(i));
    assert.ok(prepared.sign('one').equals(first));
    assert.ok(first.equals(reference(key, 'one')));
    // A key changed by its caller afterwards does not change the prepared one.
    key.fill(0);
    assert.ok(prepared.sign('one').equals(first));
  });
});
