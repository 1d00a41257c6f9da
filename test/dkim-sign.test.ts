import { generateKeyPairSync } from 'node:crypto';
import DKIM from 'nodemailer/lib/dkim';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { describe, expect, it } from 'vitest';
import { parsePrivateKey, relaxedBodyHash, signDkim, SIGNED_HEADERS, type DkimKey } from '../core/transport/dkim.js';
import { renderMessage } from '../core/transport/render.js';

/**
 * The delivery path's DKIM signer (core/transport/dkim.ts) signs the bytes in memory in one go. It must give
 * exactly what nodemailer's streaming signer gives (an RSA PKCS#1 v1.5 signature is deterministic, so the
 * bytes can be compared), and what it gives must verify.
 */
const pair = generateKeyPairSync('rsa', {
  modulusLength: 2048,
  privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  publicKeyEncoding: { type: 'spki', format: 'der' },
});
const key: DkimKey = { domain: 'sign.test', selector: 'svc1', privateKey: parsePrivateKey(pair.privateKey) };

/** nodemailer's streaming signer with the same key and header list: the reference. */
async function streamed(raw: Buffer, k: DkimKey = key): Promise<Buffer> {
  const signer = new DKIM({
    domainName: k.domain,
    keySelector: k.selector,
    privateKey: k.privateKey as unknown as string,
    headerFieldNames: SIGNED_HEADERS,
  });
  const chunks: Buffer[] = [];
  const out = signer.sign(raw);
  await new Promise<void>((resolve, reject) => {
    out.on('data', (c: Buffer) => chunks.push(c));
    out.on('end', resolve);
    out.on('error', reject);
  });
  return Buffer.concat(chunks);
}

const head = 'From: a@sign.test\r\nTo: b@rcpt.test\r\nSubject: hi\r\nMessage-ID: <1@sign.test>\r\n';
const cases: Record<string, string> = {
  'a plain message': `${head}\r\nHello\r\n`,
  'no final line break': `${head}\r\nHello`,
  'trailing whitespace and runs of it': `${head}\r\nHello  \t world \t\r\n\tindented\r\n`,
  'empty lines at the end': `${head}\r\nHello\r\n\r\n\r\n\r\n`,
  'empty lines in the middle': `${head}\r\nA\r\n\r\n\r\nB\r\n`,
  'bare LF line breaks': 'From: a@sign.test\nTo: b@rcpt.test\nSubject: lf\n\nline one\nline two  \n\n',
  'a bare CR in the body and at its end': `${head}\r\nA\rB\r\nC\r`,
  'an empty body': `${head}\r\n`,
  'only headers, no empty line': head,
  'whitespace-only lines': `${head}\r\n \t \r\nA\r\n   \r\n`,
  'folded and duplicate headers': `From: a@sign.test\r\nSubject: one\r\n two\r\nTo: b@rcpt.test\r\nTo: c@rcpt.test\r\nX-Other:  x \r\n\r\nbody\r\n`,
  'a header block ended by LF CR LF': 'From: a@sign.test\nSubject: mixed\n\r\nbody\r\n',
  'a long body line': `${head}\r\n${'word '.repeat(4000)}\r\n`,
};

describe('DKIM signing in memory', () => {
  for (const [name, text] of Object.entries(cases))
    it(`gives nodemailer's streaming signer's bytes: ${name}`, async () => {
      const raw = Buffer.from(text, 'latin1');
      const signed = await signDkim(raw, key);
      expect(signed.equals(await streamed(raw))).toBe(true);
      expect(signed.subarray(signed.length - raw.length).equals(raw)).toBe(true);
    });

  it('gives the same bytes for rendered mail (text, html, an attachment, non-ASCII) and the signature verifies', async () => {
    const { raw } = await renderMessage({
      id: 'msg_sign',
      fromAddr: 'Zoë <zoe@sign.test>',
      toAddrs: ['b@rcpt.test'],
      subject: 'Grüße — a subject long enough to be folded over more than one line of the header block',
      text: 'Héllo\n\nwith  two  spaces   \n',
      html: '<p>Héllo <b>world</b></p>',
      attachments: [{ filename: 'a.txt', contentType: 'text/plain', content: Buffer.from('attached \r\n\r\n') }],
      serviceDomain: 'svc.test',
      feedbackId: 'dom:usr:transactional:svc1234567890',
      headers: { 'List-Unsubscribe': '<https://svc.test/u/1>', 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
    });
    const signed = await signDkim(raw, key);
    expect(signed.equals(await streamed(raw))).toBe(true);
    const record = `v=DKIM1; k=rsa; p=${pair.publicKey.toString('base64')}`;
    const verdict = await dkimVerify(signed, {
      resolver: (async (name: string, rr: string) => {
        if (rr === 'TXT' && name === 'svc1._domainkey.sign.test') return [[record]];
        throw Object.assign(new Error('no record'), { code: 'ENOTFOUND' });
      }) as never,
    });
    expect(verdict.results[0]).toMatchObject({ status: { result: 'pass' } });
  });

  it('writes the d= and s= tags as nodemailer does: an IDN domain as its A-label, delimiters and control characters dropped', async () => {
    const raw = Buffer.from(cases['a plain message']!, 'latin1');
    const odd: DkimKey = { ...key, domain: 'Bücher.TEST', selector: 'sel;x=1\u0001' };
    const signed = await signDkim(raw, odd);
    expect(signed.equals(await streamed(raw, odd))).toBe(true);
    expect(signed.toString('latin1')).toMatch(/d=xn--bcher-kva\.test;\r\n q=dns\/txt; s=selx1;/);
  });

  it('hashes the relaxed body as RFC 6376 §3.4.4 says (its own examples)', () => {
    const sha = (s: string) => relaxedBodyHash(Buffer.from(s, 'latin1'));
    // " C \r\nD \t E\r\n\r\n\r\n" canonicalizes to " C\r\nD E\r\n".
    expect(sha(' C \r\nD \t E\r\n\r\n\r\n')).toBe(sha(' C\r\nD E\r\n'));
    // An empty body hashes as the empty string.
    expect(sha('')).toBe('47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=');
  });

  it('refuses to send unsigned when the key cannot make an RSA signature', async () => {
    const ed = generateKeyPairSync('ed25519').privateKey;
    await expect(signDkim(Buffer.from(cases['a plain message']!), { ...key, privateKey: ed })).rejects.toThrow(
      /DKIM signing for sign\.test failed/,
    );
  });
});
