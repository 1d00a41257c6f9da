import { AsyncLocalStorage } from 'node:async_hooks';
import { format } from 'node:util';
import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';

/**
 * Structured logs (docs/operations.md, Logs): JSON lines on stdout with `level`, `time`, `role` and the
 * ids in scope (messageId, accountId, domainId, workflowId, runId), pretty when stdout is a terminal.
 * Ids come from `withLogScope` (an activity, a request, a message being delivered): every line logged
 * inside it carries them. Values under secret-looking keys are redacted; messages never quote a credential.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogScope = {
  messageId?: string;
  accountId?: string | null;
  domainId?: string | null;
  workflowId?: string;
  runId?: string;
  [k: string]: unknown;
};

const scope = new AsyncLocalStorage<LogScope>();

const SECRET_KEYS = new Set([
  'authorization',
  'cookie',
  'set-cookie',
  'password',
  'token',
  'apiKey',
  'key',
  'secret',
  'signingSecret',
  'secretKey',
  'accessToken',
  'refreshToken',
]);
const CENSOR = '[redacted]';
const isPlain = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/**
 * A line's fields with every value under a secret-looking key replaced by `[redacted]`: at the top
 * level, one level down, and inside a `headers` object at either level. Answers the object itself when
 * nothing is secret (the usual line), else a copy: the caller's object is never changed. pino's own
 * `redact` with wildcard paths did this at about 20 µs a line, six times the rest of the line's cost.
 */
export function redactSecrets(obj: Record<string, unknown>): Record<string, unknown> {
  return redactLevel(obj, 0);
}

function redactLevel(obj: Record<string, unknown>, depth: number): Record<string, unknown> {
  let out: Record<string, unknown> | undefined;
  for (const k in obj) {
    const v = obj[k];
    let next = v;
    if (SECRET_KEYS.has(k)) next = v === undefined ? v : CENSOR;
    else if (isPlain(v) && (depth === 0 || (depth === 1 && k === 'headers'))) next = redactLevel(v, depth + 1);
    if (next !== v) (out ??= { ...obj })[k] = next;
  }
  return out ?? obj;
}

function createLogger(opts: { level: LogLevel; role?: string; pretty?: boolean }): Logger {
  const options = {
    level: opts.level,
    base: opts.role ? { role: opts.role } : {},
    formatters: { level: (label: string) => ({ level: label }), log: redactSecrets },
    timestamp: pino.stdTimeFunctions.isoTime,
    mixin: () => scope.getStore() ?? {},
  };
  // Lines go out asynchronously (written as soon as the previous write is done, never held for a
  // buffer to fill), so a slow reader of stdout does not stall the event loop; pino flushes what is
  // pending synchronously on exit. A synchronous write per line cost about 60 µs on a busy pipe.
  return opts.pretty
    ? pino(options, pretty({ colorize: true, sync: true }))
    : pino(options, pino.destination({ dest: 1, sync: false }));
}

/** The process's logger (at `info` until boot); `configureLogging` replaces it with LOG_LEVEL once config is read. */
export let log: Logger = createLogger({ level: 'info', pretty: Boolean(process.stdout.isTTY) });

/** Sets the level and the role every line carries (runtime/service.ts, at boot). */
export function configureLogging(opts: { level: LogLevel; role: string }): Logger {
  log = createLogger({ ...opts, pretty: Boolean(process.stdout.isTTY) });
  return log;
}

/** Runs `fn` with `ids` added to every line it logs (nested scopes merge). */
export function withLogScope<T>(ids: LogScope, fn: () => T): T {
  return scope.run({ ...scope.getStore(), ...ids }, fn);
}

/** console.log/info/warn/error as log lines, so what libraries print is JSON too (the CLI roles only). */
export function captureConsole(): void {
  const to =
    (level: 'info' | 'warn' | 'error') =>
    (...args: unknown[]) =>
      log[level](format(...args));
  console.log = to('info');
  console.info = to('info');
  console.warn = to('warn');
  console.error = to('error');
}

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
  const frames =
    err instanceof Error && err.stack
      ? err.stack
          .split('\n')
          .filter((l) => /^\s+at /.test(l))
          .slice(0, 5)
          .map((l) => l.trim())
      : [];
  log.error({ error: describeError(err), ...(frames.length ? { stack: frames } : {}) }, context);
}
