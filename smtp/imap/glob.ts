/**
 * LIST/LSUB mailbox patterns (RFC 3501 §6.3.8): `*` matches any characters, `%` any but the hierarchy
 * delimiter `/`, everything else itself (case-insensitively). Matched by simulating the pattern as a set of
 * positions advanced one name character at a time: O(pattern × name) time and O(pattern) memory whatever
 * the input, no backtracking, no RegExp built from it. `work.steps` counts the positions visited.
 */
export function globMatch(pattern: string, name: string, work = { steps: 0 }): boolean {
  const p = pattern.toLowerCase();
  const n = name.toLowerCase();
  const m = p.length;
  // A wildcard may match nothing: a reachable wildcard makes the position after it reachable too.
  const close = (set: Uint8Array) => {
    for (let i = 0; i < m; i++) if (set[i] && (p[i] === '*' || p[i] === '%')) set[i + 1] = 1;
  };
  let states = new Uint8Array(m + 1);
  states[0] = 1;
  close(states);
  for (const ch of n) {
    const next = new Uint8Array(m + 1);
    let any = false;
    for (let i = 0; i < m; i++) {
      work.steps++;
      if (!states[i]) continue;
      const c = p[i];
      if (c === '*' || (c === '%' && ch !== '/')) next[i] = 1;
      else if (c === ch) next[i + 1] = 1;
      else continue;
      any = true;
    }
    if (!any) return false;
    close(next);
    states = next;
  }
  return states[m] === 1;
}
