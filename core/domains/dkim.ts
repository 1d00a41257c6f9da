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
  return {
    privateKeyPem: privateKey as unknown as string,
    publicKeyB64: (publicKey as unknown as Buffer).toString('base64'),
  };
}

export const dkimRecordValue = (publicKeyB64: string) => `v=DKIM1; k=rsa; p=${publicKeyB64}`;

/** A DKIM key set as both key tables hold it (db/schema/domains.ts, dkimKeyColumns): signing, next and previous key. */
export type DkimKeys = {
  dkimSelector: string;
  dkimPublicKey: string;
  dkimPrivateKeySealed: string;
  dkimNextSelector: string | null;
  dkimNextPublicKey: string | null;
  dkimNextPrivateKeySealed: string | null;
  dkimPrevSelector: string | null;
  dkimPrevPublicKey: string | null;
  dkimRotatedAt: number | null;
};

/** A key owner's row as a rotation reads it: its keys, the domain they sign for, whether its zone is served here. */
export type KeyHolder = DkimKeys & { domain: string; hosted: boolean };

/**
 * Whose DKIM key a rotation turns (docs/domains.md): a customer domain's row or SERVICE_DOMAIN's. The steps
 * (core/domains/rotation-steps.ts) are the same for both; each owner reads and writes its own row.
 */
export interface KeyOwner<R extends KeyHolder = KeyHolder> {
  /** The keys now, read fresh; undefined once the domain is deleted. */
  read(): Promise<R | undefined>;
  /** Stores key columns; with `ifNoNext`, only while no next key waits (the first writer wins). The row written. */
  write(values: Partial<DkimKeys>, ifNoNext?: boolean): Promise<R | undefined>;
  /** After a write: publishes the row's keys where this service serves the zone (a hosted domain's records). */
  publish(row: R): Promise<void>;
}

/** A rotation is under way: a key waiting to be published, or the old key in its grace period. */
export const rotationUnderWay = (keys: DkimKeys) => Boolean(keys.dkimNextSelector || keys.dkimPrevSelector);

/** The selector after `current`: `svc1` → `svc2`; any other name starts the series at `svc2`. */
export function nextSelector(current: string, previous?: string | null): string {
  const n = (s: string | null | undefined) => Number(/^svc(\d{1,9})$/.exec(s ?? '')?.[1] ?? 1);
  return `svc${Math.max(n(current), n(previous)) + 1}`;
}
