import { index, integer, pgTable, primaryKey, text } from 'drizzle-orm/pg-core';
import { ms } from './columns.js';

/**
 * The abuse guards' fixed windows (core/rate-limit.ts createSharedRateLimiter): one row per (limiter, key),
 * shared by every API process, so N processes behind a balancer still allow one window's worth. Expired
 * rows are pruned as the limiter goes.
 */
export const rateLimitWindows = pgTable(
  'rate_limit_windows',
  {
    /** Which limiter: `login`, `login_ip`, `create`, `mail`, `oauth_register`. */
    name: text('name').notNull(),
    key: text('key').notNull(),
    windowStart: ms('window_start').notNull(),
    count: integer('count').notNull(),
  },
  (t) => [primaryKey({ columns: [t.name, t.key] }), index('rate_limit_windows_start_idx').on(t.name, t.windowStart)],
);
