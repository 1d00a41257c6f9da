import { and, desc, eq, getTableColumns, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { forEachLimit } from '../concurrency.js';
import { newId } from '../ids.js';
import { retryTransient } from '../retry.js';
import type { Progress } from '../mail/progress.js';
import type { Sealer } from '../secrets.js';
import { markRunning, recordHealth, RUNNING_AFTER_MS } from './health.js';
import type { ControlRecord, ControlReplies } from './control.js';
import { postWebhook, type AttemptCapture } from './post.js';
import { createAttemptWriter, type AttemptWriter, type Recorded } from './attempt-writer.js';
import { TRACKING_PATTERN } from '../mail/patterns.js';
import type { RouteService } from './routes.js';
import type { NetPolicy } from './url.js';
import { log } from '../log.js';
import { named, namedCache, rowOf, runNamed } from '../prepared.js';
import { arrayInsert } from '../array-insert.js';

export type DeliveryRow = typeof schema.deliveries.$inferSelect;
export type AttemptResult = { ok: boolean; status: number | null; reason: string | null };
/** A delivery with what its attempt needs, read with it (or known already: a row just made, its route, its payload). */
export type DeliveryToAttempt = {
  d: DeliveryRow;
  done: typeof schema.deliveryAttempts.$inferSelect | null;
  sealed: string | null;
  route: typeof schema.routes.$inferSelect | null;
};
export type NewDelivery = {
  id?: string;
  userId: string;
  messageId: string;
  routeId: string;
  domainId: string | null;
  url: string;
  kind: DeliveryRow['kind'];
  payload?: Record<string, unknown>;
  workflowId?: string;
};

/** Webhook deliveries: rows, one captured attempt at a time, and reading attempts back. */
export function createDeliveryStore(deps: {
  db: Db;
  sealer: Sealer;
  routes: RouteService;
  net: NetPolicy;
  accountSecret(userId: string): Promise<string>;
  /** Applies control-mode replies of inbound deliveries (spam, drop, block-sender); without it they are only acks. */
  control?: () => ControlReplies;
  /** Group commit of attempt records; one of its own when not given. */
  attempts?: AttemptWriter;
}) {
  const { db } = deps;
  const dl = schema.deliveries;
  const at = schema.deliveryAttempts;
  const writer = deps.attempts ?? createAttemptWriter({ db });
  /** Counts health folds that changed a streak; `changedAt` per domain, and the newest one of a domain forgotten. */
  let sequence = 0;
  let evictedUpTo = 0;
  const folds = new Map<string, { tail: Promise<void>; changedAt: number; users: number }>();

  /** The body to POST: a stored inbound payload (with this delivery's `to`) or the delivery's own payload. */
  async function bodyOf(d: DeliveryRow, sealed?: string | null): Promise<string | undefined> {
    if (d.kind === 'engagement') return JSON.stringify(d.payload);
    const p =
      sealed !== undefined
        ? sealed
        : (
            await db
              .select({ p: schema.inboundRaw.payloadSealed })
              .from(schema.inboundRaw)
              .where(eq(schema.inboundRaw.messageId, d.messageId))
          )[0]?.p;
    if (!p) return undefined;
    return JSON.stringify({ ...JSON.parse(deps.sealer.open(p)), ...(d.payload ?? {}) });
  }

  async function target(d: DeliveryRow, known?: typeof schema.routes.$inferSelect | null) {
    const route =
      known !== undefined ? known : (await db.select().from(schema.routes).where(eq(schema.routes.id, d.routeId)))[0];
    const ackMode = route?.ackMode ?? 'lenient';
    const secret =
      !route || route.pattern === TRACKING_PATTERN ? await deps.accountSecret(d.userId) : deps.routes.secretOf(route);
    return { url: route?.url ?? d.url, ackMode, secret };
  }

  // The rows go in from one array per column (core/array-insert.ts): one text per variant, a named
  // prepared statement however many rows it carries, nothing built per call but the arrays.
  const deliveryRows = arrayInsert(dl);
  const deliveryColumns = getTableColumns(dl);
  const insertStatements = namedCache();
  const id = sql.identifier(dl.id.name);

  /**
   * Rows in one statement: a row that exists already (a retried step) is answered as it is, unchanged;
   * `made` tells a row this statement inserted (it has no attempt yet).
   */
  async function createMany(vs: NewDelivery[]): Promise<(DeliveryRow & { made: boolean })[]> {
    if (vs.length === 0) return [];
    const now = Date.now();
    const rows = vs.map((v) => ({
      id: v.id ?? newId('dlv'),
      userId: v.userId,
      messageId: v.messageId,
      routeId: v.routeId,
      domainId: v.domainId,
      url: v.url,
      kind: v.kind,
      status: 'pending' as const,
      payload: v.payload ?? null,
      workflowId: v.workflowId ?? null,
      createdAt: now,
      updatedAt: now,
    }));
    const { variant, columns } = deliveryRows.columnsOf(rows);
    const statement = insertStatements(variant, () =>
      named(
        'deliveries_insert',
        sql`${deliveryRows.statement(columns, 'd')} on conflict (${id}) do update set ${id} = excluded.${id} returning *, (xmax = 0) as made`,
      ),
    );
    const { rows: stored } = await runNamed(db, statement, deliveryRows.values(columns, rows, 'd'));
    return stored.map((r) => ({ ...rowOf<DeliveryRow>(deliveryColumns, r), made: r.made === true }));
  }

  return {
    bodyOf,

    async create(v: NewDelivery): Promise<DeliveryRow> {
      const [stored] = await createMany([v]);
      return stored!;
    },

    createMany,

    /**
     * Attempt `n` of a delivery: signed POST, captured as an `att_` row, delivery and domain health updated.
     * Idempotent per (delivery, n): a repeated call answers the recorded outcome without posting again.
     */
    async attempt(
      deliveryId: string,
      n: number,
      nextDelayMs: number | null,
      progress?: Progress,
    ): Promise<AttemptResult> {
      return (await attemptMany([deliveryId], n, nextDelayMs, { progress })).get(deliveryId)!;
    },

    attemptMany,

    record: (d: DeliveryRow, n: number, c: AttemptCapture, url: string, nextDelayMs: number | null) =>
      record(d, n, c, url, nextDelayMs),

    async get(userId: string, id: string): Promise<DeliveryRow | undefined> {
      const [row] = await db
        .select()
        .from(dl)
        .where(and(eq(dl.id, id), eq(dl.userId, userId)));
      return row;
    },

    async attemptsOf(deliveryId: string) {
      const rows = await db.select().from(at).where(eq(at.deliveryId, deliveryId)).orderBy(desc(at.attemptNumber));
      return rows.map((a) => ({
        id: a.id,
        delivery_id: a.deliveryId,
        message_id: a.messageId,
        attempt_number: a.attemptNumber,
        ok: (a.ok ? 1 : 0) as 0 | 1,
        reason: a.reason,
        request_headers: a.requestHeaders,
        request_body: a.requestBody,
        response_status: a.responseStatus,
        response_headers: a.responseHeaders,
        response_body: a.responseBody,
        control: (a.control ?? null) as ControlRecord | null,
        duration_ms: a.durationMs,
        requested_at: a.requestedAt,
        created_at: a.createdAt,
      }));
    },
  };

  /**
   * Attempt `n` of each delivery (`attempt`), `concurrency` POSTs at a time, after one read for all of them:
   * the delivery, a recorded outcome of this attempt, the payload and the route. Answers by delivery id.
   * The deliveries in `known` (rows the caller just made, with their payload and route) are not read again.
   */
  async function attemptMany(
    ids: string[],
    n: number,
    nextDelayMs: number | null,
    opts: { progress?: Progress; concurrency?: number } = {},
    known: DeliveryToAttempt[] = [],
  ): Promise<Map<string, AttemptResult>> {
    const out = new Map<string, AttemptResult>(ids.map((id) => [id, { ok: false, status: null, reason: 'not_found' }]));
    const given = known.filter((k) => out.has(k.d.id));
    const rest = ids.filter((id) => !given.some((k) => k.d.id === id));
    if (ids.length === 0) return out;
    const read = async () =>
      rest.length === 0
        ? []
        : db
            .select({ d: dl, done: at, sealed: schema.inboundRaw.payloadSealed, route: schema.routes })
            .from(dl)
            .leftJoin(at, and(eq(at.deliveryId, dl.id), eq(at.attemptNumber, n)))
            .leftJoin(schema.inboundRaw, eq(schema.inboundRaw.messageId, dl.messageId))
            .leftJoin(schema.routes, eq(schema.routes.id, dl.routeId))
            .where(rest.length === 1 ? eq(dl.id, rest[0]!) : inArray(dl.id, rest));
    const rows: DeliveryToAttempt[] = [...given, ...(await read())];
    await forEachLimit(rows, opts.concurrency ?? 16, async (row) => {
      // Cancelled (the run, or the activity's timeout): no further POST starts; the ones under way are recorded.
      if (opts.progress?.stopped()) throw new Error('attempts cancelled');
      out.set(row.d.id, await attemptRow(row, n, nextDelayMs, opts.progress));
    });
    return out;
  }

  async function attemptRow(
    row: DeliveryToAttempt,
    n: number,
    nextDelayMs: number | null,
    progress?: Progress,
  ): Promise<AttemptResult> {
    if (row.done) return { ok: row.done.ok === 1, status: row.done.responseStatus, reason: row.done.reason };
    const d = row.d;
    const body = await bodyOf(d, row.sealed);
    if (body === undefined) {
      await db
        .update(dl)
        .set({ status: 'failed', nextRetryAt: null, lastReason: 'no_payload', updatedAt: Date.now() })
        .where(eq(dl.id, d.id));
      return { ok: false, status: null, reason: 'no_payload' };
    }
    const t = await target(d, row.route);
    const c = await postWatched(d, () =>
      postWebhook({ url: t.url, body, secret: t.secret, ackMode: t.ackMode, net: deps.net }),
    );
    log.info(
      {
        deliveryId: d.id,
        messageId: d.messageId,
        accountId: d.userId,
        domainId: d.domainId,
        attempt: n,
        result: c.reason ?? 'ok',
        status: c.status,
        durationMs: c.durationMs,
      },
      'webhook attempt',
    );
    // A control reply acts on the message before the attempt is written (each effect is idempotent).
    const control =
      c.control && d.kind === 'inbound' && deps.control ? await deps.control().apply(d, c.control) : undefined;
    // The POST happened: its outcome is written even through a database outage, so a retry never posts it again.
    return retryTransient(() => record(d, n, c, t.url, nextDelayMs, control), { onWait: () => progress?.beat() });
  }

  /**
   * A POST still unanswered after RUNNING_AFTER_MS marks its domain's webhook `running`; the mark is written
   * before the outcome, so the outcome always replaces it. A quick answer writes nothing extra (the hot path).
   */
  async function postWatched(d: DeliveryRow, post: () => Promise<AttemptCapture>): Promise<AttemptCapture> {
    if (!d.domainId || d.kind === 'engagement') return post();
    let marking: Promise<void> | undefined;
    const timer = setTimeout(() => {
      marking = markRunning(db, [d.domainId!]).catch(() => undefined);
    }, RUNNING_AFTER_MS);
    try {
      return await post();
    } finally {
      clearTimeout(timer);
      await marking;
    }
  }

  /**
   * Captures attempt `n` as an att_ row and moves the delivery and the domain's health on. The attempt and the
   * delivery are one statement, shared with the attempts recorded meanwhile (group commit); this resolves
   * once they are durable.
   */
  async function record(
    d: DeliveryRow,
    n: number,
    c: AttemptCapture,
    url: string,
    nextDelayMs: number | null,
    control?: ControlRecord,
  ): Promise<AttemptResult> {
    const health = d.domainId && d.kind !== 'engagement';
    const seen = sequence;
    const moved = await writer.write({ deliveryId: d.id, messageId: d.messageId, n, c, url, nextDelayMs, control });
    if (health) await foldHealth(d.domainId!, c, moved, seen);
    return { ok: c.ok, status: c.status, reason: c.reason };
  }

  /**
   * Folds attempts into their domain's health streak one after another (per domain, in this process): the
   * attempts of one group read the streak in the same statement, so an attempt uses what its statement read
   * only when no fold that changed the streak ended since; otherwise it reads the streak again. Failures in
   * one group each count.
   */
  function foldHealth(domainId: string, c: AttemptCapture, moved: Recorded, seen: number): Promise<void> {
    const f = folds.get(domainId) ?? { tail: Promise.resolve(), changedAt: evictedUpTo, users: 0 };
    folds.set(domainId, f);
    f.users += 1;
    const run = f.tail.then(async () => {
      const known = moved && f.changedAt <= seen ? moved : undefined;
      const prev = (known?.health ?? null) as { status?: string; code?: number | null } | null;
      const steady = c.ok && known !== undefined && prev?.status === 'ok' && prev.code === c.status;
      try {
        await recordHealth(db, domainId, c, known);
      } finally {
        // A steady healthy streak only moves its time on: the next fold may still use its own read.
        if (!steady) f.changedAt = ++sequence;
      }
    });
    f.tail = run.catch(() => undefined);
    return run.finally(() => {
      f.users -= 1;
      if (f.users === 0 && folds.get(domainId) === f) {
        folds.delete(domainId);
        evictedUpTo = Math.max(evictedUpTo, f.changedAt);
      }
    });
  }
}
export type DeliveryStore = ReturnType<typeof createDeliveryStore>;

/** SPEC.md Webhook delivery row. */
export const deliveryDto = (d: DeliveryRow) => ({
  id: d.id,
  message_id: d.messageId,
  route_id: d.routeId,
  url: d.url,
  status: d.status,
  attempts: d.attempts,
  last_status_code: d.lastStatusCode,
  next_retry_at: d.nextRetryAt,
  retry_attempts: d.retryAttempts,
  created_at: d.createdAt,
  updated_at: d.updatedAt,
});
