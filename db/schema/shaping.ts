import { doublePrecision, index, integer, jsonb, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/** A SetConfig automation action in force on a site: the limit's new value until `until`. */
export type SiteOverride = { value: string; until: number; cause: string };

/**
 * Traffic shaping state per destination site (docs/deliverability.md), shared by every worker: the
 * message token bucket, the new-connection token bucket, the suspension in force and SetConfig
 * overrides. `limits` and `domains` are what the last worker to touch the site saw (for the listing).
 */
export const shapingSites = pgTable('shaping_sites', {
  site: text('site').primaryKey(),
  msgTokens: doublePrecision('msg_tokens').notNull(),
  msgAt: ms('msg_at').notNull(),
  connTokens: doublePrecision('conn_tokens').notNull(),
  connAt: ms('conn_at').notNull(),
  suspendedUntil: ms('suspended_until'),
  suspendCause: text('suspend_cause'),
  overrides: jsonb('overrides').$type<Record<string, SiteOverride>>().notNull().default({}),
  limits: jsonb('limits').$type<Record<string, unknown>>(),
  domains: jsonb('domains').$type<string[]>().notNull().default([]),
  updatedAt: ms('updated_at').notNull(),
});

/** One open SMTP connection to a site: a slot of its connection_limit, given back on close or when it expires (a crashed worker). */
export const shapingLeases = pgTable(
  'shaping_leases',
  {
    id: text('id').primaryKey(),
    site: text('site').notNull(),
    holder: text('holder').notNull(),
    expiresAt: ms('expires_at').notNull(),
  },
  (t) => [index('shaping_leases_site_idx').on(t.site, t.expiresAt)],
);

/** Every action an automation rule took (a suspension or a SetConfig), with the answer that caused it. */
export const shapingActions = pgTable(
  'shaping_actions',
  {
    id: text('id').primaryKey(),
    site: text('site').notNull(),
    action: text('action').notNull(),
    rule: text('rule').notNull(),
    cause: text('cause').notNull(),
    createdAt: ms('created_at').notNull(),
    expiresAt: ms('expires_at').notNull(),
  },
  (t) => [
    index('shaping_actions_site_idx').on(t.site, t.expiresAt),
    index('shaping_actions_expires_idx').on(t.expiresAt),
  ],
);

/**
 * A sending domain's warm-up plan (docs/deliverability.md, Warm-up): `schedule[day]` messages per
 * destination site on each day; its workflow (`warmup-<domain id>`) moves `day` on every `dayMs`.
 */
export const warmupPlans = pgTable('warmup_plans', {
  domainId: text('domain_id').primaryKey(),
  userId: text('user_id').notNull(),
  schedule: jsonb('schedule').$type<number[]>().notNull(),
  dayMs: ms('day_ms').notNull(),
  day: integer('day').notNull(),
  startedAt: ms('started_at').notNull(),
  dayStartedAt: ms('day_started_at').notNull(),
  completedAt: ms('completed_at'),
});

/** Messages a warming domain sent to one site on one day of its plan. */
export const warmupCounts = pgTable(
  'warmup_counts',
  {
    domainId: text('domain_id').notNull(),
    site: text('site').notNull(),
    day: integer('day').notNull(),
    sent: integer('sent').notNull(),
  },
  (t) => [primaryKey({ columns: [t.domainId, t.site, t.day] })],
);
