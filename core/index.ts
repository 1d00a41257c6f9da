import type { Config } from './config.js';
import type { Database } from '../db/index.js';
import { createAccountService } from './accounts.js';
import { createAuthService } from './auth.js';
import { createInboundService } from './inbound.js';
import { createOutboxService } from './outbox.js';
import { createKeyService } from './keys.js';
import { createOutboundQueue, type OutboundQueue } from './outbound/queue.js';
import { createSystemMailer } from './outbound/system-mail.js';
import { createSealer } from './secrets.js';
import { createTokenService } from './tokens.js';
import { createUsageService } from './usage.js';

/** The ports core needs from the Temporal side; implemented in temporal/ with a real client. */
export type WorkflowPort = {
  startOutboundBatch(messageIds: string[]): Promise<void>;
  ping(): Promise<void>;
};

/** Composition of every core service from its dependencies. Transports receive this object. */
export function createCore(deps: { database: Database; config: Config; workflows: WorkflowPort }) {
  const { config } = deps;
  const db = deps.database.db;
  const sealer = createSealer(config.secretKey);
  const tokens = createTokenService(config.secretKey);
  const queue: OutboundQueue = createOutboundQueue({
    startBatch: (ids) => deps.workflows.startOutboundBatch(ids),
    onError: (err, ids) => console.error(`[outbound] could not start delivery of ${ids.length} message(s); the sweep will retry:`, (err as Error).message),
  });
  const mailer = createSystemMailer({ db, queue, serviceDomain: config.serviceDomain });
  const keys = createKeyService({ db, sealer });
  const accounts = createAccountService({ db, keys, tokens, mailer, publicUrl: config.publicUrl, defaultPlan: config.defaultPlan });
  const auth = createAuthService({ keys, tokens, accounts });
  const inbound = createInboundService();
  const outbox = createOutboxService({ db });
  const usage = createUsageService({ db, plans: config.plans, defaultPlan: config.defaultPlan });

  return {
    config, db, database: deps.database, workflows: deps.workflows, sealer, tokens, queue, mailer, keys, accounts, auth, usage, inbound, outbox,
    async close() {
      await queue.close();
    },
  };
}
export type Core = ReturnType<typeof createCore>;
