import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { parseTrustProxy, type TrustProxy } from './net/client-address.js';
import { PARSE_DEFAULTS } from './parsing/options.js';
import { parsePlans, type Plan } from './plans.js';
import { loadBounceRules, type BounceRules } from './mail/bounce-class.js';
import { loadShapingFile, type ShapingConfig } from './shaping/config.js';
import { loadEgressFile, type EgressConfig } from './egress/config.js';

/** The shaping file shipped at the repository root (docs/deliverability.md). */
export const DEFAULT_SHAPING_FILE = fileURLToPath(new URL('../shaping.toml', import.meta.url));
/** The egress file shipped at the repository root (docs/transport-policy.md). */
export const DEFAULT_EGRESS_FILE = fileURLToPath(new URL('../egress.toml', import.meta.url));

const port = z.coerce.number().int().min(0).max(65535);
const hostPort = z.string().regex(/^[^\s:]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/, 'expected ip[:port]');

/** Every environment variable the service reads, with its default (DESIGN.md, Configuration). */
const envSchema = z.object({
  NODE_ENV: z.string().optional(),
  PORT: port.default(3000),
  PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
  DATA_DIR: z.string().min(1).default('./.data'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'expected postgres://…')
    .optional(),
  TEMPORAL_ADDRESS: z
    .string()
    .regex(/^[^\s:]+:\d{1,5}$/, 'expected host:port')
    .optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('svc-mail'),
  TEMPORAL_UI_PORT: port.default(8233),
  TEMPORAL_DEV_PORT: port.default(7233),
  SMTP_PORT: port.default(2525),
  SERVICE_DOMAIN: z
    .string()
    .min(1)
    .regex(/^[a-z0-9.-]+$/i, 'expected a host name')
    .default('localhost'),
  DNS_SERVERS: z.string().optional(),
  SMTP_RELAY_URL: z
    .string()
    .regex(/^smtps?:\/\//, 'expected smtp://user:pass@host:port')
    .optional(),
  OUTBOUND_MODE: z.enum(['mx', 'relay', 'capture']).optional(),
  MX_PORT: port.default(25),
  SECRET_KEY: z.string().min(32, 'must be at least 32 characters').optional(),
  DNS_PORT: port.optional(),
  WEBHOOK_RETRY_SCHEDULE: z.string().optional(),
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(100).max(15_000).default(15_000),
  DOMAIN_VERIFY_INITIAL_MS: z.coerce.number().int().min(100).default(60_000),
  DOMAIN_VERIFY_MAX_MS: z.coerce.number().int().min(100).default(3_600_000),
  DOMAIN_VERIFY_DEADLINE_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(72 * 3_600_000),
  REGISTRAR: z.enum(['simulated']).optional(),
  SIGNUP_LIMIT_PER_HOUR: z.coerce.number().int().min(1).default(20),
  OAUTH_ACCESS_TOKEN_TTL: z.coerce.number().int().min(1).max(86_400).default(900),
  SMTP_MAX_MESSAGE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(30 * 1024 * 1024),
  SMTP_MAX_CLIENTS: z.coerce.number().int().min(1).default(200),
  SMTP_MAX_CLIENTS_PER_IP: z.coerce.number().int().min(1).default(10),
  SMTP_MAX_RECIPIENTS: z.coerce.number().int().min(1).default(100),
  SMTP_COMMANDS_PER_MINUTE: z.coerce.number().int().min(10).default(1200),
  SMTP_IDLE_TIMEOUT_MS: z.coerce.number().int().min(1000).default(60_000),
  SMTP_TLS_KEY: z.string().optional(),
  SMTP_TLS_CERT: z.string().optional(),
  SUBMISSION_PORT: port.default(1587),
  SUBMISSIONS_PORT: port.default(1465),
  SUBMISSION_HOST: z.string().min(1).max(253).optional(),
  SUBMISSION_PUBLIC_PORT: port.optional(),
  SUBMISSIONS_PUBLIC_PORT: port.optional(),
  OUTBOUND_RETRY_SCHEDULE: z.string().optional(),
  OUTBOUND_TLS_CA_FILE: z.string().min(1).optional(),
  OUTBOUND_SMTP_TIMEOUT_MS: z.coerce.number().int().min(1000).default(60_000),
  OUTBOUND_STARTS_PER_SECOND: z.coerce.number().min(0.1).max(10_000).default(5),
  INBOUND_STARTS_PER_SECOND: z.coerce.number().min(0.1).max(10_000).default(2),
  TEMPORAL_UI_URL: z.url({ protocol: /^https?$/ }).optional(),
  IMAP_PORT: port.default(1143),
  IMAPS_PORT: port.default(1993),
  IMAP_MAX_LITERAL_BYTES: z.coerce.number().int().min(1024).optional(),
  IMAP_IDLE_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(30 * 60_000),
  IMAP_POLL_MS: z.coerce.number().int().min(50).default(1000),
  IMAP_MAX_CLIENTS: z.coerce.number().int().min(1).default(500),
  IMAP_COMMAND_TIMEOUT_MS: z.coerce.number().int().min(100).default(60_000),
  STORAGE_QUOTA_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(1024 * 1024 * 1024),
  UNVERIFIED_INBOUND_DAILY: z.coerce.number().int().min(0).default(50),
  UNVERIFIED_INBOUND_DAILY_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(10 * 1024 * 1024),
  CONTACTS_PER_ACCOUNT: z.coerce.number().int().min(1).default(100_000),
  APP_EVENTS_PER_ACCOUNT: z.coerce.number().int().min(1).default(1_000_000),
  OAUTH_APPS_PER_ACCOUNT: z.coerce.number().int().min(1).default(50),
  IMAP_MAX_CLIENTS_PER_IP: z.coerce.number().int().min(1).default(20),
  IMAP_LOGIN_TIMEOUT_MS: z.coerce.number().int().min(1000).default(60_000),
  IMAP_PREAUTH_COMMANDS: z.coerce.number().int().min(1).default(20),
  LOGIN_MAX_FAILURES: z.coerce.number().int().min(1).default(10),
  LOGIN_LOCKOUT_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(15 * 60_000),
  ATTACHMENT_FETCH_ALLOW_PRIVATE: z.enum(['0', '1', 'true', 'false']).optional(),
  ALLOW_PRIVATE_NETWORKS: z.enum(['0', '1', 'true', 'false']).optional(),
  PLANS: z.string().optional(),
  DEFAULT_PLAN: z.string().default('free'),
  BROADCAST_BATCH_SIZE: z.coerce.number().int().min(1).max(100).default(100),
  BROADCAST_CONCURRENCY: z.coerce.number().int().min(1).max(32).default(4),
  BROADCAST_DOMAIN_RATE: z.coerce.number().min(0).default(0),
  BROADCAST_BATCHES_PER_RUN: z.coerce.number().int().min(1).default(100),
  BROADCAST_FOOTER_ADDRESS: z.string().max(500).optional(),
  IMPORT_CHUNK_ROWS: z.coerce.number().int().min(1).max(10_000).default(1000),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error']).default('info'),
  REPORT_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(20 * 1024 * 1024),
  DMARC_MAX_RECORDS: z.coerce.number().int().min(1).default(10_000),
  TLS_REPORT_PERIOD: z.coerce.number().int().min(60).default(86_400),
  GUARD_COMPLAINT_RATE: z.coerce.number().min(0).max(1).default(0.003),
  GUARD_COMPLAINT_WARN_RATE: z.coerce.number().min(0).max(1).default(0.001),
  GUARD_BOUNCE_RATE: z.coerce.number().min(0).max(1).default(0.08),
  GUARD_BOUNCE_WARN_RATE: z.coerce.number().min(0).max(1).default(0.04),
  GUARD_WINDOWS_HOURS: z
    .string()
    .regex(/^\d{1,4}(?:,\d{1,4}){0,3}$/)
    .default('24,168'),
  GUARD_MIN_VOLUME: z.coerce.number().int().min(1).default(500),
  // Test and benchmark plumbing (docs/configuration.md, "Internal"): a prebuilt workflow bundle, the statement counter's file.
  SVC_WORKFLOW_BUNDLE: z.string().min(1).optional(),
  SVC_QUERY_STATS_FILE: z.string().min(1).optional(),
  PARSE_THREADS: z.coerce.number().int().min(1).max(64).optional(),
  PARSE_TIMEOUT_MS: z.coerce.number().int().min(50).max(300_000).default(PARSE_DEFAULTS.timeoutMs),
  PARSE_MEMORY_MB: z.coerce.number().int().min(64).max(16_384).default(PARSE_DEFAULTS.memoryMb),
  PUBLIC_IP: z.union([z.ipv4(), z.ipv6()]).optional(),
  OPERATOR_TOKEN: z.string().min(24, 'must be at least 24 characters').optional(),
  METRICS_PORT: port.optional(),
  TEMPORAL_METRICS_PORT: port.optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  TRACE_TRUST_INCOMING: z.enum(['0', '1', 'true', 'false']).optional(),
  TRUST_PROXY: z
    .string()
    .optional()
    .superRefine((v, ctx) => {
      const parsed = parseTrustProxy(v);
      if (typeof parsed === 'object' && 'error' in parsed) ctx.addIssue({ code: 'custom', message: parsed.error });
    }),
  MCP_ALLOWED_ORIGINS: z.string().optional(),
  BOUNCE_RULES_FILE: z.string().min(1).optional(),
  DKIM_ROTATION_DAYS: z.coerce.number().int().min(1).max(3650).optional(),
  DKIM_ROTATION_GRACE_MS: z.coerce
    .number()
    .int()
    .min(0)
    .default(7 * 86_400_000),
  SHAPING_FILE: z.string().min(1).optional(),
  EGRESS_FILE: z.string().min(1).optional(),
  MTA_STS_PORT: port.default(443),
  MTA_STS_MAX_BYTES: z.coerce.number().int().min(512).max(1_048_576).default(65_536),
  MTA_STS_TIMEOUT_MS: z.coerce.number().int().min(500).max(120_000).default(10_000),
  MTA_STS_RETRY_MS: z.coerce.number().int().min(1000).default(600_000),
  RSPAMD_URL: z.string().url().optional(),
  RSPAMD_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(3_000),
  QUARANTINE_DAYS: z.coerce.number().int().min(1).max(365).default(10),
  MTA_STS_CACHE_MS: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
  WARMUP_DAY_MS: z.coerce.number().int().min(1000).default(86_400_000),
});

export type Config = {
  env: string;
  port: number;
  publicUrl: string;
  dataDir: string;
  databaseUrl: string | undefined;
  temporal: { address: string | undefined; namespace: string; taskQueue: string; uiPort: number; devPort: number };
  smtpPort: number;
  serviceDomain: string;
  dnsServers: string[];
  relayUrl: string | undefined;
  outboundMode: 'mx' | 'relay' | 'capture';
  mxPort: number;
  /** PEM certificates trusted beside the system's roots when judging an MX's certificate (OUTBOUND_TLS_CA_FILE). */
  outboundTlsCaFile?: string;
  secretKey: string;
  dnsPort: number | undefined;
  webhookRetrySchedule: number[];
  /** How long one webhook POST may take before it fails as `timeout` (DESIGN.md: 15 s; tests shorten it). */
  webhookTimeoutMs: number;
  registrar: 'simulated' | undefined;
  /** Accounts one client address may create per hour (signup and provision). */
  signupLimitPerHour: number;
  /** Lifetime in seconds of OAuth access tokens (`expires_in`); refresh tokens rotate to go on. */
  oauthAccessTokenTtlSeconds: number;
  smtp: {
    maxMessageBytes: number;
    maxClients: number;
    maxClientsPerIp: number;
    maxRecipients: number;
    commandsPerMinute: number;
    idleTimeoutMs: number;
    tlsKeyFile: string | undefined;
    tlsCertFile: string | undefined;
  };
  /**
   * IMAP server: plain+STARTTLS port, implicit-TLS port, connections per port, largest literal accepted (APPEND), idle
   * autologout, the time a half-sent command may take, how often idle sessions look for mail filed
   * by other processes; connections per client address, the idle time allowed before login, commands allowed before login.
   */
  /** Submission (smtp/submission.ts): the ports it listens on, and the host and ports users are told to use. */
  submission: { port: number; tlsPort: number; host: string; publicPort: number; publicTlsPort: number };
  imap: {
    port: number;
    tlsPort: number;
    maxClients: number;
    maxLiteralBytes: number;
    idleTimeoutMs: number;
    commandTimeoutMs: number;
    pollMs: number;
    maxClientsPerIp: number;
    loginTimeoutMs: number;
    preauthCommands: number;
  };
  /** Storage per account: mailbox message bodies (one per inbound message, however many mailboxes) and unexpired stored attachments, in bytes. */
  storageQuotaBytes: number;
  /**
   * Reports that come back (docs/feedback.md): the bounds of a DMARC or TLS report once decompressed, the
   * period of the TLS reports the platform sends, and the complaint guard's thresholds (rates 0..1), windows
   * (hours) and the volume a window needs before it is judged.
   */
  feedback: {
    reportMaxBytes: number;
    dmarcMaxRecords: number;
    tlsReportPeriodMs: number;
    guard: {
      complaintRate: number;
      complaintWarnRate: number;
      bounceRate: number;
      bounceWarnRate: number;
      windowsHours: number[];
      minVolume: number;
    };
  };
  /** What an account whose address is not verified may receive per UTC day: messages and bytes. */
  unverifiedInboundDaily: { messages: number; bytes: number };
  /** Per-account caps: contacts (traffic senders included), stored application events, linked OAuth apps. */
  caps: { contacts: number; appEvents: number; oauthApps: number };
  /** Mailbox logins (IMAP, mailbox API): failures per client address before it is locked out for `lockoutMs`. */
  login: { maxFailures: number; lockoutMs: number };
  /** The parse pool (core/parsing/pool.ts): most threads, time budget per task, memory limit per thread. */
  parsing: { threads: number; timeoutMs: number; memoryMb: number };
  /** Delays (ms) between later attempts at a temporarily failed outbound message; then it bounces. */
  outboundRetrySchedule: number[];
  /** SMTP connect, greeting and socket timeout of outbound delivery. */
  outboundSmtpTimeoutMs: number;
  /** Outbound delivery runs started per second for partial batches (a full batch of 100 never waits). */
  outboundStartsPerSecond: number;
  /** Inbound batch runs started per second for partial batches (a full batch of 100 never waits). */
  inboundStartsPerSecond: number;
  /** Base URL of the Temporal Web UI, for links to runs (GET /api/messages/:id); unset: no links. */
  temporalUiUrl: string | undefined;
  /** Let attachment URLs reach loopback/private addresses (local testing only). */
  attachmentFetchAllowPrivate: boolean;
  /** Let webhooks, routes, tracking webhooks and MX delivery reach loopback/private addresses (development and tests only). */
  allowPrivateNetworks: boolean;
  domainVerify: { initialDelayMs: number; maxDelayMs: number; deadlineMs: number };
  plans: Record<string, Plan>;
  defaultPlan: string;
  logLevel: 'debug' | 'info' | 'warn' | 'error';
  /** SVC_WORKFLOW_BUNDLE: the workflow bundle a worker runs (tests hand theirs in); unset: the prebuilt one when fresh. */
  workflowBundle: string | undefined;
  /** SVC_QUERY_STATS_FILE: where the benchmarks' statement counter writes (db/index.ts); unset: not counted. */
  queryStatsFile: string | undefined;
  /** Broadcast fan-out: recipients per batch (one delivery run each), batches in flight, recipients/s per recipient domain (0 = no limit), batches per run before continue-as-new, footer default. */
  broadcast: {
    batchSize: number;
    concurrency: number;
    domainRate: number;
    batchesPerRun: number;
    footerAddress: string | undefined;
    importChunkRows: number;
  };
  /** The public address outbound mail leaves from: published in SPF and A, checked for reverse DNS by the doctor. */
  publicIp: string | undefined;
  /** Bearer credential of `GET /api/health?detail=1` (the doctor over HTTP); unset: detail is off. */
  operatorToken: string | undefined;
  /** GET /metrics of the smtp, imap and worker roles on this port (the API serves /metrics on PORT); unset: none. */
  metricsPort: number | undefined;
  /** The Temporal SDK's own Prometheus exporter (worker role) on this port; unset: off. */
  temporalMetricsPort: number | undefined;
  /** OTLP/HTTP endpoint traces are exported to (…/v1/traces is appended); unset: tracing is off and not loaded. */
  otlpEndpoint: string | undefined;
  /** TRACE_TRUST_INCOMING: an API request's `traceparent` is continued; off, every request starts its own trace. */
  traceTrustIncoming: boolean;
  /** TRUST_PROXY: which X-Forwarded-For hops name the client (express `trust proxy`); false: the socket's peer. */
  trustProxy: TrustProxy;
  /** Origins besides PUBLIC_URL's whose browsers may call /mcp (MCP_ALLOWED_ORIGINS, comma-separated). */
  mcpAllowedOrigins: string[];
  /** Where SECRET_KEY came from: the environment, or the file generated in DATA_DIR on first boot. */
  secretKeySource: 'env' | 'file';
  /** Bounce classification: the shipped bounce-rules.toml with BOUNCE_RULES_FILE's rules on top. */
  bounceRules: BounceRules;
  /** DKIM key rotation: scheduled every `days` (unset: only on request), and how long the old selector stays published. */
  dkimRotation: { days: number | undefined; graceMs: number };
  /** Egress shaping per destination site (SHAPING_FILE, default the shipped shaping.toml): read and checked at startup. */
  shaping: ShapingConfig;
  /** Egress sources, pools and the streams' pools (EGRESS_FILE, default the shipped egress.toml; docs/transport-policy.md). */
  egress: EgressConfig;
  /**
   * MTA-STS of recipient domains (docs/transport-policy.md): the HTTPS port policies are fetched from (443;
   * tests use another), the largest policy read, the fetch's time budget, and how long a failed fetch is
   * remembered before it is tried again, and how long a worker trusts a domain's `_mta-sts` record and stored
   * policy before it looks again.
   */
  mtaSts: { port: number; maxBytes: number; timeoutMs: number; retryMs: number; cacheMs: number };
  /**
   * Inbound filtering (docs/inbound-policy.md): rspamd's HTTP address (unset: `npm start` runs a local rspamd
   * when the binary is on the machine, else mail is delivered unscored), how long a scan may take before the
   * message is delivered unscored, and how many days held mail is kept.
   */
  inboundFilter: { rspamdUrl: string | undefined; rspamdTimeoutMs: number; quarantineDays: number };
  /** The length of one day of a domain warm-up plan (tests shorten it). */
  warmupDayMs: number;
};

export class ConfigError extends Error {}

/** 5 min, 15 min, 30 min, 1 h, 2 h, 4 h, 8 h, 16 h, 24 h, 24 h: about three and a half days in all. */
const DEFAULT_OUTBOUND_RETRY = [
  300_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000, 57_600_000, 86_400_000, 86_400_000,
];
const DEFAULT_RETRY_SCHEDULE = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000];
/** Trailing slashes; `(?<!\/)` lets a match start only at the first slash of a run, so the search stays linear. */
const TRAILING_SLASHES = /(?<!\/)\/+$/;

/** Parses the environment once; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(stripEmpty(env));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const dataDir = resolve(e.DATA_DIR);
  const outboundMode = e.OUTBOUND_MODE ?? (e.SMTP_RELAY_URL ? 'relay' : e.NODE_ENV === 'production' ? 'mx' : 'capture');
  if (outboundMode === 'relay' && !e.SMTP_RELAY_URL)
    throw new ConfigError('Invalid configuration:\n  OUTBOUND_MODE=relay needs SMTP_RELAY_URL');
  if (e.REGISTRAR === 'simulated' && e.NODE_ENV === 'production') {
    throw new ConfigError(
      'Invalid configuration:\n  REGISTRAR=simulated registers nothing and charges nothing: refused when NODE_ENV=production',
    );
  }
  const plans = wrap('PLANS', () => parsePlans(e.PLANS));
  if (!plans[e.DEFAULT_PLAN])
    throw new ConfigError(
      `Invalid configuration:\n  DEFAULT_PLAN: no plan named "${e.DEFAULT_PLAN}" (have ${Object.keys(plans).join(', ')})`,
    );
  return {
    env: e.NODE_ENV ?? 'development',
    port: e.PORT,
    publicUrl: (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(TRAILING_SLASHES, ''),
    dataDir,
    databaseUrl: e.DATABASE_URL,
    temporal: {
      address: e.TEMPORAL_ADDRESS,
      namespace: e.TEMPORAL_NAMESPACE,
      taskQueue: e.TEMPORAL_TASK_QUEUE,
      uiPort: e.TEMPORAL_UI_PORT,
      devPort: e.TEMPORAL_DEV_PORT,
    },
    smtpPort: e.SMTP_PORT,
    serviceDomain: e.SERVICE_DOMAIN.toLowerCase(),
    dnsServers: parseList('DNS_SERVERS', e.DNS_SERVERS, (s) => hostPort.parse(s)),
    relayUrl: e.SMTP_RELAY_URL,
    outboundMode,
    mxPort: e.MX_PORT,
    outboundTlsCaFile: e.OUTBOUND_TLS_CA_FILE,
    secretKey: e.SECRET_KEY ?? persistedSecret(dataDir),
    dnsPort: e.DNS_PORT,
    webhookRetrySchedule: e.WEBHOOK_RETRY_SCHEDULE
      ? parseList('WEBHOOK_RETRY_SCHEDULE', e.WEBHOOK_RETRY_SCHEDULE, (s) => z.coerce.number().int().min(0).parse(s))
      : DEFAULT_RETRY_SCHEDULE,
    webhookTimeoutMs: e.WEBHOOK_TIMEOUT_MS,
    registrar: e.REGISTRAR,
    signupLimitPerHour: e.SIGNUP_LIMIT_PER_HOUR,
    oauthAccessTokenTtlSeconds: e.OAUTH_ACCESS_TOKEN_TTL,
    smtp: {
      maxMessageBytes: e.SMTP_MAX_MESSAGE_BYTES,
      maxClients: e.SMTP_MAX_CLIENTS,
      maxClientsPerIp: e.SMTP_MAX_CLIENTS_PER_IP,
      maxRecipients: e.SMTP_MAX_RECIPIENTS,
      commandsPerMinute: e.SMTP_COMMANDS_PER_MINUTE,
      idleTimeoutMs: e.SMTP_IDLE_TIMEOUT_MS,
      tlsKeyFile: e.SMTP_TLS_KEY,
      tlsCertFile: e.SMTP_TLS_CERT,
    },
    submission: {
      port: e.SUBMISSION_PORT,
      tlsPort: e.SUBMISSIONS_PORT,
      // What users are told to configure (the dashboard, the docs): the compose file publishes 587 and 465.
      host: e.SUBMISSION_HOST ?? new URL(e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).hostname,
      publicPort: e.SUBMISSION_PUBLIC_PORT ?? e.SUBMISSION_PORT,
      publicTlsPort: e.SUBMISSIONS_PUBLIC_PORT ?? e.SUBMISSIONS_PORT,
    },
    imap: {
      port: e.IMAP_PORT,
      tlsPort: e.IMAPS_PORT,
      maxClients: e.IMAP_MAX_CLIENTS,
      maxLiteralBytes: e.IMAP_MAX_LITERAL_BYTES ?? e.SMTP_MAX_MESSAGE_BYTES,
      idleTimeoutMs: e.IMAP_IDLE_TIMEOUT_MS,
      commandTimeoutMs: e.IMAP_COMMAND_TIMEOUT_MS,
      pollMs: e.IMAP_POLL_MS,
      maxClientsPerIp: e.IMAP_MAX_CLIENTS_PER_IP,
      loginTimeoutMs: e.IMAP_LOGIN_TIMEOUT_MS,
      preauthCommands: e.IMAP_PREAUTH_COMMANDS,
    },
    storageQuotaBytes: e.STORAGE_QUOTA_BYTES,
    feedback: {
      reportMaxBytes: e.REPORT_MAX_BYTES,
      dmarcMaxRecords: e.DMARC_MAX_RECORDS,
      tlsReportPeriodMs: e.TLS_REPORT_PERIOD * 1000,
      guard: {
        complaintRate: e.GUARD_COMPLAINT_RATE,
        complaintWarnRate: e.GUARD_COMPLAINT_WARN_RATE,
        bounceRate: e.GUARD_BOUNCE_RATE,
        bounceWarnRate: e.GUARD_BOUNCE_WARN_RATE,
        windowsHours: e.GUARD_WINDOWS_HOURS.split(',').map(Number),
        minVolume: e.GUARD_MIN_VOLUME,
      },
    },
    unverifiedInboundDaily: { messages: e.UNVERIFIED_INBOUND_DAILY, bytes: e.UNVERIFIED_INBOUND_DAILY_BYTES },
    caps: {
      contacts: e.CONTACTS_PER_ACCOUNT,
      appEvents: e.APP_EVENTS_PER_ACCOUNT,
      oauthApps: e.OAUTH_APPS_PER_ACCOUNT,
    },
    login: { maxFailures: e.LOGIN_MAX_FAILURES, lockoutMs: e.LOGIN_LOCKOUT_MS },
    parsing: {
      threads: e.PARSE_THREADS ?? PARSE_DEFAULTS.threads,
      timeoutMs: e.PARSE_TIMEOUT_MS,
      memoryMb: e.PARSE_MEMORY_MB,
    },
    outboundRetrySchedule: e.OUTBOUND_RETRY_SCHEDULE
      ? parseList('OUTBOUND_RETRY_SCHEDULE', e.OUTBOUND_RETRY_SCHEDULE, (s) => z.coerce.number().int().min(0).parse(s))
      : DEFAULT_OUTBOUND_RETRY,
    outboundSmtpTimeoutMs: e.OUTBOUND_SMTP_TIMEOUT_MS,
    outboundStartsPerSecond: e.OUTBOUND_STARTS_PER_SECOND,
    inboundStartsPerSecond: e.INBOUND_STARTS_PER_SECOND,
    // The dev server `npm start` runs serves its UI on TEMPORAL_UI_PORT; with TEMPORAL_ADDRESS set, only an explicit URL.
    temporalUiUrl: (
      e.TEMPORAL_UI_URL ?? (e.TEMPORAL_ADDRESS ? undefined : `http://localhost:${e.TEMPORAL_UI_PORT}`)
    )?.replace(TRAILING_SLASHES, ''),
    attachmentFetchAllowPrivate:
      e.ATTACHMENT_FETCH_ALLOW_PRIVATE === '1' || e.ATTACHMENT_FETCH_ALLOW_PRIVATE === 'true',
    allowPrivateNetworks: e.ALLOW_PRIVATE_NETWORKS === '1' || e.ALLOW_PRIVATE_NETWORKS === 'true',
    domainVerify: {
      initialDelayMs: e.DOMAIN_VERIFY_INITIAL_MS,
      maxDelayMs: e.DOMAIN_VERIFY_MAX_MS,
      deadlineMs: e.DOMAIN_VERIFY_DEADLINE_MS,
    },
    plans,
    defaultPlan: e.DEFAULT_PLAN,
    logLevel: e.LOG_LEVEL,
    workflowBundle: e.SVC_WORKFLOW_BUNDLE,
    queryStatsFile: e.SVC_QUERY_STATS_FILE,
    broadcast: {
      batchSize: e.BROADCAST_BATCH_SIZE,
      concurrency: e.BROADCAST_CONCURRENCY,
      domainRate: e.BROADCAST_DOMAIN_RATE,
      batchesPerRun: e.BROADCAST_BATCHES_PER_RUN,
      footerAddress: e.BROADCAST_FOOTER_ADDRESS,
      importChunkRows: e.IMPORT_CHUNK_ROWS,
    },
    publicIp: e.PUBLIC_IP,
    operatorToken: e.OPERATOR_TOKEN,
    metricsPort: e.METRICS_PORT,
    temporalMetricsPort: e.TEMPORAL_METRICS_PORT,
    otlpEndpoint: e.OTEL_EXPORTER_OTLP_ENDPOINT,
    traceTrustIncoming: e.TRACE_TRUST_INCOMING === '1' || e.TRACE_TRUST_INCOMING === 'true',
    trustProxy: parseTrustProxy(e.TRUST_PROXY) as TrustProxy,
    mcpAllowedOrigins: (e.MCP_ALLOWED_ORIGINS ?? '')
      .split(',')
      .map((o) => o.trim())
      .filter(Boolean),
    secretKeySource: e.SECRET_KEY ? 'env' : 'file',
    bounceRules: wrap('BOUNCE_RULES_FILE', () => loadBounceRules(e.BOUNCE_RULES_FILE)),
    dkimRotation: { days: e.DKIM_ROTATION_DAYS, graceMs: e.DKIM_ROTATION_GRACE_MS },
    warmupDayMs: e.WARMUP_DAY_MS,
    shaping: wrap('SHAPING_FILE', () => loadShapingFile(resolve(e.SHAPING_FILE ?? DEFAULT_SHAPING_FILE))),
    egress: wrap('EGRESS_FILE', () => loadEgressFile(resolve(e.EGRESS_FILE ?? DEFAULT_EGRESS_FILE), env)),
    inboundFilter: {
      rspamdUrl: e.RSPAMD_URL,
      rspamdTimeoutMs: e.RSPAMD_TIMEOUT_MS,
      quarantineDays: e.QUARANTINE_DAYS,
    },
    mtaSts: {
      port: e.MTA_STS_PORT,
      maxBytes: e.MTA_STS_MAX_BYTES,
      timeoutMs: e.MTA_STS_TIMEOUT_MS,
      retryMs: e.MTA_STS_RETRY_MS,
      cacheMs: e.MTA_STS_CACHE_MS,
    },
  };
}

function stripEmpty(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== '')) as Record<
    string,
    string
  >;
}

function parseList<T>(name: string, raw: string | undefined, item: (s: string) => T): T[] {
  if (!raw) return [];
  return wrap(name, () =>
    raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map(item),
  );
}

function wrap<T>(name: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const msg = err instanceof z.ZodError ? err.issues.map((i) => i.message).join('; ') : (err as Error).message;
    throw new ConfigError(`Invalid configuration:\n  ${name}: ${msg}`);
  }
}

/** SECRET_KEY unset: generate one on first boot and keep it in DATA_DIR (mode 0600). */
function persistedSecret(dataDir: string): string {
  const file = join(dataDir, 'secret.key');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(dataDir, { recursive: true });
  const secret = randomBytes(32).toString('base64url');
  try {
    writeFileSync(file, secret + '\n', { mode: 0o600, flag: 'wx' });
    chmodSync(file, 0o600);
    return secret;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return readFileSync(file, 'utf8').trim();
    throw err;
  }
}
