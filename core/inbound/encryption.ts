import {
  constants,
  createCipheriv,
  createDecipheriv,
  createHash,
  createPublicKey,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
  X509Certificate,
  type KeyObject,
} from 'node:crypto';
import * as openpgp from 'openpgp';
import * as pkijs from 'pkijs';
import { badRequest } from '../errors.js';

/**
 * At-rest encryption of stored inbound mail (SPEC.md, Domain: enc_*). A domain holds only a public key,
 * so the service can seal a message but never read it back; the account keeps the private key.
 */
export type EncKeyAlg = 'RSA-OAEP-256' | 'PGP' | 'S/MIME';
export type ParsedEncryptionKey = {
  alg: EncKeyAlg;
  format: 'pgp' | 'smime' | null;
  /** sha256 of the SPKI or certificate DER (lowercase hex), or the OpenPGP fingerprint. */
  fingerprint: string;
  /** What to store in enc_public_key: normalized PEM, or the re-armored OpenPGP public key. */
  publicKey: string;
};

const MIN_RSA_BITS = 2048;
const ENC_ALGS: readonly string[] = ['RSA-OAEP-256', 'PGP', 'S/MIME'];
const invalidKey = (message: string) => badRequest(message, 'invalid_encryption_key');
const sha256Hex = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** True for the three enc_key_alg values SPEC.md allows. */
export const isEncKeyAlg = (alg: string | null | undefined): alg is EncKeyAlg => ENC_ALGS.includes(alg ?? '');

/** Detects the kind of an uploaded public key, checks it can encrypt, and computes its fingerprint; 400 otherwise. */
export async function parseEncryptionKey(text: string): Promise<ParsedEncryptionKey> {
  const pem = text.trim();
  // Messages are fixed strings: library errors may quote the input, and key material is never echoed back.
  if (/-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----/.test(pem)) {
    throw invalidKey('This is a private key: upload only the public key (keep the private key to yourself)');
  }
  if (pem.startsWith('-----BEGIN PUBLIC KEY-----')) return parseSpki(pem);
  if (pem.startsWith('-----BEGIN CERTIFICATE-----')) return parseCertificate(pem);
  if (pem.startsWith('-----BEGIN PGP PUBLIC KEY BLOCK-----')) return parsePgpKey(pem);
  throw invalidKey(
    'Expected a PEM SPKI RSA public key (BEGIN PUBLIC KEY), an armored OpenPGP public key or a PEM X.509 certificate',
  );
}

function checkRsa(key: KeyObject, what: string): void {
  // rsa-pss keys are restricted to signing, so only plain rsaEncryption keys qualify.
  if (key.asymmetricKeyType !== 'rsa')
    throw invalidKey(`${what} must hold an RSA key (got ${key.asymmetricKeyType ?? 'an unknown type'})`);
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (bits < MIN_RSA_BITS)
    throw invalidKey(`${what} is a ${bits}-bit RSA key; at least ${MIN_RSA_BITS} bits are required`);
}

function parseSpki(pem: string): ParsedEncryptionKey {
  let key: KeyObject;
  try {
    key = createPublicKey({ key: pem, format: 'pem' });
  } catch {
    throw invalidKey('The PEM public key could not be parsed');
  }
  checkRsa(key, 'The public key');
  const der = key.export({ type: 'spki', format: 'der' });
  return {
    alg: 'RSA-OAEP-256',
    format: null,
    fingerprint: sha256Hex(der),
    publicKey: key.export({ type: 'spki', format: 'pem' }).toString(),
  };
}

function parseCertificate(pem: string): ParsedEncryptionKey {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(pem);
    pkijs.Certificate.fromBER(cert.raw); // encryption parses it with pkijs later: refuse now what it cannot read
  } catch {
    throw invalidKey('The X.509 certificate could not be parsed');
  }
  checkRsa(cert.publicKey, 'The certificate');
  const now = Date.now();
  if (Date.parse(cert.validTo) < now)
    throw invalidKey(`The certificate expired on ${new Date(cert.validTo).toISOString()}`);
  if (Date.parse(cert.validFrom) > now)
    throw invalidKey(`The certificate is not valid before ${new Date(cert.validFrom).toISOString()}`);
  return { alg: 'S/MIME', format: 'smime', fingerprint: sha256Hex(cert.raw), publicKey: cert.toString() };
}

async function parsePgpKey(armoredKey: string): Promise<ParsedEncryptionKey> {
  let key: openpgp.Key;
  try {
    key = await openpgp.readKey({ armoredKey });
  } catch {
    throw invalidKey('The OpenPGP public key could not be parsed');
  }
  if (key.isPrivate())
    throw invalidKey('This is a private key: upload only the public key (keep the private key to yourself)');
  try {
    // Throws when no subkey or primary key may encrypt now (signing-only, expired, revoked, too weak).
    await key.getEncryptionKey();
  } catch {
    throw invalidKey('The OpenPGP key has no valid encryption key (signing-only, expired, revoked or too weak)');
  }
  return { alg: 'PGP', format: 'pgp', fingerprint: key.getFingerprint().toLowerCase(), publicKey: key.armor() };
}

/** Seals raw message bytes for storage with the domain's public key (RSA-OAEP-256 envelope, OpenPGP or S/MIME). */
export async function encryptForStorage(key: { alg: EncKeyAlg; publicKey: string }, raw: Buffer): Promise<Buffer> {
  switch (key.alg) {
    case 'RSA-OAEP-256':
      return encryptRsaOaepEnvelope(key.publicKey, raw);
    case 'PGP':
      return encryptPgp(key.publicKey, raw);
    case 'S/MIME':
      return encryptSmime(key.publicKey, raw);
  }
}

/**
 * The custom envelope (enc_format null), a JSON object in UTF-8, the one the official SDKs' `encrypt` and
 * `decrypt` read: `{"v":1,"keyAlg":"RSA-OAEP-256","fp","enc":"A256GCM","iv","wrappedKey","ciphertext"}`,
 * binary fields in standard base64. Each message gets a fresh random 32-byte content key (CEK) and a 12-byte
 * IV; the content is AES-256-GCM without AAD with its 16-byte tag appended to `ciphertext` (the WebCrypto
 * layout); `wrappedKey` is the CEK wrapped with RSAES-OAEP using SHA-256 and MGF1-SHA-256 (WebCrypto's
 * RSA-OAEP with SHA-256, JOSE `RSA-OAEP-256`); `fp` is the SHA-256 of the key's SPKI DER, lowercase hex
 * (the domain's `enc_fingerprint`). The SDKs' decrypt answers the content as UTF-8 text.
 */
function encryptRsaOaepEnvelope(publicKeyPem: string, raw: Buffer): Buffer {
  const cek = randomBytes(32);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', cek, iv);
  const ciphertext = Buffer.concat([cipher.update(raw), cipher.final(), cipher.getAuthTag()]);
  const publicKey = createPublicKey({ key: publicKeyPem, format: 'pem' });
  // Node's oaepHash sets the OAEP digest, and OpenSSL uses the same digest for MGF1 unless told otherwise.
  const wrapped = publicEncrypt({ key: publicKey, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, cek);
  const envelope = {
    v: 1,
    keyAlg: 'RSA-OAEP-256',
    fp: sha256Hex(publicKey.export({ type: 'spki', format: 'der' })),
    enc: 'A256GCM',
    iv: iv.toString('base64'),
    wrappedKey: wrapped.toString('base64'),
    ciphertext: ciphertext.toString('base64'),
  };
  return Buffer.from(JSON.stringify(envelope), 'utf8');
}

const GCM_TAG_BYTES = 16;

/**
 * Opens an RSA-OAEP-256 envelope with the matching private key (tests and operators' tooling); 400 if
 * malformed. Reads both layouts: the SDK one sealed now, and `{v, alg, enc, key, iv, tag, ciphertext}`
 * (the tag apart) that copies sealed before it carry.
 */
export function decryptRsaOaepEnvelope(envelope: Buffer, privateKeyPem: string): Buffer {
  let e: Record<string, unknown>;
  try {
    e = JSON.parse(envelope.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw badRequest('Not an RSA-OAEP-256 envelope (not JSON)', 'invalid_envelope');
  }
  const sdk = e.keyAlg !== undefined;
  const fields = sdk ? [e.wrappedKey, e.iv, e.ciphertext] : [e.key, e.iv, e.tag, e.ciphertext];
  if (
    e.v !== 1 ||
    (sdk ? e.keyAlg : e.alg) !== 'RSA-OAEP-256' ||
    e.enc !== 'A256GCM' ||
    !fields.every((f) => typeof f === 'string')
  ) {
    throw badRequest('Not a version 1 RSA-OAEP-256 / A256GCM envelope', 'invalid_envelope');
  }
  const [key, iv, ...rest] = (fields as string[]).map((f) => Buffer.from(f, 'base64')) as Buffer[];
  let tag: Buffer;
  let ciphertext: Buffer;
  if (sdk) {
    const all = rest[0]!;
    if (all.length < GCM_TAG_BYTES)
      throw badRequest('The envelope ciphertext is shorter than its tag', 'invalid_envelope');
    ciphertext = all.subarray(0, all.length - GCM_TAG_BYTES);
    tag = all.subarray(all.length - GCM_TAG_BYTES);
  } else {
    [tag, ciphertext] = rest as [Buffer, Buffer];
  }
  const cek = privateDecrypt(
    { key: privateKeyPem, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
    key!,
  );
  const decipher = createDecipheriv('aes-256-gcm', cek, iv!);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(ciphertext), decipher.final()]);
}

/** An armored OpenPGP message holding the raw bytes as a binary literal data packet. */
async function encryptPgp(armoredKey: string, raw: Buffer): Promise<Buffer> {
  const encryptionKeys = await openpgp.readKey({ armoredKey });
  const message = await openpgp.createMessage({ binary: new Uint8Array(raw) });
  const armored = await openpgp.encrypt({ message, encryptionKeys, format: 'armored' });
  return Buffer.from(armored, 'utf8');
}

/**
 * A CMS EnvelopedData (RFC 5652) for the certificate: RSAES-OAEP (SHA-256) key transport and AES-256-CBC
 * content encryption (RFC 8551's mandatory cipher; GCM belongs in AuthEnvelopedData, which fewer clients read),
 * wrapped as an `application/pkcs7-mime; smime-type=enveloped-data` entity so the stored bytes are a valid message.
 */
async function encryptSmime(certPem: string, raw: Buffer): Promise<Buffer> {
  const cert = pkijs.Certificate.fromBER(new X509Certificate(certPem).raw);
  const enveloped = new pkijs.EnvelopedData();
  enveloped.addRecipientByCertificate(cert, { oaepHashAlgorithm: 'SHA-256' }, 1);
  await enveloped.encrypt({ name: 'AES-CBC', length: 256 } as Algorithm, new Uint8Array(raw).buffer);
  const info = new pkijs.ContentInfo({ contentType: pkijs.ContentInfo.ENVELOPED_DATA, content: enveloped.toSchema() });
  const der = Buffer.from(info.toSchema().toBER(false));
  const body = der.toString('base64').replace(/.{1,76}/g, '$&\r\n');
  return Buffer.from(
    [
      'MIME-Version: 1.0',
      'Content-Type: application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"',
      'Content-Transfer-Encoding: base64',
      'Content-Disposition: attachment; filename="smime.p7m"',
      '',
      body,
    ].join('\r\n'),
    'utf8',
  );
}
