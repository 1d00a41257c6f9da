import { eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, notFound } from '../errors.js';
import { domainDto } from './dto.js';
import type { Actor } from '../tenancy.js';
import type { DomainService } from './service.js';

/** The domain flags a caller may set (SPEC.md Domain): 0/1 as stored, or a boolean. */
export type DomainSettings = { zero_retention?: 0 | 1 | boolean; track_opens?: 0 | 1 | boolean };

/** PATCH /api/domains/:id: zero retention of inbound mail and the domain-wide default for open tracking. */
export function createDomainSettings(deps: { db: Db; domains: DomainService }) {
  const d = schema.domains;
  const flag = (v: 0 | 1 | boolean | undefined) => (v === undefined ? undefined : v === true || v === 1 ? 1 : 0);
  return {
    /** Writes the given flags of a domain the actor may see (a scoped key: its own); answers the stored row. */
    async update(actor: Actor, id: string, input: DomainSettings) {
      await deps.domains.load(actor, id);
      const values = { zeroRetention: flag(input.zero_retention), trackOpens: flag(input.track_opens) };
      if (values.zeroRetention === undefined && values.trackOpens === undefined)
        throw badRequest('Give zero_retention and/or track_opens', 'validation_error');
      const [row] = await deps.db
        .update(d)
        .set({ ...values, updatedAt: Date.now() })
        .where(eq(d.id, id))
        .returning();
      if (!row) throw notFound('Domain not found');
      return { domain: domainDto(row) };
    },
  };
}
export type DomainSettingsService = ReturnType<typeof createDomainSettings>;
