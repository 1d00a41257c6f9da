import { and, eq, inArray, isNull, or, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { WebhookStatus } from '../domains/dto.js';
import type { AttemptCapture } from './post.js';

/** A domain's webhook turns unhealthy after this many failed attempts in a row. */
export const UNHEALTHY_AFTER = 5;

const NEVER: WebhookStatus = {
  status: null,
  message: null,
  code: null,
  at: null,
  consecutiveFailures: 0,
  firstFailedAt: null,
  unhealthy: false,
};

/** A POST unanswered this long marks its domain's webhook `running` (quicker answers write nothing extra). */
export const RUNNING_AFTER_MS = 1000;

/**
 * Marks the domains' webhooks `running` while a POST is in flight (SPEC.md webhookStatus), keeping the
 * failing streak and the last HTTP code; the outcome then replaces it. No write for a domain already marked.
 */
export async function markRunning(db: Db, domainIds: string[], at = Date.now()): Promise<void> {
  if (domainIds.length === 0) return;
  const d = schema.domains;
  const running = { status: 'running', message: 'Delivery in flight', at };
  await db
    .update(d)
    .set({
      webhookHealth: sql`coalesce(${d.webhookHealth}, ${JSON.stringify(NEVER)}::jsonb) || ${JSON.stringify(running)}::jsonb`,
    })
    .where(
      and(
        inArray(d.id, domainIds),
        or(isNull(d.webhookHealth), sql`${d.webhookHealth}->>'status' is distinct from 'running'`),
      ),
    );
}

/**
 * When this process last wrote a domain's healthy streak: the attempts of one batch, in flight together, all
 * read the streak from before any of them, and one write among them is enough.
 */
const okWrittenAt = new Map<string, number>();

/** Folds one attempt into the domain's webhook health streak (SPEC.md webhookStatus). */
export async function recordHealth(
  db: Db,
  domainId: string,
  a: AttemptCapture,
  known?: { health: unknown },
): Promise<void> {
  // The caller may have read the current streak already (in the statement that recorded the attempt).
  const row =
    known ??
    (
      await db
        .select({ health: schema.domains.webhookHealth })
        .from(schema.domains)
        .where(eq(schema.domains.id, domainId))
    )[0];
  if (!row) return;
  const prev = (row.health ?? null) as WebhookStatus | null;
  const at = a.requestedAt;
  // A healthy streak that stays healthy needs no write more than once a second (this runs on every attempt).
  if (a.ok && prev?.status === 'ok' && prev.code === a.status && prev.at !== null) {
    const mine = okWrittenAt.get(domainId);
    if (at - prev.at < 1000 || (mine !== undefined && at - mine < 1000 && mine >= prev.at)) return;
  }
  const next: WebhookStatus = a.ok
    ? {
        status: 'ok',
        message: `Delivered (HTTP ${a.status})`,
        code: a.status,
        at,
        consecutiveFailures: 0,
        firstFailedAt: null,
        unhealthy: false,
      }
    : {
        status: a.reason === 'timeout' ? 'timeout' : 'fail',
        message:
          a.reason === 'timeout'
            ? `No answer within ${a.durationMs} ms (timeout)`
            : a.reason === 'network'
              ? `Network error: ${a.responseBody ?? ''}`.trim()
              : a.reason === 'no-ack'
                ? `HTTP ${a.status} without acknowledgement`
                : a.reason === 'redirect'
                  ? `HTTP ${a.status} redirect (not followed)`
                  : `HTTP ${a.status}`,
        code: a.status,
        at,
        consecutiveFailures: (prev?.consecutiveFailures ?? 0) + 1,
        firstFailedAt: prev?.consecutiveFailures ? prev.firstFailedAt : at,
        unhealthy: (prev?.consecutiveFailures ?? 0) + 1 >= UNHEALTHY_AFTER,
      };
  // Said before the write, so the attempts finishing meanwhile need none of their own.
  okWrittenAt.delete(domainId);
  if (a.ok) okWrittenAt.set(domainId, at);
  if (okWrittenAt.size > 10_000) okWrittenAt.delete(okWrittenAt.keys().next().value!);
  try {
    await db.update(schema.domains).set({ webhookHealth: next }).where(eq(schema.domains.id, domainId));
  } catch (err) {
    if (okWrittenAt.get(domainId) === at) okWrittenAt.delete(domainId);
    throw err;
  }
}
