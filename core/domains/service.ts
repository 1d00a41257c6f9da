import type { Resolver } from 'node:dns/promises';
import { and, eq, inArray, ne } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { Actor } from '../tenancy.js';
import { badRequest, conflict, forbidden, notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { DkimRotationWorkflows, VerificationWorkflows } from '../ports/domains.js';
import type { Plan } from '../plans.js';
import type { Sealer } from '../secrets.js';
import { checkDomainRecords, type DnsObservation, type DomainChecks } from './check.js';
import { generateDkimKey } from './dkim.js';
import { deleteMailboxMessages } from '../storage/mailbox-rows.js';
import { domainDto, type DomainRow, type EnrichedDomain } from './dto.js';
import { normalizeDomainName } from './names.js';
import type { OwnershipTokens } from './ownership.js';
import type { ProviderRegistry } from './providers.js';
import type { EgressConfig } from '../egress/config.js';
import { poolWarnings } from '../egress/suspensions.js';
import { mxHostOf, newMxToken } from './records.js';
import { receivingConfigChanged } from '../mail/config-changes.js';

export const DKIM_SELECTOR = 'svc1';

/** PostgreSQL unique_violation (drizzle wraps the driver's error in `cause`). */
export const isUniqueViolation = (err: unknown): boolean =>
  (err as { code?: string })?.code === '23505' || (err as { cause?: { code?: string } })?.cause?.code === '23505';

export type DomainDeps = {
  db: Db;
  sealer: Sealer;
  resolver: Resolver;
  serviceDomain: string;
  providers: ProviderRegistry;
  /** The egress file: a domain's pool health (warnings) is judged against it. */
  egress: EgressConfig;
  workflows: VerificationWorkflows & DkimRotationWorkflows;
  ownership: OwnershipTokens;
  planOf(userId: string): Promise<Plan>;
  enrich(rows: DomainRow[], userId: string): Promise<EnrichedDomain[]>;
  cleanupHosted(domainId: string): Promise<number>;
};

/** Domains: add, list, read, delete, and the DNS check the verification loop and verify-now share. */
export function createDomainService(deps: DomainDeps) {
  const { db } = deps;
  const d = schema.domains;

  /** Loads a domain the actor may see; anything else is 404, as if it did not exist. */
  async function load(actor: Actor, id: string): Promise<DomainRow> {
    const [row] = await db
      .select()
      .from(d)
      .where(and(eq(d.id, id), eq(d.userId, actor.userId)));
    if (!row || (actor.domainId && actor.domainId !== row.id)) throw notFound('Domain not found');
    return row;
  }

  const providerOf = (row: DomainRow) => deps.providers.byId(row.emailProviderId ?? '') ?? deps.providers.default;
  /** Rows from before pools backed domains (no email_provider_id) show the platform default's pool and type. */
  const withPool = (row: DomainRow): DomainRow =>
    row.emailProviderId
      ? row
      : { ...row, emailProviderId: deps.providers.default.id, provider: deps.providers.default.type };
  /** What is wrong with the pool backing a domain (a suspended source, a pool gone from the file); none: []. */
  const warningsOf = (row: DomainRow) => poolWarnings(db, deps.egress, withPool(row).emailProviderId!);
  /** The mail records of the domain's provider (what a hosted zone serves). */
  const mailRecordsOf = (row: DomainRow) => providerOf(row).records(row);
  /** What a non-hosted domain publishes: the provider's records, whose MX (the row's own host) proves the zone. */
  const dnsOf = (row: DomainRow) => (row.hosted ? [] : mailRecordsOf(row));

  /** Inserts a domain row with a fresh DKIM key; `verified` rows (hosted) pass all four checks at once. */
  async function insertDomain(
    actor: Actor,
    name: string,
    opts: { providerId?: string; verified?: boolean; hosted?: boolean },
  ) {
    const [own] = await db
      .select({ id: d.id })
      .from(d)
      .where(and(eq(d.userId, actor.userId), eq(d.domain, name)));
    if (own) throw conflict(`${name} is already on this account (${own.id})`, 'domain_exists');
    const [held] = await db
      .select({ id: d.id })
      .from(d)
      .where(and(eq(d.domain, name), eq(d.status, 'verified'), ne(d.userId, actor.userId)));
    if (held) throw conflict(`${name} is verified by another account`, 'domain_taken');
    const key = await generateDkimKey();
    const now = Date.now();
    const provider = opts.providerId ? deps.providers.byId(opts.providerId)! : deps.providers.default;
    const v = opts.verified ? 1 : 0;
    const rows = await db
      .insert(d)
      .values({
        id: newId('dom'),
        userId: actor.userId,
        domain: name,
        status: opts.verified ? 'verified' : 'pending',
        mxVerified: v,
        spfVerified: v,
        dkimVerified: v,
        dmarcVerified: v,
        provider: provider.type,
        emailProviderId: provider.id,
        egressPinned: Boolean(opts.providerId),
        dkimSelector: DKIM_SELECTOR,
        dkimPublicKey: key.publicKeyB64,
        dkimPrivateKeySealed: deps.sealer.seal(key.privateKeyPem),
        sendingEnabled: Boolean(opts.verified),
        hosted: Boolean(opts.hosted),
        lastCheckedAt: opts.verified ? now : null,
        createdAt: now,
        updatedAt: now,
        ownershipVerified: v,
        mxToken: newMxToken(),
      })
      .onConflictDoNothing()
      .returning();
    receivingConfigChanged();
    if (!rows[0]) throw conflict(`${name} is already on this account`, 'domain_exists');
    return rows[0];
  }

  /**
   * Checks DNS now and stores the result. The row's own MX host proves the zone is this account's, so MX
   * alone verifies the domain (SPEC.md); the older proof (MX at SERVICE_DOMAIN plus the account's
   * `_svc-verify` TXT token) is still accepted. At most one account holds a name verified (the unique index
   * says no to a second). SPF and DKIM enable sending: the DKIM key is the row's own, so it proves the zone
   * too. A record whose lookup failed (timeout, SERVFAIL) keeps its previous state.
   */
  async function runCheck(row: DomainRow) {
    const seen: DnsObservation = row.hosted
      ? { mx: true, sharedMx: true, spf: true, dkim: true, dmarc: true, ownership: true }
      : await checkDomainRecords(deps.resolver, {
          domain: row.domain,
          serviceDomain: deps.serviceDomain,
          mxHost: mxHostOf(row.mxToken, deps.serviceDomain),
          selector: row.dkimSelector,
          publicKeyB64: row.dkimPublicKey,
          ownershipToken: deps.ownership.token(row.userId, row.domain),
        });
    const before = {
      mx: row.mxVerified === 1,
      spf: row.spfVerified === 1,
      dkim: row.dkimVerified === 1,
      dmarc: row.dmarcVerified === 1,
      ownership: row.ownershipVerified === 1,
    };
    const failed = (Object.keys(seen) as (keyof DnsObservation)[]).filter((k) => seen[k] === undefined);
    const known = (k: keyof DnsObservation, previous: boolean) => seen[k] ?? previous;
    const ownMx = known('mx', before.mx && before.ownership);
    const owned = ownMx || known('ownership', before.ownership);
    const checks: DomainChecks = {
      mx: ownMx || (owned && known('sharedMx', before.mx)),
      spf: known('spf', before.spf),
      dkim: known('dkim', before.dkim),
      dmarc: known('dmarc', before.dmarc),
      ownership: owned,
    };
    const sending = await enableSending(row, checks);
    const checkedAt = Date.now();
    const values = {
      mxVerified: +checks.mx,
      spfVerified: +checks.spf,
      dkimVerified: +checks.dkim,
      dmarcVerified: +checks.dmarc,
      ownershipVerified: +owned,
      sendingEnabled: row.sendingEnabled || Boolean(sending.enabled),
      lastCheckedAt: checkedAt,
      updatedAt: checkedAt,
      lastCheckError: failed.length ? `DNS lookup failed for ${failed.join(', ')}; previous state kept` : null,
    };
    let status: 'verified' | 'pending' = checks.mx || row.status === 'verified' ? 'verified' : 'pending';
    try {
      await db
        .update(d)
        .set({ ...values, status })
        .where(eq(d.id, row.id));
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      // Another account holds this domain verified: nothing this row shows changes that.
      status = 'pending';
      checks.mx = false;
      await db
        .update(d)
        .set({ ...values, status, mxVerified: 0 })
        .where(eq(d.id, row.id));
    }
    receivingConfigChanged();
    return { status, checks, checkedAt, sending };
  }

  async function enableSending(row: DomainRow, checks: DomainChecks) {
    const provider = providerOf(row);
    if (!(checks.spf && checks.dkim)) {
      const missing = [!checks.spf && 'SPF', !checks.dkim && 'DKIM'].filter(Boolean).join(' and ');
      return {
        ok: false,
        enabled: row.sendingEnabled,
        dkimVerified: checks.dkim,
        providerId: provider.id,
        error: `${missing} not found yet`,
      };
    }
    try {
      const r = await provider.enableSending(row);
      return {
        ok: true,
        enabled: r.enabled,
        dkimVerified: true,
        alreadyEnabled: r.alreadyEnabled,
        providerId: provider.id,
      };
    } catch (err) {
      return { ok: false, enabled: false, dkimVerified: true, providerId: provider.id, error: (err as Error).message };
    }
  }

  return {
    load,
    insertDomain,
    dnsOf,
    mailRecordsOf,
    withPool,

    async add(actor: Actor, input: { domain: string; email_provider_id?: string }) {
      if (actor.domainId) throw forbidden('A domain-scoped key cannot add domains', 'wrong_credential');
      const name = normalizeDomainName(input.domain, deps.serviceDomain);
      // SPEC.md: paid plans may choose a provider; free plans are pinned to the platform default (the choice is ignored).
      const chosen =
        input.email_provider_id && (await deps.planOf(actor.userId)).paid ? input.email_provider_id : undefined;
      if (chosen && !deps.providers.byId(chosen))
        throw badRequest(`Unknown email_provider_id "${chosen}"`, 'unknown_provider');
      const row = await insertDomain(actor, name, { providerId: chosen });
      await deps.workflows.startDomainVerification({ domainId: row.id, userId: row.userId, domain: row.domain });
      const warnings = await warningsOf(row);
      return { domain: domainDto(row), dns: dnsOf(row), ...(warnings.length ? { warnings } : {}) };
    },

    async list(actor: Actor) {
      const rows = await db
        .select()
        .from(d)
        .where(and(eq(d.userId, actor.userId), ...(actor.domainId ? [eq(d.id, actor.domainId)] : [])))
        .orderBy(d.createdAt);
      return deps.enrich(rows.map(withPool), actor.userId);
    },

    async get(actor: Actor, id: string) {
      const row = await load(actor, id);
      const warnings = await warningsOf(row);
      return {
        domain: (await deps.enrich([withPool(row)], actor.userId))[0]!,
        dns: dnsOf(row),
        ...(warnings.length ? { warnings } : {}),
      };
    },

    async remove(actor: Actor, id: string) {
      const row = await load(actor, id);
      const warnings: string[] = [];
      const deregistered: string[] = [];
      try {
        await providerOf(row).deregister(row);
        deregistered.push(row.provider);
      } catch (err) {
        warnings.push(`deregister ${row.provider}: ${(err as Error).message}`);
      }
      let dnsDeleted = 0;
      try {
        dnsDeleted = await deps.cleanupHosted(row.id);
      } catch (err) {
        warnings.push(`hosted DNS: ${(err as Error).message}`);
      }
      await deps.workflows
        .stopDomainVerification(row.id)
        .catch((err: Error) => warnings.push(`verification workflow: ${err.message}`));
      await db.transaction(async (tx) => {
        await tx
          .delete(schema.apiKeys)
          .where(and(eq(schema.apiKeys.domainId, row.id), eq(schema.apiKeys.kind, 'scoped')));
        await tx.delete(schema.routes).where(eq(schema.routes.domainId, row.id));
        // Its mailboxes and the app passwords that opened them go with it.
        await tx.delete(schema.appPasswords).where(eq(schema.appPasswords.domainId, row.id));
        await deleteMailboxMessages(
          tx,
          inArray(
            schema.mailboxMessages.mailboxId,
            tx.select({ id: schema.mailboxes.id }).from(schema.mailboxes).where(eq(schema.mailboxes.domainId, row.id)),
          ),
        );
        await tx.delete(schema.mailboxes).where(eq(schema.mailboxes.domainId, row.id));
        // The reports receivers sent about it (docs/feedback.md) are the domain's: they go with it.
        await tx.delete(schema.dmarcRows).where(eq(schema.dmarcRows.domainId, row.id));
        await tx.delete(schema.dmarcReports).where(eq(schema.dmarcReports.domainId, row.id));
        await tx.delete(schema.tlsReports).where(eq(schema.tlsReports.domainId, row.id));
        await tx.delete(d).where(eq(d.id, row.id));
      });
      receivingConfigChanged();
      return { ok: true as const, cleanup: { deregistered, dnsDeleted, warnings } };
    },

    async verifyNow(actor: Actor, id: string) {
      const result = await runCheck(await load(actor, id));
      await deps.workflows.nudgeDomainVerification(id).catch(() => undefined);
      // A DKIM rotation waiting for its new record looks again now too.
      await deps.workflows.nudgeDkimRotation(id).catch(() => undefined);
      return result;
    },

    /** The verification loop's step: undefined when the domain is gone. */
    async checkById(id: string) {
      const [row] = await db.select().from(d).where(eq(d.id, id));
      if (!row) return undefined;
      const r = await runCheck(row);
      return { ...r, allPassed: r.checks.mx && r.checks.spf && r.checks.dkim && r.checks.dmarc };
    },

    /** Outbound-verified domains the actor may put in From. */
    async sendingDomains(actor: Actor): Promise<string[]> {
      const rows = await db
        .select({ id: d.id, domain: d.domain })
        .from(d)
        .where(
          and(eq(d.userId, actor.userId), eq(d.sendingEnabled, true), eq(d.spfVerified, 1), eq(d.dkimVerified, 1)),
        );
      return rows
        .filter((r) => !actor.domainId || r.id === actor.domainId)
        .map((r) => r.domain)
        .sort();
    },
  };
}
export type DomainService = ReturnType<typeof createDomainService>;
