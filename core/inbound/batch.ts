import { forEachLimit } from '../concurrency.js';
import type { DeliveryStore } from '../webhooks/deliveries.js';
import { ladderEnds } from '../../workflows/ladder-ends.js';
import type { InboundService } from './service.js';

/** A message whose first attempt failed with attempts left: its own inbound run takes the ladder on. */
export type HandOff = { messageId: string; userId: string; domainId?: string };

/**
 * The one step of an inbound batch run (README, Receiving; the Temporal budget): claims the batch's
 * messages, makes the first webhook attempt of each of their deliveries, `concurrency` messages at a
 * time, and drops the clear copy of a zero-retention or encrypted domain's message once its deliveries
 * are over. Answers the messages with an attempt left to make. Safe to run twice: the claim is the
 * batch's own, delivery ids are derived from the message and route, and a recorded attempt is answered
 * from its row, not posted again.
 */
export async function deliverInboundBatch(
  deps: { inbound: InboundService; deliveries: DeliveryStore },
  input: { batchId: string; messageIds: string[]; nextDelayMs: number | null },
  concurrency = 16,
): Promise<HandOff[]> {
  const prepared = await deps.inbound.prepareBatch(input.batchId, input.messageIds);
  const handOff: HandOff[] = [];
  await forEachLimit(prepared, concurrency, async (m) => {
    const results = await Promise.all(m.deliveryIds.map((id) => deps.deliveries.attempt(id, 1, input.nextDelayMs)));
    if (results.some((r) => !ladderEnds(r, input.nextDelayMs))) handOff.push({ messageId: m.messageId, userId: m.userId!, ...(m.domainId ? { domainId: m.domainId } : {}) });
    else if (m.keepsNoCopy) await deps.inbound.finish(m.messageId);
  });
  return handOff;
}
