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
    if (a === 0 || b === 0 || a > 0xffffffff && a !== Infinity || b > 0xffffffff && b !== Infinity) return undefined;
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
