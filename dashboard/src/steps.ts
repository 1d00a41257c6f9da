/** Readable text for sequence steps and durations, as the API stores them (durations in ms). */

const UNITS = [
  ['d', 86_400_000],
  ['h', 3_600_000],
  ['m', 60_000],
  ['s', 1000],
] as const;

/** 3600000 → "1 h", 90000 → "1 m 30 s", 500 → "500 ms". */
export function duration(ms: unknown): string {
  if (typeof ms !== 'number') return String(ms);
  if (ms < 1000) return `${ms} ms`;
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of UNITS) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)} ${unit}`);
      rest %= size;
    }
  }
  if (rest > 0) parts.push(`${rest} ms`);
  return parts.join(' ');
}

const target = (t: unknown) =>
  t === undefined || t === 'next' ? 'the next step' : t === 'exit' ? 'exit' : `step “${String(t)}”`;

type Step = { type: string; id?: string } & Record<string, unknown>;

/** One line for a step: what it does. */
export function describeStep(step: Step): string {
  switch (step.type) {
    case 'send':
      return step.templateId
        ? `Send template ${String(step.templateId)}${step.subject ? ` with subject “${String(step.subject)}”` : ''}`
        : `Send “${String(step.subject ?? '(no subject)')}”`;
    case 'wait':
      return `Wait ${duration(step.duration)}`;
    case 'wait_for_event': {
      const match =
        step.match && typeof step.match === 'object' && Object.keys(step.match).length > 0
          ? ` matching ${Object.entries(step.match)
              .map(([k, v]) => `${k} = ${JSON.stringify(v)}`)
              .join(', ')}`
          : '';
      return `Wait for event “${String(step.event)}”${match}, at most ${duration(step.timeout)}; when it arrives go to ${target(step.onArrived)}, on timeout to ${target(step.onTimeout)}`;
    }
    case 'exit':
      return 'Exit';
    default:
      return step.type;
  }
}

export const outcomeTone = (o: string) => (o === 'timed_out' ? 'warn' : 'ok');
export const enrolmentTone = (s: string) =>
  s === 'completed' ? 'ok' : s === 'running' ? 'warn' : s === 'failed' ? 'bad' : 'plain';
export const sequenceTone = (s: string) => (s === 'active' ? 'ok' : s === 'paused' ? 'warn' : 'plain');
