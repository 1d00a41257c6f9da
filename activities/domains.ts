import type { DomainService } from '../core/domains/service.js';

/** Domain activities: the DNS check of the verification loop (reads DNS, writes the domain row; idempotent). */
export function domainActivities(deps: { domains: DomainService }) {
  return {
    async checkDomainDns(input: { domainId: string }) {
      const r = await deps.domains.checkById(input.domainId);
      return r && { status: r.status, checks: r.checks, allPassed: r.allPassed, checkedAt: r.checkedAt };
    },
  };
}
