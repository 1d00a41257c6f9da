import { eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { conflict, forbidden, unavailable } from '../errors.js';
import { newId } from '../ids.js';
import { domainDto } from './dto.js';
import type { HostedZoneService } from './hosted.js';
import { normalizeDomainName } from './names.js';
import type { Contact, Registrar } from './registrar.js';
import type { Actor } from '../tenancy.js';
import type { DomainService } from './service.js';

/** Buying a domain: availability and price, then register + host its mail DNS + add it, in one call. */
export function createRegistrationService(deps: {
  db: Db;
  registrar: Registrar | undefined;
  serviceDomain: string;
  domains: DomainService;
  hosted: HostedZoneService;
}) {
  const { db, registrar } = deps;

  async function availability(name: string) {
    const a = await registrar!.check(name);
    const [ours] = await db
      .select({ id: schema.domainRegistrations.id })
      .from(schema.domainRegistrations)
      .where(eq(schema.domainRegistrations.domain, name));
    return ours ? { ...a, available: false, reason: 'Already registered' } : a;
  }

  return {
    async check(input: string) {
      const name = normalizeDomainName(input, deps.serviceDomain);
      if (!registrar)
        return {
          configured: false,
          domain: name,
          available: false,
          premium: false,
          reason: 'Domain registration is not configured on this server',
        };
      const a = await availability(name);
      return {
        configured: true,
        domain: name,
        available: a.available,
        premium: a.premium,
        reason: a.reason,
        ...(a.available && a.price ? { price: a.price } : {}),
      };
    },

    async register(actor: Actor, input: { domain: string; contact: Contact; years: number; dryRun: boolean }) {
      if (actor.domainId) throw forbidden('A domain-scoped key cannot register domains', 'wrong_credential');
      if (!registrar)
        throw unavailable('Domain registration is not configured on this server', 'registration_unavailable');
      const name = normalizeDomainName(input.domain, deps.serviceDomain);
      const a = await availability(name);
      if (!a.available) throw conflict(`${name} is not available: ${a.reason}`, 'domain_unavailable');
      if (a.premium) throw conflict(`${name} is a premium name and cannot be registered here`, 'premium_domain');
      const charge = { amount: a.price!.amount * input.years, currency: a.price!.currency, years: input.years };
      if (input.dryRun)
        return {
          registration: { status: 'dry_run' as const, reference: null, domain: name, charge },
          dryRun: true as const,
        };

      const result = await registrar.register(name, input.years, input.contact);
      await db.insert(schema.domainRegistrations).values({
        id: newId('reg'),
        userId: actor.userId,
        domain: name,
        registrar: registrar.name,
        status: result.status,
        reference: result.reference,
        years: input.years,
        amount: Math.round(charge.amount * 100),
        currency: charge.currency,
        contact: input.contact,
        createdAt: Date.now(),
      });
      const row = await deps.domains.insertDomain(actor, name, { verified: true, hosted: true });
      const records = deps.domains.mailRecordsOf(row);
      await deps.hosted.publish(row.id, records);
      return {
        registration: { status: result.status, reference: result.reference },
        domain: domainDto(row),
        dns: records,
        charge,
      };
    },
  };
}
export type RegistrationService = ReturnType<typeof createRegistrationService>;
