/** Custom search attributes the workflows set, so an operator can filter runs in the Temporal UI. */
export const SEARCH_ATTRIBUTES = {
  SvcAccountId: 'Keyword',
  SvcDomain: 'Keyword',
  SvcDomainStatus: 'Keyword',
  SvcMessageId: 'Keyword',
} as const;
export type SearchAttributeName = keyof typeof SEARCH_ATTRIBUTES;
