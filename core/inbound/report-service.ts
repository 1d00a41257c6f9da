import { and, eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { classifyBounce, defaultBounceRules, suppresses, type BounceRules } from '../mail/bounce-class.js';
import type { EventService } from '../message-events.js';
import type { RecipientStates } from '../mail/recipients.js';
import type { SuppressionService } from '../gate/suppressions.js';
import type { BounceRecipient, ParsedReport } from '../parsing/reports.js';
import { countBounce, countComplaint } from '../metrics.js';

type MessageRow = typeof schema.messages.$inferSelect & { userId: string };
type Tx = Pick<Db, 'select' | 'insert' | 'update'>;
type ComplaintReport = Extract<ParsedReport, { kind: 'complaint' }>;
export type ReportResult = { matched: boolean; messageId: string | null };

/** The address inside `<…>` when there is one (indexOf, not a backtracking pattern: the input is a report's). */
const bare = (a: string) => {
  const open = a.indexOf('<');
  const close = open < 0 ? -1 : a.indexOf('>', open + 1);
  return (close > open + 1 ? a.slice(open + 1, close) : a).trim().toLowerCase();
};
const eventKey = (type: string, recipient: string | null, detail: string) => `${type}|${recipient ?? ''}|${detail}`;

/**
 * Maps a reported address onto a recipient of the message, so that a report (which anyone who saw the
 * message id could forge) only ever affects the people the message went to. A single-recipient message
 * takes any address: forwarding rewrites the final recipient and feedback loops often redact it.
 */
function resolveRecipient(reported: string | null, recipients: string[]): string | null {
  if (reported && recipients.includes(reported)) return reported;
  return recipients.length === 1 ? recipients[0]! : null;
}

/** The class of a reported recipient: the Status field's code first, then the diagnostic's code and text ("failed" without a status is permanent). */
export const classifyReported = (rules: BounceRules, r: BounceRecipient) =>
  classifyBounce(rules, { text: r.diagnostic, status: r.status, permanent: r.type === 'hard' });

/**
 * Asynchronous bounces and complaints: applies a parsed report to the outbound message it is about,
 * as `email.bounced` / `email.complained` events, suppressions and the message's bounce state.
 */
export function createReportService(deps: {
  db: Db;
  events: EventService;
  suppressions: SuppressionService;
  bounceRules?: BounceRules;
}) {
  const { db } = deps;
  const rules = deps.bounceRules ?? defaultBounceRules();
  const m = schema.messages;
  const e = schema.events;

  async function load(id: string): Promise<MessageRow | undefined> {
    // System mail (verification, sign-in links) returns to the service domain and is reported on like customer mail.
    const [row] = await db
      .select()
      .from(m)
      .where(and(eq(m.id, id), eq(m.direction, 'outbound'), inArray(m.kind, ['user', 'system'])));
    return row?.userId ? { ...row, userId: row.userId } : undefined;
  }

  /** Keys of the report events the message already has, so a report that arrives twice is recorded once. */
  async function recorded(tx: Tx, messageId: string): Promise<Set<string>> {
    const rows = await tx
      .select({ type: e.type, recipient: e.recipient, data: e.data })
      .from(e)
      .where(and(eq(e.messageId, messageId), inArray(e.type, ['email.bounced', 'email.complained'])));
    return new Set(
      rows.map((r) =>
        eventKey(r.type, r.recipient, String((r.data?.bounce as { type?: string } | undefined)?.type ?? '')),
      ),
    );
  }

  /** One entry per affected recipient of the message; a hard failure outweighs a soft one for the same address. */
  function bounceTargets(row: MessageRow, reported: BounceRecipient[]): Map<string, BounceRecipient> {
    const recipients = [...row.toAddrs, ...(row.ccAddrs ?? []), ...(row.bccAddrs ?? [])].map(bare);
    const targets = new Map<string, BounceRecipient>();
    for (const r of reported) {
      const address = resolveRecipient(r.address, recipients);
      if (address && targets.get(address)?.type !== 'hard') targets.set(address, r);
    }
    return targets;
  }

  async function applyBounce(row: MessageRow, reported: BounceRecipient[]): Promise<void> {
    const targets = bounceTargets(row, reported);
    if (targets.size === 0) return;
    const hard = [...targets.values()].some((r) => r.type === 'hard');
    await db.transaction(async (tx) => {
      const seen = await recorded(tx, row.id);
      const bouncedNow: RecipientStates = {};
      for (const [address, r] of targets) {
        const c = classifyReported(rules, r);
        const bounceClass = c.bounceClass;
        if (r.type === 'hard')
          bouncedNow[address] = {
            status: 'bounced',
            attempts: row.recipients?.[address]?.attempts ?? 1,
            response: (r.diagnostic ?? r.status ?? 'bounced').slice(0, 500),
            at: Date.now(),
            bounceClass,
          };
        // Only a permanent recipient-level failure suppresses; a system message's recipient is the account holder, never suppressed on their list.
        if (r.type === 'hard' && suppresses(c) && row.kind === 'user')
          await deps.suppressions.add(
            row.userId,
            address,
            'hard_bounce',
            { messageId: row.id, detail: r.diagnostic ?? undefined },
            tx,
          );
        if (seen.has(eventKey('email.bounced', address, r.type))) continue;
        countBounce('async', bounceClass);
        await deps.events.record(
          {
            userId: row.userId,
            messageId: row.id,
            domainId: row.domainId,
            type: 'email.bounced',
            recipient: address,
            data: { bounce: { type: r.type, diagnostic: r.diagnostic, bounceClass } },
          },
          tx,
        );
      }
      // A later soft report (a delay notice arriving late) never downgrades a hard bounce.
      const bounceType = hard || row.bounceType === 'hard' ? 'hard' : 'soft';
      const recipients = sql`coalesce(${m.recipients}, '{}'::jsonb) || ${JSON.stringify(bouncedNow)}::jsonb`;
      await tx
        .update(m)
        .set({ bounceType, ...(hard ? { status: 'bounced', recipients } : {}), updatedAt: Date.now() })
        .where(eq(m.id, row.id));
    });
  }

  async function applyComplaint(row: MessageRow, report: ComplaintReport): Promise<void> {
    // "not-spam" is a recipient taking a complaint back: nothing to suppress or report.
    if (report.feedbackType === 'not-spam') return;
    const recipients = [...row.toAddrs, ...(row.ccAddrs ?? []), ...(row.bccAddrs ?? [])].map(bare);
    const address = resolveRecipient(report.recipient, recipients);
    const detail = `${report.feedbackType} report${report.userAgent ? ` from ${report.userAgent}` : ''}`;
    await db.transaction(async (tx) => {
      if (address && row.kind === 'user')
        await deps.suppressions.add(row.userId, address, 'complaint', { messageId: row.id, detail }, tx);
      if ((await recorded(tx, row.id)).has(eventKey('email.complained', address, ''))) return;
      countComplaint(report.feedbackType);
      await deps.events.record(
        {
          userId: row.userId,
          messageId: row.id,
          domainId: row.domainId,
          type: 'email.complained',
          recipient: address,
          data: { complaint: { feedbackType: report.feedbackType, userAgent: report.userAgent } },
        },
        tx,
      );
    });
  }

  return {
    /**
     * Applies a report to its outbound user message; `matched: false` (nothing recorded) when the message is
     * unknown. Idempotent: suppressions are kept once and an event already recorded for the same message,
     * type and recipient (and bounce type) is not repeated.
     */
    async apply(report: ParsedReport): Promise<ReportResult> {
      const row = report.messageId ? await load(report.messageId) : undefined;
      if (!row) return { matched: false, messageId: null };
      if (report.kind === 'bounce') await applyBounce(row, report.recipients);
      else await applyComplaint(row, report);
      return { matched: true, messageId: row.id };
    },
  };
}
export type ReportService = ReturnType<typeof createReportService>;
