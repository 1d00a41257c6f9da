import { createPrivateKey, type KeyObject } from 'node:crypto';
import DKIM from 'nodemailer/lib/dkim';

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

/**
 * Prepends a DKIM-Signature (rsa-sha256, relaxed/relaxed) to `raw`, using nodemailer's signer, which
 * takes a parsed key. A key that cannot sign is an error here, never a silently unsigned message.
 */
export async function signDkim(raw: Buffer, key: DkimKey): Promise<Buffer> {
  const signer = new DKIM({
    domainName: key.domain,
    keySelector: key.selector,
    privateKey: key.privateKey as unknown as string,
    headerFieldNames: SIGNED_HEADERS,
  });
  const chunks: Buffer[] = [];
  const out = signer.sign(raw);
  await new Promise<void>((resolve, reject) => {
    out.on('data', (c: Buffer) => chunks.push(c));
    out.on('end', resolve);
    out.on('error', reject);
  });
  const signed = Buffer.concat(chunks);
  if (!signed.subarray(0, 15).toString('latin1').startsWith('DKIM-Signature:'))
    throw new Error(`DKIM signing for ${key.domain} failed (the key cannot sign)`);
  return signed;
}
