import { createHash } from 'node:crypto';
import { and, eq, lte, or, sql } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import { AppError, conflict } from './errors.js';
import { randomToken } from './ids.js';
import { describeError, log } from './log.js';
import type { Sealer } from './secrets.js';

/** How long a key answers its first response again (docs/idempotency.md). */
export const IDEMPOTENCY_TTL_MS = 24 * 3600_000;
/** A running claim whose process stopped renewing it for this long is abandoned and may be taken over. */
export const IDEMPOTENCY_LEASE_MS = 30_000;
/** A key: 1 to 255 printable ASCII characters, no spaces (a UUID, a ULID, "order-1234:send"…). */
export const IDEMPOTENCY_KEY_MAX = 255;
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]+$/;

/** What an operation answered: HTTP status and JSON body, replayed as they were. */
export type StoredAnswer = { status: number; body: unknown };
export type IdempotentAnswer = StoredAnswer & { replayed: boolean };
/** One keyed request: whose key, which key, and what it asks (fingerprint of operation, scope and input). */
export type KeyedRequest = { userId: string; key: string; operation: string; fingerprint: string };
type Claim = { kind: 'claimed'; token: string } | { kind: 'replay'; answer: StoredAnswer };

export const keyReused = () =>
  new AppError(
    422,
    'idempotency_key_reused',
    'This Idempotency-Key was used with a different request (operation, credential scope or body); use a new key for a new request',
  );
export const keyInProgress = () =>
  conflict('A request with this Idempotency-Key is still running; retry in a few seconds', 'idempotency_in_progress');

/** sha256 of a value's canonical JSON (object keys sorted, undefined left out), so equal requests match whatever their key order. */
export function fingerprintOf(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * Idempotency keys in PostgreSQL, scoped to the account. The claim row is inserted before the work, so of
 * any number of concurrent requests with one key, in any process, exactly one runs; the others answer
 * 409 while it runs and its stored answer afterwards. A failed request releases its key (nothing was made).
 */
export function createIdempotencyStore(deps: { db: Db; sealer: Sealer; leaseMs?: number }) {
  const { db } = deps;
  const t = schema.idempotencyKeys;
  const leaseMs = deps.leaseMs ?? IDEMPOTENCY_LEASE_MS;
  const rowOf = (r: { userId: string; key: string }, token: string) =>
    and(eq(t.userId, r.userId), eq(t.key, r.key), eq(t.claimToken, token), eq(t.state, 'running'));

  /**
   * One statement claims the key: a new row, or an old one that expired, or a running one whose process
   * stopped renewing it (same request only). Otherwise the row tells: another request (422), still
   * running (409), or done (its answer).
   */
  async function claim(req: KeyedRequest, now = Date.now()): Promise<Claim> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const token = randomToken(12);
      const values = {
        ...req,
        state: 'running' as const,
        claimToken: token,
        leaseUntil: now + leaseMs,
        responseStatus: null,
        responseSealed: null,
        createdAt: now,
        expiresAt: now + IDEMPOTENCY_TTL_MS,
      };
      const [won] = await db
        .insert(t)
        .values(values)
        .onConflictDoUpdate({
          target: [t.userId, t.key],
          set: values,
          setWhere: or(
            lte(t.expiresAt, now),
            and(eq(t.state, 'running'), lte(t.leaseUntil, now), eq(t.fingerprint, req.fingerprint)),
          ),
        })
        .returning({ token: t.claimToken });
      if (won) return { kind: 'claimed', token };
      const [row] = await db
        .select()
        .from(t)
        .where(and(eq(t.userId, req.userId), eq(t.key, req.key)));
      if (!row) continue; // released between the two statements: claim again
      if (row.fingerprint !== req.fingerprint) throw keyReused();
      if (row.state === 'running' || row.responseSealed === null) throw keyInProgress();
      return {
        kind: 'replay',
        answer: { status: row.responseStatus ?? 200, body: JSON.parse(deps.sealer.open(row.responseSealed)) },
      };
    }
    throw keyInProgress();
  }

  /** Keeps the answer for replays. False when the claim was lost (the lease ran out and another request took over). */
  async function complete(req: KeyedRequest, token: string, answer: StoredAnswer, now = Date.now()): Promise<boolean> {
    const sealed = deps.sealer.seal(JSON.stringify(answer.body ?? null));
    const done = await db
      .update(t)
      .set({ state: 'done', responseStatus: answer.status, responseSealed: sealed, leaseUntil: now })
      .where(rowOf(req, token))
      .returning({ key: t.key });
    return done.length === 1;
  }

  /** Gives the key back after a failed request, so a retry (corrected or not) runs. */
  async function release(req: KeyedRequest, token: string): Promise<void> {
    await db.delete(t).where(rowOf(req, token));
  }

  /** Pushes the lease forward while the work runs (a long upload, a slow registrar). */
  async function renew(req: KeyedRequest, token: string, now = Date.now()): Promise<void> {
    await db
      .update(t)
      .set({ leaseUntil: now + leaseMs })
      .where(rowOf(req, token));
  }

  return {
    claim,
    complete,
    release,
    renew,

    /**
     * Runs `work` once per key: the first request runs it and its answer is kept 24 hours; a repeat with
     * the same request answers that again (`replayed`) without running anything; errors release the key.
     */
    async run(req: KeyedRequest, work: () => Promise<StoredAnswer>): Promise<IdempotentAnswer> {
      const c = await claim(req);
      if (c.kind === 'replay') return { ...c.answer, replayed: true };
      const renewal = setInterval(
        () => {
          renew(req, c.token).catch((err) =>
            log.error(`[idempotency] could not renew the claim of a running request: ${describeError(err)}`),
          );
        },
        Math.max(1000, Math.floor(leaseMs / 3)),
      );
      renewal.unref();
      let answer: StoredAnswer;
      try {
        answer = await work();
      } catch (err) {
        clearInterval(renewal);
        await release(req, c.token).catch((e) =>
          log.error(
            `[idempotency] could not release a key after a failed request (its lease frees it): ${describeError(e)}`,
          ),
        );
        throw err;
      }
      clearInterval(renewal);
      // The work is done: its answer goes back even if keeping it fails (then a retry after the lease runs it again).
      const kept = await complete(req, c.token, answer).catch((err) => {
        log.error(`[idempotency] could not keep the answer of a keyed request: ${describeError(err)}`);
        return false;
      });
      if (!kept)
        log.warn(`[idempotency] the claim of key ${JSON.stringify(req.key)} was lost before its answer was kept`);
      return { ...answer, replayed: false };
    },
  };
}
export type IdempotencyStore = ReturnType<typeof createIdempotencyStore>;

/** Housekeeping: deletes up to `limit` keys past their 24 hours; answers how many. Idempotent. */
export async function deleteExpiredIdempotencyKeys(db: Db, now: number, limit: number): Promise<number> {
  const t = schema.idempotencyKeys;
  const gone = await db
    .delete(t)
    .where(sql`ctid in (select ctid from ${t} where ${t.expiresAt} < ${now} limit ${limit})`)
    .returning({ key: t.key });
  return gone.length;
}
