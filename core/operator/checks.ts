/** How one doctor check came out; `skipped` (nothing to check here, or offline) never counts as a failure. */
export type CheckStatus = 'ok' | 'warn' | 'fail' | 'skipped';
/** One line of the doctor's report: what was checked, what was found, and the fix when it is not ok. */
export type CheckResult = {
  id: string;
  status: CheckStatus;
  required: boolean;
  what: string;
  detail: string;
  fix?: string;
};

/** Builds check results with the same id/what/required, so each check reads as one decision. */
export function check(id: string, what: string, required = true) {
  return {
    ok: (detail: string): CheckResult => ({ id, what, required, status: 'ok', detail }),
    warn: (detail: string, fix: string): CheckResult => ({ id, what, required, status: 'warn', detail, fix }),
    fail: (detail: string, fix: string): CheckResult => ({ id, what, required, status: 'fail', detail, fix }),
    skipped: (detail: string): CheckResult => ({ id, what, required, status: 'skipped', detail }),
  };
}

/** Runs a probe with a hard time limit, so no check can hang the doctor (an unreachable peer, a silent resolver). */
export async function within<T>(ms: number, what: string, fn: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      fn(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The required checks that failed: the doctor exits non-zero naming them. */
export const failures = (results: CheckResult[]) => results.filter((r) => r.required && r.status === 'fail');

/** One line per check: status, id, what was found, and the fix. */
export function formatReport(results: CheckResult[]): string {
  const width = Math.max(...results.map((r) => r.id.length));
  const lines = results.map(
    (r) =>
      `${r.status.toUpperCase().padEnd(7)} ${r.id.padEnd(width)}  ${r.what}: ${r.detail}${r.fix ? ` | fix: ${r.fix}` : ''}`,
  );
  const failed = failures(results);
  lines.push(failed.length ? `FAILED: ${failed.map((r) => r.id).join(', ')}` : 'All required checks passed.');
  return lines.join('\n');
}
