import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Custom search attributes set by the workflows, so an operator can filter runs in the Temporal UI. */
export const SvcAccountId = defineSearchAttributeKey('SvcAccountId', SearchAttributeType.KEYWORD);
export const SvcDomain = defineSearchAttributeKey('SvcDomain', SearchAttributeType.KEYWORD);
export const SvcDomainId = defineSearchAttributeKey('SvcDomainId', SearchAttributeType.KEYWORD);
export const SvcDomainStatus = defineSearchAttributeKey('SvcDomainStatus', SearchAttributeType.KEYWORD);
/**
 * Every message id a run handles (a batch holds up to 100): `SvcMessageId = 'msg_…'` finds a message's runs.
 * A KeywordList of 100 ids is about 3.1 KB, over Temporal's default 2 KB per value: the server needs
 * `frontend.searchAttributesSizeOfValueLimit` of at least 4096 (docs/deployment.md, Finding a message's runs).
 */
export const SvcMessageId = defineSearchAttributeKey('SvcMessageId', SearchAttributeType.KEYWORD_LIST);
export const SvcDeliveryId = defineSearchAttributeKey('SvcDeliveryId', SearchAttributeType.KEYWORD);

export const SvcBroadcastId = defineSearchAttributeKey('SvcBroadcastId', SearchAttributeType.KEYWORD);
/** Where a broadcast run is: `scheduled`, `sending`, `sent`, `failed`, `canceled`. */
export const SvcBroadcastStatus = defineSearchAttributeKey('SvcBroadcastStatus', SearchAttributeType.KEYWORD);

export const SvcSequenceId = defineSearchAttributeKey('SvcSequenceId', SearchAttributeType.KEYWORD);
export const SvcContactId = defineSearchAttributeKey('SvcContactId', SearchAttributeType.KEYWORD);
/** The step an enrolment is on (its index in the sequence version). An INT: SQL visibility has 10 keyword columns. */
export const SvcSequenceStep = defineSearchAttributeKey('SvcSequenceStep', SearchAttributeType.INT);

export const ALL_SEARCH_ATTRIBUTES = [
  SvcAccountId,
  SvcDomain,
  SvcDomainId,
  SvcDomainStatus,
  SvcMessageId,
  SvcDeliveryId,
  SvcBroadcastId,
  SvcBroadcastStatus,
  SvcSequenceId,
  SvcContactId,
  SvcSequenceStep,
];
