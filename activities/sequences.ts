import type { SequenceDispatcher } from '../core/sequences/dispatch.js';
import type { EnrolmentStore } from '../core/sequences/enrolments.js';
import type { SendEnrolments } from '../core/sequences/send-enrolment.js';

/** Enrolment activities: database steps keyed by derived ids (a retry finds its own row or message), and the outbox sweep. */
export function sequenceActivities(deps: {
  enrolmentStore: EnrolmentStore;
  dispatcher: SequenceDispatcher;
  sendEnrolments: SendEnrolments;
}) {
  const store = deps.enrolmentStore;
  return {
    /** Inserts the enrolment record once per (sequence, contact, trigger); answers its definition version. */
    openEnrolment: store.open,
    /** Records the finished step and the one starting; answers an exit reason, or the events a wait finds already posted. */
    enterEnrolmentStep: store.enterStep,
    /** Re-checks the contact during a wait (after contactChangedSignal): an exit reason, or null. */
    checkEnrolmentContact: store.checkContact,
    /** Queues a step's email (message id derived from enrolment and step: sent once) and starts its delivery. */
    sendSequenceEmail: store.send,
    /** Writes the final status of an enrolment. */
    closeEnrolment: store.close,
    /**
     * Settles held send enrolments whose delivery ended (a crash between the outcome and its settle), then hands
     * outbox rows a crash or a failed call left behind to Temporal (safe to repeat); answers how many were handed.
     */
    async sweepSequenceOutbox(input: { olderThanMs: number; limit: number }) {
      await deps.sendEnrolments.sweepHeld(input.olderThanMs, input.limit);
      return deps.dispatcher.sweep(input.olderThanMs, input.limit);
    },
  };
}
