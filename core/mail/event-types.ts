/** The types that can go to an engagement webhook (SPEC.md Events). */
export const ENGAGEMENT_TYPES = [
  'email.sent',
  'email.bounced',
  'email.complained',
  'email.opened',
  'email.clicked',
] as const;
