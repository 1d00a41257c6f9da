import { eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { notFound } from '../errors.js';
import type { Sealer } from '../secrets.js';
import { newWebhookSecret } from './sign.js';

/** The account webhook secret: signs tracking-webhook events and is the fallback key of routes. */
export function createAccountSecretService(deps: { db: Db; sealer: Sealer }) {
  const u = schema.users;
  return {
    /** Read-or-create; concurrent first reads agree (the update only fills an empty column). */
    async get(userId: string): Promise<string> {
      const [row] = await deps.db.select({ s: u.webhookSecretSealed }).from(u).where(eq(u.id, userId));
      if (!row) throw notFound('Account not found');
      if (row.s) return deps.sealer.open(row.s);
      await deps.db
        .update(u)
        .set({ webhookSecretSealed: deps.sealer.seal(newWebhookSecret()) })
        .where(eq(u.id, userId));
      const [again] = await deps.db.select({ s: u.webhookSecretSealed }).from(u).where(eq(u.id, userId));
      return deps.sealer.open(again!.s!);
    },
    async rotate(userId: string): Promise<string> {
      const secret = newWebhookSecret();
      await deps.db
        .update(u)
        .set({ webhookSecretSealed: deps.sealer.seal(secret) })
        .where(eq(u.id, userId));
      return secret;
    },
  };
}
export type AccountSecretService = ReturnType<typeof createAccountSecretService>;
