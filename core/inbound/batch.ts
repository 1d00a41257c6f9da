import { forEachLimit } from '../concurrency.js';
import type { Progress } from '../mail/progress.js';
import type { DeliveryStore } from '../webhooks/deliveries.js';
import { ladderEnds } from '../mail/ladder-ends.js';
import type { InboundService } from './service.js';

/** A message whose first attempt failed with attempts left: its own inbound run takes the ladder on. */
export type HandOff = { messageId: string; userId: string; domainId?: string };

/**
 * The one step of an inbound batch run (README, Receiving; the Temporal budget): claims the batch's
 * messages, makes the first webhook attempt of each of their deliveries, `concurrency` POSTs at a
 * time, and drops the clear copy of a zero-retention or encrypted domain's message once its deliveries
 * are over. Answers the messages with an attempt left to make. Safe to run twice: the claim is the
 * batch's own, delivery ids are derived from the message and route, and a recorded attempt is answered
 * from its row, not posted again.
 */
export async function deliverInboundBatch(
  deps: { inbound: InboundService; deliveries: DeliveryStore },
  input: { batchId: string; messageIds: string[]; nextDelayMs: number | null },
  progress?: Progress,
  concurrency = 16,
): Promise<HandOff[]> {
  const { prepared, known } = await deps.inbound.claimBatch(input.batchId, input.messageIds);
  // Every delivery of the batch posted `concurrency` at a time: the rows the claim just made as they are, the
  // others (made by an earlier try of this step) read in one statement.
  const results = await deps.deliveries.attemptMany(
    prepared.flatMap((m) => m.deliveryIds),
    1,
    input.nextDelayMs,
    { concurrency, ...(progress ? { progress } : {}) },
    known,
  );
  const handOff: HandOff[] = [];
  const over: string[] = [];
  for (const m of prepared) {
    if (m.deliveryIds.some((id) => !ladderEnds(results.get(id)!, input.nextDelayMs)))
      handOff.push({ messageId: m.messageId, userId: m.userId!, ...(m.domainId ? { domainId: m.domainId } : {}) });
    else if (m.keepsNoCopy) over.push(m.messageId);
  }
  await forEachLimit(over, concurrency, (id) => deps.inbound.finish(id));
  return handOff;
}
