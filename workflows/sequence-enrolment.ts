import {
  condition,
  defineQuery,
  defineSignal,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';
import type { SequenceStep } from '../core/sequences/definition.js';
import type { EnrolmentEvent, EnrolmentStart, EnrolmentState } from '../core/ports/sequences.js';
import { UNLIMITED_RETRY } from './activity-options.js';
import { SvcSequenceStep } from './search-attributes.js';

const local = proxyLocalActivities<Activities>({ startToCloseTimeout: '1 minute', retry: UNLIMITED_RETRY });
const { sendSequenceEmail } = proxyActivities<Activities>({ startToCloseTimeout: '2 minutes', retry: UNLIMITED_RETRY });

/** Application events of this contact (batched by the dispatcher); each is used at most once, by id. */
export const appEventSignal = defineSignal<[EnrolmentEvent[]]>('appEventSignal');
/** Stop the enrolment: it ends `canceled` at once (a wait is cut short; a send under way finishes). */
export const cancelEnrolmentSignal = defineSignal('cancelEnrolmentSignal');
/** The contact unsubscribed, was suppressed or deleted: a wait under way re-checks it and exits if it can no longer be mailed. */
export const contactChangedSignal = defineSignal('contactChangedSignal');
export const stateQuery = defineQuery<EnrolmentState>('stateQuery');

const MAX_BUFFERED = 200;
type StepRecord = {
  index: number;
  type: string;
  outcome: string;
  at: number;
  startedAt: number;
  detail?: Record<string, unknown>;
};

/**
 * One enrolment of a contact in a sequence version (id per (sequence, contact): one at a time). Runs the
 * steps: sends through an idempotent activity, waits on durable timers, and `wait_for_event` as a
 * condition over signalled events with a timeout, so arrival and timeout are decided once, in history.
 * Events posted after the trigger but before the wait began are found in the database when it begins.
 */
export async function enrolSequenceWorkflow(start: EnrolmentStart) {
  const received: EnrolmentEvent[] = [];
  const used = new Set<string>([start.trigger.key]);
  let canceled = false;
  let recheck = false;
  const state: EnrolmentState = {
    enrolmentId: null,
    step: null,
    stepType: null,
    waitingFor: null,
    waitUntil: null,
    stepsDone: 0,
    finished: false,
  };
  // {{event.*}}: the payload of the event that started the enrolment (it comes with the start), until a wait receives one.
  let triggerPayload: Record<string, unknown> = {};
  let lastEvent: Record<string, unknown> | undefined;
  setHandler(appEventSignal, (events) => {
    for (const ev of events) {
      if (ev.id === start.trigger.key) triggerPayload = ev.payload ?? {};
      else if (!used.has(ev.id) && !received.some((r) => r.id === ev.id)) received.push(ev);
    }
    if (received.length > MAX_BUFFERED) received.splice(0, received.length - MAX_BUFFERED);
  });
  setHandler(cancelEnrolmentSignal, () => void (canceled = true));
  setHandler(contactChangedSignal, () => void (recheck = true));
  setHandler(stateQuery, () => state);

  const info = workflowInfo();
  const opened = await local.openEnrolment({ ...start, workflowId: info.workflowId, runId: info.runId });
  if (opened.status !== 'opened') return { status: opened.status };
  state.enrolmentId = opened.enrolmentId;
  const steps = opened.definition.steps as SequenceStep[];
  let record: StepRecord | undefined;
  let i = 0;
  while (i < steps.length && !canceled) {
    const step = steps[i]!;
    const startedAt = Date.now();
    Object.assign(state, {
      step: i,
      stepType: step.type,
      waitingFor: step.type === 'wait_for_event' ? step.event : null,
      waitUntil: null,
    });
    upsertSearchAttributes([{ key: SvcSequenceStep, value: i }]);
    const entered = await local.enterEnrolmentStep({
      enrolmentId: opened.enrolmentId,
      index: i,
      type: step.type,
      record,
      waitingFor: state.waitingFor,
      findEvents: step.type === 'wait_for_event' ? { name: step.event, since: start.trigger.at } : undefined,
    });
    record = undefined;
    if (entered.exit) return finish('exited', entered.exit);
    if (step.type === 'exit') break;
    if (step.type === 'send') {
      const r = await sendSequenceEmail({
        enrolmentId: opened.enrolmentId,
        index: i,
        start,
        from: opened.definition.from,
        replyTo: opened.definition.replyTo,
        step,
        event: lastEvent ?? triggerPayload,
      });
      if (r.exit) return finish('exited', r.exit);
      record = {
        index: i,
        type: step.type,
        outcome: 'sent',
        at: Date.now(),
        startedAt,
        detail: { messageId: r.messageId },
      };
      i += 1;
    } else if (step.type === 'wait') {
      state.waitUntil = Date.now() + step.duration;
      const exit = await park(() => false, state.waitUntil);
      if (exit) return finish('exited', exit);
      record = { index: i, type: step.type, outcome: canceled ? 'canceled' : 'waited', at: Date.now(), startedAt };
      i += 1;
    } else {
      for (const ev of entered.events) if (!used.has(ev.id) && !received.some((r) => r.id === ev.id)) received.push(ev);
      const matches = (ev: EnrolmentEvent) =>
        !used.has(ev.id) &&
        ev.name === step.event &&
        Object.entries(step.match ?? {}).every(([k, v]) => (ev.payload ?? {})[k] === v);
      state.waitUntil = Date.now() + step.timeout;
      // The one decision: whichever the workflow sees first, a matching event or the timer.
      const exit = await park(() => received.some(matches), state.waitUntil);
      if (exit) return finish('exited', exit);
      if (canceled) break;
      const ev = received.find(matches);
      if (ev) {
        used.add(ev.id);
        lastEvent = ev.payload ?? {};
      }
      record = {
        index: i,
        type: step.type,
        outcome: ev ? 'arrived' : 'timed_out',
        at: Date.now(),
        startedAt,
        ...(ev ? { detail: { eventId: ev.id } } : {}),
      };
      i = branch(steps, i, ev ? step.onArrived : step.onTimeout);
    }
    state.stepsDone += 1;
  }
  return finish(canceled ? 'canceled' : 'completed', canceled ? 'canceled' : null);

  /** Waits until `ready()` or the time `until`; on contactChangedSignal re-checks the contact, answering an exit reason. */
  async function park(ready: () => boolean, until: number): Promise<string | undefined> {
    for (;;) {
      const left = until - Date.now();
      const woke = left > 0 && (await condition(() => canceled || recheck || ready(), left));
      if (!woke || canceled || ready()) return undefined;
      recheck = false;
      const exit = await local.checkEnrolmentContact({ enrolmentId: opened.enrolmentId });
      if (exit) return exit;
    }
  }

  async function finish(status: 'completed' | 'exited' | 'canceled', reason: string | null) {
    Object.assign(state, { finished: true, waitingFor: null, waitUntil: null });
    await local.closeEnrolment({ enrolmentId: opened.enrolmentId!, status, reason, record });
    return { status, reason };
  }
}

/** Index of the step a branch goes to after step `i` (`steps.length` ends the enrolment); targets are later steps. */
function branch(steps: SequenceStep[], i: number, target: string | undefined): number {
  if (target === undefined || target === 'next') return i + 1;
  if (target === 'exit') return steps.length;
  const at = steps.findIndex((s) => s.id === target);
  return at > i ? at : steps.length;
}
