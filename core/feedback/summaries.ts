import { and, desc, eq, gte, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { notFound } from '../errors.js';
import type { Actor } from '../tenancy.js';
import type { DmarcFigure } from '../domains/dto.js';

const DAY = 86_400_000;
/** Most sources and reports a summary lists (the totals count them all). */
const MAX_SOURCES = 200;
const MAX_REPORTS = 50;

/**
 * What a domain owner reads of the reports that came back (GET /api/domains/:id/dmarc and /tls-reports):
 * summaries over the last `days`, loaded through the actor like every domain resource.
 */
export function createReportSummaries(deps: { db: Db; platformIps: () => string[] }) {
  const { db } = deps;
  const d = schema.domains;

  async function owned(actor: Actor, id: string) {
    const [row] = await db
      .select({ id: d.id, domain: d.domain })
      .from(d)
      .where(and(eq(d.id, id), eq(d.userId, actor.userId)));
    if (!row || (actor.domainId && actor.domainId !== row.id)) throw notFound('Domain not found');
    return row;
  }

  const windowOf = (days: number) => {
    const to = Math.floor(Date.now() / DAY) * DAY + DAY;
    return { from: to - days * DAY, to };
  };

  return {
    /**
     * The DMARC figure the domain row carries (GET /api/domains/:id, `feedback.dmarc`): the last 7 days
     * of reports, for many domains in one grouped query.
     */
    async passRates(domainIds: string[]): Promise<Map<string, DmarcFigure>> {
      const out = new Map<string, DmarcFigure>();
      if (domainIds.length === 0) return out;
      const r = schema.dmarcRows;
      const from = windowOf(7).from;
      const rows = await db
        .select({
          domainId: r.domainId,
          sourceIp: r.sourceIp,
          messages: sql<number>`sum(${r.count})::bigint`.mapWith(Number),
          aligned:
            sql<number>`coalesce(sum(${r.count}) filter (where ${r.dkimAligned} or ${r.spfAligned}), 0)::bigint`.mapWith(
              Number,
            ),
        })
        .from(r)
        .where(and(inArray(r.domainId, domainIds), gte(r.day, from)))
        .groupBy(r.domainId, r.sourceIp);
      for (const row of rows) {
        const f = out.get(row.domainId) ?? { days: 7, messages: 0, aligned: 0, pass_rate: null, failing_sources: 0 };
        f.messages += row.messages;
        f.aligned += row.aligned;
        if (row.aligned < row.messages) f.failing_sources++;
        f.pass_rate = f.messages ? f.aligned / f.messages : null;
        out.set(row.domainId, f);
      }
      return out;
    },

    async dmarc(actor: Actor, id: string, days: number) {
      const domain = await owned(actor, id);
      const { from, to } = windowOf(days);
      const r = schema.dmarcRows;
      const inWindow = and(eq(r.domainId, domain.id), gte(r.day, from));
      const aligned = sql<number>`coalesce(sum(${r.count}) filter (where ${r.dkimAligned} or ${r.spfAligned}), 0)::bigint`;
      const [perDay, perSource, perReporter] = await Promise.all([
        db
          .select({ day: r.day, messages: sql<number>`sum(${r.count})::bigint`, aligned })
          .from(r)
          .where(inWindow)
          .groupBy(r.day)
          .orderBy(r.day),
        db
          .select({
            sourceIp: r.sourceIp,
            messages: sql<number>`sum(${r.count})::bigint`,
            aligned,
            dkim: sql<number>`coalesce(sum(${r.count}) filter (where ${r.dkimAligned}), 0)::bigint`,
            spf: sql<number>`coalesce(sum(${r.count}) filter (where ${r.spfAligned}), 0)::bigint`,
            none: sql<number>`coalesce(sum(${r.count}) filter (where ${r.disposition} = 'none'), 0)::bigint`,
            quarantine: sql<number>`coalesce(sum(${r.count}) filter (where ${r.disposition} = 'quarantine'), 0)::bigint`,
            reject: sql<number>`coalesce(sum(${r.count}) filter (where ${r.disposition} = 'reject'), 0)::bigint`,
            reporters: sql<string[]>`array_agg(distinct ${r.reporter})`,
          })
          .from(r)
          .where(inWindow)
          .groupBy(r.sourceIp)
          .orderBy(desc(sql`sum(${r.count})`))
          .limit(MAX_SOURCES),
        db
          .select({
            reporter: schema.dmarcReports.reporter,
            reports: sql<number>`count(*)::int`,
            messages: sql<number>`sum(${schema.dmarcReports.messages})::bigint`,
            last: sql<number>`max(${schema.dmarcReports.receivedAt})`,
          })
          .from(schema.dmarcReports)
          .where(and(eq(schema.dmarcReports.domainId, domain.id), gte(schema.dmarcReports.beginAt, from)))
          .groupBy(schema.dmarcReports.reporter)
          .orderBy(schema.dmarcReports.reporter),
      ]);
      const ours = new Set(deps.platformIps());
      const messages = perDay.reduce((n, x) => n + Number(x.messages), 0);
      const alignedTotal = perDay.reduce((n, x) => n + Number(x.aligned), 0);
      const sources = perSource.map((s) => ({
        source_ip: s.sourceIp,
        messages: Number(s.messages),
        aligned: Number(s.aligned),
        dkim_aligned: Number(s.dkim),
        spf_aligned: Number(s.spf),
        dispositions: { none: Number(s.none), quarantine: Number(s.quarantine), reject: Number(s.reject) },
        platform: ours.has(s.sourceIp),
        reporters: [...s.reporters].sort(),
      }));
      return {
        domain: domain.domain,
        from,
        to,
        totals: {
          messages,
          aligned: alignedTotal,
          pass_rate: messages ? alignedTotal / messages : null,
          reports: perReporter.reduce((n, x) => n + x.reports, 0),
        },
        days: perDay.map((x) => ({
          day: Number(x.day),
          messages: Number(x.messages),
          aligned: Number(x.aligned),
          failed: Number(x.messages) - Number(x.aligned),
        })),
        sources,
        failing: sources
          .filter((s) => s.aligned < s.messages)
          .map((s) => ({ source_ip: s.source_ip, messages: s.messages - s.aligned, platform: s.platform })),
        reporters: perReporter.map((x) => ({
          reporter: x.reporter,
          reports: x.reports,
          messages: Number(x.messages),
          last_report_at: Number(x.last),
        })),
      };
    },

    async tls(actor: Actor, id: string, days: number) {
      const domain = await owned(actor, id);
      const { from, to } = windowOf(days);
      const t = schema.tlsReports;
      const rows = await db
        .select()
        .from(t)
        .where(and(eq(t.domainId, domain.id), gte(t.beginAt, from)))
        .orderBy(desc(t.beginAt))
        .limit(1000);
      const perDay = new Map<number, { success: number; failure: number }>();
      const types = new Map<string, number>();
      for (const row of rows) {
        const day = Math.floor(row.beginAt / DAY) * DAY;
        const x = perDay.get(day) ?? { success: 0, failure: 0 };
        perDay.set(day, { success: x.success + row.success, failure: x.failure + row.failure });
        for (const p of row.policies as { failures?: { resultType: string; failedSessions: number }[] }[])
          for (const f of p.failures ?? []) types.set(f.resultType, (types.get(f.resultType) ?? 0) + f.failedSessions);
      }
      return {
        domain: domain.domain,
        from,
        to,
        totals: {
          success: rows.reduce((n, r) => n + r.success, 0),
          failure: rows.reduce((n, r) => n + r.failure, 0),
          reports: rows.length,
        },
        days: [...perDay].sort((a, b) => a[0] - b[0]).map(([day, x]) => ({ day, ...x })),
        failure_types: [...types]
          .sort((a, b) => b[1] - a[1])
          .map(([result_type, sessions]) => ({ result_type, sessions })),
        reports: rows.slice(0, MAX_REPORTS).map((r) => ({
          id: r.id,
          reporter: r.reporter,
          report_id: r.reportId,
          begin_at: r.beginAt,
          end_at: r.endAt,
          success: r.success,
          failure: r.failure,
          truncated: r.truncated,
          policies: r.policies,
        })),
      };
    },
  };
}
export type ReportSummaries = ReturnType<typeof createReportSummaries>;
