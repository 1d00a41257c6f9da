import { boolean, index, integer, jsonb, pgTable, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { bytea, ms } from './columns.js';

/**
 * Webhook routes (`rte_`): a domain's catch-all (`pattern` = `*`, set by PUT /api/domains/:id/webhook)
 * and address routes (exact local part, `support-*`, `*-agent`). The most specific match wins.
 */
export const routes = pgTable(
  'routes',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    domainId: text('domain_id').notNull(),
    pattern: text('pattern').notNull(),
    /** Webhook URL; empty for routes whose action is not `webhook`. */
    url: text('url').notNull(),
    /** What happens to mail matching the route: `webhook` (POST to `url`), `forward`, `store` (mailbox only) or `drop`. */
    action: text('action', { enum: ['webhook', 'forward', 'store', 'drop'] })
      .notNull()
      .default('webhook'),
    /** Forward target address for `forward`; the URL again for `webhook`. */
    destination: text('destination'),
    ackMode: text('ack_mode', { enum: ['lenient', 'ack'] })
      .notNull()
      .default('lenient'),
    secretSealed: text('secret_sealed').notNull(),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [uniqueIndex('routes_domain_pattern_uq').on(t.domainId, t.pattern), index('routes_user_idx').on(t.userId)],
);

/** The raw bytes of a stored inbound message (encrypted when the domain has a key). Absent for zero-retention domains. */
export const inboundRaw = pgTable('inbound_raw', {
  messageId: text('message_id').primaryKey(),
  content: bytea('content').notNull(),
  encrypted: boolean('encrypted').notNull().default(false),
  encAlg: text('enc_alg'),
  /**
   * The `email.received` payload, sealed with the service key. Kept for replay on ordinary domains;
   * on zero-retention and encrypted domains it exists only while deliveries are under way.
   */
  payloadSealed: text('payload_sealed'),
  createdAt: ms('created_at').notNull(),
});

/** Webhook deliveries (`dlv_`): one per (message, route) per attempt series; history is append-only. */
export const deliveries = pgTable(
  'deliveries',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    messageId: text('message_id').notNull(),
    routeId: text('route_id').notNull(),
    domainId: text('domain_id'),
    url: text('url').notNull(),
    kind: text('kind', { enum: ['inbound', 'replay', 'test', 'engagement'] }).notNull(),
    status: text('status', { enum: ['pending', 'delivered', 'failed', 'paused'] }).notNull(),
    attempts: integer('attempts').notNull().default(0),
    lastStatusCode: integer('last_status_code'),
    lastReason: text('last_reason'),
    nextRetryAt: ms('next_retry_at'),
    retryAttempts: integer('retry_attempts').notNull().default(0),
    workflowId: text('workflow_id'),
    payload: jsonb('payload').$type<Record<string, unknown>>(),
    createdAt: ms('created_at').notNull(),
    updatedAt: ms('updated_at').notNull(),
  },
  (t) => [
    index('deliveries_message_idx').on(t.messageId, t.createdAt),
    index('deliveries_user_idx').on(t.userId, t.createdAt),
  ],
);

/** Every attempt of a delivery (`att_`), captured for 45 days; bodies cut to about 4 KB. */
export const deliveryAttempts = pgTable(
  'delivery_attempts',
  {
    id: text('id').primaryKey(),
    deliveryId: text('delivery_id').notNull(),
    messageId: text('message_id').notNull(),
    attemptNumber: integer('attempt_number').notNull(),
    ok: integer('ok').notNull(),
    reason: text('reason'),
    requestHeaders: text('request_headers'),
    requestBody: text('request_body'),
    responseStatus: integer('response_status'),
    responseHeaders: text('response_headers'),
    responseBody: text('response_body'),
    durationMs: integer('duration_ms'),
    /** The consumer's control-mode reply, as understood (`{status: ok|spam|drop, actions: […]}`), when it gave one. */
    control: jsonb('control').$type<Record<string, unknown>>(),
    requestedAt: ms('requested_at').notNull(),
    createdAt: ms('created_at').notNull(),
  },
  (t) => [
    uniqueIndex('delivery_attempts_uq').on(t.deliveryId, t.attemptNumber),
    index('delivery_attempts_created_idx').on(t.createdAt),
  ],
);
