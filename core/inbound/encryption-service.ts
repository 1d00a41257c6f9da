import { eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError, notFound } from '../errors.js';
import { domainDto, type DomainRow } from '../domains/dto.js';
import type { DomainService } from '../domains/service.js';
import type { Actor } from '../tenancy.js';
import { receivingConfigChanged } from '../mail/config-changes.js';
import { encryptForStorage, isEncKeyAlg, parseEncryptionKey } from './encryption.js';

/** What the inbound path writes to `inbound_raw`: sealed bytes when the domain has a key, the raw bytes otherwise. */
export type SealedContent = { content: Buffer; encrypted: boolean; encAlg: string | null };

/** A domain's at-rest encryption key (set, clear) and the sealing of inbound messages with it. */
export function createEncryptionService(deps: { db: Db; domains: DomainService }) {
  const d = schema.domains;

  /** Writes the four enc_* columns of a domain the actor may see; 404 when it vanished meanwhile. */
  async function writeKey(
    id: string,
    values: Pick<DomainRow, 'encPublicKey' | 'encKeyAlg' | 'encFingerprint' | 'encFormat'>,
  ) {
    const [row] = await deps.db
      .update(d)
      .set({ ...values, updatedAt: Date.now() })
      .where(eq(d.id, id))
      .returning();
    receivingConfigChanged();
    if (!row) throw notFound('Domain not found');
    return row;
  }

  return {
    /** Validates and stores the domain's public key; inbound mail is stored encrypted from then on. */
    async setKey(actor: Actor, domainId: string, publicKey: string) {
      // Ownership first, so a foreign or out-of-scope id is 404 whatever the key looks like.
      await deps.domains.load(actor, domainId);
      const key = await parseEncryptionKey(publicKey);
      const row = await writeKey(domainId, {
        encPublicKey: key.publicKey,
        encKeyAlg: key.alg,
        encFingerprint: key.fingerprint,
        encFormat: key.format,
      });
      return domainDto(row);
    },

    /** Removes the key: messages received afterwards are stored in the clear (older ones stay sealed). */
    async clearKey(actor: Actor, domainId: string) {
      await deps.domains.load(actor, domainId);
      await writeKey(domainId, { encPublicKey: null, encKeyAlg: null, encFingerprint: null, encFormat: null });
      return { ok: true as const };
    },

    /** Seals raw inbound bytes for `inbound_raw` with the domain's key; passes them through when it has none. */
    async sealForDomain(domain: Pick<DomainRow, 'encPublicKey' | 'encKeyAlg'>, raw: Buffer): Promise<SealedContent> {
      if (!domain.encPublicKey && !domain.encKeyAlg) return { content: raw, encrypted: false, encAlg: null };
      // Half a key or an unknown algorithm must never fall back to storing plaintext.
      if (!domain.encPublicKey || !isEncKeyAlg(domain.encKeyAlg)) {
        throw new AppError(
          500,
          'encryption_misconfigured',
          "The domain's encryption key is incomplete; the message was not stored",
          true,
        );
      }
      const content = await encryptForStorage({ alg: domain.encKeyAlg, publicKey: domain.encPublicKey }, raw);
      return { content, encrypted: true, encAlg: domain.encKeyAlg };
    },
  };
}
export type EncryptionService = ReturnType<typeof createEncryptionService>;
