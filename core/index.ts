import type { Config } from './config.js';
import type { Database } from '../db/index.js';
import { createAccountService } from './accounts.js';
import { createAttachmentService } from './attachments/service.js';
import { createAuthService } from './auth.js';
import { createResolver } from './dns.js';
import { domainDto, type DomainRow, type EnrichedDomain, type WebhookStatus } from './domains/dto.js';
import { createWebhookTests } from './webhooks/test-event.js';
import { createEngagementService } from './webhooks/engagement.js';
import { createHostedZoneService } from './domains/hosted.js';
import { builtinProvider, createProviderRegistry } from './domains/providers.js';
import { simulatedRegistrar } from './domains/registrar.js';
import { createRegistrationService } from './domains/registration.js';
import { createDomainService, type DomainService } from './domains/service.js';
import { createInboundService } from './inbound/service.js';
import { createAccountSecretService } from './webhooks/account-secret.js';
import { createDeliveryStore } from './webhooks/deliveries.js';
import { createReplayService } from './webhooks/replay.js';
import { createRouteService } from './webhooks/routes.js';
import { createEncryptionService } from './inbound/encryption-service.js';
import { createReportService } from './inbound/report-service.js';
import { createKeyService } from './keys.js';
import { createOAuthService } from './oauth/service.js';
import { createServiceDomain } from './operator/service-domain.js';
import { createOutboundQueue, type OutboundQueue } from './outbound/queue.js';
import { createSystemMailer } from './outbound/system-mail.js';
import { createOutboxService } from './outbox.js';
import { createScopedKeyService } from './scoped-keys.js';
import { createSealer } from './secrets.js';
import { createTemplateService } from './templates/service.js';
import { createEventService } from './sending/events.js';
import { createMessageService } from './sending/messages.js';
import { createScheduledSendService } from './sending/scheduled.js';
import { createSendService } from './sending/service.js';
import { createSuppressionService } from './sending/suppressions.js';
import { createTracking } from './sending/tracking.js';
import { createTokenService } from './tokens.js';
import { createUsageService } from './usage.js';

/** The ports core needs from the Temporal side; implemented in temporal/ with a real client. */
export type WorkflowPort = {
  /** Starts one outbound delivery run for a flush of one account's queued messages. */
  startOutboundBatch(messageIds: string[], accountId: string): Promise<void>;
  /** Starts (or keeps, when running) the deferred-delivery ladder of one message. */
  startDeferredDelivery(messageId: string): Promise<void>;
  /** Starts the workflow that parks one scheduled send until its time. */
  startScheduledSend(s: { id: string; messageId: string; userId: string; scheduledAt: number }): Promise<void>;
  /**
   * Cancels a parked send through its workflow update: `canceled`; `too_late` once sending began; `closed`
   * when its workflow has ended; `unavailable` when no worker answered within a few seconds.
   */
  cancelScheduledSend(id: string): Promise<'canceled' | 'too_late' | 'closed' | 'unavailable'>;
  /** Whether the workflow of a scheduled send still runs. */
  scheduledSendState(id: string): Promise<'running' | 'closed' | 'missing'>;
  /** Starts the DNS verification loop of a domain (starting twice is success). */
  startDomainVerification(d: { domainId: string; userId: string; domain: string }): Promise<void>;
  /** Asks a running verification loop to check again now. */
  nudgeDomainVerification(domainId: string): Promise<void>;
  stopDomainVerification(domainId: string): Promise<void>;
  /** Starts the delivery workflow of one inbound message (starting twice is success). */
  startInboundDelivery(m: { messageId: string; userId: string; domainId?: string }): Promise<void>;
  /** Continues a delivery's retry ladder in its own workflow, from `startAttempt`. */
  startWebhookDelivery(d: { deliveryId: string; startAttempt: number; userId: string; messageId: string }): Promise<void>;
  /** Wakes (or starts) the one engagement dispatcher of a domain (signal-with-start). */
  nudgeEngagement(domainId: string, userId?: string): Promise<void>;
  ping(): Promise<void>;
  /** How long the namespace keeps closed runs, in ms (the doctor's retention check); null when unset. */
  retentionMs(): Promise<number | null>;
};

/** Composition of every core service from its dependencies. Transports receive this object. */
export function createCore(deps: { database: Database; config: Config; workflows: WorkflowPort }) {
  const { config } = deps;
  const db = deps.database.db;
  const sealer = createSealer(config.secretKey);
  const tokens = createTokenService(config.secretKey);
  const resolver = createResolver(config.dnsServers);
  const queue: OutboundQueue = createOutboundQueue({
    startBatch: (ids, account) => deps.workflows.startOutboundBatch(ids, account),
    onError: (err, ids) => console.error(`[outbound] could not start delivery of ${ids.length} message(s); the sweep will retry:`, (err as Error).message),
  });
  const mailer = createSystemMailer({ db, queue, serviceDomain: config.serviceDomain });
  const keys = createKeyService({ db, sealer });
  const accounts = createAccountService({ db, keys, tokens, mailer, publicUrl: config.publicUrl, defaultPlan: config.defaultPlan, signupLimitPerHour: config.signupLimitPerHour });
  const oauth = createOAuthService({ db, tokens, publicUrl: config.publicUrl, accessTtlSeconds: config.oauthAccessTokenTtlSeconds });
  const auth = createAuthService({ keys, tokens, accounts, grants: oauth.grants });
  const usage = createUsageService({ db, plans: config.plans, defaultPlan: config.defaultPlan });
  const outbox = createOutboxService({ db });
  const attachments = createAttachmentService({
    db, publicUrl: config.publicUrl, secretKey: config.secretKey, allowPrivate: config.attachmentFetchAllowPrivate,
  });
  const providers = createProviderRegistry([builtinProvider(config.serviceDomain)]);

  const planOf = async (userId: string) => usage.planOf((await accounts.getUser(userId))?.plan ?? config.defaultPlan);
  /** List/detail enrichment (SPEC.md, Domain): webhook fields and the daily-cap flag. */
  const enrich = async (rows: DomainRow[], userId: string): Promise<EnrichedDomain[]> => {
    const user = await accounts.getUser(userId);
    const dailyLimitReached = user ? await usage.dailyLimitReached(user) : false;
    const hooks = await routes.catchAllsFor(rows.map((r) => r.id));
    return rows.map((r) => ({
      ...domainDto(r), webhookUrl: hooks.get(r.id)?.url ?? null, webhookAckMode: hooks.get(r.id)?.ackMode ?? null,
      webhookStatus: (r.webhookHealth as WebhookStatus | null) ?? null, dailyLimitReached,
    }));
  };
  // The domain and hosted-zone services refer to each other (delete cleans hosted records; claims insert domains).
  const serviceDomain = createServiceDomain({ db, sealer, domain: config.serviceDomain, publicIp: config.publicIp });
  const hosted = createHostedZoneService({ db, base: config.serviceDomain, domains: () => domains, ownRecords: () => serviceDomain.records() });
  const domains: DomainService = createDomainService({
    db, sealer, resolver, serviceDomain: config.serviceDomain, providers, workflows: deps.workflows, planOf, enrich,
    cleanupHosted: (id) => hosted.cleanup(id),
  });
  const registration = createRegistrationService({
    db, registrar: config.registrar === 'simulated' ? simulatedRegistrar() : undefined, serviceDomain: config.serviceDomain, domains, hosted,
  });
  const scopedKeys = createScopedKeyService({ db, sealer, domains });
  const encryption = createEncryptionService({ db, domains });
  const templates = createTemplateService({ db });
  const suppressions = createSuppressionService({ db });
  const events = createEventService({ db });
  const reports = createReportService({ db, events, suppressions });
  const tracking = createTracking({ publicUrl: config.publicUrl, secretKey: config.secretKey });
  const scheduled = createScheduledSendService({ db, workflows: deps.workflows });
  const sending = createSendService({ db, accounts, usage, suppressions, templates, attachments, tracking, queue, scheduled });
  const runLink = (workflowId: string) => (config.temporalUiUrl
    ? `${config.temporalUiUrl}/namespaces/${encodeURIComponent(config.temporal.namespace)}/workflows/${encodeURIComponent(workflowId)}`
    : null);
  const messages = createMessageService({ db, events, runLink });
  const accountSecret = createAccountSecretService({ db, sealer });
  const routes = createRouteService({ db, sealer, domains });
  const deliveryStore = createDeliveryStore({ db, sealer, routes, accountSecret: (userId) => accountSecret.get(userId) });
  const webhookTests = createWebhookTests({ routes });
  const engagement = createEngagementService({
    db, domains, routes, accountSecret, deliveries: deliveryStore, workflows: deps.workflows, retrySchedule: config.webhookRetrySchedule,
  });
  events.attachRouter(engagement.router);
  const replay = createReplayService({ db, deliveries: deliveryStore, workflows: deps.workflows, retrySchedule: config.webhookRetrySchedule });
  const inbound = createInboundService({
    db, sealer, resolver, serviceDomain: config.serviceDomain, attachments, encryption, routes, deliveries: deliveryStore, usage, workflows: deps.workflows, reports,
  });

  return {
    config, db, database: deps.database, workflows: deps.workflows, sealer, serviceDomain, tokens, queue, mailer, keys, accounts, auth, oauth, usage,
    inbound, outbox, attachments, providers, domains, hosted, registration, scopedKeys, encryption, resolver, templates, suppressions, events, reports, tracking, scheduled, sending, messages, accountSecret, routes, deliveryStore, replay, webhookTests, engagement,
    async close() {
      await queue.close();
    },
  };
}
export type Core = ReturnType<typeof createCore>;
