/** Sequence sets (RFC 3501 §9 `sequence-set`): `1:4,7,9:*`; `*` is the largest number in use. */
export type SeqRange = [number, number];

/** Ranges of a sequence set, or undefined when it is malformed. */
export function parseSequenceSet(text: string): SeqRange[] | undefined {
  if (text === '$' || text.length > 10_000) return undefined;
  const ranges: SeqRange[] = [];
  for (const piece of text.split(',')) {
    const m = /^(\d+|\*)(?::(\d+|\*))?$/.exec(piece);
    if (!m) return undefined;
    const a = m[1] === '*' ? Infinity : Number(m[1]);
    const b = m[2] === undefined ? a : m[2] === '*' ? Infinity : Number(m[2]);
    if (a === 0 || b === 0 || (a > 0xffffffff && a !== Infinity) || (b > 0xffffffff && b !== Infinity))
      return undefined;
    ranges.push([a, b]);
  }
  return ranges;
}

/** Whether `n` lies in the set, `*` standing for `max`. */
export function inSet(ranges: SeqRange[], n: number, max: number): boolean {
  for (const [a0, b0] of ranges) {
    const a = a0 === Infinity ? max : a0;
    const b = b0 === Infinity ? max : b0;
    if (n >= Math.min(a, b) && n <= Math.max(a, b)) return true;
  }
  return false;
}

/** The set as sorted, disjoint, closed intervals, `*` standing for `max`. */
export function intervals(ranges: SeqRange[], max: number): SeqRange[] {
  const sorted = ranges
    .map(([a0, b0]): SeqRange => {
      const a = a0 === Infinity ? max : a0;
      const b = b0 === Infinity ? max : b0;
      return [Math.min(a, b), Math.max(a, b)];
    })
    .sort((x, y) => x[0] - y[0]);
  const out: SeqRange[] = [];
  for (const r of sorted) {
    const last = out.at(-1);
    if (last && r[0] <= last[1] + 1) last[1] = Math.max(last[1], r[1]);
    else out.push([r[0], r[1]]);
  }
  return out;
}

/** Membership in the set by binary search over its intervals: O(log ranges) per number. */
export function compileSet(ranges: SeqRange[], max: number): (n: number) => boolean {
  const iv = intervals(ranges, max);
  return (n) => {
    let lo = 0;
    let hi = iv.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const [a, b] = iv[mid]!;
      if (n < a) hi = mid - 1;
      else if (n > b) lo = mid + 1;
      else return true;
    }
    return false;
  };
}

/** The first index of ascending `xs` whose value is at least `v`. */
export function lowerBound(xs: number[], v: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid]! < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Compact text of ascending numbers: `1:3,5`. */
export function formatSet(nums: number[]): string {
  const sorted = [...nums].sort((a, b) => a - b);
  const out: string[] = [];
  for (let i = 0; i < sorted.length; i++) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    out.push(i === j ? `${sorted[i]}` : `${sorted[i]}:${sorted[j]}`);
    i = j;
  }
  return out.join(',');
}
