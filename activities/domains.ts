import type { DkimRotation } from '../core/domains/rotation.js';
import type { DomainService } from '../core/domains/service.js';
import type { DkimRotationWorkflows } from '../core/ports/domains.js';

/** Domain activities: the DNS check of the verification loop and the steps of a DKIM rotation (each idempotent). */
export function domainActivities(deps: {
  domains: DomainService;
  dkimRotation: DkimRotation;
  workflows: DkimRotationWorkflows;
}) {
  return {
    async checkDomainDns(input: { domainId: string }) {
      const r = await deps.domains.checkById(input.domainId);
      return r && { status: r.status, checks: r.checks, allPassed: r.allPassed, checkedAt: r.checkedAt };
    },
    beginDkimRotation: (input: { domainId: string }) => deps.dkimRotation.begin(input.domainId),
    dkimNextPublished: (input: { domainId: string }) => deps.dkimRotation.nextPublished(input.domainId),
    switchDkimKey: (input: { domainId: string }) => deps.dkimRotation.switchKey(input.domainId),
    retireDkimKey: (input: { domainId: string }) => deps.dkimRotation.retire(input.domainId),
    abandonDkimRotation: (input: { domainId: string }) => deps.dkimRotation.abandon(input.domainId),
    /** Starts the rotation of every due domain (starting one already running keeps it); answers how many. */
    async startDueDkimRotations(input: { olderThanMs: number; limit: number }) {
      const ids = await deps.dkimRotation.due(input.olderThanMs, input.limit);
      for (const id of ids) await deps.workflows.startDkimRotation(id);
      return ids.length;
    },
  };
}
