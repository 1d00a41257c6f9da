import { index, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/**
 * Inbound policy per receiving domain (docs/inbound-policy.md): sender rules by address, domain and IP or
 * CIDR that block or allow mail at SMTP. The spam thresholds and the DMARC p=reject switch are columns of
 * the domain row; held mail (the quarantine) is a message row with status `held`.
 */
export const senderRules = pgTable(
  'sender_rules',
  {
    /** `sbr_…` */
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    domainId: text('domain_id').notNull(),
    /** `address` (a lowercased address), `domain` (a lowercased domain and its subdomains) or `ip` (an address or CIDR). */
    kind: text('kind', { enum: ['address', 'domain', 'ip'] }).notNull(),
    value: text('value').notNull(),
    action: text('action', { enum: ['block', 'allow'] }).notNull(),
    /** Who made it: the owner through the API, or a webhook consumer's `block-sender` reply. */
    origin: text('origin', { enum: ['api', 'webhook-reply'] })
      .notNull()
      .default('api'),
    note: text('note'),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [uniqueIndex('sender_rules_uq').on(t.domainId, t.kind, t.value), index('sender_rules_user_idx').on(t.userId)],
);
