/** Header marking a forward, so it is not filed into the forwarding address's Sent folder. */
export const FORWARD_HEADER = 'X-Svc-Forwarded-For';
