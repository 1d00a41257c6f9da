import { and, eq, isNull, like } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { notFound } from '../errors.js';
import { describeError, log } from '../log.js';
import type { EventService } from '../message-events.js';
import { bulkPaused } from '../metrics.js';
import type { GuardWorkflows } from '../ports/domains.js';
import type { Actor } from '../tenancy.js';
import type { DomainService } from '../domains/service.js';
import type { DomainFeedback } from '../domains/dto.js';
import { hourlyCounts, judge, type GuardSettings, type HourCounts, type Since } from './rates.js';

type DomainRow = typeof schema.domains.$inferSelect;
/** What one evaluation answers the guard workflow: whether bulk mail is paused, and the resume point still in force. */
export type GuardVerdict = { paused: boolean; gone: boolean; since: Since | null };

const HOUR = 3_600_000;
/** Complaints or bounces noted within this are sent to the guards together: one signal per domain per flush. */
const FLUSH_MS = 1000;

/**
 * The complaint guard (docs/deliverability.md, The complaint guard): per sending domain, the complaint
 * and hard-bounce rates over GUARD_WINDOWS_HOURS from activity_counters. Above a pause rate it pauses
 * the domain's bulk mail (broadcasts, sequences) once, records `domain.sending_paused` and logs; the
 * owner or an operator resumes. The workflow `domain-guard-<id>` calls `evaluate`; complaints and
 * bounces recorded anywhere reach it through `note`, batched off the hot path.
 */
export function createGuardService(deps: {
  db: Db;
  events: EventService;
  settings: GuardSettings;
  workflows: GuardWorkflows;
  domains: Pick<DomainService, 'load'>;
}) {
  const { db, settings } = deps;
  const d = schema.domains;
  const longestMs = Math.max(...settings.windowsHours, 1) * HOUR;
  const noted = new Map<string, string>();
  let timer: NodeJS.Timeout | undefined;

  function flush() {
    timer = undefined;
    const batch = [...noted];
    noted.clear();
    for (const [domainId, userId] of batch)
      deps.workflows
        .signalDomainGuard(domainId, userId)
        .catch((err) => log.error(`[guard] could not signal the guard of ${domainId}: ${describeError(err)}`));
  }

  /** Pauses the domain's bulk mail (once) and records `domain.sending_paused` in the same transaction. */
  async function pause(dom: DomainRow, reason: string): Promise<void> {
    const at = Date.now();
    const ev = deps.events.prepare([
      {
        userId: dom.userId,
        domainId: dom.id,
        type: 'domain.sending_paused',
        data: { domainId: dom.id, domain: dom.domain, pausedAt: at, reason },
      },
    ]);
    const inserted = await db.transaction(async (tx) => {
      const [row] = await tx
        .update(d)
        .set({ bulkPausedAt: at, bulkPausedReason: reason, updatedAt: at })
        .where(and(eq(d.id, dom.id), isNull(d.bulkPausedAt)))
        .returning({ id: d.id });
      return row ? tx.insert(schema.events).values(ev.rows).returning(ev.returning) : undefined;
    });
    if (!inserted) return;
    ev.notify(inserted);
    bulkPaused.inc();
    log.warn({ domainId: dom.id, accountId: dom.userId, domain: dom.domain, reason }, 'bulk mail paused');
  }

  /** Clears a pause and tells the guard (which then judges only what is counted after now) and the domain's broadcasts. */
  async function resume(dom: DomainRow) {
    // Not paused: nothing to resume (and no way to make the guard forget what it counts).
    if (!dom.bulkPausedAt) return { domainId: dom.id, feedback: (await feedbackOf([dom])).get(dom.id)! };
    // The guard hears first: if Temporal cannot be told, the domain stays paused and the call can be made again.
    await deps.workflows.resumeDomainGuard(dom.id, dom.userId);
    const [row] = await db
      .update(d)
      .set({ bulkPausedAt: null, bulkPausedReason: null, updatedAt: Date.now() })
      .where(eq(d.id, dom.id))
      .returning();
    log.info({ domainId: dom.id, accountId: dom.userId }, 'bulk mail resumed');
    const b = schema.broadcasts;
    const waiting = await db
      .select({ id: b.id })
      .from(b)
      .where(and(eq(b.userId, dom.userId), eq(b.status, 'sending'), like(b.fromAddr, `%@${dom.domain}%`)));
    await Promise.all(waiting.map((w) => deps.workflows.wakeBroadcast(w.id)));
    return { domainId: dom.id, feedback: (await feedbackOf([row ?? dom])).get(dom.id)! };
  }

  /** The `feedback` object of each domain row (one account's): one grouped read of activity_counters for all of them. */
  async function feedbackOf(rows: DomainRow[]): Promise<Map<string, DomainFeedback>> {
    const counts = await hourlyCounts(
      db,
      rows[0]?.userId ?? '',
      rows.map((r) => r.id),
      settings.windowsHours,
    );
    const now = Date.now();
    return new Map(
      rows.map((r) => {
        const v = judge(counts.get(r.id) ?? [], settings, now);
        return [
          r.id,
          {
            windows: v.windows,
            warning: v.warning,
            bulk_paused_at: r.bulkPausedAt,
            bulk_paused_reason: r.bulkPausedReason,
          },
        ];
      }),
    );
  }

  return {
    feedbackOf,
    /** A complaint or bounce was recorded for the domain: its guard hears of it within a second (one signal per burst). */
    note(domainId: string, userId: string) {
      noted.set(domainId, userId);
      timer ??= setTimeout(flush, FLUSH_MS).unref();
    },

    /** Judges the domain now (counting only from `since` when a resume set it); pauses it when a rate is too high. */
    async evaluate(input: { domainId: string; since: Since | null }): Promise<GuardVerdict> {
      const [dom] = await db.select().from(d).where(eq(d.id, input.domainId));
      if (!dom) return { paused: false, gone: true, since: null };
      const now = Date.now();
      const since = input.since && now - input.since.at < longestMs ? input.since : null;
      if (dom.bulkPausedAt) return { paused: true, gone: false, since };
      const hours = (await hourlyCounts(db, dom.userId, [dom.id], settings.windowsHours, now)).get(dom.id) ?? [];
      const verdict = judge(hours, settings, now, since);
      if (verdict.pause) await pause(dom, verdict.pause);
      return { paused: Boolean(verdict.pause), gone: false, since };
    },

    /** The resume point: now, and the counts of this hour so far (the guard subtracts them). */
    async baseline(input: { domainId: string }): Promise<Since> {
      const now = Date.now();
      const hour = Math.floor(now / HOUR) * HOUR;
      const [dom] = await db.select({ userId: d.userId }).from(d).where(eq(d.id, input.domainId));
      const counts = dom ? await hourlyCounts(db, dom.userId, [input.domainId], [1], now) : undefined;
      const hours: HourCounts[] = counts?.get(input.domainId) ?? [];
      const h = hours.find((x) => x.hour === hour);
      return {
        at: now,
        hour,
        base: { delivered: h?.delivered ?? 0, bounced: h?.bounced ?? 0, complained: h?.complained ?? 0 },
      };
    },

    /** POST /api/domains/:id/resume-sending: the owner (any credential of the domain) resumes its bulk mail. */
    async resume(actor: Actor, domainId: string) {
      return resume(await deps.domains.load(actor, domainId));
    },

    /** The operator's resume (OPERATOR_TOKEN): any domain by id. */
    async resumeAsOperator(domainId: string) {
      const [dom] = await db.select().from(d).where(eq(d.id, domainId));
      if (!dom) throw notFound('Domain not found');
      return resume(dom);
    },
  };
}
export type GuardService = ReturnType<typeof createGuardService>;
