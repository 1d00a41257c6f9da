import { and, eq, isNull } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { dkimRecordValue, generateDkimKey, type KeyHolder, type KeyOwner } from './dkim.js';
import { SIGNING_KEY_CACHE_MS } from '../transport/dkim.js';
import { BOUNCE_LABEL, MX_LABEL, type DnsRecordOut } from './records.js';
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
export function serviceDomainRecords(
  domain: string,
  opts: {
    publicKeyB64: string;
    publicIp?: string;
    selector?: string;
    otherKeys?: { selector: string; publicKeyB64: string }[];
  },
): DnsRecordOut[] {
  return [
    { type: 'MX', name: domain, value: domain, priority: 10 },
    ...(opts.publicIp && !opts.publicIp.includes(':')
      ? [{ type: 'A' as const, name: domain, value: opts.publicIp }]
      : []),
    // Each domain row's own MX host (<token>.mx.<domain>): one wildcard record (the built-in DNS server answers it itself).
    ...(opts.publicIp && !opts.publicIp.includes(':')
      ? [{ type: 'A' as const, name: `*.${MX_LABEL}.${domain}`, value: opts.publicIp }]
      : []),
    { type: 'TXT', name: domain, value: serviceSpf(opts.publicIp) },
    {
      type: 'TXT',
      name: `${opts.selector ?? SERVICE_DKIM_SELECTOR}._domainkey.${domain}`,
      value: dkimRecordValue(opts.publicKeyB64),
    },
    // During a rotation: the next key (published before it signs) and the previous one (its grace period).
    ...(opts.otherKeys ?? []).map((k) => ({
      type: 'TXT' as const,
      name: `${k.selector}._domainkey.${domain}`,
      value: dkimRecordValue(k.publicKeyB64),
    })),
    { type: 'TXT', name: `_dmarc.${domain}`, value: 'v=DMARC1; p=quarantine; adkim=r; aspf=r' },
    { type: 'MX', name: `${BOUNCE_LABEL}.${domain}`, value: domain, priority: 10 },
    { type: 'TXT', name: `${BOUNCE_LABEL}.${domain}`, value: `v=spf1 include:${domain} ~all` },
  ];
}

/** The id the rotation workflow and its activities use for SERVICE_DOMAIN's own key (`dkim-rotate-service`). */
export const SERVICE_ROTATION_ID = 'service';

/**
 * The service domain as a first-class sending domain: its DKIM key is created once at first boot
 * (race-safe: roles starting together insert-or-ignore on the domain name, then all read the winner's row)
 * and rotated like a customer domain's (docs/domains.md, DKIM key rotation): `keys` is its owner, over which
 * the rotation workflow runs the same steps with the id `service`. Each process reads the row again after
 * SIGNING_KEY_CACHE_MS, so a switch reaches every signer within it.
 */
export function createServiceDomain(deps: {
  db: Db;
  sealer: Sealer;
  domain: string;
  publicIp?: string;
  /** The built-in DNS server answers SERVICE_DOMAIN's zone (DNS_PORT): a new key is published at once. */
  servesZone?: boolean;
}) {
  const t = schema.serviceDomains;
  let ready: Promise<Row> | undefined;
  let cached: { at: number; row: Row } | undefined;

  async function load(): Promise<Row | undefined> {
    const [row] = await deps.db.select().from(t).where(eq(t.domain, deps.domain));
    return row;
  }

  async function create(): Promise<Row> {
    const existing = await load();
    if (existing) return existing;
    const key = await generateDkimKey();
    await deps.db
      .insert(t)
      .values({
        domain: deps.domain,
        dkimSelector: SERVICE_DKIM_SELECTOR,
        dkimPublicKey: key.publicKeyB64,
        dkimPrivateKeySealed: deps.sealer.seal(key.privateKeyPem),
        createdAt: Date.now(),
      })
      .onConflictDoNothing();
    const row = await load();
    if (!row) throw new Error(`the service domain ${deps.domain} could not be stored`);
    return row;
  }

  /** The row, created on first call (a failed attempt is retried on the next call), read again once it is SIGNING_KEY_CACHE_MS old. */
  async function ensure(): Promise<Row> {
    if (cached && Date.now() - cached.at < SIGNING_KEY_CACHE_MS) return cached.row;
    ready ??= create().catch((err) => {
      ready = undefined;
      throw err;
    });
    await ready;
    const row = (await load()) ?? (await ready);
    cached = { at: Date.now(), row };
    return row;
  }

  const holder = (row: Row): Row & KeyHolder => ({ ...row, hosted: Boolean(deps.servesZone) });

  /**
   * SERVICE_DOMAIN's key as a rotation's owner (core/domains/rotation-steps.ts): its zone counts as served here
   * when the built-in DNS server answers it, and its records are built from the row, so publishing adds nothing.
   */
  const keys: KeyOwner<Row & KeyHolder> = {
    // Read fresh, not from this process's copy: a rotation's steps derive each write from the row as it is.
    async read() {
      return holder((await load()) ?? (await ensure()));
    },
    async write(values, ifNoNext) {
      const mine = eq(t.domain, deps.domain);
      const [row] = await deps.db
        .update(t)
        .set(values)
        .where(ifNoNext ? and(mine, isNull(t.dkimNextSelector)) : mine)
        .returning();
      cached = undefined;
      return row && holder(row);
    },
    publish: async () => undefined,
  };

  return {
    domain: deps.domain,
    ensure,
    keys,
    /** What signs system mail: the service domain, its selector and the opened private key. */
    async signer(): Promise<ServiceSigner> {
      const row = await ensure();
      return { domain: row.domain, selector: row.dkimSelector, privateKey: deps.sealer.open(row.dkimPrivateKeySealed) };
    },
    /** The records to publish for SERVICE_DOMAIN (served by the built-in DNS server when DNS_PORT is set), a rotation's keys included. */
    async records(): Promise<DnsRecordOut[]> {
      const row = await ensure();
      const otherKeys = [
        ...(row.dkimNextSelector && row.dkimNextPublicKey
          ? [{ selector: row.dkimNextSelector, publicKeyB64: row.dkimNextPublicKey }]
          : []),
        ...(row.dkimPrevSelector && row.dkimPrevPublicKey
          ? [{ selector: row.dkimPrevSelector, publicKeyB64: row.dkimPrevPublicKey }]
          : []),
      ];
      return serviceDomainRecords(row.domain, {
        publicKeyB64: row.dkimPublicKey,
        selector: row.dkimSelector,
        publicIp: deps.publicIp,
        otherKeys,
      });
    },
  };
}
export type ServiceDomain = ReturnType<typeof createServiceDomain>;
