import { sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { AppError } from '../errors.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Tx = Db | Parameters<Parameters<Db['transaction']>[0]>[0] | any;
const files = schema.storedFiles;
const usageRows = schema.storageUsage;

/** The answer when a write would take an account over its storage quota (IMAP says NO [OVERQUOTA]). */
export const overQuota = (used: number, adding: number, quota: number) =>
  new AppError(
    413,
    'storage_quota_exceeded',
    `Storage quota exceeded: ${used} of ${quota} bytes are in use and this needs ${adding} more; delete mail or attachments first`,
  );

/**
 * Storage per account (STORAGE_QUOTA_BYTES): the raw bytes of every stored mailbox body (one per inbound
 * message however many mailboxes it was filed into; each Sent copy, APPEND and COPY is a body of its own),
 * the sealed copies of encrypted domains' inbound mail, and unexpired stored attachments. Writers that grow
 * it are ordered by the account's `storage_usage` row, locked until their transaction ends: `reserve` locks
 * it before reading, and an inbound message locks it by storing its body (the trigger) and is judged after,
 * so concurrent writers cannot pass the quota together.
 */
export function createStorageQuota(deps: { db: Db; quotaBytes: number }) {
  /** Mail from the running total (storage_usage, kept by a trigger and the inbound path), attachments summed: one statement. */
  async function used(tx: Tx, userId: string): Promise<{ mailboxes: number; attachments: number }> {
    const [row] = await tx
      .select({
        mail: sql<string>`coalesce((select ${usageRows.bytes} from ${usageRows} where ${usageRows.userId} = ${userId}), 0)`,
        files: sql<string>`coalesce((select sum(${files.size}) from ${files} where ${files.userId} = ${userId} and ${files.expiresAt} > ${Date.now()}), 0)`,
      })
      .from(sql`(select 1) as one`);
    return { mailboxes: Number(row?.mail ?? 0), attachments: Number(row?.files ?? 0) };
  }
  /**
   * Orders the account's storage writers: the account's running-total row, locked until `tx` ends (the
   * trigger of a body insert and the door's sealed copies lock the same row, so every writer queues there).
   */
  const lock = (tx: Tx, userId: string) =>
    tx
      .insert(usageRows)
      .values({ userId, bytes: 0 })
      .onConflictDoUpdate({ target: usageRows.userId, set: { bytes: sql`${usageRows.bytes}` } });
  return {
    quotaBytes: deps.quotaBytes,
    /** Inside `tx`: adds stored bytes that no mailbox body holds (an encrypted domain's sealed copy) to the running total. */
    async add(tx: Tx, userId: string, bytes: number): Promise<void> {
      if (bytes <= 0) return;
      await tx
        .insert(usageRows)
        .values({ userId, bytes })
        .onConflictDoUpdate({ target: usageRows.userId, set: { bytes: sql`${usageRows.bytes} + excluded.bytes` } });
    },
    /** Bytes in use and the quota, for /api/billing/usage (and the SMTP door, inside its transaction). */
    async usage(userId: string, q: Tx = deps.db) {
      const u = await used(q, userId);
      return {
        used: u.mailboxes + u.attachments,
        mailboxes: u.mailboxes,
        attachments: u.attachments,
        quota: deps.quotaBytes,
      };
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
