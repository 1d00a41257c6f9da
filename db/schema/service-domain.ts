import { pgTable, text } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/**
 * The service's own mail domain (SERVICE_DOMAIN): one row per domain name, created at first boot, holding
 * the DKIM key that signs system mail (verification, sign-in links). The private key is sealed like
 * customer keys, so it is lost without SECRET_KEY.
 */
export const serviceDomains = pgTable('service_domains', {
  domain: text('domain').primaryKey(),
  dkimSelector: text('dkim_selector').notNull(),
  dkimPublicKey: text('dkim_public_key').notNull(),
  dkimPrivateKeySealed: text('dkim_private_key_sealed').notNull(),
  createdAt: ms('created_at').notNull(),
  /** A rotation under way (docs/domains.md, DKIM key rotation): the next key, published before it signs. */
  dkimNextSelector: text('dkim_next_selector'),
  dkimNextPublicKey: text('dkim_next_public_key'),
  dkimNextPrivateKeySealed: text('dkim_next_private_key_sealed'),
  /** The key signing moved off, still published for the grace period. */
  dkimPrevSelector: text('dkim_prev_selector'),
  dkimPrevPublicKey: text('dkim_prev_public_key'),
  dkimRotatedAt: ms('dkim_rotated_at'),
});
