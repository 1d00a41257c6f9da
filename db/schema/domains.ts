import { sql } from 'drizzle-orm';
import { boolean, doublePrecision, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/**
 * A DKIM key set as both key tables hold it (a domain's row and SERVICE_DOMAIN's row, `service_domains`):
 * the key that signs, and during a rotation (docs/domains.md) the next key and the previous one.
 */
export const dkimKeyColumns = () => ({
  dkimSelector: text('dkim_selector').notNull(),
  dkimPublicKey: text('dkim_public_key').notNull(),
  dkimPrivateKeySealed: text('dkim_private_key_sealed').notNull(),
  /** The next key, published but not yet signing. */
  dkimNextSelector: text('dkim_next_selector'),
  dkimNextPublicKey: text('dkim_next_public_key'),
  dkimNextPrivateKeySealed: text('dkim_next_private_key_sealed'),
  /** The key signing stopped with at the last switch, still published for the grace period. */
  dkimPrevSelector: text('dkim_prev_selector'),
  dkimPrevPublicKey: text('dkim_prev_public_key'),
  /** When signing last switched to a new key (the scheduled rotation counts from it, else from created_at). */
  dkimRotatedAt: ms('dkim_rotated_at'),
});

/**
 * Domains (`dom_`). The SPEC.md row fields, plus internal ones never shown: the DKIM key pair (private
 * key sealed), whether outbound sending is enabled with the provider, and whether we host its DNS.
 */
export const domains = pgTable(
  'domains',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    domain: text('domain').notNull(),
    status: text('status', { enum: ['pending', 'verified', 'failed'] }).notNull(),
    mxVerified: integer('mx_verified').notNull().default(0),
    spfVerified: integer('spf_verified').notNull().default(0),
    dkimVerified: integer('dkim_verified').notNull().default(0),
    dmarcVerified: integer('dmarc_verified').notNull().default(0),
    zeroRetention: integer('zero_retention').notNull().default(0),
    trackOpens: integer('track_opens').notNull().default(0),
    encPublicKey: text('enc_public_key'),
    encKeyAlg: text('enc_key_alg'),
    encFingerprint: text('enc_fingerprint'),
    encFormat: text('enc_format'),
    provider: text('provider').notNull(),
    emailProviderId: text('email_provider_id'),
    dnsTokens: text('dns_tokens'),
    lastCheckedAt: ms('last_checked_at'),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
    trackingWebhookUrl: text('tracking_webhook_url'),
    webhookEvents: text('webhook_events'),
    ...dkimKeyColumns(),
    sendingEnabled: boolean('sending_enabled').notNull().default(false),
    hosted: boolean('hosted').notNull().default(false),
    /** Health streak of the latest webhook deliveries (SPEC.md webhookStatus). */
    webhookHealth: jsonb('webhook_health').$type<Record<string, unknown>>(),
    /** 1 once the row's own MX host (or, as an alternative proof, the account's `_svc-verify` TXT token) was seen; hosted domains at creation. */
    ownershipVerified: integer('ownership_verified').notNull().default(0),
    /** The label of the row's own MX host, `<mx_token>.mx.<SERVICE_DOMAIN>`: random per row, so only the owner's published MX verifies it. */
    mxToken: text('mx_token').notNull(),
    /** Set when the last DNS check could not read a record (timeout, SERVFAIL): the previous state was kept. */
    lastCheckError: text('last_check_error'),
    /** Set while the complaint guard (or an operator) holds the domain's broadcasts and sequences; transactional mail goes on. */
    bulkPausedAt: ms('bulk_paused_at'),
    /** Why the domain's bulk mail is paused (the rate, the window and the threshold), shown with `bulkPausedAt`. */
    bulkPausedReason: text('bulk_paused_reason'),
    /** `enforced`: the domain's mail leaves only over verified TLS (docs/transport-policy.md); else `opportunistic`. */
    tls: text('tls', { enum: ['opportunistic', 'enforced'] })
      .notNull()
      .default('opportunistic'),
    /** Set when `email_provider_id` was chosen (a paid plan at creation) or assigned by an operator, not the platform default. */
    egressPinned: boolean('egress_pinned').notNull().default(false),
    /** Inbound policy (docs/inbound-policy.md): rspamd score at or above which mail is held (quarantine); null: never. */
    spamHoldScore: doublePrecision('spam_hold_score'),
    /** The score at or above which mail is refused `550 5.7.1` at the end of DATA; null: never. */
    spamRefuseScore: doublePrecision('spam_refuse_score'),
    /** Refuse mail whose DMARC check fails for a sender domain publishing `p=reject`. */
    refuseDmarcReject: boolean('refuse_dmarc_reject').notNull().default(false),
  },
  (t) => [
    uniqueIndex('domains_user_domain_uq').on(t.userId, t.domain),
    uniqueIndex('domains_hosted_uq')
      .on(t.domain)
      .where(sql`hosted`),
    // At most one account holds a domain verified: the database decides, not a read before the write.
    uniqueIndex('domains_verified_uq')
      .on(t.domain)
      .where(sql`status = 'verified'`),
    index('domains_domain_idx').on(t.domain),
    uniqueIndex('domains_mx_token_uq').on(t.mxToken),
  ],
);

/** Records of the hosted zones under SERVICE_DOMAIN (and of registered domains), served by the built-in DNS server. */
export const hostedDnsRecords = pgTable(
  'hosted_dns_records',
  {
    id: text('id').primaryKey(),
    domainId: text('domain_id'),
    name: text('name').notNull(),
    type: text('type').notNull(),
    value: text('value').notNull(),
    priority: integer('priority'),
    ttl: integer('ttl').notNull().default(300),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [index('hosted_dns_name_idx').on(t.name), index('hosted_dns_domain_idx').on(t.domainId)],
);

/** Domains bought through the registrar, with what was charged. */
export const domainRegistrations = pgTable(
  'domain_registrations',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    domain: text('domain').notNull(),
    registrar: text('registrar').notNull(),
    status: text('status').notNull(),
    reference: text('reference'),
    years: integer('years').notNull(),
    amount: integer('amount_cents').notNull(),
    currency: text('currency').notNull(),
    contact: jsonb('contact').$type<Record<string, string>>().notNull(),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [uniqueIndex('domain_registrations_domain_uq').on(t.domain)],
);
