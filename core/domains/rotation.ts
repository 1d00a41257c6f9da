import type { Resolver } from 'node:dns/promises';
import { and, asc, eq, isNull, lt, or } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { Sealer } from '../secrets.js';
import { rotationUnderWay, type KeyOwner } from './dkim.js';
import type { DomainRow, EnrichedDomain } from './dto.js';
import type { DnsRecordOut } from './records.js';
import type { DkimRotationWorkflows } from '../ports/domains.js';
import type { Actor } from '../tenancy.js';
import { conflict, notFound } from '../errors.js';
import { SERVICE_ROTATION_ID, type ServiceDomain } from './service-domain.js';
import { rotationSteps } from './rotation-steps.js';

/**
 * DKIM key rotation (docs/domains.md): the steps of core/domains/rotation-steps.ts run with a domain's id over
 * that domain's row, and with the id `service` over SERVICE_DOMAIN's own key; each is idempotent so the rotation
 * workflow can retry any of them. `republish` rewrites a hosted zone's records from the row.
 */
export function createDkimRotation(deps: {
  db: Db;
  sealer: Sealer;
  resolver: Resolver;
  workflows: DkimRotationWorkflows;
  republish(row: DomainRow): Promise<void>;
  /** The domain service's tenant-scoped read (404 for anything the actor may not see) and its detail view. */
  load(actor: Actor, id: string): Promise<DomainRow>;
  get(actor: Actor, id: string): Promise<{ domain: EnrichedDomain; dns: DnsRecordOut[] }>;
  /** SERVICE_DOMAIN's own key: the steps run with the id `service` go to it. */
  service?: ServiceDomain;
}) {
  const { db } = deps;
  const d = schema.domains;

  /** A domain row's key as a rotation's owner: each write stamps `updated_at`; a hosted zone is rewritten from it. */
  const domainKeys = (id: string): KeyOwner<DomainRow> => ({
    read: async () => (await db.select().from(d).where(eq(d.id, id)))[0],
    async write(values, ifNoNext) {
      const where = ifNoNext ? and(eq(d.id, id), isNull(d.dkimNextSelector)) : eq(d.id, id);
      return (
        await db
          .update(d)
          .set({ ...values, updatedAt: Date.now() })
          .where(where)
          .returning()
      )[0];
    },
    async publish(row) {
      if (row.hosted) await deps.republish(row);
    },
  });
  const stepsOf = (id: string) =>
    id === SERVICE_ROTATION_ID && deps.service
      ? rotationSteps(deps.service.keys, deps)
      : rotationSteps(domainKeys(id), deps);

  /** SERVICE_DOMAIN's key is due: older than `olderThanMs` (this process's copy of its row), no rotation under way. */
  async function serviceDue(olderThanMs: number): Promise<boolean> {
    if (!deps.service) return false;
    const row = await deps.service.ensure();
    return !rotationUnderWay(row) && (row.dkimRotatedAt ?? row.createdAt) < Date.now() - olderThanMs;
  }

  const steps = {
    /** Creates the next key under a new selector (kept when one is already waiting), publishes it in a hosted zone. */
    begin: (domainId: string) => stepsOf(domainId).begin(),
    /** Whether the next key resolves (a hosted zone serves it at once); false while it does not, or DNS failed. */
    nextPublished: (domainId: string) => stepsOf(domainId).nextPublished(),
    /** Signing moves to the next key; the old one stays published as the previous key. Idempotent. */
    switchKey: (domainId: string) => stepsOf(domainId).switchKey(),
    /** The grace period is over: the previous key is no longer published. */
    retire: (domainId: string) => stepsOf(domainId).retire(),
    /** A next key that never resolved before the deadline is dropped; signing never moved. */
    abandon: (domainId: string) => stepsOf(domainId).abandon(),

    /**
     * Domains whose signing key is older than `olderThanMs` and sending (and `service`, SERVICE_DOMAIN's own key):
     * due for the scheduled rotation.
     */
    async due(olderThanMs: number, limit: number): Promise<string[]> {
      const service = (await serviceDue(olderThanMs)) ? [SERVICE_ROTATION_ID] : [];
      const before = Date.now() - olderThanMs;
      const rows = await db
        .select({ id: d.id })
        .from(d)
        .where(
          and(
            eq(d.sendingEnabled, true),
            isNull(d.dkimNextSelector),
            or(lt(d.dkimRotatedAt, before), and(isNull(d.dkimRotatedAt), lt(d.createdAt, before))),
          ),
        )
        .orderBy(asc(d.createdAt))
        .limit(limit);
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
      if (rotationUnderWay(row))
        throw conflict(`A DKIM rotation of ${row.domain} is already under way`, 'dkim_rotation_in_progress');
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
      if (!started)
        throw conflict(`A DKIM rotation of ${row.domain} is already under way`, 'dkim_rotation_in_progress');
      const view = await deps.get(actor, id);
      return {
        ...view,
        rotation: { selector: step.selector, previousSelector: row.dkimSelector, published: step.hosted },
      };
    },

    /**
     * POST /api/service-domain/dkim/rotate (operator): the same for SERVICE_DOMAIN's own key, which signs
     * system mail; its workflow is `dkim-rotate-service`. 409 while a rotation is under way.
     */
    async requestService() {
      const service = deps.service;
      if (!service) throw notFound('No service domain');
      const inProgress = () =>
        conflict(`A DKIM rotation of ${service.domain} is already under way`, 'dkim_rotation_in_progress');
      const keys = await service.keys.read();
      if (keys && rotationUnderWay(keys)) throw inProgress();
      const current = await service.ensure();
      const serviceSteps = rotationSteps(service.keys, deps);
      const step = await serviceSteps.begin();
      if (step.state === 'gone') throw notFound('No service domain');
      let started: boolean;
      try {
        started = await deps.workflows.startDkimRotation(SERVICE_ROTATION_ID);
      } catch (err) {
        await serviceSteps.abandon();
        throw err;
      }
      if (!started) throw inProgress();
      return {
        domain: service.domain,
        dns: await service.records(),
        rotation: { selector: step.selector, previousSelector: current.dkimSelector, published: step.hosted },
      };
    },
  };
}
export type DkimRotation = ReturnType<typeof createDkimRotation>;
