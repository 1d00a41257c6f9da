import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Custom search attributes set by the workflows, so an operator can filter runs in the Temporal UI. */
export const SvcAccountId = defineSearchAttributeKey('SvcAccountId', SearchAttributeType.KEYWORD);
export const SvcDomain = defineSearchAttributeKey('SvcDomain', SearchAttributeType.KEYWORD);
export const SvcDomainId = defineSearchAttributeKey('SvcDomainId', SearchAttributeType.KEYWORD);
export const SvcDomainStatus = defineSearchAttributeKey('SvcDomainStatus', SearchAttributeType.KEYWORD);
export const SvcMessageId = defineSearchAttributeKey('SvcMessageId', SearchAttributeType.KEYWORD);
export const SvcDeliveryId = defineSearchAttributeKey('SvcDeliveryId', SearchAttributeType.KEYWORD);

export const SvcBroadcastId = defineSearchAttributeKey('SvcBroadcastId', SearchAttributeType.KEYWORD);
/** Where a broadcast run is: `scheduled`, `sending`, `sent`, `failed`, `canceled`. */
export const SvcBroadcastStatus = defineSearchAttributeKey('SvcBroadcastStatus', SearchAttributeType.KEYWORD);

export const ALL_SEARCH_ATTRIBUTES = [SvcAccountId, SvcDomain, SvcDomainId, SvcDomainStatus, SvcMessageId, SvcDeliveryId, SvcBroadcastId, SvcBroadcastStatus];
