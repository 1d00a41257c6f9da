import { z } from 'zod';
import { defineOperation } from '../contract.js';

const AUTH = ['session', 'oauth', 'account_key', 'scoped_key'] as const;
export const deliverySchema = z.object({
  id: z.string(),
  message_id: z.string(),
  route_id: z.string(),
  url: z.string(),
  status: z.enum(['pending', 'delivered', 'failed', 'paused']),
  attempts: z.number().int(),
  last_status_code: z.number().int().nullable(),
  next_retry_at: z.number().int().nullable(),
  retry_attempts: z.number().int(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
});
const ids = (prefix: string) =>
  z
    .array(z.string().min(1).max(100))
    .max(500)
    .optional()
    .describe(`${prefix} ids (at most 50 in all, threads expanded first)`);

export const retryDelivery = defineOperation({
  name: 'deliveries.retry',
  method: 'POST',
  path: '/api/deliveries/:id/retry',
  auth: AUTH,
  idempotencyKey: true,
  summary: 'Replay one delivery: appends a new delivery row and attempts it now.',
  params: z.object({ id: z.string().min(1).max(100) }),
  output: z.object({
    ok: z.boolean(),
    status: z.number().int().describe('0 when no response'),
    delivery: deliverySchema,
  }),
  handler: (input, { core, actor }) => core.replay.retryOne(actor, input.id),
});

export const retryDeliveries = defineOperation({
  name: 'deliveries.retryMany',
  method: 'POST',
  path: '/api/deliveries/retry',
  auth: AUTH,
  idempotencyKey: true,
  summary:
    'Bulk replay by delivery, message or thread ids (threads expanded before the 50-id cap). Always HTTP 200: every id has a result.',
  body: z
    .strictObject({ deliveryIds: ids('dlv_'), messageIds: ids('msg_'), threadIds: ids('Thread') })
    .refine(
      (b) => (b.deliveryIds?.length ?? 0) + (b.messageIds?.length ?? 0) + (b.threadIds?.length ?? 0) > 0,
      'give at least one of deliveryIds, messageIds, threadIds',
    ),
  output: z.object({
    ok: z.boolean(),
    requested: z.number().int(),
    delivered: z.number().int(),
    failed: z.number().int(),
    skipped: z.number().int(),
    results: z
      .array(
        z.object({
          messageId: z.string().nullable(),
          routeId: z.string().nullable(),
          deliveryId: z.string().nullable(),
          ok: z.boolean(),
          status: z.number().int().nullable(),
          reason: z
            .string()
            .nullable()
            .describe(
              'Failures: http, timeout, network, redirect, no-ack. Skips: not_found, no_delivery, duplicate_endpoint, too_many_ids (past the 50-id cap)',
            ),
          threadId: z
            .string()
            .optional()
            .describe(
              'Only on the result of a thread id that expanded to no message (not_found) or was not reached (too_many_ids)',
            ),
        }),
      )
      .describe('One per id (a thread: one per message it expanded to); no guaranteed order'),
  }),
  handler: (input, { core, actor }) => core.replay.retryMany(actor, input),
});

export const listAttempts = defineOperation({
  name: 'deliveries.attempts',
  method: 'GET',
  path: '/api/deliveries/:id/attempts',
  auth: AUTH,
  summary: 'Every captured attempt of a delivery, newest first.',
  params: z.object({ id: z.string().min(1).max(100) }),
  output: z.object({
    attempts: z.array(
      z.object({
        id: z.string(),
        delivery_id: z.string(),
        message_id: z.string(),
        attempt_number: z.number().int(),
        ok: z.union([z.literal(0), z.literal(1)]),
        reason: z.string().nullable(),
        request_headers: z.string().nullable(),
        request_body: z.string().nullable(),
        response_status: z.number().int().nullable(),
        response_headers: z.string().nullable(),
        response_body: z.string().nullable(),
        control: z
          .object({
            status: z.enum(['ok', 'spam', 'drop']),
            actions: z.array(z.string()),
            applied: z.array(z.string()),
            ignored: z.array(z.string()).optional(),
            error: z.string().optional(),
          })
          .nullable()
          .optional()
          .describe("The consumer's control-mode reply and what it did (docs/receiving.md, Control replies)"),
        duration_ms: z.number().int().nullable(),
        requested_at: z.number().int(),
        created_at: z.number().int(),
      }),
    ),
  }),
  handler: (input, { core, actor }) => core.replay.attempts(actor, input.id),
});
