import { runLadder } from './webhook-ladder.js';

/**
 * A delivery not created by an inbound message (a replay or an engagement event whose first attempt
 * failed): the same signed POST and retry ladder, starting at `startAttempt`.
 */
export async function webhookDeliveryWorkflow(input: {
  deliveryId: string;
  retrySchedule: number[];
  startAttempt: number;
}) {
  return runLadder(input.deliveryId, input.retrySchedule, input.startAttempt);
}
