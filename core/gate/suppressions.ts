import { and, desc, eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { notFound } from '../errors.js';
import { newId } from '../ids.js';
import type { Actor } from '../tenancy.js';

type Tx = Pick<Db, 'insert'>;

/** The suppression list: addresses an account's sends refuse (hard bounces, complaints, manual entries). */
export function createSuppressionService(deps: { db: Db; onSuppressed?: (userId: string, email: string) => void }) {
  const { db } = deps;
  const s = schema.suppressions;
  const dto = (r: typeof s.$inferSelect) => ({
    id: r.id,
    email: r.email,
    reason: r.reason,
    messageId: r.messageId,
    detail: r.detail,
    createdAt: r.createdAt,
  });

  return {
    async list({ userId }: Actor) {
      return (await db.select().from(s).where(eq(s.userId, userId)).orderBy(desc(s.createdAt))).map(dto);
    },
    /** Adds (or keeps) a suppression; idempotent per address. */
    async add(
      userId: string,
      email: string,
      reason: string,
      extra: { messageId?: string; detail?: string } = {},
      tx: Tx = db,
    ) {
      await tx
        .insert(s)
        .values({
          id: newId('sup'),
          userId,
          email: email.toLowerCase(),
          reason,
          messageId: extra.messageId ?? null,
          detail: extra.detail ?? null,
          createdAt: Date.now(),
        })
        .onConflictDoNothing();
      // Inside a caller's transaction this runs before the commit; the enrolment's next step re-checks anyway.
      deps.onSuppressed?.(userId, email.toLowerCase());
    },
    async remove({ userId }: Actor, email: string) {
      const gone = await db
        .delete(s)
        .where(and(eq(s.userId, userId), eq(s.email, email.toLowerCase())))
        .returning({ id: s.id });
      if (gone.length === 0) throw notFound(`${email} is not suppressed`);
      return { ok: true as const };
    },
  };
}
export type SuppressionService = ReturnType<typeof createSuppressionService>;
