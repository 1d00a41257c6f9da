import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { newId } from '../ids.js';
import type { OutboundQueue } from './queue.js';

/**
 * Mail the service sends on its own behalf (verification and sign-in links). It takes the same
 * outbound path as customer mail: a `queued` message row, then the outbound delivery workflow.
 */
export function createSystemMailer(deps: { db: Db; queue: OutboundQueue; serviceDomain: string }) {
  const from = `svc <no-reply@${deps.serviceDomain}>`;
  return {
    async send(mail: { userId: string; to: string; subject: string; text: string; html?: string }): Promise<string> {
      const now = Date.now();
      const id = newId('msg');
      await deps.db.insert(schema.messages).values({
        id,
        userId: mail.userId,
        direction: 'outbound',
        kind: 'system',
        fromAddr: from,
        toAddrs: [mail.to],
        subject: mail.subject,
        text: mail.text,
        html: mail.html ?? null,
        status: 'queued',
        createdAt: now,
        updatedAt: now,
      });
      deps.queue.enqueue([id], mail.userId);
      return id;
    },
  };
}
export type SystemMailer = ReturnType<typeof createSystemMailer>;
