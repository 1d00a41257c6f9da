import { eq, getTableColumns, lt, sql, type Column, type Placeholder } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError } from '../errors.js';
import type { StorageQuota } from '../storage/quota.js';
import { billMonth, monthKey } from '../usage.js';
import { named, namedCache, runNamed, toDriver, type Named } from '../prepared.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Tx = Db | Parameters<Parameters<Db['transaction']>[0]>[0] | any;

/** What an account whose address is not verified may receive per UTC day (UNVERIFIED_INBOUND_DAILY, …_BYTES). */
export type InboundAllowance = { messages: number; bytes: number };

const DAY_MS = 86_400_000;
/** One accepted message in this many prunes the per-day rows of past days. */
const PRUNE_EVERY = 1000;
/** How long RCPT trusts what it read about an account (DATA always reads again, under the account's lock). */
const RCPT_VIEW_MS = 1000;

/**
 * The account is past its storage quota or its daily allowance: a temporary refusal (507 Insufficient
 * Storage), so the sender tries again once the owner made room (or the next day for the allowance).
 */
const full = (why: string) => new AppError(507, 'mailbox_full', why, true);
/** This message is larger than everything the account may ever hold (413), so retrying cannot help. */
const never = (why: string) => new AppError(413, 'mailbox_full', why);

type View = { verified: boolean; used: number; today: { messages: number; bytes: number } };
/**
 * The message's own rows, written by the door's statement: its `messages` row and its raw copy, each inserted
 * unless there (the message row's insert tells whether the message was new: stored before, by an earlier or
 * concurrent try, when it inserted nothing).
 */
export type MessageInsert = {
  message: typeof schema.messages.$inferInsert;
  raw: typeof schema.inboundRaw.$inferInsert;
};

/** The raw copy's columns, each a placeholder of the accepting statement. */
const RAW_KEYS = ['messageId', 'content', 'encrypted', 'encAlg', 'payloadSealed', 'createdAt'] as const;
const MESSAGE_COLUMNS: Record<string, Column> = getTableColumns(schema.messages);
const RAW_COLUMNS: Record<string, Column> = getTableColumns(schema.inboundRaw);

/** The account's standing as columns of a select over `users`: verified, mail stored, live attachment bytes. */
function standing(now: number | Placeholder) {
  const u = schema.users,
    s = schema.storageUsage,
    f = schema.storedFiles;
  return {
    verified: sql<boolean>`${u.emailVerified}`.as('verified'),
    mail: sql<string>`coalesce((select ${s.bytes} from ${s} where ${s.userId} = ${u.id}), 0)`.as('mail'),
    files:
      sql<string>`coalesce((select sum(${f.size}) from ${f} where ${f.userId} = ${u.id} and ${f.expiresAt} > ${now}::bigint), 0)`.as(
        'files',
      ),
  };
}

/** A standing row (by its column names) as a View. */
function viewOfRow(row: Record<string, unknown> | undefined): View {
  return {
    verified: Boolean(row?.verified),
    used: Number(row?.mail ?? 0) + Number(row?.files ?? 0),
    today: {
      messages: Number(row?.todayMessages ?? row?.today_messages ?? 0),
      bytes: Number(row?.todayBytes ?? row?.today_bytes ?? 0),
    },
  };
}

/**
 * Storage counted at the door of the SMTP ingress: inbound mail counts against the account's storage
 * quota, and an account whose address is not verified has a small daily allowance. RCPT refuses an
 * account already past either (from a view at most 1 s old); DATA refuses a message that would pass
 * either, checked early from that view and then last in the accepting transaction, under the account's
 * running-total row lock. (A view that counted a message whose transaction then failed errs toward refusing, for
 * at most a second, with a temporary refusal.) smtp/replies.ts says what each refusal answers.
 */
export function createInboundDoor(deps: { db: Db; storage: StorageQuota; unverifiedDaily: InboundAllowance }) {
  const views = new Map<string, { at: number; view: Promise<View> }>();

  /**
   * The account's standing in one statement: verified, stored bytes (running total plus attachments), and
   * today's inbound. Read-only (RCPT, the early DATA check), or in the accepting transaction (`admit`).
   */
  async function read(q: Tx, userId: string): Promise<View> {
    const day = Date.now() - (Date.now() % DAY_MS);
    const u = schema.users,
      t = schema.inboundDaily;
    const [row] = await q
      .select({
        ...standing(Date.now()),
        todayMessages: sql<string>`coalesce((select ${t.messages} from ${t} where ${t.userId} = ${u.id} and ${t.day} = ${day}), 0)`,
        todayBytes: sql<string>`coalesce((select ${t.bytes} from ${t} where ${t.userId} = ${u.id} and ${t.day} = ${day}), 0)`,
      })
      .from(u)
      .where(eq(u.id, userId));
    return viewOfRow(row);
  }

  /**
   * The accepting statement (DATA, in the transaction): writes the message's rows, counts the message in
   * today's row and in the month's usage, and answers the account's standing with today's counts before this
   * message (a refusal throws and rolls all of it back with the transaction). One text per set of message
   * columns, named and prepared (PostgreSQL plans it once per connection; nothing is built per message).
   */
  async function admit(tx: Tx, userId: string, bytes: number, m: MessageInsert): Promise<View & { stored: boolean }> {
    const keys = Object.keys(m.message).filter((k) => m.message[k as keyof typeof m.message] !== undefined);
    const values: Record<string, unknown> = {
      userId,
      day: Date.now() - (Date.now() % DAY_MS),
      bytes,
      month: monthKey(),
      now: Date.now(),
    };
    // Bound as drizzle binds them (null stays SQL NULL, jsonb is encoded): the placeholders are the columns' values.
    for (const k of keys) values[`m_${k}`] = toDriver(MESSAGE_COLUMNS[k]!, m.message[k as keyof typeof m.message]);
    for (const k of RAW_KEYS) values[`r_${k}`] = toDriver(RAW_COLUMNS[k]!, m.raw[k] ?? null);
    const { rows } = await runNamed(tx, admitStatement(keys), values);
    const row = rows[0] as Record<string, unknown> | undefined;
    return { ...viewOfRow(row), stored: Number(row?.stored ?? 0) > 0 };
  }

  const statements = namedCache();
  /** The accepting statement for a message row setting `keys`, built once (placeholders for every value). */
  const admitStatement = (keys: string[]): Named => statements(keys.join(','), () => buildAdmit(keys));
  function buildAdmit(keys: string[]): Named {
    const db = deps.db;
    const ph = (name: string) => sql.placeholder(name);
    const u = schema.users,
      t = schema.inboundDaily,
      r = schema.inboundRaw;
    const stored = db.$with('stored').as(
      db
        .insert(schema.messages)
        .values(Object.fromEntries(keys.map((k) => [k, sql`${ph(`m_${k}`)}`])) as never)
        .onConflictDoNothing()
        .returning({ id: schema.messages.id }),
    );
    const rawCopy = db.$with('raw_copy').as(
      db
        .insert(r)
        .values(Object.fromEntries(RAW_KEYS.map((k) => [k, sql`${ph(`r_${k}`)}`])) as never)
        .onConflictDoNothing()
        .returning({ id: r.messageId }),
    );
    const counted = db.$with('counted').as(
      db
        .insert(t)
        .values({ userId: ph('userId'), day: ph('day'), messages: 1, bytes: ph('bytes') })
        .onConflictDoUpdate({
          target: [t.userId, t.day],
          set: { messages: sql`${t.messages} + 1`, bytes: sql`${t.bytes} + excluded.bytes` },
        })
        .returning({ messages: t.messages, bytes: t.bytes }),
    );
    // Admitting also bills the message to the month's usage (SPEC.md: inbound and outbound share the bucket).
    const billed = db
      .$with('billed')
      .as(billMonth(db, ph('userId'), 1, ph('month')).returning({ count: schema.usageCounters.count }));
    const query = db
      .with(counted, billed, stored, rawCopy)
      .select({
        ...standing(ph('now')),
        todayMessages: sql<string>`(select "messages" - 1 from "counted")`.as('today_messages'),
        todayBytes: sql<string>`(select "bytes" - ${ph('bytes')}::bigint from "counted")`.as('today_bytes'),
        stored: sql<string>`(select count(*) from "stored")`.as('stored'),
      })
      .from(u)
      .where(eq(u.id, ph('userId')));
    return named('inbound_admit', query.getSQL());
  }

  /** Throws the refusal for `bytes` more (0 at RCPT: is the account already past a limit?). */
  function judge(v: View, bytes: number, keepsCopy: boolean, address: string): void {
    const quota = deps.storage.quotaBytes;
    if (keepsCopy) {
      if (bytes > quota)
        throw never(`<${address}>: the message is larger than this mailbox's storage quota (${quota} bytes)`);
      if (v.used + bytes > quota || v.used >= quota)
        throw full(`<${address}>: mailbox full (storage quota of ${quota} bytes reached), try again later`);
    }
    if (!v.verified) {
      const a = deps.unverifiedDaily;
      if (bytes > a.bytes)
        throw never(
          `<${address}>: the message is larger than the daily inbound allowance (${a.bytes} bytes) of an unverified account`,
        );
      if (v.today.messages >= a.messages || v.today.bytes + bytes > a.bytes || v.today.bytes >= a.bytes) {
        throw full(
          `<${address}>: daily inbound allowance of an unverified account used up (${a.messages} messages, ${a.bytes} bytes), try again tomorrow`,
        );
      }
    }
  }

  /** What RCPT and the early DATA check go by: read at most RCPT_VIEW_MS ago in this process. */
  function viewOf(userId: string): Promise<View> {
    let hit = views.get(userId);
    if (!hit || Date.now() - hit.at > RCPT_VIEW_MS) {
      hit = { at: Date.now(), view: read(deps.db, userId) };
      views.set(userId, hit);
      hit.view.catch(() => views.delete(userId));
      if (views.size > 10_000) views.delete(views.keys().next().value!);
    }
    return hit.view;
  }

  return {
    /** Inside the accepting `tx`: an encrypted domain's sealed copy, stored instead of a mailbox body, counts in the running total. */
    storedSealed: (tx: Tx, userId: string, bytes: number) => deps.storage.add(tx, userId, bytes),

    /** RCPT TO for a mailbox of `userId`: refused, for now, when the account is already over its quota or allowance. */
    async atRcpt(userId: string, address: string, keepsCopy: boolean): Promise<void> {
      judge(await viewOf(userId), 0, keepsCopy, address);
    },

    /** DATA, before anything is parsed: the same view as RCPT, now with the message's size (no lock). */
    async early(userId: string, address: string, bytes: number, keepsCopy: boolean): Promise<void> {
      judge(await viewOf(userId), bytes, keepsCopy, address);
    },

    /**
     * DATA, last in the accepting `tx`, after the message was stored: what it stored (`stored` bytes: its
     * mailbox body or sealed copy) is in the running total already, whose row the transaction holds locked
     * until commit, so concurrent messages of one account are judged one after the other, each seeing the
     * ones before it. Counts the message in today's row in the same statement, and refuses (rolling all of
     * it back) a message that passes the quota or the allowance. The view RCPT goes by then counts it.
     * With `message`, the same statement writes the message's rows too, and answers whether it was new: a
     * message stored before is not judged (the caller rolls the transaction back and answers as before).
     */
    async atData(
      tx: Tx,
      userId: string,
      address: string,
      bytes: number,
      keepsCopy: boolean,
      stored: number,
      message: MessageInsert,
    ): Promise<{ stored: boolean }> {
      const counted = await admit(tx, userId, bytes, message);
      if (!counted.stored) return { stored: false };
      const v: View = { ...counted, used: counted.used - stored };
      judge(v, bytes, keepsCopy, address);
      // Days before yesterday limit nothing: pruned now and then, off the accepting transaction.
      if (Math.random() * PRUNE_EVERY < 1) {
        const t = schema.inboundDaily;
        deps.db
          .delete(t)
          .where(lt(t.day, Date.now() - (Date.now() % DAY_MS) - DAY_MS))
          .catch(() => undefined);
      }
      const next: View = { ...counted, today: { messages: v.today.messages + 1, bytes: v.today.bytes + bytes } };
      views.set(userId, { at: Date.now(), view: Promise.resolve(next) });
      return { stored: true };
    },
  };
}
export type InboundDoor = ReturnType<typeof createInboundDoor>;
