import { and, eq, gt, sql } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import { AppError } from './errors.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Tx = Db | Parameters<Parameters<Db['transaction']>[0]>[0] | any;
const bodies = schema.mailboxBodies;
const files = schema.storedFiles;
const raws = schema.inboundRaw;
const messages = schema.messages;

/** The answer when a write would take an account over its storage quota (IMAP says NO [OVERQUOTA]). */
export const overQuota = (used: number, adding: number, quota: number) => new AppError(413, 'storage_quota_exceeded',
  `Storage quota exceeded: ${used} of ${quota} bytes are in use and this needs ${adding} more; delete mail or attachments first`);

/**
 * Storage per account (STORAGE_QUOTA_BYTES): the raw bytes of every stored mailbox body (one per inbound
 * message however many mailboxes it was filed into; each Sent copy, APPEND and COPY is a body of its own),
 * the sealed copies of encrypted domains' inbound mail, and unexpired stored attachments. Writers that grow
 * it reserve inside their transaction: an advisory lock per account orders them, so concurrent writers
 * cannot pass the quota together.
 */
export function createStorageQuota(deps: { db: Db; quotaBytes: number }) {
  async function used(tx: Tx, userId: string): Promise<{ mailboxes: number; attachments: number }> {
    const [m] = await tx.select({ n: sql<string>`coalesce(sum(${bodies.size}), 0)` }).from(bodies).where(eq(bodies.userId, userId));
    // The sealed copies of encrypted domains (a clear message's raw copy is empty: its mailbox body is the copy).
    const [r] = await tx.select({ n: sql<string>`coalesce(sum(octet_length(${raws.content})), 0)` }).from(raws)
      .innerJoin(messages, eq(messages.id, raws.messageId)).where(eq(messages.userId, userId));
    const [f] = await tx.select({ n: sql<string>`coalesce(sum(${files.size}), 0)` }).from(files).where(and(eq(files.userId, userId), gt(files.expiresAt, Date.now())));
    return { mailboxes: Number(m?.n ?? 0) + Number(r?.n ?? 0), attachments: Number(f?.n ?? 0) };
  }
  /** Orders the account's storage writers: held until `tx` ends. */
  const lock = (tx: Tx, userId: string) => tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`storage:${userId}`}))`);
  return {
    quotaBytes: deps.quotaBytes,
    lock,
    /** Bytes in use and the quota, for /api/billing/usage (and the SMTP door, inside its transaction). */
    async usage(userId: string, q: Tx = deps.db) {
      const u = await used(q, userId);
      return { used: u.mailboxes + u.attachments, mailboxes: u.mailboxes, attachments: u.attachments, quota: deps.quotaBytes };
    },
    /** Inside `tx`: locks the account's storage until commit and throws 413 storage_quota_exceeded when `bytes` more would pass the quota. */
    async reserve(tx: Tx, userId: string, bytes: number): Promise<void> {
      await lock(tx, userId);
      const u = await used(tx, userId);
      const total = u.mailboxes + u.attachments;
      if (total + bytes > deps.quotaBytes) throw overQuota(total, bytes, deps.quotaBytes);
    },
  };
}
export type StorageQuota = ReturnType<typeof createStorageQuota>;
