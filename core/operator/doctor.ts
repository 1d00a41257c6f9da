import { eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { Config } from '../config.js';
import { createResolver } from '../dns.js';
import { check, within, type CheckResult } from './checks.js';
import { checkServiceDns } from './dns-checks.js';
import { checkEgressSources } from './egress-checks.js';
import { checkOutboundMode, checkPort25, checkSecretKey, checkTlsCertificate } from './host-checks.js';
import { checkSubmissionCertificate, checkSubmissionPorts } from './submission-checks.js';

const DAY_MS = 86_400_000;
/** A domain whose MX answers on port 25 from anywhere: the target of the outbound port-25 probe. */
export const PORT25_PROBE_DOMAIN = 'gmail.com';

/** What the doctor reaches besides DNS: the database (absent when it could not be opened) and Temporal. */
export type DoctorDeps = {
  config: Config;
  database: { db: Db; ping(): Promise<void> } | { error: string };
  temporal: { ping(): Promise<void>; retentionMs(): Promise<number | null> } | { error: string };
  probeDomain?: string;
};

async function probe(id: string, what: string, fn: () => Promise<string>, fix: string): Promise<CheckResult> {
  const c = check(id, what);
  try {
    return c.ok(await within(5_000, what, fn));
  } catch (err) {
    return c.fail((err as Error).message, fix);
  }
}

/** The service domain's DKIM public key as stored at first boot (null before the service ever started). */
async function servicePublicKey(deps: DoctorDeps): Promise<string | null> {
  if ('error' in deps.database) return null;
  const t = schema.serviceDomains;
  const db = deps.database.db;
  const [row] = await within(5_000, 'service domain key', () =>
    db.select({ key: t.dkimPublicKey }).from(t).where(eq(t.domain, deps.config.serviceDomain)),
  ).catch(() => []);
  return row?.key ?? null;
}

async function checkTemporal(deps: DoctorDeps): Promise<CheckResult[]> {
  const { address, namespace } = deps.config.temporal;
  const where = `${address ?? 'the dev server'} (namespace ${namespace})`;
  const reach = check('temporal', `Temporal at ${where}`);
  const keep = check('temporal.retention', `retention of closed workflow runs in namespace ${namespace}`);
  if ('error' in deps.temporal)
    return [
      reach.fail(deps.temporal.error, 'start Temporal or fix TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE'),
      keep.skipped('Temporal is not reachable'),
    ];
  const t = deps.temporal;
  const reachable = await probe(
    'temporal',
    `Temporal at ${where}`,
    async () => {
      await t.ping();
      return 'reachable';
    },
    'start Temporal or fix TEMPORAL_ADDRESS',
  );
  if (reachable.status !== 'ok') return [reachable, keep.skipped('Temporal is not reachable')];
  const fix = `temporal operator namespace update --namespace ${namespace} --retention 7d`;
  try {
    const ms = await within(5_000, 'describeNamespace', () => t.retentionMs());
    if (ms === null) return [reachable, keep.fail('the namespace reports no retention', fix)];
    const days = ms / DAY_MS;
    const shown = days >= 1 ? `${+days.toFixed(1)} day${days === 1 ? '' : 's'}` : `${Math.round(ms / 3_600_000)} h`;
    return [
      reachable,
      days >= 1
        ? keep.ok(`${shown} (an operator can inspect a finished run that long)`)
        : keep.warn(`${shown}: finished runs vanish before anyone can look`, fix),
    ];
  } catch (err) {
    return [reachable, keep.fail((err as Error).message, fix)];
  }
}

/**
 * Every operator check in one pass, in a fixed order (see README, "Production checklist"): the service
 * domain's DNS through DNS_SERVERS, reverse DNS, outbound port 25, STARTTLS, the submission ports and their
 * certificate, SECRET_KEY, OUTBOUND_MODE, the egress sources of egress.toml (address, reverse DNS, EHLO name;
 * a relay's reachability), database and Temporal. Each probe has its own time limit, so the whole run is bounded.
 */
export async function runDoctor(deps: DoctorDeps): Promise<CheckResult[]> {
  const { config } = deps;
  const resolver = createResolver(config.dnsServers, 2_000);
  const database =
    'error' in deps.database
      ? check('database', 'database').fail(deps.database.error, 'start PostgreSQL or fix DATABASE_URL')
      : await probe(
          'database',
          `database (${config.databaseUrl ? 'PostgreSQL' : 'embedded PGlite'})`,
          async () => {
            await (deps.database as { ping(): Promise<void> }).ping();
            return 'reachable';
          },
          'start PostgreSQL or fix DATABASE_URL',
        );
  const [dns, port25, submission, egress, temporal] = await Promise.all([
    checkServiceDns(resolver, {
      domain: config.serviceDomain,
      publicKeyB64: await servicePublicKey(deps),
      publicIp: config.publicIp,
    }),
    checkPort25(resolver, config, deps.probeDomain ?? PORT25_PROBE_DOMAIN),
    checkSubmissionPorts(resolver, config),
    checkEgressSources(resolver, config.egress, config.serviceDomain),
    checkTemporal(deps),
  ]);
  return [
    ...dns,
    port25,
    checkTlsCertificate(config),
    ...submission,
    checkSubmissionCertificate(config),
    checkSecretKey(config),
    checkOutboundMode(config),
    ...egress,
    database,
    ...temporal,
  ];
}
