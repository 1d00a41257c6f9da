import { inArray, sql } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { FORWARD_HEADER } from '../mail/headers.js';
import { forbidden, type AppError } from '../errors.js';
import { domainOf } from '../mail/addresses.js';
import { bareAddress } from '../mail/recipients.js';
import { accountRefusal, senderRefusal } from './gate.js';
import { bulkHoldMs, isBulk } from '../mail/bulk.js';

/**
 * The send gate judged again as mail leaves (docs/sending.md, At departure): a message accepted while its
 * account, sender domain and key were in order may wait minutes to days (queued behind a run or a site's
 * rate, deferred on the retry ladder, scheduled). Before each attempt it is judged again: the account
 * exists, is verified and not suspended; the sender domain still exists, is the account's and
 * sending-verified (a forward only needs its receiving domain to still be the account's); the
 * domain-scoped key that sent it, when one did, still exists. System mail is exempt, as at the door.
 *
 * What the verdict needs is read by the statement that claims the rows (`standing` in its RETURNING), so
 * judging a batch costs no extra round trip on the send path.
 */

type MessageRow = typeof schema.messages.$inferSelect;
/** What the gate needs to know about a row's sender, as it stands now. */
export type Standing = {
  account: string | null;
  emailVerified: boolean | null;
  suspendedAt: number | null;
  domainId: string | null;
  domainUser: string | null;
  domainName: string | null;
  sendingEnabled: boolean | null;
  spfVerified: number | null;
  dkimVerified: number | null;
  key: string | null;
  /** When the complaint guard paused the sender domain's bulk mail (absent from rows judged before it existed). */
  bulkPausedAt?: number | null;
};

/** The credential recorded on an outbound row it sent (`messages.auth` holds verdicts on inbound rows). */
export const sentByKey = (keyId: string | undefined) => (keyId ? { key: keyId } : null);

/**
 * A column for a statement over `messages` (a select, or an update's RETURNING): the row's Standing, by
 * primary keys. Plain SQL with its own aliases: drizzle leaves columns unqualified in an update's RETURNING.
 */
export function standingColumn() {
  return sql<Standing>`(select json_build_object('account', su.id, 'emailVerified', su.email_verified, 'suspendedAt', su.suspended_at,
      'domainId', sd.id, 'domainUser', sd.user_id, 'domainName', sd.domain, 'sendingEnabled', sd.sending_enabled,
      'spfVerified', sd.spf_verified, 'dkimVerified', sd.dkim_verified, 'key', sk.id, 'bulkPausedAt', sd.bulk_paused_at)
    from (select 1) as one
    left join users su on su.id = messages.user_id
    left join domains sd on sd.id = messages.domain_id
    left join api_keys sk on sk.id = messages.auth ->> 'key')`;
}

/** Why `row` may not leave now, given its sender's standing; undefined when it may (and for system mail). */
export function refusalAtDeparture(row: MessageRow, s: Standing): AppError | undefined {
  if (row.kind !== 'user' || !row.userId) return undefined;
  const byAccount = accountRefusal(
    s.account
      ? { emailVerified: Boolean(s.emailVerified), suspendedAt: s.suspendedAt === null ? null : Number(s.suspendedAt) }
      : undefined,
  );
  if (byAccount) return byAccount;
  const name = s.domainName ?? domainOf(bareAddress(row.fromAddr));
  const domain =
    s.domainId && s.domainUser === row.userId
      ? {
          id: s.domainId,
          sendingEnabled: Boolean(s.sendingEnabled),
          spfVerified: s.spfVerified ?? 0,
          dkimVerified: s.dkimVerified ?? 0,
        }
      : undefined;
  const forward = Boolean(row.headers?.[FORWARD_HEADER]);
  if (forward ? !domain : senderRefusal(domain, name)) return senderRefusal(undefined, name);
  if (row.auth?.key && !s.key)
    return forbidden('The domain-scoped key that sent this message was revoked before it left', 'key_revoked');
  return undefined;
}

/**
 * Splits claimed rows (with their `standing`) into the rows, the refusals by message id, and the bulk
 * copies (broadcast, sequence) of a domain whose bulk mail the complaint guard paused: held, with how
 * long to wait before looking again (never failed: they leave once the domain is resumed).
 */
export function judgeClaimed(claimed: (MessageRow & { standing: Standing })[]): {
  rows: MessageRow[];
  refused: Map<string, AppError>;
  held: Map<string, number>;
} {
  const refused = new Map<string, AppError>();
  const held = new Map<string, number>();
  const rows = claimed.map(({ standing, ...row }) => {
    const why = refusalAtDeparture(row, standing);
    if (why) refused.set(row.id, why);
    else if (standing.bulkPausedAt && isBulk(row)) held.set(row.id, bulkHoldMs(Number(standing.bulkPausedAt)));
    return row;
  });
  return { rows, refused, held };
}

/** The same judgement for rows read elsewhere (a scheduled send's release): one query for all of them. */
export async function refusalsAtDeparture(db: Db, rows: MessageRow[]): Promise<Map<string, AppError>> {
  const refused = new Map<string, AppError>();
  if (rows.length === 0) return refused;
  const m = schema.messages;
  const found = await db
    .select({ id: m.id, standing: standingColumn() })
    .from(m)
    .where(
      inArray(
        m.id,
        rows.map((r) => r.id),
      ),
    );
  const byId = new Map(found.map((f) => [f.id, f.standing]));
  for (const row of rows) {
    const standing = byId.get(row.id);
    const why = standing && refusalAtDeparture(row, standing);
    if (why) refused.set(row.id, why);
  }
  return refused;
}

/** The `email.failed` event of a message the gate refused as it left: the gate's code as `reason`, its message as `error`. */
export function failedEvent(row: { id: string; userId: string | null; domainId: string | null }, refusal: AppError) {
  return {
    userId: row.userId!,
    messageId: row.id,
    domainId: row.domainId,
    type: 'email.failed' as const,
    data: { reason: refusal.code, error: refusal.message },
  };
}
