import type { Db } from '../../db/index.js';
import { createShapingStore } from './store.js';

export type SiteReport = {
  site: string;
  domains: string[];
  sources: string[];
  limits: Record<string, unknown>;
  fileLimits: Record<string, unknown>;
  openConnections: number;
  suspension: { until: number; cause: string; rule: string | null } | null;
  overrides: { name: string; value: string; until: number; cause: string }[];
  updatedAt: number;
};
export type ShapingAction = {
  site: string;
  action: string;
  rule: string;
  cause: string;
  createdAt: number;
  expiresAt: number;
};

/**
 * What GET /api/deliverability/sites answers: every site the workers have sent to, its limits in force
 * (the file's, with SetConfig overrides), its open connections, its suspension and what caused it, and
 * the latest actions automation rules took.
 */
export async function shapingReport(
  db: Db,
  now = Date.now(),
): Promise<{ sites: SiteReport[]; recentActions: ShapingAction[] }> {
  const { sites, open, active, recent } = await createShapingStore(db).list(now);
  const strip = (a: (typeof recent)[number]): ShapingAction => ({
    site: a.site,
    action: a.action,
    rule: a.rule,
    cause: a.cause,
    createdAt: a.createdAt,
    expiresAt: a.expiresAt,
  });
  return {
    sites: sites.map((s) => {
      const { sources, ...fileLimits } = (s.limits ?? {}) as Record<string, unknown>;
      const overrides = Object.entries(s.overrides ?? {})
        .filter(([, o]) => o.until > now)
        .map(([name, o]) => ({ name, ...o }));
      const suspended = s.suspendedUntil && s.suspendedUntil > now;
      const rule = suspended ? (active.find((a) => a.site === s.site && a.action === 'Suspend')?.rule ?? null) : null;
      return {
        site: s.site,
        domains: s.domains ?? [],
        sources: Array.isArray(sources) ? (sources as string[]) : [],
        limits: { ...fileLimits, ...Object.fromEntries(overrides.map((o) => [o.name, o.value])) },
        fileLimits,
        openConnections: open.get(s.site) ?? 0,
        suspension: suspended ? { until: s.suspendedUntil!, cause: s.suspendCause ?? '', rule } : null,
        overrides,
        updatedAt: s.updatedAt,
      };
    }),
    recentActions: recent.map(strip),
  };
}
