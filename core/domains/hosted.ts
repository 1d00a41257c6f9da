import { randomInt } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { badRequest, conflict } from '../errors.js';
import { newId } from '../ids.js';
import { domainDto, type DomainRow } from './dto.js';
import { isWithin } from './names.js';
import { MX_LABEL, REPORT_LABEL, type DnsRecordOut } from './records.js';
import type { Actor } from '../tenancy.js';
import type { DomainService } from './service.js';

const RESERVED = new Set([
  'www',
  'mail',
  'smtp',
  'imap',
  'pop',
  'pop3',
  'mx',
  'ns',
  'ns1',
  'ns2',
  'dns',
  'api',
  'app',
  'admin',
  'root',
  'postmaster',
  'abuse',
  'hostmaster',
  'webmaster',
  'support',
  'help',
  'status',
  'billing',
  'security',
  'dashboard',
  'bounces',
  'dmarc',
  'autoconfig',
  'autodiscover',
  'localhost',
  'test',
  'staging',
  'dev',
  'docs',
  'blog',
  'oauth',
  'login',
  'auth',
]);

export type SubdomainCheck = { available: boolean; reason?: string; domain?: string };

/** Hosted subdomains under SERVICE_DOMAIN and the hosted zone records the built-in DNS server answers from. */
export function createHostedZoneService(deps: {
  db: Db;
  base: string;
  domains: () => DomainService;
  ownRecords?: () => Promise<DnsRecordOut[]>;
}) {
  const { db, base } = deps;
  const h = schema.hostedDnsRecords;

  async function taken(fqdn: string): Promise<boolean> {
    const [row] = await db
      .select({ id: schema.domains.id })
      .from(schema.domains)
      .where(eq(schema.domains.domain, fqdn))
      .limit(1);
    return Boolean(row);
  }

  async function check(input: string): Promise<SubdomainCheck & { label: string }> {
    let label = input.trim().toLowerCase().replace(/\.$/, '');
    if (label.endsWith(`.${base}`)) label = label.slice(0, -(base.length + 1));
    const formable = /^[a-z0-9-]+$/.test(label);
    const domain = formable ? `${label}.${base}` : undefined;
    const no = (reason: string) => ({ available: false, reason, label, ...(domain ? { domain } : {}) });
    if (label.includes('.')) return no('Use a single label (no dots)');
    if (label.length < 3) return no('At least 3 characters');
    if (label.length > 32) return no('At most 32 characters');
    if (!formable) return no('Use letters, numbers and hyphens only');
    if (label.startsWith('-') || label.endsWith('-')) return no('Cannot start or end with a hyphen');
    if (RESERVED.has(label)) return no('That subdomain is reserved');
    if (await taken(domain!)) return no('Already taken');
    return { available: true, label, domain };
  }

  /** Writes a domain's records into the hosted zone (replacing any it had). */
  async function publish(domainId: string, records: DnsRecordOut[]): Promise<void> {
    const now = Date.now();
    await db.transaction(async (tx) => {
      await tx.delete(h).where(eq(h.domainId, domainId));
      if (records.length > 0) {
        await tx.insert(h).values(
          records.map((r) => ({
            id: newId('dns'),
            domainId,
            name: r.name,
            type: r.type,
            value: r.value,
            priority: r.priority ?? null,
            createdAt: now,
          })),
        );
      }
    });
  }

  return {
    check: async (name: string): Promise<SubdomainCheck> => {
      const { label: _label, ...rest } = await check(name);
      return rest;
    },

    async suggest() {
      for (let i = 0; i < 20; i++) {
        const label = `mail-${randomInt(36 ** 5)
          .toString(36)
          .padStart(5, '0')}`;
        if (!(await taken(`${label}.${base}`))) return { subdomain: label, domain: `${label}.${base}`, base };
      }
      throw new Error('could not find a free subdomain');
    },

    async claim(actor: Actor, subdomain: string) {
      if (actor.domainId) throw badRequest('A domain-scoped key cannot add domains', 'wrong_credential');
      const c = await check(subdomain);
      if (!c.available) {
        if (c.reason === 'Already taken') throw conflict(`${c.domain} is already taken`, 'subdomain_taken');
        throw badRequest(c.reason!, 'invalid_subdomain');
      }
      const domains = deps.domains();
      let row: DomainRow;
      try {
        row = await domains.insertDomain(actor, c.domain!, { verified: true, hosted: true });
      } catch (err) {
        if ((err as { code?: string }).code === '23505')
          throw conflict(`${c.domain} is already taken`, 'subdomain_taken');
        throw err;
      }
      await publish(row.id, domains.mailRecordsOf(row));
      return { domain: domainDto(row), dns: [] as DnsRecordOut[] };
    },

    publish,

    /** Removes a domain's hosted records; answers how many were deleted. */
    async cleanup(domainId: string): Promise<number> {
      const gone = await db.delete(h).where(eq(h.domainId, domainId)).returning({ id: h.id });
      return gone.length;
    },

    /** The built-in DNS server's view: authoritative for SERVICE_DOMAIN and for hosted (registered) domains. */
    async lookup(name: string, type: string) {
      const authorization = await reportAuthorization(name);
      if (authorization)
        return {
          authoritative: true,
          nameExists: true,
          records: type === 'TXT' ? [{ name, type: 'TXT' as const, value: 'v=DMARC1' }] : [],
        };
      const rows = await db.select().from(h).where(eq(h.name, name));
      // SERVICE_DOMAIN's own records (MX, SPF include target, DKIM of system mail, DMARC, the bounces. return path);
      // each domain row's own MX host (<token>.mx.<base>) has the addresses of SERVICE_DOMAIN itself.
      const ownName = isRowMxHost(name) ? base : name;
      const own =
        isWithin(name, base) && deps.ownRecords
          ? (await deps.ownRecords())
              .filter((r) => r.name === ownName && (ownName === name || r.type === 'A'))
              .map((r) => ({ ...r, name }))
          : [];
      const authoritative = isWithin(name, base) || rows.length > 0 || (await hostsZoneOf(name));
      return {
        authoritative,
        nameExists: rows.length > 0 || own.length > 0 || name === base || isRowMxHost(name),
        records: [
          ...own
            .filter((r) => r.type === type)
            .map((r) => ({ name: r.name, type: r.type, value: r.value, priority: r.priority })),
          ...rows
            .filter((r) => r.type === type || r.type === 'CNAME')
            .map((r) => ({
              name: r.name,
              type: r.type as 'MX',
              value: r.value,
              priority: r.priority ?? undefined,
              ttl: r.ttl,
            })),
        ],
      };
    },
  };

  /**
   * RFC 7489 §7.1: a domain whose DMARC record sends reports to `dmarc@<base>` must be authorized by
   * `<domain>._report._dmarc.<base>` TXT "v=DMARC1"; answered for every domain that has a row here.
   */
  async function reportAuthorization(name: string): Promise<boolean> {
    const suffix = `.${REPORT_LABEL}.${base}`;
    if (!name.endsWith(suffix)) return false;
    const domain = name.slice(0, -suffix.length);
    if (!domain || domain.length > 253) return false;
    const [row] = await db
      .select({ id: schema.domains.id })
      .from(schema.domains)
      .where(eq(schema.domains.domain, domain))
      .limit(1);
    return Boolean(row);
  }

  /** `<label>.mx.<base>`: the MX host of one domain row (core/domains/records.ts mxHostOf). */
  function isRowMxHost(name: string): boolean {
    const suffix = `.${MX_LABEL}.${base}`;
    return name.endsWith(suffix) && /^[a-z0-9-]{1,63}$/.test(name.slice(0, -suffix.length));
  }

  async function hostsZoneOf(name: string): Promise<boolean> {
    const [row] = await db
      .select({ id: schema.domains.id })
      .from(schema.domains)
      .where(
        and(
          eq(schema.domains.hosted, true),
          sql`(${name} = ${schema.domains.domain} or ${name} like '%.' || ${schema.domains.domain})`,
        ),
      )
      .limit(1);
    return Boolean(row);
  }
}
export type HostedZoneService = ReturnType<typeof createHostedZoneService>;
