import { useEffect, useRef, type ReactNode } from 'react';
import './locale-guard.js';
import uPlot from 'uplot';
import { Table } from './ui.js';

/**
 * Line colours, each at least 3:1 against the white background (WCAG 1.4.11, graphical objects) and told
 * apart by dash pattern too, so a line is not known by its colour alone.
 */
export const PALETTE = {
  blue: '#0b4f9c',
  green: '#14632d',
  orange: '#8a4b00',
  red: '#a11a1a',
  purple: '#5b2a86',
  teal: '#00606b',
  grey: '#4a4a4a',
} as const;

export type ChartLine = {
  label: string;
  /** One value per time; null where there is nothing to draw (a rate with no volume). */
  values: (number | null)[];
  color: string;
  dash?: number[];
};

type ChartProps = {
  title: string;
  /** Bucket starts, ms epoch (UTC). */
  times: number[];
  lines: ChartLine[];
  /** What the chart shows, in words and figures: the accessible name of the drawing. */
  summary: string;
  /** Buckets of an hour show the time on the axis and in the table; of a day, the date. */
  hourly?: boolean;
  /** How a value is written in the table (default: as an integer, with a total row). */
  format?: (v: number | null) => string;
  /** After each value on the y axis (`%` for a rate). */
  unit?: string;
  height?: number;
  children?: ReactNode;
};

const COUNT_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 1e7, 1e8];
const whole = (v: number | null) => (v === null ? '—' : String(v));
const utc = (ms: number, hourly?: boolean) =>
  hourly
    ? `${new Date(ms).toISOString().slice(0, 13).replace('T', ' ')}:00 UTC`
    : new Date(ms).toISOString().slice(0, 10);

/**
 * A time-series chart drawn by uPlot on a canvas, wrapped for assistive technology: the drawing is one image
 * (role="img") named by `summary`, its legend is HTML, and the same numbers are in a table under a
 * disclosure, so nothing is only in the pixels.
 */
export function Chart(props: ChartProps) {
  const { title, times, lines, summary, hourly, format = whole, unit = '', height = 220, children } = props;
  const counts = format === whole;
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const data: uPlot.AlignedData = [times.map((t) => t / 1000), ...lines.map((l) => l.values)];
    const plot = new uPlot(
      {
        width: Math.max(240, el.clientWidth),
        height,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        // Buckets are UTC hours and days: the axis says so rather than the browser's zone.
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
        scales: { y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
        axes: [
          { stroke: '#1a1a1a', grid: { stroke: '#e3e3e3' }, ticks: { stroke: '#c8c8c8' } },
          {
            stroke: '#1a1a1a',
            grid: { stroke: '#e3e3e3' },
            ticks: { stroke: '#c8c8c8' },
            size: 56,
            // Counts step by whole numbers; rates may not.
            ...(counts ? { incrs: COUNT_STEPS } : {}),
            values: (_u: uPlot, splits: number[]) => splits.map((v) => `${v}${unit}`),
          },
        ],
        series: [
          {},
          // Points always: a rate known on one day only has no line to draw, only its point.
          ...lines.map((l) => ({
            label: l.label,
            stroke: l.color,
            width: 2,
            dash: l.dash,
            spanGaps: false,
            points: { show: true, size: 5, fill: '#fff' },
          })),
        ],
      },
      data,
      el,
    );
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(240, el.clientWidth), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [times, lines, height, counts, unit]);
  const total = (l: ChartLine) => l.values.reduce<number>((n, v) => n + (v ?? 0), 0);
  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      <div className="chart-canvas" role="img" aria-label={summary} ref={box} />
      <ul className="chart-legend" aria-label={`${title}: legend`}>
        {lines.map((l) => (
          <li key={l.label}>
            <svg width="28" height="10" aria-hidden="true" focusable="false">
              <line x1="0" y1="5" x2="28" y2="5" stroke={l.color} strokeWidth="3" strokeDasharray={l.dash?.join(' ')} />
            </svg>
            {l.label}
          </li>
        ))}
      </ul>
      {children}
      <details>
        <summary>{title}: the numbers</summary>
        <Table
          label={`${title}: the numbers`}
          head={[hourly ? 'Hour (UTC)' : 'Day (UTC)', ...lines.map((l) => l.label)]}
        >
          {times.map((t, i) => (
            <tr key={t}>
              <td>{utc(t, hourly)}</td>
              {lines.map((l) => (
                <td key={l.label}>{format(l.values[i] ?? null)}</td>
              ))}
            </tr>
          ))}
          {counts && (
            <tr>
              <th scope="row">Total</th>
              {lines.map((l) => (
                <td key={l.label}>{total(l)}</td>
              ))}
            </tr>
          )}
        </Table>
      </details>
    </figure>
  );
}
