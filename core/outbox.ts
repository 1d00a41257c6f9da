import { and, desc, eq, lt } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import type { Actor } from './tenancy.js';

/** Reads the capture-mode outbox: the messages of one account, newest first. */
export function createOutboxService(deps: { db: Db }) {
  return {
    async list({ userId }: Actor, opts: { limit: number; before?: number }) {
      const o = schema.outbox;
      const m = schema.messages;
      return deps.db
        .select({
          id: o.messageId,
          from: o.envelopeFrom,
          to: o.envelopeTo,
          subject: o.subject,
          text: m.text,
          raw: o.raw,
          capturedAt: o.createdAt,
        })
        .from(o)
        .innerJoin(m, eq(m.id, o.messageId))
        .where(and(eq(m.userId, userId), ...(opts.before ? [lt(o.createdAt, opts.before)] : [])))
        .orderBy(desc(o.createdAt))
        .limit(opts.limit);
    },
  };
}
