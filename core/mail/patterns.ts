/** The route pattern kept for a domain's tracking (engagement) webhook; it matches no local part. */
export const TRACKING_PATTERN = '@tracking';

/** How specific a pattern is for `local`: -1 no match; exact beats wildcards (longer literal first) beats `*`. */
export function patternScore(pattern: string, local: string): number {
  if (pattern === TRACKING_PATTERN) return -1;
  if (pattern === '*') return 0;
  if (!pattern.includes('*')) return pattern === local ? 10_000 : -1;
  const literal = pattern.replace('*', '');
  const hit = pattern.endsWith('*') ? local.startsWith(literal) : local.endsWith(literal);
  return hit && local.length > literal.length ? 1 + literal.length * 2 + (pattern.endsWith('*') ? 1 : 0) : -1;
}
