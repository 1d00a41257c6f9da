import { createHash, generateKeyPairSync, randomBytes, webcrypto, type KeyObject } from 'node:crypto';
import * as asn1js from 'asn1js';
import { eq } from 'drizzle-orm';
import * as openpgp from 'openpgp';
import * as pkijs from 'pkijs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decryptRsaOaepEnvelope, encryptForStorage, parseEncryptionKey } from '../core/inbound/encryption.js';
import { schema } from '../db/index.js';
import { startStack, type TestStack } from './helpers/stack.js';

const sha256Hex = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const spkiPem = (k: KeyObject) => k.export({ type: 'spki', format: 'pem' }).toString();
const pkcs8Der = (k: KeyObject) => k.export({ type: 'pkcs8', format: 'der' });
// Headers, CRLFs and bytes that are not UTF-8: the round trip must be byte-exact.
const RAW = Buffer.concat([
  Buffer.from('From: a@example.com\r\nTo: b@enc.example\r\nSubject: secret\r\n\r\nhello\r\n'),
  randomBytes(256),
]);

/** A self-signed X.509 certificate for an RSA key, built with pkijs. */
async function selfSignedCert(key: { publicKey: KeyObject; privateKey: KeyObject }, notAfter: Date): Promise<string> {
  const cert = new pkijs.Certificate();
  cert.version = 2;
  cert.serialNumber = new asn1js.Integer({ value: Date.now() });
  const cn = () =>
    new pkijs.AttributeTypeAndValue({ type: '2.5.4.3', value: new asn1js.Utf8String({ value: 'enc test' }) });
  cert.issuer.typesAndValues.push(cn());
  cert.subject.typesAndValues.push(cn());
  cert.notBefore.value = new Date(Date.now() - 3_600_000);
  cert.notAfter.value = notAfter;
  cert.subjectPublicKeyInfo = pkijs.PublicKeyInfo.fromBER(key.publicKey.export({ type: 'spki', format: 'der' }));
  const signer = await webcrypto.subtle.importKey(
    'pkcs8',
    pkcs8Der(key.privateKey),
    { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
    false,
    ['sign'],
  );
  await cert.sign(signer, 'SHA-256');
  const b64 = Buffer.from(cert.toSchema().toBER(false))
    .toString('base64')
    .replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN CERTIFICATE-----\n${b64}-----END CERTIFICATE-----\n`;
}

/** Opens the stored S/MIME entity: MIME headers, base64 CMS EnvelopedData, decrypted with the private key. */
async function openSmime(entity: Buffer, certPem: string, privateKey: KeyObject) {
  const text = entity.toString('utf8');
  const split = text.indexOf('\r\n\r\n');
  const headers = text.slice(0, split);
  const info = pkijs.ContentInfo.fromBER(Buffer.from(text.slice(split + 4), 'base64'));
  expect(info.contentType).toBe(pkijs.ContentInfo.ENVELOPED_DATA);
  const enveloped = new pkijs.EnvelopedData({ schema: info.content });
  const recipientCertificate = pkijs.Certificate.fromBER(
    Buffer.from(certPem.replace(/-----[^-]+-----|\s/g, ''), 'base64'),
  );
  const plain = await enveloped.decrypt(0, { recipientCertificate, recipientPrivateKey: pkcs8Der(privateKey) });
  const ktri = enveloped.recipientInfos[0]!.value as pkijs.KeyTransRecipientInfo;
  return {
    headers,
    plain: Buffer.from(plain),
    keyAlg: ktri.keyEncryptionAlgorithm.algorithmId,
    contentAlg: enveloped.encryptedContentInfo.contentEncryptionAlgorithm.algorithmId,
  };
}

const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
let certPem: string;
let pgp: { publicKey: string; privateKey: string };

beforeAll(async () => {
  certPem = await selfSignedCert(rsa, new Date(Date.now() + 86_400_000));
  pgp = await openpgp.generateKey({ userIDs: [{ email: 'enc@example.com' }], format: 'armored' });
});

async function rejection(text: string) {
  const err = await parseEncryptionKey(text).then(
    () => undefined,
    (e: unknown) => e as { status: number; code: string; message: string },
  );
  expect(err, 'should be rejected').toBeDefined();
  return err!;
}

describe('parseEncryptionKey and encryptForStorage', () => {
  it('RSA-OAEP-256: fingerprint is sha256 of the SPKI DER; the envelope opens with the private key', async () => {
    const parsed = await parseEncryptionKey(`\n${spkiPem(rsa.publicKey)}\n`);
    expect(parsed).toMatchObject({ alg: 'RSA-OAEP-256', format: null, publicKey: spkiPem(rsa.publicKey) });
    expect(parsed.fingerprint).toBe(sha256Hex(rsa.publicKey.export({ type: 'spki', format: 'der' })));
    const sealed = await encryptForStorage(parsed, RAW);
    const envelope = JSON.parse(sealed.toString('utf8'));
    expect(envelope).toMatchObject({ v: 1, keyAlg: 'RSA-OAEP-256', fp: parsed.fingerprint, enc: 'A256GCM' });
    expect(Buffer.from(envelope.iv, 'base64')).toHaveLength(12);
    expect(sealed.includes(Buffer.from('secret'))).toBe(false);
    expect(
      decryptRsaOaepEnvelope(sealed, rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()).equals(RAW),
    ).toBe(true);
    // WebCrypto's RSA-OAEP/SHA-256 fixes MGF1-SHA-256 too: it unwraps the same 32-byte content key.
    const unwrapKey = await webcrypto.subtle.importKey(
      'pkcs8',
      pkcs8Der(rsa.privateKey),
      { name: 'RSA-OAEP', hash: 'SHA-256' },
      false,
      ['decrypt'],
    );
    expect(
      Buffer.from(
        await webcrypto.subtle.decrypt({ name: 'RSA-OAEP' }, unwrapKey, Buffer.from(envelope.wrappedKey, 'base64')),
      ),
    ).toHaveLength(32);
  });

  it('PGP: fingerprint is the OpenPGP fingerprint; the armored message decrypts to the exact bytes', async () => {
    const parsed = await parseEncryptionKey(pgp.publicKey);
    expect(parsed).toMatchObject({ alg: 'PGP', format: 'pgp' });
    expect(parsed.fingerprint).toBe((await openpgp.readKey({ armoredKey: pgp.publicKey })).getFingerprint());
    expect(parsed.publicKey).toMatch(/^-----BEGIN PGP PUBLIC KEY BLOCK-----/);
    const sealed = await encryptForStorage(parsed, RAW);
    expect(sealed.toString('utf8')).toMatch(/^-----BEGIN PGP MESSAGE-----/);
    const { data } = await openpgp.decrypt({
      message: await openpgp.readMessage({ armoredMessage: sealed.toString('utf8') }),
      decryptionKeys: await openpgp.readPrivateKey({ armoredKey: pgp.privateKey }),
      format: 'binary',
    });
    expect(Buffer.from(data).equals(RAW)).toBe(true);
  });

  it('S/MIME: fingerprint is sha256 of the certificate DER; the pkcs7-mime entity decrypts to the exact bytes', async () => {
    const parsed = await parseEncryptionKey(certPem);
    expect(parsed).toMatchObject({ alg: 'S/MIME', format: 'smime' });
    expect(parsed.fingerprint).toBe(sha256Hex(Buffer.from(certPem.replace(/-----[^-]+-----|\s/g, ''), 'base64')));
    const opened = await openSmime(await encryptForStorage(parsed, RAW), parsed.publicKey, rsa.privateKey);
    expect(opened.headers).toContain('Content-Type: application/pkcs7-mime; smime-type=enveloped-data');
    expect(opened.headers).toContain('Content-Transfer-Encoding: base64');
    expect(opened.keyAlg).toBe('1.2.840.113549.1.1.7'); // id-RSAES-OAEP
    expect(opened.contentAlg).toBe('2.16.840.1.101.3.4.1.42'); // aes256-CBC
    expect(opened.plain.equals(RAW)).toBe(true);
  });

  it('refuses garbage, private keys, weak or non-RSA keys and expired certificates with invalid_encryption_key', async () => {
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const cases: [string, RegExp][] = [
      ['not a key at all', /Expected a PEM SPKI/],
      ['-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----', /could not be parsed/],
      [rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), /private key/],
      [rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString(), /private key/],
      [pgp.privateKey, /private key/],
      [spkiPem(small.publicKey), /1024-bit.*2048/],
      [spkiPem(ec.publicKey), /RSA key/],
      [await selfSignedCert(rsa, new Date(Date.now() - 60_000)), /expired/],
      [await selfSignedCert(small, new Date(Date.now() + 86_400_000)), /1024-bit/],
    ];
    for (const [text, message] of cases) {
      const err = await rejection(text);
      expect(err).toMatchObject({ status: 400, code: 'invalid_encryption_key' });
      expect(err.message).toMatch(message);
      expect(err.message).not.toContain('-----');
    }
  });
});

describe('PUT/DELETE /api/domains/:id/encryption', () => {
  let stack: TestStack;
  let token: string;
  let domainId: string;
  const path = () => `/api/domains/${domainId}/encryption`;
  const rowOf = async (id: string) =>
    (await stack.service.core.db.select().from(schema.domains).where(eq(schema.domains.id, id)))[0]!;

  beforeAll(async () => {
    stack = await startStack({ SERVICE_DOMAIN: 'enc.svc.test' });
    token = (
      await stack.api('POST', '/api/auth/signup', { body: { email: 'enc@example.com', password: 'encryption pw' } })
    ).body.token;
    domainId = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'enc' } })).body.domain
      .id;
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('sets each kind of key on the row, and clears it', async () => {
    for (const [publicKey, alg, format] of [
      [certPem, 'S/MIME', 'smime'],
      [pgp.publicKey, 'PGP', 'pgp'],
      [spkiPem(rsa.publicKey), 'RSA-OAEP-256', null],
    ] as const) {
      const parsed = await parseEncryptionKey(publicKey);
      const res = await stack.api('PUT', path(), { token, body: { publicKey } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.domain).toMatchObject({
        id: domainId,
        enc_key_alg: alg,
        enc_format: format,
        enc_fingerprint: parsed.fingerprint,
        enc_public_key: parsed.publicKey,
      });
    }
    expect((await stack.api('GET', `/api/domains/${domainId}`, { token })).body.domain.enc_key_alg).toBe(
      'RSA-OAEP-256',
    );
    expect((await stack.api('DELETE', path(), { token })).body).toEqual({ ok: true });
    const { domain } = (await stack.api('GET', `/api/domains/${domainId}`, { token })).body;
    expect(domain).toMatchObject({ enc_public_key: null, enc_key_alg: null, enc_fingerprint: null, enc_format: null });
  });

  it('answers a bad key with a JSON 400 that does not echo it', async () => {
    const privatePem = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const res = await stack.api('PUT', path(), { token, body: { publicKey: privatePem } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: expect.any(String), code: 'invalid_encryption_key' });
    expect(res.body.error).not.toContain('PRIVATE');
    expect((await rowOf(domainId)).encPublicKey).toBeNull();
  });

  it('is 404 for another account and for a key scoped to another domain', async () => {
    const other = (
      await stack.api('POST', '/api/auth/signup', {
        body: { email: 'enc-other@example.com', password: 'other account pw' },
      })
    ).body.token;
    expect((await stack.api('PUT', path(), { token: other, body: { publicKey: spkiPem(rsa.publicKey) } })).status).toBe(
      404,
    );
    expect((await stack.api('DELETE', path(), { token: other })).status).toBe(404);
    const second = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: 'enc-two' } })).body
      .domain.id;
    const { key } = (await stack.api('POST', '/api/keys/scoped', { token, body: { domainId: second } })).body;
    expect(
      (await stack.api('PUT', path(), { token: key, body: { publicKey: spkiPem(rsa.publicKey) } })).body.code,
    ).toBe('not_found');
    expect(
      (await stack.api('PUT', `/api/domains/${second}/encryption`, { token: key, body: { publicKey: pgp.publicKey } }))
        .status,
    ).toBe(200);
    expect((await rowOf(domainId)).encPublicKey).toBeNull();
  });

  it('sealForDomain encrypts for a keyed domain and passes an unkeyed one through', async () => {
    const { encryption } = stack.service.core;
    expect(await encryption.sealForDomain(await rowOf(domainId), RAW)).toEqual({
      content: RAW,
      encrypted: false,
      encAlg: null,
    });
    await stack.api('PUT', path(), { token, body: { publicKey: spkiPem(rsa.publicKey) } });
    const sealed = await encryption.sealForDomain(await rowOf(domainId), RAW);
    expect(sealed).toMatchObject({ encrypted: true, encAlg: 'RSA-OAEP-256' });
    expect(
      decryptRsaOaepEnvelope(sealed.content, rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()).equals(
        RAW,
      ),
    ).toBe(true);
    await expect(encryption.sealForDomain({ encPublicKey: 'x', encKeyAlg: null }, RAW)).rejects.toMatchObject({
      code: 'encryption_misconfigured',
    });
  });
});
