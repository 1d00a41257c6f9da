import { createHash } from 'node:crypto';
import { and, eq, gte, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { DmarcReport, TlsReport } from '../parsing/aggregate-types.js';
import { reportsReceived } from '../metrics.js';
import { log } from '../log.js';

/**
 * Reports kept per domain, kind and UTC day, and DMARC rows kept per domain and day: anyone can mail a
 * report, so what outside senders can make the platform store for a domain is bounded (docs/feedback.md).
 */
export const REPORTS_PER_DOMAIN_DAY = 200;
export const DMARC_ROWS_PER_DOMAIN_DAY = 50_000;
const DAY = 86_400_000;

const reportKey = (prefix: string, ...parts: string[]) =>
  `${prefix}_${createHash('sha256').update(parts.join('\0')).digest('base64url').slice(0, 24)}`;
const dayOf = (ms: number) => Math.floor(ms / DAY) * DAY;

export type StoreOutcome = 'stored' | 'duplicate' | 'unknown_domain' | 'over_daily_cap';

/**
 * DMARC aggregate and TLS reports received for the platform's domains, stored per domain row (the
 * verified row of the name; a report about a name no account holds verified is dropped). A report is
 * kept once per (domain, reporter, report id), and at most REPORTS_PER_DOMAIN_DAY per domain and day.
 */
export function createAggregateStore(deps: { db: Db }) {
  const { db } = deps;
  const d = schema.domains;

  /** The verified domain rows among `names` (a report may cover subdomains through their header From). */
  async function domainsNamed(names: string[]) {
    if (names.length === 0) return new Map<string, { id: string; userId: string }>();
    const rows = await db
      .select({ id: d.id, userId: d.userId, domain: d.domain })
      .from(d)
      .where(and(inArray(d.domain, names), eq(d.status, 'verified')));
    return new Map(rows.map((r) => [r.domain, { id: r.id, userId: r.userId }]));
  }

  async function underCap(table: typeof schema.dmarcReports | typeof schema.tlsReports, domainId: string, rows = 0) {
    const records = table === schema.dmarcReports ? sql`${schema.dmarcReports.records}` : sql`0`;
    const [row] = await db
      .select({ n: sql<number>`count(*)::int`, records: sql<number>`coalesce(sum(${records}), 0)::int` })
      .from(table)
      .where(and(eq(table.domainId, domainId), gte(table.receivedAt, dayOf(Date.now()))));
    return (row?.n ?? 0) < REPORTS_PER_DOMAIN_DAY && (row?.records ?? 0) + rows <= DMARC_ROWS_PER_DOMAIN_DAY;
  }

  const counted = (kind: 'dmarc' | 'tls', outcome: StoreOutcome) => {
    reportsReceived.inc({ kind, outcome });
    return outcome;
  };

  return {
    /** Stores one DMARC report: its records grouped by the domain row their header From names. */
    async storeDmarc(report: DmarcReport): Promise<StoreOutcome[]> {
      const byName = new Map<string, DmarcReport['records']>();
      for (const r of report.records) {
        const name = r.headerFrom || report.policyDomain;
        byName.set(name, [...(byName.get(name) ?? []), r]);
      }
      if (byName.size === 0) byName.set(report.policyDomain, []);
      const owners = await domainsNamed([...byName.keys()]);
      const outcomes: StoreOutcome[] = [];
      for (const [name, records] of byName) {
        const owner = owners.get(name);
        if (!owner) {
          outcomes.push(counted('dmarc', 'unknown_domain'));
          continue;
        }
        if (!(await underCap(schema.dmarcReports, owner.id, records.length))) {
          outcomes.push(counted('dmarc', 'over_daily_cap'));
          continue;
        }
        const id = reportKey('dmr', owner.id, report.reporter, report.reportId);
        const day = dayOf(report.beginAt);
        const stored = await db.transaction(async (tx) => {
          const [inserted] = await tx
            .insert(schema.dmarcReports)
            .values({
              id,
              userId: owner.userId,
              domainId: owner.id,
              reporter: report.reporter,
              reporterEmail: report.reporterEmail,
              reportId: report.reportId,
              beginAt: report.beginAt,
              endAt: report.endAt,
              policy: report.policy,
              records: records.length,
              messages: records.reduce((n, r) => n + r.count, 0),
              truncated: report.truncated,
              receivedAt: Date.now(),
            })
            .onConflictDoNothing()
            .returning({ id: schema.dmarcReports.id });
          if (!inserted) return false;
          // Rows in chunks: one statement per 1,000 records (PostgreSQL caps a statement's parameters).
          for (let i = 0; i < records.length; i += 1000) {
            await tx.insert(schema.dmarcRows).values(
              records.slice(i, i + 1000).map((r, j) => ({
                reportId: id,
                idx: i + j,
                userId: owner.userId,
                domainId: owner.id,
                reporter: report.reporter,
                day,
                sourceIp: r.sourceIp,
                headerFrom: r.headerFrom || name,
                count: r.count,
                disposition: r.disposition,
                dkimAligned: r.dkimAligned,
                spfAligned: r.spfAligned,
                authResults: { dkim: r.dkim, spf: r.spf, envelopeFrom: r.envelopeFrom },
              })),
            );
          }
          return true;
        });
        outcomes.push(counted('dmarc', stored ? 'stored' : 'duplicate'));
      }
      log.info({ reporter: report.reporter, reportId: report.reportId, outcomes }, 'DMARC report received');
      return outcomes;
    },

    /** Stores one TLS report for the domain row of each policy domain it covers. */
    async storeTls(report: TlsReport): Promise<StoreOutcome[]> {
      const names = [...new Set(report.policies.map((p) => p.policyDomain))];
      const owners = await domainsNamed(names);
      const outcomes: StoreOutcome[] = [];
      for (const name of names) {
        const owner = owners.get(name);
        if (!owner) {
          outcomes.push(counted('tls', 'unknown_domain'));
          continue;
        }
        if (!(await underCap(schema.tlsReports, owner.id))) {
          outcomes.push(counted('tls', 'over_daily_cap'));
          continue;
        }
        const policies = report.policies.filter((p) => p.policyDomain === name);
        const [inserted] = await db
          .insert(schema.tlsReports)
          .values({
            id: reportKey('tlr', owner.id, report.reporter, report.reportId),
            userId: owner.userId,
            domainId: owner.id,
            reporter: report.reporter,
            reporterContact: report.contact,
            reportId: report.reportId,
            beginAt: report.beginAt,
            endAt: report.endAt,
            success: policies.reduce((n, p) => n + p.success, 0),
            failure: policies.reduce((n, p) => n + p.failure, 0),
            policies,
            truncated: report.truncated,
            receivedAt: Date.now(),
          })
          .onConflictDoNothing()
          .returning({ id: schema.tlsReports.id });
        outcomes.push(counted('tls', inserted ? 'stored' : 'duplicate'));
      }
      log.info({ reporter: report.reporter, reportId: report.reportId, outcomes }, 'TLS report received');
      return outcomes;
    },
  };
}
export type AggregateStore = ReturnType<typeof createAggregateStore>;
