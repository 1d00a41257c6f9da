import { badRequest } from '../errors.js';

const UNITS: Record<string, number> = { second: 1e3, minute: 60e3, hour: 3600e3, day: 86400e3, week: 604800e3 };

/**
 * Reads `scheduledAt`: a ms-epoch number, an ISO 8601 string, or simple relative text
 * ("in 2 hours", "in 30 minutes", "tomorrow", "tomorrow 9am", UTC). A digit-only string is refused
 * (ambiguous between seconds and milliseconds). Returns ms epoch.
 */
export function parseScheduledAt(value: string | number, now = Date.now()): number {
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0)
      throw badRequest('scheduledAt must be a positive ms epoch', 'bad_schedule');
    return Math.floor(value);
  }
  const text = value.trim();
  if (/^\d+$/.test(text))
    throw badRequest(
      'scheduledAt as a digit-only string is ambiguous: send a number (ms epoch) or ISO 8601',
      'bad_schedule',
    );
  const rel = /^in\s+(\d+)\s*(second|minute|hour|day|week)s?$/i.exec(text);
  if (rel) return now + Number(rel[1]) * UNITS[rel[2]!.toLowerCase()]!;
  const tomorrow = /^tomorrow(?:\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*(am|pm)?)?$/i.exec(text);
  if (tomorrow) {
    const d = new Date(now);
    let hour = tomorrow[1] ? Number(tomorrow[1]) : 9;
    if (tomorrow[3]?.toLowerCase() === 'pm' && hour < 12) hour += 12;
    if (tomorrow[3]?.toLowerCase() === 'am' && hour === 12) hour = 0;
    if (hour > 23) throw badRequest('scheduledAt: hour out of range', 'bad_schedule');
    return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1, hour, Number(tomorrow[2] ?? 0));
  }
  if (/^\d{4}-\d{2}-\d{2}/.test(text)) {
    const ms = Date.parse(/[zZ]|[+-]\d{2}:?\d{2}$/.test(text) || !text.includes('T') ? text : `${text}Z`);
    if (!Number.isNaN(ms)) return ms;
  }
  throw badRequest('scheduledAt must be ISO 8601, a ms epoch number, or text like "in 2 hours"', 'bad_schedule');
}
