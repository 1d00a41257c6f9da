import type { Config } from './config.js';
import { describeError, log } from './log.js';
import type { Database } from '../db/index.js';
import { createAccountService } from './accounts.js';
import { createAccountRemoval } from './account-removal.js';
import { createAttachmentService } from './attachments/service.js';
import { createAuthService } from './auth.js';
import { createResolver } from './dns.js';
import { domainDto, type DomainRow, type EnrichedDomain, type WebhookStatus } from './domains/dto.js';
import { createWebhookTests } from './webhooks/test-event.js';
import { createEngagementService } from './webhooks/engagement.js';
import { createHostedZoneService } from './domains/hosted.js';
import { createProviderRegistry } from './domains/providers.js';
import { createEgressOperator } from './operator/egress.js';
import { createEgressRouter } from './egress/router.js';
import { simulatedRegistrar } from './domains/registrar.js';
import { createRegistrationService } from './domains/registration.js';
import { createDomainService, type DomainService } from './domains/service.js';
import { createOwnershipTokens } from './domains/ownership.js';
import { createInboundService } from './inbound/service.js';
import { createInboundDoor } from './inbound/door.js';
import { createInboundPolicy } from './inbound/policy.js';
import { createQuarantine } from './inbound/quarantine.js';
import { createRspamdClient } from './spam/rspamd.js';
import { createAccountSecretService } from './webhooks/account-secret.js';
import { createDeliveryStore } from './webhooks/deliveries.js';
import { createControlReplies } from './webhooks/control.js';
import { createRouteApi } from './inbound/route-api.js';
import { createReplayService } from './webhooks/replay.js';
import { createRouteService } from './webhooks/routes.js';
import { createEncryptionService } from './inbound/encryption-service.js';
import { createDomainSettings } from './domains/settings.js';
import { createWarmupService } from './shaping/warmup.js';
import { createReportService } from './inbound/report-service.js';
import { createGuardService } from './feedback/guard.js';
import { createActivityService } from './feedback/activity.js';
import { createEgressOutcomes } from './feedback/egress-outcomes.js';
import { createAggregateStore } from './feedback/aggregate-store.js';
import { createReportSummaries } from './feedback/summaries.js';
import { createDkimRotation } from './domains/rotation.js';
import { createKeyService } from './keys.js';
import { createOAuthService } from './oauth/service.js';
import { createAppPasswordService } from './mailboxes/app-passwords.js';
import { createForwarder } from './mailboxes/forward.js';
import { createLoginGuard } from './mailboxes/login-guard.js';
import { createMailboxService, type MailboxService } from './mailboxes/service.js';
import { createMailboxStore } from './mailboxes/store.js';
import { createStorageQuota } from './storage/quota.js';
import { createServiceDomain } from './domains/service-domain.js';
import { createOutboundQueue, type OutboundQueue } from './transport/queue.js';
import { createSystemMailer } from './transport/system-mail.js';
import { createTlsReportSender } from './feedback/tls-report-send.js';
import type { TlsOutcomeRecorder } from './shaping/tls-outcomes.js';
import { createOutboxService } from './outbox.js';
import { createScopedKeyService } from './scoped-keys.js';
import { createSealer, deriveKey } from './secrets.js';
import { createSrs } from './mail/srs.js';
import { createIdempotencyStore } from './idempotency.js';
import { createTemplateService } from './templates/service.js';
import { createEventService } from './message-events.js';
import { createMessageService } from './sending/messages.js';
import { createSendGate } from './gate/gate.js';
import { createScheduledSendService } from './sending/scheduled.js';
import { createSendService } from './sending/service.js';
import { createSubmissionService } from './sending/submission.js';
import { createSuppressionService } from './gate/suppressions.js';
import { createTracking } from './render/tracking.js';
import { createTokenService } from './tokens.js';
import { createBroadcastService } from './broadcasts/service.js';
import { createFanoutService } from './broadcasts/fanout.js';
import { createUnsubscribeTokens } from './contacts/unsubscribe.js';
import { createImportService } from './contacts/imports.js';
import { createListService } from './contacts/lists.js';
import { createContactService } from './contacts/service.js';
import { createUsageService } from './usage.js';
import type { WorkflowPort } from './ports/index.js';
import { openParsePool } from './parsing/pool.js';
import { createDeliveryService, type DeliveryService } from './outbound/delivery.js';
import type { OutboundTransport } from './transport/transport.js';
import { createHealthService } from './operator/health.js';
import { shapingReport } from './shaping/report.js';
import { createMtaStsService } from './mta-sts/service.js';

export type { WorkflowPort } from './ports/index.js';
import { createSequenceDispatcher } from './sequences/dispatch.js';
import { createAppEventService } from './sequences/events.js';
import { createEnrolmentStore } from './sequences/enrolments.js';
import { createSendEnrolments } from './sequences/send-enrolment.js';
import { createSequenceService } from './sequences/service.js';

/**
 * Composition of every core service from its dependencies. Each service gets the part of the workflow port
 * it uses; transports receive the services (`Core`, `servicesOf`), the worker the delivery service built here.
 */
export function createCore(deps: { database: Database; config: Config; workflows: WorkflowPort }) {
  const { config } = deps;
  const db = deps.database.db;
  // Opened first, so its threads are warm before the first message or send arrives.
  const parsePool = openParsePool(config.parsing);
  const sealer = createSealer(config.secretKey);
  const tokens = createTokenService(config.secretKey);
  const resolver = createResolver(config.dnsServers);
  const queue: OutboundQueue = createOutboundQueue({
    startBatch: (ids, account) => deps.workflows.startOutboundBatch(ids, account),
    startsPerSecond: config.outboundStartsPerSecond,
    onError: (err, ids) =>
      log.error(
        `[outbound] could not start delivery of ${ids.length} message(s); the sweep will retry: ${describeError(err)}`,
      ),
  });
  const mailer = createSystemMailer({ db, queue, serviceDomain: config.serviceDomain });
  const keys = createKeyService({ db, sealer, listen: (channel, h) => deps.database.listen(channel, h) });
  const accounts = createAccountService({
    db,
    keys,
    tokens,
    mailer,
    publicUrl: config.publicUrl,
    defaultPlan: config.defaultPlan,
    signupLimitPerHour: config.signupLimitPerHour,
    removal: createAccountRemoval({ db, workflows: deps.workflows }),
  });
  const oauth = createOAuthService({
    db,
    tokens,
    publicUrl: config.publicUrl,
    accessTtlSeconds: config.oauthAccessTokenTtlSeconds,
    appsCap: config.caps.oauthApps,
  });
  const auth = createAuthService({
    keys,
    tokens,
    accounts,
    grants: oauth.grants,
    mailboxAuth: () => (secret, ip) => mailboxes.authenticate(secret, 'api', ip),
  });
  const usage = createUsageService({ db, plans: config.plans, defaultPlan: config.defaultPlan });
  /** The one gate every outgoing message passes (verification, suspension, caps); system mail alone is exempt. */
  const gate = createSendGate({ db, usage });
  const idempotency = createIdempotencyStore({ db, sealer });
  const outbox = createOutboxService({ db });
  const storage = createStorageQuota({ db, quotaBytes: config.storageQuotaBytes });
  const attachments = createAttachmentService({
    db,
    publicUrl: config.publicUrl,
    secretKey: config.secretKey,
    allowPrivate: config.attachmentFetchAllowPrivate || config.allowPrivateNetworks,
    storage,
  });
  /** One sending provider per egress pool (docs/domains.md, Providers, pools and TLS). */
  const providers = createProviderRegistry(config.egress, config.serviceDomain);
  /** Which pool a message leaves from; the operator's assignments make it forget an account at once. */
  const egressRouter = createEgressRouter({ db, config: config.egress });

  const reportSummaries = createReportSummaries({
    db,
    platformIps: () => (config.publicIp ? [config.publicIp] : []),
  });
  const planOf = async (userId: string) => usage.planOf((await accounts.getUser(userId))?.plan ?? config.defaultPlan);
  /** List/detail enrichment (SPEC.md, Domain): webhook fields and the daily-cap flag. */
  const enrich = async (rows: DomainRow[], userId: string): Promise<EnrichedDomain[]> => {
    const user = await accounts.getUser(userId);
    const dailyLimitReached = user ? await usage.dailyLimitReached(user) : false;
    const hooks = await routes.catchAllsFor(rows.map((r) => r.id));
    const feedback = await feedbackGuard.feedbackOf(rows);
    const dmarc = await reportSummaries.passRates(rows.map((r) => r.id));
    return rows.map((r) => ({
      ...domainDto(r),
      webhookUrl: hooks.get(r.id)?.url ?? null,
      webhookAckMode: hooks.get(r.id)?.ackMode ?? null,
      webhookStatus: (r.webhookHealth as WebhookStatus | null) ?? null,
      dailyLimitReached,
      feedback: feedback.has(r.id) ? { ...feedback.get(r.id)!, dmarc: dmarc.get(r.id) ?? null } : undefined,
    }));
  };
  // The domain and hosted-zone services refer to each other (delete cleans hosted records; claims insert domains).
  const serviceDomain = createServiceDomain({
    db,
    sealer,
    domain: config.serviceDomain,
    publicIp: config.publicIp,
    servesZone: config.dnsPort !== undefined,
  });
  const hosted = createHostedZoneService({
    db,
    base: config.serviceDomain,
    domains: () => domains,
    ownRecords: () => serviceDomain.records(),
  });
  const domains: DomainService = createDomainService({
    db,
    sealer,
    resolver,
    serviceDomain: config.serviceDomain,
    providers,
    egress: config.egress,
    workflows: deps.workflows,
    planOf,
    enrich,
    ownership: createOwnershipTokens(config.secretKey),
    cleanupHosted: (id) => hosted.cleanup(id),
  });
  const dkimRotation = createDkimRotation({
    db,
    sealer,
    resolver,
    workflows: deps.workflows,
    republish: (row) => hosted.publish(row.id, domains.mailRecordsOf(row)),
    load: (actor, id) => domains.load(actor, id),
    get: (actor, id) => domains.get(actor, id),
    service: serviceDomain,
  });
  const registration = createRegistrationService({
    db,
    registrar: config.registrar === 'simulated' ? simulatedRegistrar() : undefined,
    serviceDomain: config.serviceDomain,
    domains,
    hosted,
  });
  const scopedKeys = createScopedKeyService({ db, sealer, domains, keys });
  const encryption = createEncryptionService({ db, domains });
  const domainSettings = createDomainSettings({ db, domains });
  /** Per-domain inbound policy: sender rules and spam thresholds (docs/inbound-policy.md). */
  const inboundPolicy = createInboundPolicy({ db, load: (actor, id) => domains.load(actor, id) });
  const egressOperator = createEgressOperator({
    db,
    egress: config.egress,
    providers,
    router: egressRouter,
    republish: (row) => hosted.publish(row.id, domains.mailRecordsOf(row)),
  });
  const activity = createActivityService({ db, domains });
  const egressOutcomes = createEgressOutcomes({ db, domains });
  const warmup = createWarmupService({ db, domains, dayMs: config.warmupDayMs, workflows: deps.workflows });
  const templates = createTemplateService({ db });
  const suppressions = createSuppressionService({
    db,
    onSuppressed: (userId, email) => contactChanged(userId, { email }),
  });
  const events = createEventService({ db });
  const reports = createReportService({ db, events, suppressions, bounceRules: config.bounceRules });
  const tracking = createTracking({ publicUrl: config.publicUrl, secretKey: config.secretKey });
  const scheduled = createScheduledSendService({ db, workflows: deps.workflows, usage, events });
  const contacts = createContactService({
    db,
    onUnsubscribed: (userId, contactId) => contactChanged(userId, { contactId }),
    cap: config.caps.contacts,
  });
  const lists = createListService({ db, contactCap: config.caps.contacts });
  const imports = createImportService({ db, workflows: deps.workflows, contactCap: config.caps.contacts });
  const unsubscribe = createUnsubscribeTokens({ secretKey: config.secretKey, publicUrl: config.publicUrl });
  const broadcasts = createBroadcastService({
    db,
    workflows: deps.workflows,
    templates,
    defaultFooterAddress: config.broadcast.footerAddress,
    gate,
    usage,
  });
  const fanout = createFanoutService({ db, templates, unsubscribe, gate });
  const dispatcher = createSequenceDispatcher({
    db,
    port: deps.workflows,
    onError: (err) => log.error(`[sequences] could not hand events to Temporal; the sweep will: ${describeError(err)}`),
  });
  const appEvents = createAppEventService({ db, dispatcher, cap: config.caps.appEvents });
  const sequences = createSequenceService({ db, templates, workflows: deps.workflows });
  const enrolmentStore = createEnrolmentStore({
    db,
    templates,
    gate,
    unsubscribe,
    startDelivery: (ids, userId) => deps.workflows.startOutboundBatch(ids, userId),
  });
  const sendEnrolments = createSendEnrolments({ db, dispatcher, contactCap: config.caps.contacts });
  /** A contact that can no longer be mailed: its running enrolments re-check it now rather than at their next step. */
  function contactChanged(userId: string, by: { contactId: string } | { email: string }) {
    enrolmentStore
      .runningOf(userId, by)
      .then((ids) => Promise.all(ids.map((id) => deps.workflows.nudgeEnrolment(id))))
      .catch((err) =>
        log.error(
          `[sequences] could not tell enrolments of a contact change (their next step checks): ${describeError(err)}`,
        ),
      );
  }
  const sending = createSendService({
    db,
    accounts,
    usage,
    suppressions,
    templates,
    attachments,
    tracking,
    queue,
    scheduled,
    contacts,
    enrolments: sendEnrolments,
    gate,
    sequences,
  });
  const runLink = (workflowId: string) =>
    config.temporalUiUrl
      ? `${config.temporalUiUrl}/namespaces/${encodeURIComponent(config.temporal.namespace)}/workflows/${encodeURIComponent(workflowId)}`
      : null;
  const messages = createMessageService({ db, events, runLink });
  const accountSecret = createAccountSecretService({ db, sealer });
  const net = { resolver, allowPrivate: config.allowPrivateNetworks, webhookTimeoutMs: config.webhookTimeoutMs };
  const routes = createRouteService({ db, sealer, domains, net });
  const deliveryStore = createDeliveryStore({
    db,
    sealer,
    routes,
    net,
    accountSecret: (userId) => accountSecret.get(userId),
    control: () => controlReplies,
  });
  const webhookTests = createWebhookTests({ routes, net });
  const engagement = createEngagementService({
    db,
    domains,
    routes,
    accountSecret,
    deliveries: deliveryStore,
    workflows: deps.workflows,
    retrySchedule: config.webhookRetrySchedule,
    net,
  });
  events.attachRouter(engagement.router);
  const feedbackGuard = createGuardService({
    db,
    events,
    settings: config.feedback.guard,
    workflows: deps.workflows,
    domains,
  });
  events.attachFeedback(feedbackGuard);
  const replay = createReplayService({
    db,
    deliveries: deliveryStore,
    workflows: deps.workflows,
    retrySchedule: config.webhookRetrySchedule,
  });
  // Inbound messages are group-committed like sends: one batch run per flush (the Temporal budget).
  const inboundStarts: OutboundQueue = createOutboundQueue({
    startBatch: (ids, account) => deps.workflows.startInboundBatch(ids, account),
    startsPerSecond: config.inboundStartsPerSecond,
    onError: (err, ids) =>
      log.error(
        `[inbound] could not start the delivery of ${ids.length} message(s); the sweep will: ${describeError(err)}`,
      ),
  });
  const mailboxStore = createMailboxStore({ db, storage });
  // Webhook consumers' control-mode replies (spam, drop, block-sender); the delivery store reaches it lazily.
  const controlReplies = createControlReplies({ db, mailboxStore, addRule: inboundPolicy.addRule });
  const appPasswords = createAppPasswordService({ db, domains, changed: (userId) => mailboxes.forget(userId) });
  // One guard for every login by password (IMAP, the mailbox API, SMTP submission): failures count per client address.
  const loginGuard = createLoginGuard(db, config.login);
  const mailboxes: MailboxService = createMailboxService({
    db,
    store: mailboxStore,
    passwords: appPasswords,
    guard: loginGuard,
  });
  const submission = createSubmissionService({
    db,
    keys,
    passwords: appPasswords,
    mailboxes,
    guard: loginGuard,
    sending,
  });
  // SRS envelope senders of forwards, and the bounces to them (core/mail/srs.ts), keyed from SECRET_KEY.
  const srs = createSrs(deriveKey(config.secretKey, 'srs-v1'));
  const forwarder = createForwarder({ db, attachments, queue, gate, resolver, srs });
  const aggregates = createAggregateStore({ db });
  const inbound = createInboundService({
    db,
    listen: (channel, h) => deps.database.listen(channel, h),
    sealer,
    resolver,
    serviceDomain: config.serviceDomain,
    attachments,
    encryption,
    routes,
    deliveries: deliveryStore,
    reports,
    aggregates,
    reportBounds: { maxBytes: config.feedback.reportMaxBytes, maxRecords: config.feedback.dmarcMaxRecords },
    starts: inboundStarts,
    mailboxStore,
    forwarder,
    srs,
    // rspamd scores every inbound message at DATA (RSPAMD_URL; unset: delivered unscored, `not_configured`).
    spam: createRspamdClient({ url: config.inboundFilter.rspamdUrl, timeoutMs: config.inboundFilter.rspamdTimeoutMs }),
    door: createInboundDoor({ db, storage, unverifiedDaily: config.unverifiedInboundDaily }),
    policy: inboundPolicy,
    quarantineDays: config.inboundFilter.quarantineDays,
    touchContacts: (userId, emails) => contacts.touch(userId, emails, { subscribed: false }),
    unsubscribe: async (token) => {
      const contactId = unsubscribe.contactOf(token);
      if (contactId) await contacts.unsubscribe(contactId);
    },
  });
  /** Held inbound mail: listed, released once, deleted, swept when expired (docs/inbound-policy.md). */
  const quarantine = createQuarantine({ db, mailboxStore, forwarder, routes, starts: inboundStarts });
  /** `POST /v1/route`: a message made by the API, through one of the caller's routes. */
  const routeApi = createRouteApi({ db, inbound });

  /** The worker's delivery service, sending through `transport` (the worker opens it and closes it when it stops). */
  const delivery = (transport: OutboundTransport): DeliveryService =>
    createDeliveryService({
      db,
      transport,
      sealer,
      serviceDomain: config.serviceDomain,
      attachments,
      events,
      suppressions,
      fileSent: (m) => mailboxes.fileSent(m),
      settleEnrolments: (messageId, outcome) => sendEnrolments.settle(messageId, outcome),
      serviceSigner: () => serviceDomain.signer(),
      bounceRules: config.bounceRules,
      warmup,
      egress: egressRouter,
    });
  /** The worker's TLS report sender (docs/tls-reporting.md): mail goes out through the worker's transport. */
  const tlsReports = (transport: OutboundTransport, outcomes?: TlsOutcomeRecorder) =>
    createTlsReportSender({
      db,
      resolver,
      serviceDomain: config.serviceDomain,
      periodMs: config.feedback.tlsReportPeriodMs,
      allowPrivate: config.allowPrivateNetworks,
      transport,
      signer: () => serviceDomain.signer(),
      outcomes,
    });
  /** POST /api/operator/tls-reports/send: the pending TLS reports now, the current period included. */
  const tlsReporting = { sendNow: () => deps.workflows.runTlsReportsNow() };
  /** MTA-STS of recipient domains (docs/mta-sts.md): the worker's lookup, the fetch activity, the operator's view. */
  const mtaSts = createMtaStsService({ db, resolver, config, workflows: deps.workflows });
  const health = createHealthService({ config, database: deps.database, temporal: deps.workflows });
  /** GET /api/deliverability/sites: each destination site's limits, connections and suspension (core/shaping/report.ts). */
  const shaping = { report: () => shapingReport(db) };

  return {
    config,
    db,
    database: deps.database,
    workflows: deps.workflows,
    delivery,
    tlsReports,
    tlsReporting,
    mtaSts,
    health,
    shaping,
    sealer,
    serviceDomain,
    tokens,
    queue,
    mailer,
    keys,
    accounts,
    auth,
    oauth,
    usage,
    gate,
    idempotency,
    inbound,
    routeApi,
    outbox,
    attachments,
    providers,
    egressRouter,
    egressOperator,
    domains,
    dkimRotation,
    hosted,
    registration,
    scopedKeys,
    encryption,
    domainSettings,
    inboundPolicy,
    quarantine,
    warmup,
    activity,
    egressOutcomes,
    resolver,
    templates,
    suppressions,
    events,
    feedbackGuard,
    reports,
    aggregates,
    reportSummaries,
    tracking,
    scheduled,
    sending,
    submission,
    messages,
    accountSecret,
    routes,
    deliveryStore,
    replay,
    webhookTests,
    engagement,
    mailboxStore,
    appPasswords,
    mailboxes,
    forwarder,
    storage,
    contacts,
    lists,
    imports,
    unsubscribe,
    broadcasts,
    fanout,
    sequences,
    appEvents,
    dispatcher,
    enrolmentStore,
    sendEnrolments,
    async close() {
      await sending.close();
      await queue.close();
      await dispatcher.drain();
      await inboundStarts.close();
      await contacts
        .flushTouches()
        .catch((err: Error) =>
          log.error({ error: err.message }, '[contacts] could not record traffic addresses on shutdown'),
        );
      await parsePool.close();
    },
  };
}
/** Everything the composition builds: what runtime/service.ts and the worker hold (tests reach the database here). */
export type Composition = ReturnType<typeof createCore>;

/** What the composition keeps from transports: the database, the workflow port, the worker's part, its lifecycle. */
type Internal = 'db' | 'database' | 'workflows' | 'delivery' | 'tlsReports' | 'close';

/** What transports (API, SMTP, IMAP, the operations) receive: the services, never the database. */
export type Core = Omit<Composition, Internal>;

/** The transports' view of a composition: the same services, without what `Internal` names. */
export function servicesOf(c: Composition): Core {
  const {
    db: _db,
    database: _database,
    workflows: _workflows,
    delivery: _delivery,
    tlsReports: _tlsReports,
    close: _close,
    ...services
  } = c;
  return services;
}
