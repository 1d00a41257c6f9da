/** The selector after `current`: `svc1` → `svc2`; any other name starts the series at `svc2`. */
export function nextSelector(current: string, previous?: string | null): string {
  const n = (s: string | null | undefined) => Number(/^svc(\d{1,9})$/.exec(s ?? '')?.[1] ?? 1);
  return `svc${Math.max(n(current), n(previous)) + 1}`;
}

/** What the first step of a rotation found: the domain gone, or the next key's selector and whether its zone is served here. */
export type RotationStep = { state: 'gone' } | { state: 'ready'; selector: string; hosted: boolean };
