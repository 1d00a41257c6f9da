import { eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, notFound } from '../errors.js';
import { domainDto } from './dto.js';
import type { Actor } from '../tenancy.js';
import { receivingConfigChanged } from '../mail/config-changes.js';
import type { DomainService } from './service.js';

export const TLS_MODES = ['opportunistic', 'enforced'] as const;
export type TlsMode = (typeof TLS_MODES)[number];

/** The domain settings a caller may set (SPEC.md Domain): flags as 0/1 as stored, or a boolean; the TLS requirement. */
export type DomainSettings = { zero_retention?: 0 | 1 | boolean; track_opens?: 0 | 1 | boolean; tls?: TlsMode };

/**
 * PATCH /api/domains/:id: zero retention of inbound mail, the domain-wide default for open tracking, and
 * the TLS requirement of its outbound mail (`enforced`: only over verified TLS, else deferred, then bounced
 * `tls_required`; docs/domains.md, Providers, pools and TLS).
 */
export function createDomainSettings(deps: { db: Db; domains: DomainService }) {
  const d = schema.domains;
  const flag = (v: 0 | 1 | boolean | undefined) => (v === undefined ? undefined : v === true || v === 1 ? 1 : 0);
  return {
    /** Writes the given settings of a domain the actor may see (a scoped key: its own); answers the stored row. */
    async update(actor: Actor, id: string, input: DomainSettings) {
      await deps.domains.load(actor, id);
      if (input.tls !== undefined && !TLS_MODES.includes(input.tls))
        throw badRequest('tls is "opportunistic" or "enforced"', 'validation_error');
      const values = { zeroRetention: flag(input.zero_retention), trackOpens: flag(input.track_opens), tls: input.tls };
      if (Object.values(values).every((v) => v === undefined))
        throw badRequest('Give zero_retention, track_opens and/or tls', 'validation_error');
      const [row] = await deps.db
        .update(d)
        .set({ ...values, updatedAt: Date.now() })
        .where(eq(d.id, id))
        .returning();
      receivingConfigChanged();
      if (!row) throw notFound('Domain not found');
      return { domain: domainDto(deps.domains.withPool(row)) };
    },
  };
}
export type DomainSettingsService = ReturnType<typeof createDomainSettings>;
