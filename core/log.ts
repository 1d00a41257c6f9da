/**
 * Error logging that keeps secrets out of logs: a database error (drizzle's "Failed query: … params: …",
 * or a pg error carrying `query`/`parameters`) is reduced to its name, code and the server's message,
 * since parameters hold message bodies, addresses and credential hashes.
 */
export function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = (err as { cause?: unknown }).cause;
  const pg = pgFields(err) ?? (cause instanceof Error ? pgFields(cause) : undefined);
  if (pg) return `database error ${pg.code}: ${pg.message}`;
  if (/^Failed query:/.test(err.message)) return 'database error: query failed';
  return `${err.name}: ${err.message}`;
}

function pgFields(err: Error): { code: string; message: string } | undefined {
  const code = (err as { code?: unknown }).code;
  const isPg = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && ('severity' in err || 'routine' in err);
  if (!isPg) return undefined;
  // The server message can quote a value (duplicate key "(email)=(a@b)"); the detail carries it, not the message.
  return { code, message: err.message.replace(/\([^()]*\)=\([^()]*\)/g, '(…)') };
}

/** Logs an unexpected error with its stack frames but without query parameters. */
export function logError(context: string, err: unknown): void {
  // Only the frames: the stack's first lines repeat the message, which for a query error holds its parameters.
  const frames = err instanceof Error && err.stack ? err.stack.split('\n').filter((l) => /^\s+at /.test(l)).slice(0, 5) : [];
  const stack = frames.length ? `\n${frames.join('\n')}` : '';
  console.error(`${context}: ${describeError(err)}${stack}`);
}
