import { EventEmitter } from 'node:events';
import { and, asc, eq, getTableName, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { newId } from '../ids.js';
import { deleteMailboxMessages } from '../storage/mailbox-rows.js';
import { named, runNamed } from '../prepared.js';
import type { StorageQuota } from '../storage/quota.js';

export type MailboxRow = typeof schema.mailboxes.$inferSelect;
/** A filed message without its bytes (listings, FLAGS, SIZE). */
export type MessageMeta = Omit<typeof schema.mailboxMessages.$inferSelect, 'bodyId'>;
/** A filed message with its bytes (read from its shared body). */
export type MailboxMessage = MessageMeta & { raw: Buffer };
export type Folder = 'INBOX' | 'Sent' | 'Drafts';
export const FOLDERS: Folder[] = ['INBOX', 'Sent', 'Drafts'];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Tx = Db | Parameters<Parameters<Db['transaction']>[0]>[0] | any;
/**
 * One message to file. `bodyId` names a body stored earlier in the same transaction with these `raw`
 * bytes (the other recipients of one inbound message); `shareBody` the body of another row (MOVE),
 * locked first so its last other row cannot take it away meanwhile. Without either, a new body is stored.
 */
export type FileInput = {
  userId: string;
  domainId: string;
  address: string;
  folder: Folder;
  raw: Buffer;
  fromAddr: string;
  subject: string | null;
  flags?: string[];
  internalDate?: number;
  messageId?: string | null;
  /** `messageId` names a message this transaction stores anew (none filed can name it): no look for a copy. */
  fresh?: boolean;
  bodyId?: string;
  shareBody?: string;
};
const mb = schema.mailboxes;
const mm = schema.mailboxMessages;
const bodies = schema.mailboxBodies;
/** Columns without the raw bytes, for listings. */
const META = {
  uid: mm.uid,
  mailboxId: mm.mailboxId,
  messageId: mm.messageId,
  flags: mm.flags,
  fromAddr: mm.fromAddr,
  toAddr: mm.toAddr,
  subject: mm.subject,
  size: mm.size,
  internalDate: mm.internalDate,
};
const FULL = { ...META, raw: bodies.raw };

/**
 * The statements of filing, each one text (named, so PostgreSQL plans it once per connection and nothing is built
 * per message; core/prepared.ts): the folder row, created if missing and locked until commit; and the
 * new bytes (unless shared), the message and the folder's next UID together (a data-modifying CTE always runs).
 */
const ph = (name: string) => sql`${sql.placeholder(name)}`;
const LOCK_FOLDER = named(
  'mailbox_lock',
  sql`insert into ${mb} (id, user_id, domain_id, address, name, uid_validity, uid_next, created_at)
    values (${ph('id')}, ${ph('userId')}, ${ph('domainId')}, ${ph('address')}, ${ph('name')}, ${ph('uidValidity')}, 1, ${ph('createdAt')})
    on conflict (domain_id, address, name) do update set uid_next = ${mb}.uid_next returning id`,
);
const filing = (withBody: boolean) => {
  const body = sql`body as (insert into ${bodies} (id, user_id, size, raw, created_at)
    values (${ph('bodyId')}, ${ph('userId')}, ${ph('size')}, ${ph('raw')}, ${ph('createdAt')}) returning id), `;
  return named(
    withBody ? 'mailbox_file_body' : 'mailbox_file',
    sql`with ${withBody ? body : sql``}filed as (insert into ${mm} (mailbox_id, message_id, flags, from_addr, to_addr, subject, size, body_id, internal_date)
      values (${ph('mailboxId')}, ${ph('messageId')}, ${ph('flags')}, ${ph('fromAddr')}, ${ph('toAddr')}, ${ph('subject')}, ${ph('size')}, ${ph('bodyId')}, ${ph('internalDate')})
      returning uid)
    update ${mb} set uid_next = greatest(${mb}.uid_next, (select uid + 1 from filed)) where id = ${ph('mailboxId')}::text
    returning (select uid from filed) as uid`,
  );
};
const FILE_WITH_BODY = filing(true);
const FILE_SHARING_BODY = filing(false);
/** The sequence every UID comes from (`mailbox_messages.uid` is a serial). */
const UID_SEQ = sql.raw(`'${getTableName(mm)}_uid_seq'`);
/**
 * A new message filed in one statement, where the two above are two: the folder row is created or locked by
 * the upsert, which sets `uid_next` past the UID it takes from the sequence, and the message takes that UID.
 * On a folder that exists the update takes it, once it holds the lock, so UIDs still become visible in
 * ascending order per folder. A folder it creates takes it in VALUES, which runs before the conflict check:
 * only when the statement's snapshot has no such folder, so a filing into an existing folder spends one value.
 * A folder deleted meanwhile and made again answers `created` with `uid_next` still 1: the caller sets it, in
 * the same transaction, from the UID the message got by default.
 */
const fresh = (withBody: boolean) => {
  const body = sql`body as (insert into ${bodies} (id, user_id, size, raw, created_at)
    values (${ph('bodyId')}, ${ph('userId')}, ${ph('size')}, ${ph('raw')}, ${ph('createdAt')}) returning id), `;
  return named(
    withBody ? 'mailbox_file_new_body' : 'mailbox_file_new',
    sql`with box as (insert into ${mb} (id, user_id, domain_id, address, name, uid_validity, uid_next, created_at)
      values (${ph('id')}, ${ph('userId')}, ${ph('domainId')}, ${ph('address')}, ${ph('name')}, ${ph('uidValidity')},
        (select case when exists (select 1 from ${mb} where domain_id = ${ph('domainId')} and address = ${ph('address')} and name = ${ph('name')})
          then 1 else nextval(${UID_SEQ}) + 1 end), ${ph('createdAt')})
      on conflict (domain_id, address, name) do update set uid_next = nextval(${UID_SEQ}) + 1
      returning id, uid_next),
    ${withBody ? body : sql``}filed as (insert into ${mm} (uid, mailbox_id, message_id, flags, from_addr, to_addr, subject, size, body_id, internal_date)
      select case when box.uid_next = 1 then nextval(${UID_SEQ}) else box.uid_next - 1 end, box.id, ${ph('messageId')}, ${ph('flags')},
        ${ph('fromAddr')}, ${ph('toAddr')}, ${ph('subject')}, ${ph('size')}, ${ph('bodyId')}, ${ph('internalDate')} from box
      returning uid, mailbox_id)
    select filed.uid, filed.mailbox_id, box.uid_next = 1 as created from filed, box`,
  );
};
const FILE_NEW_WITH_BODY = fresh(true);
const FILE_NEW_SHARING_BODY = fresh(false);
const SET_UID_NEXT = named(
  'mailbox_uid_next',
  sql`update ${mb} set uid_next = greatest(${mb}.uid_next, ${ph('uid')}::int + 1) where id = ${ph('mailboxId')}::text`,
);

/** The folder statement's values: a new folder's row, should it be made. */
const folderValues = (m: { userId: string; domainId: string; address: string; folder: Folder }) => ({
  id: newId('mbx'),
  userId: m.userId,
  domainId: m.domainId,
  address: m.address.toLowerCase(),
  name: m.folder,
  uidValidity: Math.floor(Date.now() / 1000) % 2_000_000_000,
  createdAt: Date.now(),
});
/** The filing statement's values: the body (unless shared) and the message's row. */
const filingValues = (f: FileInput, bodyId: string) => ({
  bodyId,
  userId: f.userId,
  size: f.raw.length,
  raw: f.raw,
  createdAt: Date.now(),
  messageId: f.messageId ?? null,
  flags: JSON.stringify(f.flags ?? []),
  fromAddr: f.fromAddr,
  toAddr: f.address.toLowerCase(),
  subject: f.subject,
  internalDate: f.internalDate ?? Date.now(),
});

/**
 * Mailbox storage shared by the mailbox API and IMAP: folders per address, messages with UIDs from
 * one sequence (unique service-wide, ascending per folder: filing locks the folder row first), flags.
 * Writers call `notify` after commit; IMAP sessions in this process hear it at once, others poll.
 */
export function createMailboxStore(deps: { db: Db; storage?: StorageQuota }) {
  const { db } = deps;
  const events = new EventEmitter();
  events.setMaxListeners(0);

  async function ensure(
    tx: Tx,
    m: { userId: string; domainId: string; address: string; folder: Folder },
  ): Promise<MailboxRow> {
    const address = m.address.toLowerCase();
    const where = and(eq(mb.domainId, m.domainId), eq(mb.address, address), eq(mb.name, m.folder));
    const [found] = await tx.select().from(mb).where(where);
    if (found) return found;
    await tx
      .insert(mb)
      .values({
        id: newId('mbx'),
        userId: m.userId,
        domainId: m.domainId,
        address,
        name: m.folder,
        uidValidity: Math.floor(Date.now() / 1000) % 2_000_000_000,
        uidNext: 1,
        createdAt: Date.now(),
      })
      .onConflictDoNothing();
    const [row] = await tx.select().from(mb).where(where);
    return row!;
  }

  /**
   * The folder row, created if missing, and locked until `tx` commits (so UIDs become visible in
   * ascending order): one statement, where a lookup, an insert and a lock were three.
   */
  async function lockFolder(
    tx: Tx,
    m: { userId: string; domainId: string; address: string; folder: Folder },
  ): Promise<{ id: string }> {
    const { rows } = await runNamed(tx, LOCK_FOLDER, folderValues(m));
    return { id: String(rows[0]!.id) };
  }

  /**
   * Files one message into a folder inside `tx`; the caller notifies after commit. Skips a message id
   * filed there already. Answers the body it refers to, for the next recipient of the same bytes.
   */
  async function fileIn(tx: Tx, f: FileInput): Promise<{ mailboxId: string; uid: number; bodyId: string } | undefined> {
    if (!f.shareBody && (!f.messageId || f.fresh)) return fileNew(tx, f);
    const box = await lockFolder(tx, f);
    if (f.messageId && !f.fresh) {
      const [dup] = await tx
        .select({ uid: mm.uid })
        .from(mm)
        .where(and(eq(mm.mailboxId, box.id), eq(mm.messageId, f.messageId)));
      if (dup) return undefined;
    }
    // FOR SHARE waits for a deleter holding the body and then finds it gone: the bytes are stored anew.
    const shared = f.shareBody
      ? (await tx.select({ id: bodies.id }).from(bodies).where(eq(bodies.id, f.shareBody)).for('share'))[0]?.id
      : undefined;
    const bodyId = f.bodyId ?? shared ?? newId('mbb');
    // New bytes, the message and the folder's next UID in one statement.
    const { rows } = await runNamed(tx, f.bodyId || shared ? FILE_SHARING_BODY : FILE_WITH_BODY, {
      ...filingValues(f, bodyId),
      mailboxId: box.id,
    });
    const row = rows[0];
    return { mailboxId: box.id, uid: Number(row!.uid), bodyId };
  }

  /** `fileIn` of a message no row can hold yet, in one statement (two when a folder was deleted meanwhile). */
  async function fileNew(tx: Tx, f: FileInput): Promise<{ mailboxId: string; uid: number; bodyId: string }> {
    const bodyId = f.bodyId ?? newId('mbb');
    const { rows } = await runNamed(tx, f.bodyId ? FILE_NEW_SHARING_BODY : FILE_NEW_WITH_BODY, {
      ...folderValues(f),
      ...filingValues(f, bodyId),
    });
    const row = rows[0]!;
    const out = { mailboxId: String(row.mailbox_id), uid: Number(row.uid), bodyId };
    if (row.created === true) await runNamed(tx, SET_UID_NEXT, { uid: out.uid, mailboxId: out.mailboxId });
    return out;
  }

  const notify = (mailboxId: string) => events.emit('change', mailboxId);

  return {
    ensure: (m: { userId: string; domainId: string; address: string; folder: Folder }) => ensure(db, m),
    fileIn,
    notify,

    /**
     * Files one message in its own transaction and tells listeners. With `quota`, the account's storage
     * quota is reserved first (413 storage_quota_exceeded over it).
     */
    async file(
      f: FileInput,
      opts: { quota?: boolean } = {},
    ): Promise<{ mailboxId: string; uid: number; bodyId: string } | undefined> {
      const out = await db.transaction(async (tx) => {
        if (opts.quota) await deps.storage?.reserve(tx, f.userId, f.raw.length);
        return fileIn(tx, f);
      });
      if (out) notify(out.mailboxId);
      return out;
    },

    /** Calls `fn` whenever a folder of this process changes; answers the unsubscribe function. */
    onChange(fn: (mailboxId: string) => void): () => void {
      events.on('change', fn);
      return () => events.off('change', fn);
    },

    async find(m: { domainId: string; address: string; folder: string }): Promise<MailboxRow | undefined> {
      const [row] = await db
        .select()
        .from(mb)
        .where(and(eq(mb.domainId, m.domainId), eq(mb.address, m.address.toLowerCase()), eq(mb.name, m.folder)));
      return row;
    },
    async byId(id: string): Promise<MailboxRow | undefined> {
      const [row] = await db.select().from(mb).where(eq(mb.id, id));
      return row;
    },

    /** UIDs and flags of a folder, ascending (an IMAP session's view of it). */
    async index(mailboxId: string): Promise<{ uid: number; flags: string[] }[]> {
      return db
        .select({ uid: mm.uid, flags: mm.flags })
        .from(mm)
        .where(eq(mm.mailboxId, mailboxId))
        .orderBy(asc(mm.uid));
    },

    async meta(mailboxId: string, uids: number[]): Promise<MessageMeta[]> {
      if (uids.length === 0) return [];
      return db
        .select(META)
        .from(mm)
        .where(and(eq(mm.mailboxId, mailboxId), inArray(mm.uid, uids)))
        .orderBy(asc(mm.uid));
    },
    async full(mailboxId: string, uids: number[]): Promise<MailboxMessage[]> {
      if (uids.length === 0) return [];
      return db
        .select(FULL)
        .from(mm)
        .innerJoin(bodies, eq(bodies.id, mm.bodyId))
        .where(and(eq(mm.mailboxId, mailboxId), inArray(mm.uid, uids)))
        .orderBy(asc(mm.uid));
    },
    async byUid(uid: number): Promise<MailboxMessage | undefined> {
      const [row] = await db.select(FULL).from(mm).innerJoin(bodies, eq(bodies.id, mm.bodyId)).where(eq(mm.uid, uid));
      return row;
    },
    metaQuery: META,

    /** Replaces the flags of these messages of a folder. */
    async setFlags(
      mailboxId: string,
      uids: number[],
      flags: (old: string[]) => string[],
    ): Promise<{ uid: number; flags: string[] }[]> {
      const rows = await db
        .select({ uid: mm.uid, flags: mm.flags })
        .from(mm)
        .where(and(eq(mm.mailboxId, mailboxId), inArray(mm.uid, uids)));
      const out: { uid: number; flags: string[] }[] = [];
      for (const r of rows) {
        const next = flags(r.flags);
        if (next.join(' ') !== r.flags.join(' ')) await db.update(mm).set({ flags: next }).where(eq(mm.uid, r.uid));
        out.push({ uid: r.uid, flags: next });
      }
      if (rows.length) notify(mailboxId);
      return out.sort((a, b) => a.uid - b.uid);
    },

    /**
     * Copies messages into another folder of the same address (each copy is a body of its own, so it
     * counts again); answers [source uid, new uid] pairs. With `quota`, all of them or none: their total
     * size is reserved against the storage quota first. With `share` (MOVE, whose source rows go next)
     * the new rows refer to the same bodies: nothing more is stored.
     */
    async copy(
      fromId: string,
      uids: number[],
      target: MailboxRow,
      opts: { quota?: boolean; share?: boolean } = {},
    ): Promise<[number, number][]> {
      const pairs: [number, number][] = [];
      await db.transaction(async (tx) => {
        if (opts.quota && deps.storage && uids.length) {
          const [sum] = await tx
            .select({ n: sql<string>`coalesce(sum(${mm.size}), 0)` })
            .from(mm)
            .where(and(eq(mm.mailboxId, fromId), inArray(mm.uid, uids)));
          await deps.storage.reserve(tx, target.userId, Number(sum?.n ?? 0));
        }
        for (const uid of uids) {
          const [row] = await tx
            .select({ ...FULL, bodyId: mm.bodyId })
            .from(mm)
            .innerJoin(bodies, eq(bodies.id, mm.bodyId))
            .where(and(eq(mm.mailboxId, fromId), eq(mm.uid, uid)));
          if (!row) continue;
          const out = await fileIn(tx, {
            userId: target.userId,
            domainId: target.domainId,
            address: target.address,
            folder: target.name as Folder,
            raw: row.raw,
            fromAddr: row.fromAddr,
            subject: row.subject,
            flags: row.flags,
            internalDate: row.internalDate,
            ...(opts.share ? { shareBody: row.bodyId } : {}),
          });
          if (out) pairs.push([uid, out.uid]);
        }
      });
      if (pairs.length) notify(target.id);
      return pairs;
    },

    /** Deletes these messages of a folder outright (the second half of MOVE). */
    async remove(mailboxId: string, uids: number[]): Promise<void> {
      if (uids.length === 0) return;
      await db.transaction((tx) => deleteMailboxMessages(tx, and(eq(mm.mailboxId, mailboxId), inArray(mm.uid, uids))));
      notify(mailboxId);
    },

    /** Removes the messages flagged \Deleted (only those in `uids` when given); answers the removed UIDs. */
    async expunge(mailboxId: string, uids?: number[]): Promise<number[]> {
      const gone = await db.transaction((tx) =>
        deleteMailboxMessages(
          tx,
          and(
            eq(mm.mailboxId, mailboxId),
            sql`${mm.flags} @> ${JSON.stringify(['\\Deleted'])}::jsonb`,
            ...(uids ? [inArray(mm.uid, uids.length ? uids : [-1])] : []),
          ),
        ),
      );
      if (gone.length) notify(mailboxId);
      return gone.map((g) => g.uid).sort((a, b) => a - b);
    },
  };
}
export type MailboxStore = ReturnType<typeof createMailboxStore>;
