import { generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';

const generate = promisify(generateKeyPair);

/** A fresh 2048-bit RSA DKIM key pair: PKCS#8 PEM private key and the base64 SPKI DER for the `p=` tag. */
export async function generateDkimKey(): Promise<{ privateKeyPem: string; publicKeyB64: string }> {
  const { privateKey, publicKey } = await generate('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'der' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  return { privateKeyPem: privateKey as unknown as string, publicKeyB64: (publicKey as unknown as Buffer).toString('base64') };
}

export const dkimRecordValue = (publicKeyB64: string) => `v=DKIM1; k=rsa; p=${publicKeyB64}`;
