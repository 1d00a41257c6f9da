import { useQuery } from '@tanstack/react-query';
import { useId, useMemo, useState } from 'react';
import { api, type Outputs } from '../api.js';
import { Chart, PALETTE, type ChartLine } from '../charts.js';
import { ErrorBox, Loading } from '../ui.js';

type Metrics = Outputs['metrics']['get'];
type Period = 'day' | 'hour';
type Counts = Metrics['totals'];

/** What the overview counts, its words and its line. */
const SENDING = [
  ['sent', 'Sent', PALETTE.blue, undefined],
  ['delivered', 'Delivered', PALETTE.green, [6, 3]],
  ['deferred', 'Deferred', PALETTE.orange, [2, 3]],
  ['bounced', 'Bounced', PALETTE.red, [10, 4]],
  ['complained', 'Complained', PALETTE.purple, [2, 2, 8, 2]],
] as const;
const ENGAGEMENT = [
  ['opened', 'Opened', PALETTE.teal, undefined],
  ['clicked', 'Clicked', PALETTE.grey, [6, 3]],
] as const;
const TILES = [...SENDING, ...ENGAGEMENT].map(([k, label]) => [k, label] as const);

/** "1 report", "3 reports". */
export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** A share as a percentage with two decimals; "—" with nothing to divide by. */
export const rate = (n: number, of: number) => (of ? `${((n / of) * 100).toFixed(2)}%` : '—');

/** GET /api/metrics for the account, or one domain, per day (30 days) or hour (48 hours). */
export function useActivity(period: Period, domainId?: string) {
  return useQuery({
    queryKey: ['metrics', domainId ?? 'account', period],
    queryFn: () => api.metrics.get.query({ period, domain_id: domainId }),
  });
}

function linesOf(m: Metrics, set: typeof SENDING | typeof ENGAGEMENT): ChartLine[] {
  return set.map(([k, label, color, dash]) => ({
    label,
    color,
    dash: dash ? [...dash] : undefined,
    values: m.series.map((b) => b[k]),
  }));
}

const span = (p: Period) => (p === 'day' ? 'the last 30 days' : 'the last 48 hours');
const figures = (c: Counts, keys: readonly (readonly [keyof Counts, string, ...unknown[]])[]) =>
  keys.map(([k, label]) => `${label.toLowerCase()} ${c[k] as number}`).join(', ');

/** The activity charts of the account or of one domain: totals as tiles, a toggle of day and hour, two charts. */
export function ActivityPanel({ domainId, name }: { domainId?: string; name: string }) {
  const [period, setPeriod] = useState<Period>('day');
  const metrics = useActivity(period, domainId);
  const id = useId();
  const m = metrics.data;
  const charts = useMemo(
    () =>
      m && {
        times: m.series.map((b) => b.t),
        sending: linesOf(m, SENDING),
        engagement: linesOf(m, ENGAGEMENT),
      },
    [m],
  );
  return (
    <section aria-labelledby={`${id}-h`} className="activity">
      <h2 id={`${id}-h`}>Activity</h2>
      <fieldset className="period">
        <legend>Show</legend>
        {(['day', 'hour'] as const).map((p) => (
          <label key={p} className="inline">
            <input type="radio" name={`${id}-period`} checked={period === p} onChange={() => setPeriod(p)} />{' '}
            {p === 'day' ? 'Per day, 30 days' : 'Per hour, 48 hours'}
          </label>
        ))}
      </fieldset>
      {metrics.isPending ? <Loading /> : <ErrorBox error={metrics.error} />}
      {m && charts && (
        <>
          <ul className="tiles" aria-label={`${name}: totals over ${span(period)}`}>
            {TILES.map(([k, label]) => (
              <li key={k}>
                <span className="tile-n">{m.totals[k]}</span> {label}
              </li>
            ))}
            <li>
              <span className="tile-n">{rate(m.totals.bounced, m.totals.delivered + m.totals.bounced)}</span> Bounce
              rate
            </li>
            <li>
              <span className="tile-n">{rate(m.totals.complained, m.totals.delivered)}</span> Complaint rate
            </li>
          </ul>
          <Chart
            title={`Sending per ${period}`}
            times={charts.times}
            lines={charts.sending}
            hourly={period === 'hour'}
            summary={`${name}, sending per ${period} over ${span(period)}: ${figures(m.totals, SENDING)}.`}
          >
            <BounceClasses byClass={m.totals.bounced_by_class} />
          </Chart>
          <Chart
            title={`Opens and clicks per ${period}`}
            times={charts.times}
            lines={charts.engagement}
            hourly={period === 'hour'}
            summary={`${name}, engagement per ${period} over ${span(period)}: ${figures(m.totals, ENGAGEMENT)}.`}
          />
        </>
      )}
    </section>
  );
}

function BounceClasses({ byClass }: { byClass: Record<string, number> }) {
  const entries = Object.entries(byClass).sort((a, b) => b[1] - a[1]);
  if (entries.length === 0) return null;
  return (
    <p className="chart-note">
      Bounces by class: {entries.map(([cls, n]) => `${cls.replaceAll('_', ' ')} ${n}`).join(', ')}.
    </p>
  );
}
