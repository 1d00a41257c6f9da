import { createHash } from 'node:crypto';
import type { Resolver } from 'node:dns/promises';
import { and, eq, getTableColumns, inArray, isNull, lt, sql } from 'drizzle-orm';
import type { ParsedMail } from 'mailparser';
import type { Database, Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AttachmentService } from '../attachments/service.js';
import type { DomainRow } from '../domains/dto.js';
import { AppError } from '../errors.js';
import type { Sealer } from '../secrets.js';
import type { DeliveryStore, DeliveryToAttempt, NewDelivery } from '../webhooks/deliveries.js';
import { bestRoute, type RouteRow, type RouteService } from '../webhooks/routes.js';
import { scoreMessage } from './auth.js';
import { cachedResolve } from '../dns.js';
import { createGroupCommit } from '../group-commit.js';
import { FORWARD_HEADER } from '../mail/headers.js';
import type { Forwarder } from '../mailboxes/forward.js';
import type { Srs } from '../mail/srs.js';
import { createSrsReturns } from './srs-bounce.js';
import type { MailboxStore } from '../mailboxes/store.js';
import type { InboundDoor, MessageInsert } from './door.js';
import type { EncryptionService } from './encryption-service.js';
import type { ReportService } from './report-service.js';
import type { AggregateStore } from '../feedback/aggregate-store.js';
import type { AggregateBounds } from '../parsing/aggregate-types.js';
import { dmarcReportAddress, tlsReportAddress } from '../domains/records.js';
import {
  inboundAcceptsWaiting,
  inboundPolicyOutcomes,
  reportsReceived,
  since,
  spamScanDuration,
  spamScans,
} from '../metrics.js';
import { parseMail, runParse } from '../parsing/pool.js';
import { receivedPayload, type InboundAttachment } from './payload.js';
import { unsubscribeTokenOf } from '../contacts/unsubscribe.js';
import { log } from '../log.js';
import { named, namedCache, rowOf, runNamed, type Named } from '../prepared.js';
import { withSpamHeaders, type SpamFilter, type SpamMeta, type SpamVerdict } from '../spam/rspamd.js';
import { configCache } from './config-cache.js';
import { watchReceivingConfig } from '../mail/config-changes.js';
import { decide, policyRefused, senderBlocked, type InboundPolicy, type PolicyDecision } from './policy.js';

const hashId = (prefix: string, ...parts: (string | Buffer)[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return `${prefix}_${h.digest('base64url').slice(0, 24)}`;
};
const split = (address: string) => {
  const at = address.lastIndexOf('@');
  return { local: address.slice(0, at).toLowerCase(), domain: address.slice(at + 1).toLowerCase() };
};
/** How long an answer of a sender's DNS (SPF, DKIM keys, DMARC) is used again when scoring (core/dns.ts). */
const SCORING_DNS_KEEP_MS = 60_000;
/** At most this many messages share one accepting transaction. */
const ACCEPT_GROUP_MAX = 32;
/** One message's part of an accepting transaction. */
type AcceptWork = (tx: Parameters<Parameters<Db['transaction']>[0]>[0]) => Promise<void>;
/** Thrown inside the accepting transaction to roll it back: the message was stored before. */
const storedBefore = new Error('stored before');
/** Return-path addresses of outbound mail (`bounce+<msg>@bounces.<domain>`): reports, not inbound mail. */
export const isReturnPath = (address: string) =>
  split(address).local.startsWith('bounce+') || split(address).domain.startsWith('bounces.');

/** The SMTP transaction of a message; `hostname` is the client's reverse DNS name when it has one. */
export type Envelope = { from: string; rcpts: string[]; ip: string; helo: string; hostname?: string };

/** Inbound mail: who may receive, storing what arrives, and turning it into webhook deliveries. */
export function createInboundService(deps: {
  db: Db;
  /** Hears domain and route changes made by other processes (core/mail/config-changes.ts). */
  listen?: Database['listen'];
  sealer: Sealer;
  resolver: Resolver;
  serviceDomain: string;
  attachments: AttachmentService;
  encryption: EncryptionService;
  routes: RouteService;
  deliveries: DeliveryStore;
  reports: ReportService;
  /** DMARC aggregate and TLS reports mailed to SERVICE_DOMAIN's report addresses, and their bounds. */
  aggregates: AggregateStore;
  reportBounds: AggregateBounds;
  starts: { enqueue(ids: string[], account: string): void };
  mailboxStore: MailboxStore;
  forwarder: Forwarder;
  /** SRS envelope senders of forwards: mail to them goes back to the original sender (core/inbound/srs-bounce.ts). */
  srs: Srs;
  /** rspamd: each message is scored once at DATA, before it is stored (core/spam/rspamd.ts). */
  spam: SpamFilter;
  /** Storage counted at the door: the quota and the daily allowance of unverified accounts (RCPT and DATA). */
  door: InboundDoor;
  /** Per-domain sender rules (RCPT and DATA) and how many days held mail is kept (docs/inbound-policy.md). */
  policy: Pick<InboundPolicy, 'judgeSender'>;
  quarantineDays: number;
  /** Records addresses of mail traffic as contacts (group-committed by the contact service). */
  touchContacts: (userId: string, emails: string[]) => Promise<void>;
  /** Applies the token of mail to a broadcast's `unsubscribe+<token>@bounces.<domain>` address. */
  unsubscribe: (token: string) => Promise<void>;
}) {
  const { db } = deps;
  const d = schema.domains;
  const dmarcAddress = dmarcReportAddress(deps.serviceDomain).toLowerCase();
  const tlsAddress = tlsReportAddress(deps.serviceDomain).toLowerCase();
  /** Mail to one of SERVICE_DOMAIN's report addresses: read as a report, never stored as mail. */
  const reportKind = (address: string) =>
    address.toLowerCase() === dmarcAddress ? 'dmarc' : address.toLowerCase() === tlsAddress ? 'tls' : undefined;
  const isReportAddress = (address: string) => reportKind(address) !== undefined;

  /** A DMARC or TLS report, parsed in the pool within its bounds and stored per domain; a bad one is logged and dropped. */
  async function receiveAggregate(kind: 'dmarc' | 'tls', raw: Buffer): Promise<void> {
    const parsed =
      kind === 'dmarc'
        ? await runParse('parseDmarcReport', { raw, bounds: deps.reportBounds })
        : await runParse('parseTlsReport', { raw, bounds: deps.reportBounds });
    if (!parsed.report) {
      reportsReceived.inc({ kind, outcome: 'refused' });
      log.info({ kind, reason: parsed.reason }, 'report not read');
      throw new AppError(422, 'unparseable_message', `Not a readable ${kind.toUpperCase()} report: ${parsed.reason}`);
    }
    if (parsed.report.kind === 'dmarc') await deps.aggregates.storeDmarc(parsed.report);
    else await deps.aggregates.storeTls(parsed.report);
  }
  // The senders' SPF, DKIM and DMARC records, kept a minute: a burst from one domain asks its DNS once.
  const scoringLookups = cachedResolve(deps.resolver, SCORING_DNS_KEEP_MS);
  // The read every inbound message makes (RCPT and DATA), prepared once and kept per process (config-cache.ts).
  const domainRows = db
    .select({ domain: d, route: schema.routes })
    .from(d)
    .leftJoin(schema.routes, eq(schema.routes.domainId, d.id))
    .where(eq(d.domain, sql.placeholder('name')))
    .prepare('inbound_domain_by_name');
  /**
   * Every row of a domain name (any account, any status) and the one that receives its mail, with its
   * routes, in one statement. Only the verified row with verified MX receives (at most one account holds a
   * domain verified): a pending row of another account that added the same name never sees this mail.
   */
  // The first read opens the listener that clears these caches when another process changes the config.
  const watch = watchReceivingConfig(deps.listen);
  const byName = configCache(async (name) => {
    watch();
    const rows = await domainRows.execute({ name });
    const domains = [...new Map(rows.map((x) => [x.domain.id, x.domain])).values()];
    const domain = domains.find((x) => x.status === 'verified' && x.mxVerified === 1);
    // The join repeats the domain once per route.
    const routes = domain ? rows.filter((x) => x.domain.id === domain.id && x.route).map((x) => x.route!) : [];
    return { domains, receiving: domain ? { domain, routes } : undefined };
  });

  /** A domain's routes by its id, for the worker's deliveries (kept as the domains by name are). */
  const routesOf = configCache(async (domainId) => {
    watch();
    const rows = await db.select().from(schema.routes).where(eq(schema.routes.domainId, domainId));
    return rows;
  });

  const storedMessage = db
    .select({ id: schema.messages.id })
    .from(schema.messages)
    .where(eq(schema.messages.id, sql.placeholder('id')))
    .prepare('inbound_stored_message');

  /** The domain that receives mail for `name`, and its route for a local part. */
  async function receivingDomain(
    name: string,
  ): Promise<{ domain: DomainRow; match: (local: string) => RouteRow | undefined } | undefined> {
    const found = (await byName(name)).receiving;
    if (!found) return undefined;
    return { domain: found.domain, match: (local) => bestRoute(found.routes, local) };
  }

  /** One rspamd scan, counted and timed (svc_spam_scans_total, svc_spam_scan_duration_seconds). */
  async function scan(raw: Buffer, meta: SpamMeta): Promise<SpamVerdict> {
    const started = performance.now();
    const v = await deps.spam.check(raw, meta);
    spamScanDuration.observe({ result: v.scored ? 'scored' : 'unscored' }, since(started));
    spamScans.inc(
      v.scored
        ? { result: 'scored', action: v.action, reason: '' }
        : { result: 'unscored', action: '', reason: v.reason },
    );
    return v;
  }

  const srsReturns = createSrsReturns({
    srs: deps.srs,
    forwarder: deps.forwarder,
    receivingDomain: async (name) => (await receivingDomain(name))?.domain,
  });

  /** Attachments as the payload carries them: signed URLs, or inline base64 when nothing may be kept in the clear. */
  async function payloadAttachments(
    mail: ParsedMail,
    domain: DomainRow,
    messageId: string,
    inline: boolean,
  ): Promise<InboundAttachment[]> {
    return Promise.all(
      mail.attachments.map(async (a, i) => {
        const base = {
          id: `${messageId}_${i}`,
          filename: a.filename ?? `attachment-${i + 1}`,
          contentType: a.contentType,
          size: a.size,
        };
        if (inline) return { ...base, content: a.content.toString('base64') };
        const up = await deps.attachments.upload(domain.userId, {
          raw: a.content,
          filename: base.filename,
          contentType: a.contentType,
          retentionDays: 30,
        });
        return { ...base, id: up.id, url: up.url };
      }),
    );
  }

  /**
   * Stores one domain's copy of a message, files it into each recipient's INBOX (not on zero-retention or
   * encrypted domains), forwards it where a route says so, and starts its delivery workflow; idempotent
   * per (message bytes, recipients).
   */
  async function acceptFor(
    domain: DomainRow,
    routed: { rcpt: string; route?: RouteRow }[],
    raw: Buffer,
    mail: ParsedMail,
    env: Envelope,
    auth: Record<string, string | null>,
    /** rspamd's verdict; none on a message made by POST /v1/route (no SMTP peer to judge). */
    spam?: SpamVerdict,
    /** The domain's policy held it (quarantine): stored with its raw copy, filed, forwarded and delivered on release only. */
    hold?: { reason: string },
  ) {
    const rcpts = routed.map((r) => r.rcpt);
    const id = hashId('msg', domain.id, rcpts.join(','), raw);
    const keepNothing = domain.zeroRetention === 1;
    const encrypted = Boolean(domain.encPublicKey);
    // Attachments kept as files are uploaded before the transaction: only then is a message stored before
    // looked for first (a retried DATA must not upload them twice). Otherwise the insert itself tells.
    const uploads = mail.attachments.length > 0 && !keepNothing && !encrypted;
    const [seen] = uploads ? await storedMessage.execute({ id }) : [];
    if (!seen) {
      const receivedAt = Date.now();
      const attachments = await payloadAttachments(mail, domain, id, keepNothing || encrypted);
      const payload = receivedPayload({ id, mail, envelopeFrom: env.from, receivedAt, auth, spam, attachments });
      const sealed = keepNothing
        ? { content: Buffer.alloc(0), encrypted: false, encAlg: null }
        : await deps.encryption.sealForDomain(domain, raw);
      // Held clear mail keeps its fields readable (the owner judges it) but is filed only on release.
      const readable = !keepNothing && !encrypted;
      const clear = readable && !hold;
      const filed: string[] = [];
      // In one transaction with the other messages accepted meanwhile (`accepting`, below).
      const accepted = accepting.write(async (tx) => {
        // Run again alone when the group it was in failed: nothing of that try was kept.
        filed.length = 0;
        // The message row and its raw copy, written by the door's statement last (data-modifying CTEs always run).
        const message: MessageInsert = {
          message: {
            id,
            userId: domain.userId,
            direction: 'inbound',
            kind: 'user',
            domainId: domain.id,
            fromAddr: payload.from.address,
            toAddrs: rcpts,
            subject: readable ? payload.subject : null,
            text: readable ? payload.text : null,
            html: readable ? payload.html : null,
            status: hold ? 'held' : 'received',
            ...(hold ? { heldReason: hold.reason, heldUntil: receivedAt + deps.quarantineDays * 86_400_000 } : {}),
            threadId: payload.threadId,
            auth,
            spam: spam ?? null,
            envelopeFrom: env.from,
            receivedAt,
            sizeBytes: raw.length,
            createdAt: receivedAt,
            updatedAt: receivedAt,
          },
          raw: {
            // A clear message's one stored copy is its mailbox body (filed below); the raw copy here is the sealed one only.
            messageId: id,
            content: clear ? Buffer.alloc(0) : hold && !encrypted ? raw : sealed.content,
            encrypted: sealed.encrypted,
            encAlg: sealed.encAlg,
            payloadSealed: deps.sealer.seal(JSON.stringify(payload)),
            createdAt: receivedAt,
          },
        };
        // What this message stores goes into the account's running total (whose row stays locked until commit).
        let storedBytes = 0;
        if (encrypted && !keepNothing) {
          await deps.door.storedSealed(tx, domain.userId, sealed.content.length);
          storedBytes = sealed.content.length;
        } else if (hold && !keepNothing) {
          // Held clear mail: its raw copy counts until it is filed on release, or deleted (core/inbound/quarantine.ts).
          await deps.door.storedSealed(tx, domain.userId, raw.length);
          storedBytes = raw.length;
        }
        if (clear) {
          // One body for every recipient: the first filing stores it, the others refer to it. The mailbox copy
          // carries the verdict as X-Spam-* headers (a sender's own X-Spam-* lines are dropped).
          const boxRaw = spam ? withSpamHeaders(raw, spam) : raw;
          let bodyId: string | undefined;
          for (const rcpt of rcpts) {
            const box = await deps.mailboxStore.fileIn(tx, {
              userId: domain.userId,
              domainId: domain.id,
              address: rcpt,
              folder: 'INBOX',
              raw: boxRaw,
              fromAddr: env.from,
              subject: payload.subject,
              messageId: id,
              // A message stored before rolls this transaction back (below): no earlier copy to look for.
              fresh: true,
              internalDate: receivedAt,
              bodyId,
            });
            if (box) filed.push(box.mailboxId);
            bodyId ??= box?.bodyId;
          }
          if (bodyId) storedBytes = boxRaw.length;
        }
        // The account's counters last (today's inbound and the month's usage, in the door's one statement): each
        // holds its row locked until commit, so concurrent messages of one account queue only for that statement.
        // A message that passes the quota or the allowance is refused and everything above rolls back.
        // The message's rows go in the same statement; a message stored before (a retried DATA, or the same
        // bytes arriving twice at once) rolls all of this back and is answered as it was.
        const door = await deps.door.atData(
          tx,
          domain.userId,
          rcpts[0]!,
          raw.length,
          !keepNothing,
          storedBytes,
          message,
        );
        if (!door.stored) throw storedBefore;
      });
      inboundAcceptsWaiting.set(accepting.waiting());
      const fresh = await accepted.then(
        () => true,
        (err: unknown) => {
          if (err === storedBefore) return false;
          throw err;
        },
      );
      if (fresh) {
        filed.forEach(deps.mailboxStore.notify);
        // The sender becomes (or stays) a contact of the account, seen now (group-committed, off the 250's path).
        deps
          .touchContacts(domain.userId, [payload.from.address])
          .catch((err: Error) =>
            log.error({ error: err.message }, '[contacts] could not record a sender as a contact'),
          );
        // A message we forwarded once is not forwarded again (two forward routes pointing at each other); held mail on release.
        const forwardedBefore = mail.headers.has(FORWARD_HEADER.toLowerCase()) || Boolean(hold);
        for (const { rcpt, route } of routed) {
          if (route?.action === 'forward' && route.destination && !forwardedBefore) {
            await deps.forwarder.forward({
              userId: domain.userId,
              domainId: domain.id,
              rcpt,
              destination: route.destination,
              raw,
              mail,
              envelopeFrom: env.from,
              made: auth.source === 'api',
            });
          }
        }
      }
    }
    // Durable now: the workflow starts off the SMTP path (a crash before it is the sweep's to mend). Held: on release.
    if (!hold) deps.starts.enqueue([id], domain.userId);
    return id;
  }

  /**
   * The accepting transactions of messages that arrive together are one (core/group-commit.ts): at low load each
   * message commits alone at once; under load one transaction, one begin and one commit, carries those that came
   * meanwhile, each written and judged at the door in turn, so each sees the ones before it as it would alone.
   * One group at a time, so two groups never wait for each other's rows. A group that fails (a refusal at the
   * door, a message stored before) is rolled back and each of its messages runs again in its own transaction, to
   * its own answer.
   */
  const accepting = createGroupCommit<AcceptWork, void>({
    alone: true,
    max: ACCEPT_GROUP_MAX,
    async write(items) {
      inboundAcceptsWaiting.set(accepting.waiting());
      await db.transaction(async (tx) => {
        for (const work of items) await work(tx);
      });
      return () => undefined;
    },
  });

  type Claimed = typeof schema.messages.$inferSelect & { keepsNoCopy: boolean; payloadSealed?: string | null };

  // The claim is a named prepared statement (core/prepared.ts), one text per variant whatever the batch's size:
  // built by drizzle per batch, with one parameter per id, it cost the worker more than the rest of the claim.
  const claimStatements = namedCache();
  const claimStatement = (takeOver: boolean, withPayload: boolean): Named =>
    claimStatements(`${takeOver}:${withPayload}`, () => buildClaim(takeOver, withPayload));
  function buildClaim(takeOver: boolean, withPayload: boolean): Named {
    const raw = schema.inboundRaw;
    const m = schema.messages;
    const as = sql.placeholder('as');
    return named(
      'inbound_claim',
      sql`update ${m} set ${sql.identifier(m.workflowId.name)} = ${as}
        where ${m.id} = any(${sql.placeholder('ids')}::text[])
          and (${m.workflowId} is null or ${m.workflowId} = ${as}${takeOver ? sql` or ${m.workflowId} = ${sql.placeholder('from')}` : sql``})
        returning *,
          coalesce((select ${d.zeroRetention} = 1 or coalesce(${d.encPublicKey}, '') <> '' from ${d} where ${d.id} = ${m.domainId}), false) as keeps_no_copy
          ${withPayload ? sql`, (select ${raw.payloadSealed} from ${raw} where ${raw.messageId} = ${m.id}) as payload_sealed` : sql``}`,
    );
  }
  const messageColumns = getTableColumns(schema.messages);

  /**
   * Marks messages as taken by run `as` (the sweep starts those never marked) and reads them, in one
   * statement; the domain's retention settings come back with them (a subquery in RETURNING).
   */
  async function claimMessages(
    messageIds: string[],
    as: string,
    takeOverFrom?: string,
    withPayload = false,
  ): Promise<Claimed[]> {
    const { rows } = await runNamed(db, claimStatement(takeOverFrom !== undefined, withPayload), {
      as,
      ids: messageIds,
      ...(takeOverFrom !== undefined ? { from: takeOverFrom } : {}),
    });
    return rows.map((r) => ({
      ...rowOf<typeof schema.messages.$inferSelect>(messageColumns, r),
      keepsNoCopy: r.keeps_no_copy === true,
      ...(withPayload ? { payloadSealed: (r.payload_sealed as string | null) ?? null } : {}),
    }));
  }

  /**
   * One `dlv_` row per webhook route each message's recipients match (`store` and `forward` acted at
   * accept time): each domain's routes from the per-process cache, the rows written in one statement.
   */
  async function deliveriesFor(
    claimed: Claimed[],
    workflowId: string,
  ): Promise<{ prepared: Prepared[]; known: DeliveryToAttempt[] }> {
    const planned = await Promise.all(
      claimed.map(async (m) => {
        if (!m.domainId || !m.userId) return { m, rows: [] as (NewDelivery & { route: RouteRow })[] };
        const routes = await routesOf(m.domainId);
        const match = (local: string) => bestRoute(routes, local);
        const byRoute = new Map<string, { route: RouteRow; to: string[] }>();
        for (const rcpt of m.toAddrs) {
          const route = match(split(rcpt).local);
          if (route?.action === 'webhook')
            byRoute.set(route.id, { route, to: [...(byRoute.get(route.id)?.to ?? []), rcpt] });
        }
        const rows = [...byRoute.values()].map(({ route, to }): NewDelivery & { route: RouteRow } => ({
          route,
          id: hashId('dlv', m.id, route.id),
          userId: m.userId!,
          messageId: m.id,
          routeId: route.id,
          domainId: m.domainId,
          url: route.url!,
          kind: 'inbound',
          payload: { to: to.map((address) => ({ address })) },
          workflowId,
        }));
        return { m, rows };
      }),
    );
    const made = await deps.deliveries.createMany(planned.flatMap((p) => p.rows.map(({ route: _, ...row }) => row)));
    const stored = new Set(made.map((r) => r.id));
    // A row this statement made has no attempt yet: its attempt needs no read (payload from the claim, route as matched).
    const known: DeliveryToAttempt[] = [];
    for (const { made: fresh, ...d } of made) {
      const p = planned.find((x) => x.m.id === d.messageId);
      const route = p?.rows.find((r) => r.id === d.id)?.route;
      if (fresh && p && route && p.m.payloadSealed !== undefined)
        known.push({ d, done: null, sealed: p.m.payloadSealed, route });
    }
    const prepared = planned.map(({ m, rows }) =>
      m.domainId && m.userId
        ? {
            messageId: m.id,
            userId: m.userId,
            domainId: m.domainId,
            deliveryIds: rows.map((r) => r.id!).filter((id) => stored.has(id)),
            keepsNoCopy: Boolean(m.keepsNoCopy),
          }
        : { messageId: m.id, deliveryIds: [], keepsNoCopy: false },
    );
    return { prepared, known };
  }

  /** DATA's early answer: each receiving domain's account must have room (acceptFor decides again under the lock). */
  async function admitAll(bytes: number, rcpts: string[]): Promise<void> {
    for (const name of new Set(rcpts.map((r) => split(r).domain))) {
      const found = (await byName(name)).receiving;
      if (!found) continue;
      const { userId, zeroRetention } = found.domain;
      await deps.door.early(
        userId,
        rcpts.find((r) => split(r).domain === name)!,
        bytes,
        zeroRetention !== 1,
      );
    }
  }

  return {
    /**
     * RCPT TO: a mailbox on the verified domain with verified MX, or a return path of a domain that is
     * verified or sends; `dns_unavailable` (retryable) when the domain is known but its last DNS check could
     * not read its records; `unknown_domain` otherwise. A mailbox of an account already over its storage
     * quota or its daily allowance (unverified accounts) is `mailbox_full`, retryable.
     */
    async checkRecipient(address: string, sender?: { from: string; ip: string }): Promise<void> {
      // DMARC and TLS reports about any domain here (docs/feedback.md): read at DATA, never stored as mail.
      if (isReportAddress(address)) return;
      // The SRS envelope sender of a forward: a good hash, not expired (a forged one is refused, 550 5.1.1).
      if (srsReturns.isSrs(address)) return srsReturns.check(address);
      const { domain } = split(address);
      const returnPath = isReturnPath(address);
      const name = returnPath && domain.startsWith('bounces.') ? domain.slice('bounces.'.length) : domain;
      // The return path of system mail (bounce+<msg>@bounces.<SERVICE_DOMAIN>): the service domain has no domain row.
      if (returnPath && name === deps.serviceDomain) return;
      const { domains: rows } = await byName(name);
      const verified = rows.find((r) => r.status === 'verified');
      if (returnPath && rows.some((r) => r.status === 'verified' || r.sendingEnabled)) return;
      if (!returnPath && verified?.mxVerified === 1) {
        // The domain's sender rules (docs/inbound-policy.md): a blocked sender is refused here, 550 5.7.1.
        if (sender && (await deps.policy.judgeSender(verified.id, sender)) === 'block')
          throw senderBlocked(sender.from || sender.ip);
        return deps.door.atRcpt(verified.userId, address, verified.zeroRetention !== 1);
      }
      if (rows.some((r) => r.lastCheckError)) {
        throw new AppError(
          503,
          'dns_unavailable',
          `<${address}>: cannot check ${name} right now, try again later`,
          true,
        );
      }
      throw new AppError(404, 'unknown_domain', `<${address}>: ${name} is not a verified domain here`);
    },

    /**
     * DATA: a report sent to one of our return paths (bounce, complaint) is applied to the message it
     * is about; mail for the domains' mailboxes is persisted before the 250, then delivered.
     */
    async receive(raw: Buffer, env: Envelope): Promise<string[]> {
      // Mail to a broadcast's mailto unsubscribe address unsubscribes its contact at once (RFC 2369).
      for (const token of env.rcpts.map(unsubscribeTokenOf)) if (token) await deps.unsubscribe(token);
      const returnPaths = env.rcpts.filter((a) => isReturnPath(a) && !unsubscribeTokenOf(a));
      if (returnPaths.length > 0) {
        // In the parse pool, as every parse of outside bytes (a report past its budget is refused for good).
        const report = await runParse('parseReport', {
          raw,
          envelopeTo: returnPaths,
          serviceDomain: deps.serviceDomain,
        });
        if (report) await deps.reports.apply(report);
      }
      // Mail to the SRS address of a forward goes back to the original sender, never stored as mail.
      // Returned only once the DATA is certain to be accepted (a refusal or a 4xx must not make the retry return it twice).
      const srsRcpts = env.rcpts.filter((a) => srsReturns.isSrs(a));
      const returnSrs = async () => (srsRcpts.length > 0 ? await srsReturns.returnAll(raw, srsRcpts) : []);
      const mailRcpts = env.rcpts.filter((a) => !isReportAddress(a) && !srsReturns.isSrs(a));
      for (const kind of new Set(env.rcpts.map(reportKind))) {
        if (!kind) continue;
        // A report alone is refused when unreadable (554, the sender learns why); beside other mail it is dropped.
        if (mailRcpts.length === 0) await receiveAggregate(kind, raw);
        else await receiveAggregate(kind, raw).catch((err: unknown) => log.warn({ err }, 'report dropped'));
      }
      if (mailRcpts.every(isReturnPath)) return returnSrs();
      // Room first: a message refused at the door (`mailbox_full`) costs no parse and is stored for no domain.
      await admitAll(
        raw.length,
        mailRcpts.filter((a) => !isReturnPath(a)),
      );
      const mail = await parseMail(raw);
      // SPF, DKIM and DMARC, and rspamd's verdict, side by side; each bounded in time (unscored past it).
      const [verdicts, spam] = await Promise.all([
        scoreMessage(raw, {
          ip: env.ip,
          helo: env.helo,
          sender: env.from,
          mta: deps.serviceDomain,
          resolve: scoringLookups,
        }),
        scan(raw, {
          ip: env.ip,
          from: env.from,
          rcpts: mailRcpts.filter((a) => !isReturnPath(a)),
          helo: env.helo,
          ...(env.hostname ? { hostname: env.hostname } : {}),
        }),
      ]);
      // `auth.spam` names rspamd's action (null unscored); the whole verdict is the message's `spam`.
      const { dmarcPolicy, ...checked } = verdicts;
      const auth = { ...checked, spam: spam.scored ? spam.action : null };
      const byDomain = new Map<string, string[]>();
      for (const r of mailRcpts.filter((a) => !isReturnPath(a)))
        byDomain.set(split(r).domain, [...(byDomain.get(split(r).domain) ?? []), r.toLowerCase()]);
      // Each domain's policy first: when one refuses, the whole message is refused (one answer to DATA) and nothing is stored.
      const headerFrom = mail.from?.value[0]?.address;
      const judged: {
        found: NonNullable<Awaited<ReturnType<typeof receivingDomain>>>;
        rcpts: string[];
        decision: PolicyDecision;
      }[] = [];
      for (const [name, rcpts] of byDomain) {
        const found = await receivingDomain(name);
        if (!found) continue;
        const sender = await deps.policy.judgeSender(found.domain.id, {
          from: env.from,
          ip: env.ip,
          ...(headerFrom ? { headerFrom } : {}),
        });
        if (sender === 'block') {
          inboundPolicyOutcomes.inc({ outcome: 'blocked' });
          throw senderBlocked(headerFrom ?? env.from);
        }
        const decision = decide(found.domain, { sender, spam, dmarc: auth.dmarc, dmarcPolicy: dmarcPolicy ?? null });
        if (decision.kind === 'refuse') {
          inboundPolicyOutcomes.inc({ outcome: 'refused' });
          throw policyRefused(decision.reason);
        }
        judged.push({ found, rcpts, decision });
      }
      for (const { decision } of judged)
        inboundPolicyOutcomes.inc({ outcome: decision.kind === 'hold' ? 'held' : 'delivered' });
      const ids: string[] = await returnSrs();
      for (const { found, rcpts, decision } of judged) {
        const { domain } = found;
        const routed = rcpts.sort().map((rcpt) => ({ rcpt, route: found.match(split(rcpt).local) }));
        const kept = routed.filter((r) => r.route?.action !== 'drop');
        // A `drop` route leaves nothing behind: no message row, no mailbox copy, no delivery.
        const hold = decision.kind === 'hold' ? { reason: decision.reason } : undefined;
        if (kept.length > 0) ids.push(await acceptFor(domain, kept, raw, mail, env, auth, spam, hold));
      }
      return ids;
    },

    /**
     * Workflow step of a message's own run (`inbound-<msg id>`): claims the message and creates one `dlv_`
     * row per matched route (deterministic ids, so a retry makes no duplicates). A message another run
     * holds is left to it (no deliveries), so two runs never both deliver one message; the run a batch
     * hands a failed first attempt to takes the claim over (`takeOverFrom`).
     */
    async prepareDeliveries(messageId: string, claim: { takeOverFrom?: string } = {}): Promise<Prepared> {
      const as = `inbound-${messageId}`;
      const { prepared } = await deliveriesFor(await claimMessages([messageId], as, claim.takeOverFrom), as);
      return prepared[0] ?? { messageId, deliveryIds: [], keepsNoCopy: false };
    },

    /** The batch's claim: the messages no other run has taken, marked with `batchId` and read in one statement. */
    async prepareBatch(batchId: string, messageIds: string[]): Promise<Prepared[]> {
      return (await deliveriesFor(await claimMessages(messageIds, batchId), batchId)).prepared;
    },

    /**
     * `prepareBatch` for the batch's own step: the claim also reads each message's stored payload, and the
     * delivery rows it makes come back with what their first attempt needs (`known`: no read before the POSTs).
     */
    async claimBatch(
      batchId: string,
      messageIds: string[],
    ): Promise<{ prepared: Prepared[]; known: DeliveryToAttempt[] }> {
      return deliveriesFor(await claimMessages(messageIds, batchId, undefined, true), batchId);
    },

    /** Stored inbound messages whose workflow never started (a crash, or a failed start, after the commit). */
    async findUnstarted(
      olderThanMs: number,
      limit: number,
    ): Promise<{ messageId: string; userId: string; domainId?: string }[]> {
      const m = schema.messages;
      const rows = await db
        .select({ id: m.id, userId: m.userId, domainId: m.domainId })
        .from(m)
        .where(
          and(
            eq(m.direction, 'inbound'),
            eq(m.status, 'received'),
            isNull(m.workflowId),
            lt(m.createdAt, Date.now() - olderThanMs),
          ),
        )
        .limit(limit);
      return rows
        .filter((r) => r.userId)
        .map((r) => ({ messageId: r.id, userId: r.userId!, ...(r.domainId ? { domainId: r.domainId } : {}) }));
    },

    /** A cancelled batch's `finally`: finishes (see `finish`) the given messages still claimed by that run. */
    async finishClaimed(runId: string, messageIds: string[]): Promise<void> {
      const m = schema.messages;
      const rows = await db
        .select({ id: m.id })
        .from(m)
        .where(and(inArray(m.id, messageIds), eq(m.workflowId, runId)));
      for (const r of rows) await finish(r.id);
    },

    finish,

    /**
     * `POST /v1/route` (core/inbound/route-api.ts): a message made by the API is stored and delivered through
     * the route it names as if it had arrived for `routed`'s recipient.
     */
    acceptRouted: acceptFor,
  };

  /** Workflow step after the last attempt: zero-retention and encrypted domains keep no clear copy. */
  async function finish(messageId: string): Promise<void> {
    const [m] = await db
      .select({ domainId: schema.messages.domainId })
      .from(schema.messages)
      .where(eq(schema.messages.id, messageId));
    if (!m?.domainId) return;
    const [dom] = await db.select().from(d).where(eq(d.id, m.domainId));
    if (!dom) return;
    if (dom.zeroRetention === 1) await db.delete(schema.inboundRaw).where(eq(schema.inboundRaw.messageId, messageId));
    else if (dom.encPublicKey)
      await db
        .update(schema.inboundRaw)
        .set({ payloadSealed: null })
        .where(inArray(schema.inboundRaw.messageId, [messageId]));
  }
}
export type InboundService = ReturnType<typeof createInboundService>;
/** A claimed message's deliveries; `userId` and `domainId` name it for the run that may take it over. */
export type Prepared = {
  messageId: string;
  userId?: string;
  domainId?: string;
  deliveryIds: string[];
  keepsNoCopy: boolean;
};
