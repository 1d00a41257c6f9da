import { and, asc, eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError, badRequest, conflict, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { Actor } from '../tenancy.js';
import type { DomainRow } from '../domains/dto.js';
import { receivingConfigChanged } from '../mail/config-changes.js';
import {
  compileRules,
  normalizeRuleValue,
  RULE_ACTIONS,
  RULE_KINDS,
  type CompiledRules,
  type SenderRule,
  type SenderVerdict,
} from './sender-rules.js';

/** A spam filter's verdict as the policy reads it (rspamd's, core/inbound's spam scan): unscored mail is never held or refused for spam. */
export type SpamVerdict = { scored: boolean; score?: number | null; required?: number | null; action?: string | null };

/** What happens to one domain's copy of a message at the end of DATA. */
export type PolicyDecision =
  { kind: 'deliver' } | { kind: 'hold'; reason: string } | { kind: 'refuse'; reason: string };

/** The 550 5.7.1 refusals of the inbound policy (smtp/replies.ts). */
export const senderBlocked = (address: string) =>
  new AppError(403, 'sender_blocked', `<${address}>: the sender is blocked by this domain's policy`);
export const policyRefused = (reason: string) => new AppError(403, 'policy_refused', reason);

type PolicyColumns = Pick<DomainRow, 'zeroRetention'> & {
  spamHoldScore: number | null;
  spamRefuseScore: number | null;
  refuseDmarcReject: boolean;
};

/**
 * The score the thresholds compare: rspamd's, except that a message rspamd answers `reject` counts at least
 * its `required` score. rspamd forces `reject` for GTUBE and other pre-results whose own score may be 0.
 */
export function effectiveScore(spam: SpamVerdict | undefined): number | undefined {
  if (!spam?.scored || typeof spam.score !== 'number') return undefined;
  if (spam.action === 'reject' && typeof spam.required === 'number') return Math.max(spam.score, spam.required);
  return spam.score;
}

/**
 * The domain's inbound policy applied to one message (docs/inbound-policy.md): an allowed sender is
 * delivered whatever its score; a DMARC fail of a `p=reject` sender domain is refused when the domain says
 * so; a score at or above `spam_refuse_score` is refused, at or above `spam_hold_score` held (a
 * zero-retention domain never holds: it refuses or delivers).
 */
export function decide(
  domain: PolicyColumns,
  m: { sender: SenderVerdict; spam?: SpamVerdict | undefined; dmarc?: string | null; dmarcPolicy?: string | null },
): PolicyDecision {
  if (m.sender === 'allow') return { kind: 'deliver' };
  if (domain.refuseDmarcReject && m.dmarc === 'fail' && m.dmarcPolicy === 'reject')
    return { kind: 'refuse', reason: "DMARC check failed and the sender's domain publishes p=reject" };
  const score = effectiveScore(m.spam);
  if (score === undefined) return { kind: 'deliver' };
  if (domain.spamRefuseScore !== null && score >= domain.spamRefuseScore)
    return { kind: 'refuse', reason: `Message refused as spam (score ${score})` };
  if (domain.spamHoldScore !== null && score >= domain.spamHoldScore && domain.zeroRetention !== 1)
    return { kind: 'hold', reason: `spam score ${score} at or above ${domain.spamHoldScore}` };
  return { kind: 'deliver' };
}

const RULES_MS = 5_000;
const MAX_RULES = 1_000;

export type PolicyInput = {
  spam_hold_score?: number | null;
  spam_refuse_score?: number | null;
  refuse_dmarc_reject?: boolean;
};

/**
 * Per-domain inbound policy: its sender rules (the SMTP ingress judges by them, from a per-process cache
 * of at most RULES_MS that a change here clears) and its thresholds, read and written through the actor.
 */
export function createInboundPolicy(deps: { db: Db; load: (actor: Actor, id: string) => Promise<DomainRow> }) {
  const r = schema.senderRules;
  const d = schema.domains;
  const cache = new Map<string, { at: number; rules: Promise<CompiledRules> }>();

  function compiled(domainId: string): Promise<CompiledRules> {
    let hit = cache.get(domainId);
    if (!hit || Date.now() - hit.at > RULES_MS) {
      const rules = deps.db
        .select({ kind: r.kind, value: r.value, action: r.action })
        .from(r)
        .where(eq(r.domainId, domainId))
        .then((rows) => compileRules(rows));
      hit = { at: Date.now(), rules };
      cache.set(domainId, hit);
      rules.catch(() => cache.delete(domainId));
      if (cache.size > 10_000) cache.delete(cache.keys().next().value!);
    }
    return hit.rules;
  }

  const ruleDto = (row: typeof r.$inferSelect) => ({
    id: row.id,
    domain_id: row.domainId,
    kind: row.kind,
    value: row.value,
    action: row.action,
    origin: row.origin,
    note: row.note,
    created_at: row.createdAt,
  });
  const policyDto = (row: PolicyColumns & { id: string }) => ({
    domain_id: row.id,
    spam_hold_score: row.spamHoldScore,
    spam_refuse_score: row.spamRefuseScore,
    refuse_dmarc_reject: row.refuseDmarcReject,
  });

  /** Adds a rule on a domain (idempotent per kind and value: the same rule again answers the stored one, its action updated). */
  async function addRule(
    domain: { id: string; userId: string },
    input: { kind: SenderRule['kind']; value: string; action: SenderRule['action']; note?: string | null },
    origin: 'api' | 'webhook-reply' = 'api',
  ) {
    if (!RULE_KINDS.includes(input.kind)) throw badRequest('kind is address, domain or ip', 'validation_error');
    if (!RULE_ACTIONS.includes(input.action)) throw badRequest('action is block or allow', 'validation_error');
    const value = normalizeRuleValue(input.kind, input.value);
    const count = await deps.db.$count(r, eq(r.domainId, domain.id));
    if (count >= MAX_RULES) throw conflict(`A domain holds at most ${MAX_RULES} sender rules`, 'too_many_rules');
    const [row] = await deps.db
      .insert(r)
      .values({
        id: newId('sbr'),
        userId: domain.userId,
        domainId: domain.id,
        kind: input.kind,
        value,
        action: input.action,
        origin,
        note: input.note ?? null,
        createdAt: Date.now(),
      })
      .onConflictDoUpdate({ target: [r.domainId, r.kind, r.value], set: { action: input.action } })
      .returning();
    cache.delete(domain.id);
    return ruleDto(row!);
  }

  return {
    /** What the domain's rules say of a sender (SMTP: RCPT with the envelope, DATA with the header From too). */
    async judgeSender(domainId: string, sender: { from?: string; headerFrom?: string; ip?: string }) {
      return (await compiled(domainId)).judge(sender);
    },

    addRule,

    async listRules(actor: Actor, domainId: string) {
      await deps.load(actor, domainId);
      const rows = await deps.db.select().from(r).where(eq(r.domainId, domainId)).orderBy(asc(r.createdAt), asc(r.id));
      return { data: rows.map(ruleDto) };
    },

    async createRule(
      actor: Actor,
      domainId: string,
      input: { kind: SenderRule['kind']; value: string; action: SenderRule['action']; note?: string | null },
    ) {
      const domain = await deps.load(actor, domainId);
      return { rule: await addRule(domain, input) };
    },

    async deleteRule(actor: Actor, domainId: string, ruleId: string) {
      await deps.load(actor, domainId);
      const [row] = await deps.db
        .delete(r)
        .where(and(eq(r.id, ruleId), eq(r.domainId, domainId)))
        .returning({ id: r.id });
      if (!row) throw notFound('Sender rule not found');
      cache.delete(domainId);
      return { ok: true as const };
    },

    async getPolicy(actor: Actor, domainId: string) {
      const row = await deps.load(actor, domainId);
      return { policy: policyDto(row as DomainRow & PolicyColumns) };
    },

    async updatePolicy(actor: Actor, domainId: string, input: PolicyInput) {
      await deps.load(actor, domainId);
      const values = {
        spamHoldScore: input.spam_hold_score,
        spamRefuseScore: input.spam_refuse_score,
        refuseDmarcReject: input.refuse_dmarc_reject,
      };
      if (Object.values(values).every((v) => v === undefined))
        throw badRequest('Give spam_hold_score, spam_refuse_score and/or refuse_dmarc_reject', 'validation_error');
      const [row] = await deps.db
        .update(d)
        .set({ ...values, updatedAt: Date.now() })
        .where(eq(d.id, domainId))
        .returning();
      receivingConfigChanged();
      if (!row) throw notFound('Domain not found');
      return { policy: policyDto(row) };
    },
  };
}
export type InboundPolicy = ReturnType<typeof createInboundPolicy>;
