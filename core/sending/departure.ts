import { eq, inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { FORWARD_HEADER } from '../mailboxes/forward.js';
import { forbidden, type AppError } from '../errors.js';
import { domainOf } from './addresses.js';
import { bareAddress } from './recipients.js';
import { accountRefusal, senderRefusal } from './gate.js';

type MessageRow = typeof schema.messages.$inferSelect;

/** The credential recorded on an outbound row it sent (`messages.auth` holds verdicts on inbound rows). */
export const sentByKey = (keyId: string | undefined) => (keyId ? { key: keyId } : null);

/**
 * The send gate judged again as mail leaves (docs/sending.md, The send gate): a message accepted while
 * its account, sender domain and key were in order may wait minutes to days (queued behind a site's
 * rate, deferred on the retry ladder, scheduled). Before each attempt the rows of a batch are judged in
 * one query: the account exists, is verified and not suspended; the sender domain still exists, is the
 * account's and sending-verified (a forward only needs its receiving domain to still be the account's);
 * the domain-scoped key that sent it, when one did, still exists. Answers the refusal of each row that
 * may not go. System mail is exempt, as at the door.
 */
export async function refusalsAtDeparture(db: Db, rows: MessageRow[]): Promise<Map<string, AppError>> {
  const refused = new Map<string, AppError>();
  const judged = rows.filter((r) => r.kind === 'user' && r.userId);
  if (judged.length === 0) return refused;
  const m = schema.messages;
  const u = schema.users;
  const d = schema.domains;
  const k = schema.apiKeys;
  const found = await db.select({
    id: m.id, account: u.id, emailVerified: u.emailVerified, suspendedAt: u.suspendedAt,
    domainId: d.id, domainUser: d.userId, domainName: d.domain, sendingEnabled: d.sendingEnabled, spfVerified: d.spfVerified, dkimVerified: d.dkimVerified,
    key: k.id,
  }).from(m)
    .leftJoin(u, eq(u.id, m.userId))
    .leftJoin(d, eq(d.id, m.domainId))
    .leftJoin(k, eq(k.id, sql`${m.auth}->>'key'`))
    .where(inArray(m.id, judged.map((r) => r.id)));
  const byId = new Map(found.map((f) => [f.id, f]));
  for (const row of judged) {
    const f = byId.get(row.id);
    const why = f && verdict(row, f);
    if (why) refused.set(row.id, why);
  }
  return refused;
}

type Found = {
  account: string | null; emailVerified: boolean | null; suspendedAt: number | null; domainId: string | null; domainUser: string | null; domainName: string | null;
  sendingEnabled: boolean | null; spfVerified: number | null; dkimVerified: number | null; key: string | null;
};

function verdict(row: MessageRow, f: Found): AppError | undefined {
  const account = f.account ? { emailVerified: Boolean(f.emailVerified), suspendedAt: f.suspendedAt } : undefined;
  const byAccount = accountRefusal(account);
  if (byAccount) return byAccount;
  const name = f.domainName ?? domainOf(bareAddress(row.fromAddr));
  const domain = f.domainId && f.domainUser === row.userId
    ? { id: f.domainId, sendingEnabled: Boolean(f.sendingEnabled), spfVerified: f.spfVerified ?? 0, dkimVerified: f.dkimVerified ?? 0 }
    : undefined;
  const forward = Boolean(row.headers?.[FORWARD_HEADER]);
  if (forward ? !domain : senderRefusal(domain, name)) return senderRefusal(undefined, name);
  const keyId = row.auth?.key;
  if (keyId && !f.key) return forbidden('The domain-scoped key that sent this message was revoked before it left', 'key_revoked');
  return undefined;
}

/** The `email.failed` event of a message the gate refused as it left: the gate's code as `reason`, its message as `error`. */
export function failedEvent(row: { id: string; userId: string | null; domainId: string | null }, refusal: AppError) {
  return { userId: row.userId!, messageId: row.id, domainId: row.domainId, type: 'email.failed' as const, data: { reason: refusal.code, error: refusal.message } };
}
