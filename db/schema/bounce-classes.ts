/** Every class a failed or deferred recipient outcome can get (docs/deliverability.md, "Bounce classes"). */
export const BOUNCE_CLASSES = [
  'invalid_recipient',
  'bad_domain',
  'mailbox_full',
  'message_too_large',
  'spam_block',
  'policy_block',
  'auth_failure',
  'reputation',
  'transient',
  /** No verified TLS session could be had where MTA-STS or the sending domain requires one. */
  'tls_required',
  'protocol',
  'other',
] as const;
export type BounceClass = (typeof BOUNCE_CLASSES)[number];
