import type { Resolver } from 'node:dns/promises';
import { and, asc, eq, isNull, lt, or } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { Sealer } from '../secrets.js';
import { dkimKeyPublished } from './check.js';
import { generateDkimKey } from './dkim.js';
import type { DomainRow, EnrichedDomain } from './dto.js';
import type { DnsRecordOut } from './records.js';
import type { DkimRotationWorkflows } from '../ports/domains.js';
import type { Actor } from '../tenancy.js';
import { conflict, notFound } from '../errors.js';
import { SERVICE_ROTATION_ID, type ServiceDomain } from './service-domain.js';
import { nextSelector, type RotationStep } from './rotation-steps.js';

export { nextSelector, type RotationStep } from './rotation-steps.js';

/**
 * The steps of a DKIM key rotation (docs/domains.md), each idempotent so the rotation workflow can retry
 * any of them: create the next key and publish it, see it resolve, switch signing to it (the old key stays
 * published), retire the old key. `republish` rewrites a hosted zone's records from the row.
 */
export function createDkimRotation(deps: {
  db: Db; sealer: Sealer; resolver: Resolver; workflows: DkimRotationWorkflows; republish(row: DomainRow): Promise<void>;
  /** The domain service's tenant-scoped read (404 for anything the actor may not see) and its detail view. */
  load(actor: Actor, id: string): Promise<DomainRow>;
  get(actor: Actor, id: string): Promise<{ domain: EnrichedDomain; dns: DnsRecordOut[] }>;
  /** SERVICE_DOMAIN's own key: the steps run with the id `service` go to it. */
  service?: ServiceDomain;
}) {
  const { db } = deps;
  const d = schema.domains;
  const load = async (id: string) => (await db.select().from(d).where(eq(d.id, id)))[0];
  async function update(id: string, values: Partial<typeof d.$inferInsert>): Promise<DomainRow | undefined> {
    const [row] = await db.update(d).set({ ...values, updatedAt: Date.now() }).where(eq(d.id, id)).returning();
    if (row?.hosted) await deps.republish(row);
    return row;
  }

  const steps = {
    /** Creates the next key under a new selector (kept when one is already waiting) and publishes it in a hosted zone. */
    async begin(domainId: string): Promise<RotationStep> {
      if (domainId === SERVICE_ROTATION_ID && deps.service) return deps.service.rotation.begin();
      let row = await load(domainId);
      if (!row) return { state: 'gone' };
      if (!row.dkimNextSelector) {
        const key = await generateDkimKey();
        const selector = nextSelector(row.dkimSelector, row.dkimPrevSelector);
        // Only the first writer's key counts (a retried activity keeps it).
        const [won] = await db.update(d).set({
          dkimNextSelector: selector, dkimNextPublicKey: key.publicKeyB64, dkimNextPrivateKeySealed: deps.sealer.seal(key.privateKeyPem), updatedAt: Date.now(),
        }).where(and(eq(d.id, domainId), isNull(d.dkimNextSelector))).returning();
        row = won ?? (await load(domainId));
        if (!row) return { state: 'gone' };
      }
      if (row.hosted) await deps.republish(row);
      return { state: 'ready', selector: row.dkimNextSelector!, hosted: row.hosted };
    },

    /** Whether the next key resolves (a hosted zone serves it at once); false while it does not, or DNS failed. */
    async nextPublished(domainId: string): Promise<boolean | 'gone'> {
      if (domainId === SERVICE_ROTATION_ID && deps.service) return deps.service.rotation.nextPublished();
      const row = await load(domainId);
      if (!row) return 'gone';
      if (!row.dkimNextSelector || !row.dkimNextPublicKey) return true; // already switched (a retried step)
      if (row.hosted) return true;
      return (await dkimKeyPublished(deps.resolver, { domain: row.domain, selector: row.dkimNextSelector, publicKeyB64: row.dkimNextPublicKey })) === true;
    },

    /** Signing moves to the next key; the old one stays published as the previous key. Idempotent. */
    async switchKey(domainId: string): Promise<{ selector: string } | undefined> {
      if (domainId === SERVICE_ROTATION_ID && deps.service) return deps.service.rotation.switchKey();
      const row = await load(domainId);
      if (!row) return undefined;
      if (!row.dkimNextSelector || !row.dkimNextPublicKey || !row.dkimNextPrivateKeySealed) return { selector: row.dkimSelector };
      const done = await update(domainId, {
        dkimPrevSelector: row.dkimSelector, dkimPrevPublicKey: row.dkimPublicKey,
        dkimSelector: row.dkimNextSelector, dkimPublicKey: row.dkimNextPublicKey, dkimPrivateKeySealed: row.dkimNextPrivateKeySealed,
        dkimNextSelector: null, dkimNextPublicKey: null, dkimNextPrivateKeySealed: null, dkimRotatedAt: Date.now(),
      });
      return done && { selector: done.dkimSelector };
    },

    /** The grace period is over: the previous key is no longer published. */
    async retire(domainId: string): Promise<void> {
      if (domainId === SERVICE_ROTATION_ID && deps.service) return deps.service.rotation.retire();
      await update(domainId, { dkimPrevSelector: null, dkimPrevPublicKey: null });
    },

    /** A next key that never resolved before the deadline is dropped; signing never moved. */
    async abandon(domainId: string): Promise<void> {
      if (domainId === SERVICE_ROTATION_ID && deps.service) return deps.service.rotation.abandon();
      await update(domainId, { dkimNextSelector: null, dkimNextPublicKey: null, dkimNextPrivateKeySealed: null });
    },

    /** Domains whose signing key is older than `olderThanMs` and sending (and `service`, SERVICE_DOMAIN's own key): due for the scheduled rotation. */
    async due(olderThanMs: number, limit: number): Promise<string[]> {
      const service = deps.service && (await deps.service.rotation.due(olderThanMs)) ? [SERVICE_ROTATION_ID] : [];
      const before = Date.now() - olderThanMs;
      const rows = await db.select({ id: d.id }).from(d).where(and(
        eq(d.sendingEnabled, true), isNull(d.dkimNextSelector),
        or(lt(d.dkimRotatedAt, before), and(isNull(d.dkimRotatedAt), lt(d.createdAt, before))),
      )).orderBy(asc(d.createdAt)).limit(limit);
      return [...service, ...rows.map((r) => r.id)];
    },
  };

  return {
    ...steps,
    /**
     * POST /api/domains/:id/dkim/rotate: creates the next key (so the answer lists its record in `dns`) and
     * starts the domain's rotation workflow; 409 while a rotation is under way (a key waiting or in its grace period).
     */
    async request(actor: Actor, id: string) {
      const row = await deps.load(actor, id);
      if (row.dkimNextSelector || row.dkimPrevSelector) throw conflict(`A DKIM rotation of ${row.domain} is already under way`, 'dkim_rotation_in_progress');
      const step = await steps.begin(row.id);
      if (step.state === 'gone') throw notFound('Domain not found');
      let started: boolean;
      try {
        started = await deps.workflows.startDkimRotation(row.id);
      } catch (err) {
        // No workflow will take the key on: drop it, so the next request can start over.
        await steps.abandon(row.id);
        throw err;
      }
      if (!started) throw conflict(`A DKIM rotation of ${row.domain} is already under way`, 'dkim_rotation_in_progress');
      const view = await deps.get(actor, id);
      return { ...view, rotation: { selector: step.selector, previousSelector: row.dkimSelector, published: step.hosted } };
    },

    /**
     * POST /api/service-domain/dkim/rotate (operator): the same for SERVICE_DOMAIN's own key, which signs
     * system mail; its workflow is `dkim-rotate-service`. 409 while a rotation is under way.
     */
    async requestService() {
      const service = deps.service;
      if (!service) throw notFound('No service domain');
      const inProgress = () => conflict(`A DKIM rotation of ${service.domain} is already under way`, 'dkim_rotation_in_progress');
      if (await service.rotation.underWay()) throw inProgress();
      const current = await service.ensure();
      const step = await service.rotation.begin();
      if (step.state === 'gone') throw notFound('No service domain');
      let started: boolean;
      try {
        started = await deps.workflows.startDkimRotation(SERVICE_ROTATION_ID);
      } catch (err) {
        await service.rotation.abandon();
        throw err;
      }
      if (!started) throw inProgress();
      return { domain: service.domain, dns: await service.records(), rotation: { selector: step.selector, previousSelector: current.dkimSelector, published: step.hosted } };
    },
  };
}
export type DkimRotation = ReturnType<typeof createDkimRotation>;
