/** Header marking a forward, so it is not filed into the forwarding address's Sent folder. */
export const FORWARD_HEADER = 'X-Svc-Forwarded-For';
/**
 * Row header (never sent) of a forward sent as the original message itself (its one attachment holds the
 * bytes to send, From possibly rewritten) with an SRS envelope sender (core/mailboxes/forward.ts).
 */
export const FORWARD_MODE_HEADER = 'X-Svc-Forward-Mode';
export const isResentForward = (headers: Record<string, string> | null | undefined) =>
  headers?.[FORWARD_MODE_HEADER] === 'resend';
