import { and, desc, eq, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { DomainService } from '../domains/service.js';
import type { Actor } from '../tenancy.js';
import { badRequest, forbidden, notFound } from '../errors.js';
import { newId, randomToken } from '../ids.js';
import { credentialHash } from '../secrets.js';
import { patternScore } from '../mail/patterns.js';
import type { MailboxScope, Protocol } from '../tenancy.js';

export const APP_PASSWORD_PREFIX = 'svc_pw_';
export const LEGACY_PREFIX = 'svc_imap_';
type Row = typeof schema.appPasswords.$inferSelect;
const PATTERN = /^(\*|[a-z0-9._+-]+|[a-z0-9._+-]+\*|\*[a-z0-9._+-]+)$/;

/** Whether a local-part pattern (`*`, exact, `support-*`, `*-agent`) covers a local part. */
export const patternCovers = (pattern: string, local: string) => patternScore(pattern, local.toLowerCase()) >= 0;

const isCredential = (s: string) => s.startsWith(APP_PASSWORD_PREFIX) || s.startsWith(LEGACY_PREFIX);
const checkPattern = (address: string) => {
  const p = address.trim().toLowerCase();
  if (p.includes('@') || !PATTERN.test(p))
    throw badRequest(
      'address must be *, a local part, or one wildcard at its start or end (support-*, *-agent); no @',
      'invalid_pattern',
    );
  return p;
};

/** App passwords (`apw_`): minted and managed by the account, hashed at rest, rotated and revoked at once. */
export function createAppPasswordService(deps: { db: Db; domains: DomainService; changed?: (userId: string) => void }) {
  const { db } = deps;
  const t = schema.appPasswords;
  const d = schema.domains;

  const dto = (r: Row, domain: string | null) => ({
    id: r.id,
    user_id: r.userId,
    label: r.label,
    domain_id: r.domainId,
    domain: r.legacy ? '*' : (domain ?? ''),
    address: r.address,
    protocols: r.protocols,
    key_prefix: r.keyPrefix,
    created_at: r.createdAt,
    last_used_at: r.lastUsedAt,
    legacy: r.legacy,
  });
  const noScoped = (actor: Actor) => {
    if (actor.domainId) throw forbidden('A domain-scoped key cannot manage app passwords', 'wrong_credential');
  };
  const checkProtocols = (protocols: Protocol[], legacy: boolean) => {
    const set = [...new Set(protocols)];
    if (set.length === 0) throw badRequest('protocols must name at least one of imap, api, smtp', 'validation_error');
    if (legacy && set.some((p) => p !== 'imap'))
      throw badRequest(
        'A legacy svc_imap_ credential is IMAP-only and cannot be granted api or smtp',
        'legacy_imap_only',
      );
    return set;
  };
  async function own(actor: Actor, id: string) {
    noScoped(actor);
    const [row] = await db
      .select({ p: t, domain: d.domain })
      .from(t)
      .leftJoin(d, eq(d.id, t.domainId))
      .where(and(eq(t.id, id), eq(t.userId, actor.userId)));
    if (!row) throw notFound('App password not found');
    return row;
  }
  const mint = (legacy: boolean) => {
    const secret = `${legacy ? LEGACY_PREFIX : APP_PASSWORD_PREFIX}${randomToken(24)}`;
    return { secret, secretHash: credentialHash(secret), keyPrefix: secret.slice(0, legacy ? 14 : 12) };
  };

  return {
    async list(actor: Actor) {
      noScoped(actor);
      const rows = await db
        .select({ p: t, domain: d.domain })
        .from(t)
        .leftJoin(d, eq(d.id, t.domainId))
        .where(eq(t.userId, actor.userId))
        .orderBy(desc(t.createdAt));
      return rows.map((r) => dto(r.p, r.domain));
    },

    async create(
      actor: Actor,
      input: { domain?: string; domainId?: string; address?: string; protocols?: Protocol[]; label?: string },
    ) {
      noScoped(actor);
      let domainId = input.domainId;
      if (!domainId) {
        if (!input.domain) throw badRequest('domain (or domainId) is required', 'validation_error');
        const [row] = await db
          .select({ id: d.id })
          .from(d)
          .where(and(eq(d.domain, input.domain.trim().toLowerCase()), eq(d.userId, actor.userId)));
        if (!row) throw notFound(`No domain ${input.domain} on this account`);
        domainId = row.id;
      }
      const domain = await deps.domains.load(actor, domainId);
      if (input.domain && input.domain.trim().toLowerCase() !== domain.domain)
        throw badRequest('domain and domainId name different domains', 'validation_error');
      const address = checkPattern(input.address ?? '*');
      const protocols = checkProtocols(input.protocols ?? ['imap'], false);
      const { secret, ...material } = mint(false);
      const [row] = await db
        .insert(t)
        .values({
          id: newId('apw'),
          userId: actor.userId,
          domainId: domain.id,
          label: input.label ?? `${address}@${domain.domain}`,
          address,
          protocols,
          ...material,
          createdAt: Date.now(),
        })
        .returning();
      deps.changed?.(actor.userId);
      return { ...dto(row!, domain.domain), secret };
    },

    async update(actor: Actor, id: string, input: { address?: string; protocols?: Protocol[]; label?: string }) {
      const { p, domain } = await own(actor, id);
      const set: Partial<Row> = {};
      if (input.address !== undefined) set.address = checkPattern(input.address);
      if (input.protocols !== undefined) set.protocols = checkProtocols(input.protocols, p.legacy);
      if (input.label !== undefined) set.label = input.label;
      if (Object.keys(set).length === 0) return dto(p, domain);
      const [row] = await db.update(t).set(set).where(eq(t.id, id)).returning();
      deps.changed?.(actor.userId);
      return dto(row!, domain);
    },

    /** New secret, same scope; the old secret stops authenticating (and open IMAP sessions end) at once. */
    async rotate(actor: Actor, id: string) {
      const { p, domain } = await own(actor, id);
      const { secret, ...material } = mint(p.legacy);
      const [row] = await db.update(t).set(material).where(eq(t.id, id)).returning();
      return { ...dto(row!, domain), secret };
    },

    async remove(actor: Actor, id: string) {
      await own(actor, id);
      await db.delete(t).where(eq(t.id, id));
      deps.changed?.(actor.userId);
      return { ok: true as const };
    },

    /** The scope of a presented secret, or undefined when it is not a live app password. */
    async verify(secret: string): Promise<MailboxScope | undefined> {
      if (!isCredential(secret)) return undefined;
      const hash = credentialHash(secret);
      const [row] = await db
        .select({ p: t, domain: d.domain })
        .from(t)
        .leftJoin(d, eq(d.id, t.domainId))
        .where(eq(t.secretHash, hash));
      if (!row || (!row.p.legacy && !row.domain)) return undefined;
      const now = Date.now();
      if (!row.p.lastUsedAt || now - row.p.lastUsedAt > 60_000) {
        await db
          .update(t)
          .set({ lastUsedAt: now })
          .where(and(eq(t.id, row.p.id), sql`coalesce(${t.lastUsedAt}, 0) < ${now - 60_000}`));
      }
      const protocols = row.p.legacy ? (['imap'] as Protocol[]) : row.p.protocols;
      return {
        passwordId: row.p.id,
        secretHash: hash,
        userId: row.p.userId,
        domainId: row.p.domainId,
        domain: row.domain ?? '*',
        pattern: row.p.address,
        protocols,
        legacy: row.p.legacy,
      };
    },

    /** Whether a scope seen earlier still holds: same secret, not deleted, same pattern (checked before each IMAP command). */
    async stillValid(scope: MailboxScope): Promise<boolean> {
      const [row] = await db
        .select({ h: t.secretHash, a: t.address, p: t.protocols })
        .from(t)
        .where(eq(t.id, scope.passwordId));
      return Boolean(
        row && row.h === scope.secretHash && row.a === scope.pattern && (scope.legacy || row.p.includes('imap')),
      );
    },
  };
}
export type AppPasswordService = ReturnType<typeof createAppPasswordService>;
