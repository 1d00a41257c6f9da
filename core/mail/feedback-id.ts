import { createHash } from 'node:crypto';

/** The mail streams Gmail's Postmaster Tools can tell apart by the third field of Feedback-ID. */
export type MailStream = 'transactional' | 'broadcast' | 'sequence' | 'system';

/** What the header is built from: the columns of an outbound message row. */
type FeedbackSource = {
  kind: 'user' | 'system';
  domainId: string | null;
  userId: string | null;
  metadata: Record<string, unknown> | null;
};

/**
 * The sender id (Google asks for 5 to 15 characters, the same for the whole sender): derived from
 * SERVICE_DOMAIN, so one deployment keeps one id across restarts and replicas.
 */
export const senderIdOf = (serviceDomain: string) =>
  `svc${createHash('sha256').update(serviceDomain.toLowerCase()).digest('hex').slice(0, 10)}`;

/** Broadcast copies and sequence steps are marked in metadata by the service when it queues them. */
export function streamOf(m: FeedbackSource): MailStream {
  if (m.kind === 'system') return 'system';
  if (typeof m.metadata?.broadcast_id === 'string') return 'broadcast';
  if (typeof m.metadata?.sequence_id === 'string') return 'sequence';
  return 'transactional';
}

/** ':' separates the fields; ids never hold one, but a field must not be able to add a field. */
const field = (s: string) => s.replace(/[^\w.-]/g, '-').slice(0, 40);

/**
 * Gmail's `Feedback-ID: <domain>:<account>:<stream>:<sender id>`: Postmaster Tools counts spam
 * complaints per value of each field, so a complaint spike names the domain, account and stream.
 * System mail has no domain row: its first field is `service`.
 */
export function feedbackIdOf(m: FeedbackSource, serviceDomain: string): string {
  return [m.domainId ?? 'service', m.userId ?? 'service', streamOf(m), senderIdOf(serviceDomain)].map(field).join(':');
}
