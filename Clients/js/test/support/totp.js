// The authenticator app of the tests: RFC 6238 codes (HMAC-SHA-1, 6 digits, 30 s steps) from the
// base32 secret the server hands out, computed with node:crypto (an independent implementation of
// what the server checks).
import crypto from 'node:crypto';

/** RFC 4648 base32 (upper case, padding optional) to bytes. */
export function base32Decode(text) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const clean = text.replace(/=+$/, '').toUpperCase();
  let bits = 0;
  let value = 0;
  const out = [];
  for (const char of clean) {
    const index = alphabet.indexOf(char);
    if (index < 0) throw new Error(`not base32: ${JSON.stringify(char)} in the secret`);
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

/** The code for the 30 s step holding `atMs` (default now). */
export function totp(secret, atMs = Date.now()) {
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(atMs / 1000 / 30)));
  const mac = crypto.createHmac('sha1', base32Decode(secret)).update(counter).digest();
  const offset = mac[mac.length - 1] & 0x0f;
  const number = (mac.readUInt32BE(offset) & 0x7fffffff) % 1_000_000;
  return String(number).padStart(6, '0');
}

/** The secret of an otpauth:// URL. */
export function secretOf(otpauthURL) {
  const secret = new URL(otpauthURL).searchParams.get('secret');
  if (!secret) throw new Error(`no secret in ${otpauthURL}`);
  return secret;
}
