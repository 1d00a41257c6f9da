/** Connection-level failures: the database (or the network to it) is away, and trying again later helps. */
const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '40001',
  '40P01',
]);
const TRANSIENT_TEXT = [
  'Connection terminated',
  'connection error',
  'Connection ended',
  'timeout exceeded when trying to connect',
  'Client was closed',
  'not queryable',
];

/** The database error behind a drizzle wrapper (DrizzleQueryError keeps the driver's error as `cause`). */
function rootOf(err: unknown): { code?: string; message?: string; name?: string; constraint?: string } {
  let e = err as { cause?: unknown; query?: string } | undefined;
  while (e && typeof e === 'object' && 'query' in e && e.cause) e = e.cause as typeof e;
  return (e ?? {}) as { code?: string; message?: string; name?: string };
}

/** True when `err` is a lost or refused database connection (retry), not a bad statement (don't). */
export function isTransientDbError(err: unknown): boolean {
  const root = rootOf(err);
  if (root.code && (TRANSIENT_CODES.has(root.code) || root.code.startsWith('08'))) return true;
  const text = root.message ?? '';
  return TRANSIENT_TEXT.some((t) => text.includes(t));
}

/**
 * A message safe to log or put into a workflow history: database errors are reduced to their code
 * (never the query text or its parameters, which carry message bodies and addresses).
 */
export function cleanErrorMessage(err: unknown): string {
  const looksLikeQuery = err && typeof err === 'object' && 'query' in err;
  const root = rootOf(err);
  if (looksLikeQuery || (root.code && /^[0-9A-Z]{5}$/.test(root.code))) {
    const kind = isTransientDbError(err) ? 'database unavailable' : 'database error';
    return `${kind}${root.code ? ` (${root.code})` : ''}${root.constraint ? ` on ${root.constraint}` : ''}`;
  }
  if (root.code && TRANSIENT_CODES.has(root.code)) return `connection failed (${root.code})`;
  const msg = (err as Error)?.message ?? String(err);
  return msg.length > 300 ? `${msg.slice(0, 300)}…` : msg;
}

/**
 * Runs `fn`, retrying while the database is away (connection errors only) for up to `maxMs`, calling
 * `onWait` between tries (activities heartbeat there). Used to record an outcome that is already true
 * (a 250 from a server, a 2xx from a webhook): giving up would make a retry repeat the irreversible step.
 */
export async function retryTransient<T>(
  fn: () => Promise<T>,
  opts: { maxMs?: number; onWait?: () => void; stopped?: () => boolean } = {},
): Promise<T> {
  const deadline = Date.now() + (opts.maxMs ?? 120_000);
  let delay = 250;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (!isTransientDbError(err) || Date.now() + delay > deadline || opts.stopped?.()) throw err;
      opts.onWait?.();
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 5_000);
    }
  }
}
