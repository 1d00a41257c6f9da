import { eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { dkimRecordValue, generateDkimKey } from '../domains/dkim.js';
import { BOUNCE_LABEL, MX_LABEL, type DnsRecordOut } from '../domains/records.js';
import type { Sealer } from '../secrets.js';

/** Selector of the service domain's DKIM key (`svc1._domainkey.<SERVICE_DOMAIN>`), the same as customer domains use. */
export const SERVICE_DKIM_SELECTOR = 'svc1';
type Row = typeof schema.serviceDomains.$inferSelect;
export type ServiceSigner = { domain: string; selector: string; privateKey: string };

/** The SPF record of SERVICE_DOMAIN: the target customers' `include:` points to, so it lists where mail leaves from. */
export const serviceSpf = (publicIp: string | undefined) =>
  `v=spf1 a mx${publicIp ? ` ${publicIp.includes(':') ? 'ip6' : 'ip4'}:${publicIp}` : ''} ~all`;

/**
 * The records SERVICE_DOMAIN itself needs (the ones the doctor checks): the MX customers' MX points to
 * and its address, the SPF include target, the DKIM key of system mail, DMARC, and the `bounces.` return path.
 */
export function serviceDomainRecords(domain: string, opts: { publicKeyB64: string; publicIp?: string }): DnsRecordOut[] {
  return [
    { type: 'MX', name: domain, value: domain, priority: 10 },
    ...(opts.publicIp && !opts.publicIp.includes(':') ? [{ type: 'A' as const, name: domain, value: opts.publicIp }] : []),
    // Each domain row's own MX host (<token>.mx.<domain>): one wildcard record (the built-in DNS server answers it itself).
    ...(opts.publicIp && !opts.publicIp.includes(':') ? [{ type: 'A' as const, name: `*.${MX_LABEL}.${domain}`, value: opts.publicIp }] : []),
    { type: 'TXT', name: domain, value: serviceSpf(opts.publicIp) },
    { type: 'TXT', name: `${SERVICE_DKIM_SELECTOR}._domainkey.${domain}`, value: dkimRecordValue(opts.publicKeyB64) },
    { type: 'TXT', name: `_dmarc.${domain}`, value: 'v=DMARC1; p=quarantine; adkim=r; aspf=r' },
    { type: 'MX', name: `${BOUNCE_LABEL}.${domain}`, value: domain, priority: 10 },
    { type: 'TXT', name: `${BOUNCE_LABEL}.${domain}`, value: `v=spf1 include:${domain} ~all` },
  ];
}

/**
 * The service domain as a first-class sending domain: its DKIM key is created once at first boot
 * (race-safe: roles starting together insert-or-ignore on the domain name, then all read the winner's row).
 */
export function createServiceDomain(deps: { db: Db; sealer: Sealer; domain: string; publicIp?: string }) {
  const t = schema.serviceDomains;
  let ready: Promise<Row> | undefined;

  async function load(): Promise<Row | undefined> {
    const [row] = await deps.db.select().from(t).where(eq(t.domain, deps.domain));
    return row;
  }

  async function create(): Promise<Row> {
    const existing = await load();
    if (existing) return existing;
    const key = await generateDkimKey();
    await deps.db.insert(t).values({
      domain: deps.domain, dkimSelector: SERVICE_DKIM_SELECTOR, dkimPublicKey: key.publicKeyB64,
      dkimPrivateKeySealed: deps.sealer.seal(key.privateKeyPem), createdAt: Date.now(),
    }).onConflictDoNothing();
    const row = await load();
    if (!row) throw new Error(`the service domain ${deps.domain} could not be stored`);
    return row;
  }

  /** The row, created on first call; a failed attempt is retried on the next call. */
  function ensure(): Promise<Row> {
    ready ??= create().catch((err) => {
      ready = undefined;
      throw err;
    });
    return ready;
  }

  return {
    domain: deps.domain,
    ensure,
    /** What signs system mail: the service domain, its selector and the opened private key. */
    async signer(): Promise<ServiceSigner> {
      const row = await ensure();
      return { domain: row.domain, selector: row.dkimSelector, privateKey: deps.sealer.open(row.dkimPrivateKeySealed) };
    },
    /** The records to publish for SERVICE_DOMAIN (served by the built-in DNS server when DNS_PORT is set). */
    async records(): Promise<DnsRecordOut[]> {
      const row = await ensure();
      return serviceDomainRecords(row.domain, { publicKeyB64: row.dkimPublicKey, publicIp: deps.publicIp });
    },
  };
}
export type ServiceDomain = ReturnType<typeof createServiceDomain>;
