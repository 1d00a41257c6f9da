import { and, desc, eq, inArray, lt } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { forbidden, notFound, unauthorized } from '../errors.js';
import type { MailboxScope, Protocol } from '../tenancy.js';
import { patternCovers, type AppPasswordService } from './app-passwords.js';
import { FORWARD_HEADER } from '../mail/headers.js';
import { bareAddress } from '../mail/recipients.js';
import { flagsFromApi, flagsToApi } from './flags.js';
import type { LoginGuard } from './login-guard.js';
import type { Folder, MailboxRow, MailboxStore } from './store.js';
import { log } from '../log.js';
import { runParse } from '../parsing/pool.js';

const mm = schema.mailboxMessages;
const mb = schema.mailboxes;
const splitAddress = (address: string) => {
  const at = address.lastIndexOf('@');
  return { local: address.slice(0, at).toLowerCase(), domain: address.slice(at + 1).toLowerCase() };
};
const bare = bareAddress;
/** Subject of raw message bytes (mailparser, the one parser we trust), read in the parse pool. */
export async function subjectOf(raw: Buffer): Promise<string | null> {
  return runParse('mailSubject', raw);
}

/** A message that went out, as the delivery path knows it (see `fileSent`). */
export type SentMessage = {
  userId: string | null;
  domainId: string | null;
  from: string;
  raw: Buffer;
  messageId?: string;
  subject?: string | null;
  kind?: string;
  headers?: Record<string, string> | null;
};

/** One opened mailbox account: the address logged in and the password scope that opened it. */
export type MailboxLogin = { scope: MailboxScope; address: string; userId: string; domainId: string };

/**
 * Mailboxes of addresses on the account's domains: who may open which (app password scope, the
 * login guard), the mailbox API, and filing of sent mail.
 */
export function createMailboxService(deps: {
  db: Db;
  store: MailboxStore;
  passwords: AppPasswordService;
  guard: LoginGuard;
}) {
  const { db, store } = deps;

  // Patterns of an account's app passwords (domain id, null for legacy account-wide), kept briefly per account.
  const patterns = new Map<string, { at: number; rows: { domainId: string | null; pattern: string }[] }>();
  const PATTERN_CACHE_MS = 10_000;
  /** Whether any app password of the account covers `address` on that domain (cached for 10 s). */
  async function openable(userId: string, domainId: string, address: string): Promise<boolean> {
    let hit = patterns.get(userId);
    if (!hit || Date.now() - hit.at > PATTERN_CACHE_MS) {
      const rows = await db
        .select({ domainId: schema.appPasswords.domainId, pattern: schema.appPasswords.address })
        .from(schema.appPasswords)
        .where(eq(schema.appPasswords.userId, userId));
      hit = { at: Date.now(), rows };
      patterns.set(userId, hit);
    }
    const local = splitAddress(address).local;
    return hit.rows.some((r) => (r.domainId === null || r.domainId === domainId) && patternCovers(r.pattern, local));
  }

  const covers = (scope: MailboxScope, box: { userId: string; domainId: string; address: string }) =>
    box.userId === scope.userId &&
    (scope.domainId === null || box.domainId === scope.domainId) &&
    patternCovers(scope.pattern, splitAddress(box.address).local);

  /**
   * Verifies a presented secret for one protocol. The attempt is counted per client address before the
   * secret is looked at (a concurrent burst checks at most the guard's limit) and given back when it is good.
   */
  async function authenticate(secret: string, protocol: Protocol, ip: string): Promise<MailboxScope> {
    await deps.guard.begin(ip);
    const scope = await deps.passwords.verify(secret);
    if (!scope) throw unauthorized('Invalid or revoked app password', 'invalid_app_password');
    await deps.guard.succeed(ip);
    if (!scope.protocols.includes(protocol)) {
      throw forbidden(
        scope.legacy
          ? 'A legacy svc_imap_ credential works for IMAP only'
          : `This app password does not grant ${protocol}`,
        'protocol_not_granted',
      );
    }
    return scope;
  }

  /**
   * The domain an address's mailbox lives on, when the scope covers that address: only the verified row
   * of that name (at most one exists), so another account's pending row of the same name never shadows it.
   */
  async function resolve(
    scope: MailboxScope,
    address: string,
  ): Promise<{ userId: string; domainId: string } | undefined> {
    const { domain } = splitAddress(address);
    const d = schema.domains;
    const [row] = await db
      .select({ id: d.id, userId: d.userId })
      .from(d)
      .where(and(eq(d.domain, domain), eq(d.status, 'verified')));
    if (!row || !covers(scope, { userId: row.userId, domainId: row.id, address })) return undefined;
    return { userId: row.userId, domainId: row.id };
  }

  return {
    authenticate,
    resolve,
    covers,

    /** IMAP LOGIN: full address plus an `imap` password whose scope covers that address. */
    async login(address: string, secret: string, ip: string): Promise<MailboxLogin> {
      const scope = await authenticate(secret, 'imap', ip);
      const target = address.includes('@') ? await resolve(scope, address.toLowerCase()) : undefined;
      if (!target) {
        await deps.guard.fail(ip);
        throw unauthorized('This app password does not open that address', 'address_not_covered');
      }
      return { scope, address: address.toLowerCase(), ...target };
    },

    /** GET /api/mailbox/messages: newest first, `before` an exclusive UID cursor. */
    async list(scope: MailboxScope, q: { address?: string; mailbox?: Folder; before?: number; limit?: number }) {
      const folder = q.mailbox ?? 'INBOX';
      const limit = q.limit ?? 50;
      let boxes: MailboxRow[];
      if (q.address) {
        const target = await resolve(scope, q.address.toLowerCase());
        if (!target) throw forbidden(`This app password does not cover ${q.address}`, 'address_not_covered');
        const box = await store.find({ domainId: target.domainId, address: q.address, folder });
        boxes = box ? [box] : [];
      } else {
        const all = await db
          .select()
          .from(mb)
          .where(
            and(
              eq(mb.userId, scope.userId),
              eq(mb.name, folder),
              ...(scope.domainId ? [eq(mb.domainId, scope.domainId)] : []),
            ),
          );
        boxes = all.filter((b) => covers(scope, b));
      }
      if (boxes.length === 0) return { messages: [], nextBefore: null };
      const rows = await db
        .select(store.metaQuery)
        .from(mm)
        .where(
          and(
            inArray(
              mm.mailboxId,
              boxes.map((b) => b.id),
            ),
            ...(q.before !== undefined ? [lt(mm.uid, q.before)] : []),
          ),
        )
        .orderBy(desc(mm.uid))
        .limit(limit + 1);
      const page = rows.slice(0, limit);
      return {
        messages: page.map((r) => ({
          uid: r.uid,
          flags: flagsToApi(r.flags),
          internaldate: new Date(r.internalDate).toISOString(),
          from_addr: r.fromAddr,
          to_addr: r.toAddr,
          subject: r.subject,
          size: r.size,
        })),
        nextBefore: rows.length > limit ? page.at(-1)!.uid : null,
      };
    },

    /** One message the scope may read, by UID; 404 for anything outside it. */
    async message(scope: MailboxScope, uid: number) {
      const row = await store.byUid(uid);
      const box = row ? await store.byId(row.mailboxId) : undefined;
      if (!row || !box || !covers(scope, box)) throw notFound('Message not found');
      return { row, box };
    },

    /** POST /api/mailbox/messages/:uid/flags: replaces the flag set (the same flags IMAP shows). */
    async replaceFlags(scope: MailboxScope, uid: number, flags: string) {
      const { box } = await this.message(scope, uid);
      const next = flagsFromApi(flags);
      await store.setFlags(box.id, [uid], () => next);
      return { ok: true as const };
    },

    /**
     * Files a sent customer message into the sender address's Sent folder (idempotent per message id).
     * System mail and forwards are not filed; a filing failure is logged, never failing the send.
     */
    /** Drops the cached password patterns of an account (its passwords changed in this process). */
    forget: (userId: string) => void patterns.delete(userId),

    async fileSent(m: SentMessage): Promise<void> {
      const address = bare(m.from);
      if (
        !m.userId ||
        !m.domainId ||
        (m.kind && m.kind !== 'user') ||
        !address.includes('@') ||
        m.headers?.[FORWARD_HEADER]
      )
        return;
      // Only a mailbox someone can open gets Sent copies: a no-reply sender of transactional mail stores
      // nothing and takes no folder lock per message (the send path's cost stays what it was).
      if (!(await openable(m.userId, m.domainId, address))) return;
      try {
        await store.file(
          {
            userId: m.userId,
            domainId: m.domainId,
            address,
            folder: 'Sent',
            raw: m.raw,
            fromAddr: address,
            subject: m.subject !== undefined ? m.subject : await subjectOf(m.raw),
            flags: ['\\Seen'],
            messageId: m.messageId ?? null,
          },
          { quota: true },
        );
      } catch (err) {
        log.error(
          { error: (err as Error).message },
          `[mailbox] could not file ${m.messageId ?? 'a sent message'} into Sent`,
        );
      }
    },
  };
}
export type MailboxService = ReturnType<typeof createMailboxService>;
