import { pgTable, text } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';
import { dkimKeyColumns } from './domains.js';

/**
 * The service's own mail domain (SERVICE_DOMAIN): one row per domain name, created at first boot, holding
 * the DKIM key that signs system mail (verification, sign-in links). The private key is sealed like
 * customer keys, so it is lost without SECRET_KEY.
 */
export const serviceDomains = pgTable('service_domains', {
  domain: text('domain').primaryKey(),
  createdAt: ms('created_at').notNull(),
  ...dkimKeyColumns(),
});
