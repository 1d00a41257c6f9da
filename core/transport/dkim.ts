import { createHash, createPrivateKey, sign as rsaSign, type KeyObject } from 'node:crypto';
import MessageParser from 'nodemailer/lib/dkim/message-parser';
import signHeaders from 'nodemailer/lib/dkim/sign';
import { foldLines } from 'nodemailer/lib/mime-funcs';
import { normalizeDomain } from 'nodemailer/lib/shared';

/**
 * mailauth's and nodemailer's default signed headers plus List-Unsubscribe-Post (RFC 8058 wants the one-click
 * header signed) and Feedback-ID (Gmail trusts it only under a signature of the sending domain).
 */
export const SIGNED_HEADERS =
  'From:Sender:Reply-To:Subject:Date:Message-ID:To:Cc:MIME-Version:Content-Type:Content-Transfer-Encoding:Content-ID:Content-Description:' +
  'Resent-Date:Resent-From:Resent-Sender:Resent-To:Resent-Cc:Resent-Message-ID:In-Reply-To:References:List-Id:List-Help:List-Unsubscribe:' +
  'List-Subscribe:List-Post:List-Owner:List-Archive:BIMI-Selector:List-Unsubscribe-Post:Feedback-ID';

export type DkimKey = { domain: string; selector: string; privateKey: KeyObject };

/**
 * How long a delivery process keeps a domain's parsed signing key. A rotation keeps the old selector
 * published at least twice this long after switching, so mail signed with a cached key still verifies.
 */
export const SIGNING_KEY_CACHE_MS = 10_000;

/**
 * Parses a PEM private key once. Parsing costs about as much CPU as the RSA signature itself, so the
 * delivery path keeps the parsed key (with its domain row) instead of handing a PEM string to a signer
 * that would parse it for every message.
 */
export const parsePrivateKey = (pem: string): KeyObject => createPrivateKey(pem);

const LF = 0x0a;
const CR = 0x0d;
const SP = 0x20;
const TAB = 0x09;

/** Where the body starts: after the first empty line (LF LF or LF CR LF), as nodemailer's message parser finds it. */
function bodyStart(raw: Buffer): number {
  for (let i = raw.indexOf(LF); i !== -1; i = raw.indexOf(LF, i + 1)) {
    const next = raw.indexOf(LF, i + 1);
    if (next === -1) break;
    if (next === i + 1 || (next === i + 2 && raw[i + 1] === CR)) return next + 1;
  }
  return raw.length;
}

/**
 * The base64 SHA-256 of the body's relaxed canonicalization (RFC 6376 §3.4.4), byte for byte what
 * nodemailer's RelaxedBody hashes: whitespace at a line's end dropped, runs of it within a line one
 * space, every line ending CRLF, empty lines at the end ignored, a non-empty body ending with CRLF.
 */
export function relaxedBodyHash(body: Buffer): string {
  const out = Buffer.allocUnsafe(body.length * 2 + 2);
  let o = 0;
  let content = false;
  let wsp = false;
  let cr = false;
  let empty = 0;
  const emit = (c: number) => {
    if (!content) {
      // Empty lines followed by content are part of the body.
      for (; empty > 0; empty--) {
        out[o++] = CR;
        out[o++] = LF;
      }
      content = true;
    }
    if (wsp) {
      out[o++] = SP;
      wsp = false;
    }
    out[o++] = c;
  };
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c === LF) {
      if (content) {
        out[o++] = CR;
        out[o++] = LF;
        content = false;
      } else empty += 1;
      wsp = false;
      cr = false;
      continue;
    }
    // A CR not followed by LF is content.
    if (cr) {
      emit(CR);
      cr = false;
    }
    if (c === CR) cr = true;
    else if (c === SP || c === TAB) wsp = true;
    else emit(c);
  }
  if (cr) emit(CR);
  if (content) {
    out[o++] = CR;
    out[o++] = LF;
  }
  return createHash('sha256').update(out.subarray(0, o)).digest('base64');
}

/** A tag value as nodemailer writes it: no control characters, DEL, `;` or `=` (none can close the tag). */
const tagValue = (v: string) =>
  Array.from(v)
    .filter((c) => c > '\x1f' && c !== '\x7f' && c !== ';' && c !== '=')
    .join('');

/** The RSA signature of `data` (SHA-256, PKCS#1 v1.5), made on libuv's thread pool, not the event loop. */
const rsaSha256 = (data: Buffer, key: KeyObject) =>
  new Promise<Buffer>((resolve, reject) =>
    rsaSign('sha256', data, key, (err, sig) => (err ? reject(err) : resolve(sig))),
  );

/**
 * Prepends a DKIM-Signature (rsa-sha256, relaxed/relaxed) to `raw`. The bytes are all in memory, so this does
 * at once what nodemailer's streaming signer does over several turns of the event loop, with its header
 * parsing and header canonicalization, and gives the same bytes (an RSA PKCS#1 v1.5 signature is
 * deterministic). The signature itself, the costliest step of a delivery, runs on the thread pool, so a
 * worker delivering a batch signs one message while it talks SMTP for the others. A key that cannot sign
 * is an error here, never a silently unsigned message.
 */
export async function signDkim(raw: Buffer, key: DkimKey): Promise<Buffer> {
  const start = bodyStart(raw);
  // The parser's own header splitting (it reads nothing but `rawHeaders`), without a stream around it.
  const headers = MessageParser.prototype.parseHeaders.call({ rawHeaders: raw.subarray(0, start) } as MessageParser);
  const signed = signHeaders.relaxedHeaders(headers, SIGNED_HEADERS);
  const tags = [
    'v=1',
    'a=rsa-sha256',
    'c=relaxed/relaxed',
    `d=${normalizeDomain(tagValue(key.domain), false)}`,
    'q=dns/txt',
    `s=${tagValue(key.selector)}`,
    `bh=${relaxedBodyHash(raw.subarray(start))}`,
    `h=${tagValue(signed.fieldNames)}`,
  ].join('; ');
  const field = `${foldLines(`DKIM-Signature: ${tags}`, 76)};\r\n b=`;
  // The signature covers the header itself with an empty b=, canonicalized like the others.
  const own = signHeaders.relaxedHeaders([{ key: 'dkim-signature', line: field }], 'dkim-signature').headers;
  let signature: string;
  try {
    signature = (await rsaSha256(Buffer.from(signed.headers + own.slice(0, -2), 'latin1'), key.privateKey)).toString(
      'base64',
    );
  } catch {
    throw new Error(`DKIM signing for ${key.domain} failed (the key cannot sign)`);
  }
  return Buffer.concat([Buffer.from(`${field}${foldSignature(signature)}\r\n`, 'latin1'), raw]);
}

/** The b= value folded as nodemailer folds it: 73 characters on the tag's line, then 75 per continuation line. */
function foldSignature(b64: string): string {
  const lines = [b64.slice(0, 73)];
  for (let i = 73; i < b64.length; i += 75) lines.push(b64.slice(i, i + 75));
  return lines.join('\r\n ');
}
