/**
 * KumoMTA's value syntax for shaping.toml: rates `"300/min"`, `"10/s"`, `"5000/h"`, `"20000/d"` (a bare
 * number is per second), durations `"20s"`, `"15m"`, `"1h"`, `"2d"`, `"500ms"`, `"2 hours"` (a bare number is seconds).
 * The inputs come from the operator's file only; every pattern here is anchored and has no nested repetition.
 */

const RATE_UNITS: Record<string, number> = {
  s: 1,
  sec: 1,
  second: 1,
  m: 60,
  min: 60,
  minute: 60,
  h: 3600,
  hr: 3600,
  hour: 3600,
  d: 86_400,
  day: 86_400,
};
const DURATION_UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  sec: 1000,
  second: 1000,
  seconds: 1000,
  m: 60_000,
  min: 60_000,
  minute: 60_000,
  minutes: 60_000,
  h: 3_600_000,
  hr: 3_600_000,
  hour: 3_600_000,
  hours: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
  days: 86_400_000,
};

/**
 * A rate: events per second, and the burst the bucket holds (the count as written: "300/min" lets 300
 * go at once after a quiet minute, then 5/s; at least 1). Throws a message naming the value on bad syntax.
 */
export type Rate = { perSecond: number; burst: number; text: string };
export function parseRate(value: unknown): Rate {
  if (typeof value === 'number' && Number.isFinite(value) && value > 0)
    return { perSecond: value, burst: Math.max(1, Math.floor(value)), text: `${value}/s` };
  const m = typeof value === 'string' ? /^\s*(\d{1,9}(?:\.\d{1,6})?)\s*\/\s*([a-z]{1,6})\s*$/i.exec(value) : null;
  const per = m ? RATE_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || !per || Number(m[1]) <= 0)
    throw new Error(`${JSON.stringify(value)} is not a rate (expected "300/min", "10/s", "5000/h" or "20000/d")`);
  return {
    perSecond: Number(m[1]) / per,
    burst: Math.max(1, Math.floor(Number(m[1]))),
    text: `${Number(m[1])}/${m[2]!.toLowerCase()}`,
  };
}

/** A duration in milliseconds; throws a message naming the value on bad syntax. */
export function parseDuration(value: unknown): number {
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return value * 1000;
  const m = typeof value === 'string' ? /^\s*(\d{1,9}(?:\.\d{1,6})?)\s*([a-z]{1,7})\s*$/i.exec(value) : null;
  const unit = m ? DURATION_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || !unit)
    throw new Error(
      `${JSON.stringify(value)} is not a duration (expected "500ms", "20s", "15m", "1h", "2d" or "2 hours")`,
    );
  return Math.round(Number(m[1]) * unit);
}

/** A positive whole number (connection_limit, max_deliveries_per_connection). */
export function parseCount(value: unknown): number {
  const n = typeof value === 'string' && /^\d{1,9}$/.test(value.trim()) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1)
    throw new Error(`${JSON.stringify(value)} is not a whole number of at least 1`);
  return n;
}
