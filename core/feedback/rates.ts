import { and, eq, gte, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { Config } from '../config.js';
import type { WindowFigures } from '../domains/dto.js';

/** The complaint guard's settings (config.feedback.guard): rates 0..1, windows in hours, the volume a window needs. */
export type GuardSettings = Config['feedback']['guard'];
/** One hour of a domain's counters the guard reads. */
export type HourCounts = { hour: number; delivered: number; bounced: number; complained: number };
/** What the guard counts only from: the hour of a resume and that hour's counts at the resume (subtracted). */
export type Since = { at: number; hour: number; base: Omit<HourCounts, 'hour'> };
export type Verdict = {
  windows: WindowFigures[];
  /** Set when a rate is above its pause threshold in a window with enough volume. */
  pause: string | null;
  warning: string | null;
};

const HOUR = 3_600_000;
const METRICS = ['delivered', 'bounced', 'complained'] as const;
const pct = (x: number) => `${(x * 100).toFixed(2)}%`;

/**
 * Hourly counts of an account's `domainIds` over the longest window, from activity_counters (kept by
 * triggers as mail flows): one grouped query on the primary key's (user, domain, hour) prefix, never a
 * scan of messages.
 */
export async function hourlyCounts(
  db: Db,
  userId: string,
  domainIds: string[],
  windowsHours: number[],
  now = Date.now(),
) {
  const out = new Map<string, HourCounts[]>();
  if (domainIds.length === 0) return out;
  const a = schema.activityCounters;
  const from = Math.floor(now / HOUR) * HOUR - (Math.max(...windowsHours, 1) - 1) * HOUR;
  const rows = await db
    .select({
      domainId: a.domainId,
      hour: a.hour,
      metric: a.metric,
      n: sql<number>`sum(${a.count})::bigint`.mapWith(Number),
    })
    .from(a)
    .where(
      and(eq(a.userId, userId), inArray(a.domainId, domainIds), gte(a.hour, from), inArray(a.metric, [...METRICS])),
    )
    .groupBy(a.domainId, a.hour, a.metric);
  for (const r of rows) {
    const hours = out.get(r.domainId) ?? [];
    let h = hours.find((x) => x.hour === Number(r.hour));
    if (!h) hours.push((h = { hour: Number(r.hour), delivered: 0, bounced: 0, complained: 0 }));
    h[r.metric as (typeof METRICS)[number]] += r.n;
    out.set(r.domainId, hours);
  }
  return out;
}

/** The counts of one window ending now, only from `since` on when given (the resume's hour less its counts then). */
function windowOf(hours: HourCounts[], windowHours: number, now: number, since?: Since | null): WindowFigures {
  const from = Math.floor(now / HOUR) * HOUR - (windowHours - 1) * HOUR;
  const w = { delivered: 0, bounced: 0, complained: 0 };
  for (const h of hours) {
    if (h.hour < from || (since && h.hour < since.hour)) continue;
    for (const k of METRICS) w[k] += Math.max(0, h[k] - (since && h.hour === since.hour ? since.base[k] : 0));
  }
  return {
    hours: windowHours,
    ...w,
    complaint_rate: w.delivered ? w.complained / w.delivered : null,
    bounce_rate: w.delivered + w.bounced ? w.bounced / (w.delivered + w.bounced) : null,
  };
}

/**
 * The guard's judgement of a domain: per window, complaints / delivered and bounced / (delivered +
 * bounced); a window is judged only once its delivered count reaches `minVolume`. Above a pause rate in
 * any judged window: `pause` says which rate, window and threshold; between warn and pause: `warning`.
 */
export function judge(hours: HourCounts[], s: GuardSettings, now = Date.now(), since?: Since | null): Verdict {
  const windows = s.windowsHours.map((h) => windowOf(hours, h, now, since));
  let pause: string | null = null;
  let warning: string | null = null;
  for (const w of windows) {
    if (w.delivered < s.minVolume) continue;
    const checks = [
      { what: 'complaint rate', rate: w.complaint_rate ?? 0, stop: s.complaintRate, warn: s.complaintWarnRate },
      { what: 'hard-bounce rate', rate: w.bounce_rate ?? 0, stop: s.bounceRate, warn: s.bounceWarnRate },
    ];
    for (const c of checks) {
      const said = `${c.what} ${pct(c.rate)} over ${w.hours} h (${w.delivered} delivered)`;
      if (c.rate > c.stop) pause ??= `${said} is above the pause threshold ${pct(c.stop)}`;
      else if (c.rate > c.warn) warning ??= `${said} is above the warning threshold ${pct(c.warn)}`;
    }
  }
  return { windows, pause, warning: pause ?? warning };
}
