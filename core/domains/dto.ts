import type { schema } from '../../db/index.js';

export type DomainRow = typeof schema.domains.$inferSelect;

/** One window of the complaint guard (core/feedback/rates.ts): counts and rates over the last `hours`. */
export type WindowFigures = {
  hours: number;
  delivered: number;
  bounced: number;
  complained: number;
  complaint_rate: number | null;
  bounce_rate: number | null;
};
/** A domain's DMARC reports of the last `days` (core/feedback/summaries.ts): messages, how many passed aligned, sources that failed. */
export type DmarcFigure = {
  days: number;
  messages: number;
  aligned: number;
  pass_rate: number | null;
  failing_sources: number;
};
/** The `feedback` object of a domain (GET /api/domains/:id): the complaint guard's figures and pause, and DMARC. */
export type DomainFeedback = {
  windows: WindowFigures[];
  warning: string | null;
  bulk_paused_at: number | null;
  bulk_paused_reason: string | null;
  /** The last 7 days of DMARC reports (core/feedback/summaries.ts), added by the domain enrichment. */
  dmarc?: DmarcFigure | null;
};
const flag = (n: number) => (n ? 1 : 0) as 0 | 1;

/** The stored row as SPEC.md shows it: internal columns (DKIM private key, flags) never leave here. */
export function domainDto(r: DomainRow) {
  return {
    id: r.id,
    user_id: r.userId,
    domain: r.domain,
    status: r.status,
    mx_verified: flag(r.mxVerified),
    spf_verified: flag(r.spfVerified),
    dkim_verified: flag(r.dkimVerified),
    dmarc_verified: flag(r.dmarcVerified),
    zero_retention: flag(r.zeroRetention),
    track_opens: flag(r.trackOpens),
    enc_public_key: r.encPublicKey,
    enc_key_alg: r.encKeyAlg,
    enc_fingerprint: r.encFingerprint,
    enc_format: r.encFormat,
    provider: r.provider,
    email_provider_id: r.emailProviderId,
    tls: r.tls,
    dns_tokens: r.dnsTokens,
    last_checked_at: r.lastCheckedAt,
    created_at: r.createdAt,
    ...(r.trackingWebhookUrl ? { tracking_webhook_url: r.trackingWebhookUrl } : {}),
    ...(r.webhookEvents ? { webhook_events: r.webhookEvents } : {}),
  };
}
export type DomainDto = ReturnType<typeof domainDto>;

export type WebhookStatus = {
  status: 'ok' | 'fail' | 'running' | 'timeout' | null;
  message: string | null;
  code: number | null;
  at: number | null;
  consecutiveFailures: number;
  firstFailedAt: number | null;
  unhealthy: boolean;
};
/** List/detail shape: the row plus the enrichment fields of SPEC.md. */
export type EnrichedDomain = DomainDto & {
  webhookUrl: string | null;
  webhookAckMode: 'lenient' | 'ack' | null;
  webhookStatus: WebhookStatus | null;
  dailyLimitReached: boolean;
  /** The complaint guard's figures and pause (core/feedback/guard.ts); the lead adds `dmarc` beside them. */
  feedback?: DomainFeedback;
};
