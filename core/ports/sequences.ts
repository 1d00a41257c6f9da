/** Types shared by the enrolment workflow, its activities and core (type-only: safe in workflow code). */
export type Scalar = string | number | boolean | null;

/** An application event as handed to an enrolment (by signal, or found in the database when a wait begins). */
export type EnrolmentEvent = { id: string; name: string; payload: Record<string, unknown> | null; createdAt: number };

/** What enrolled the contact: `key` (the event or message id) makes the enrolment id, so a trigger enrolls once. */
export type EnrolmentTrigger = { kind: 'event' | 'send'; key: string; at: number; data: Record<string, Scalar> };

export type EnrolmentStart = {
  sequenceId: string;
  version: number;
  userId: string;
  contactId: string;
  email: string;
  trigger: EnrolmentTrigger;
  input: Record<string, Scalar>;
};

/** The `stateQuery` answer: where the enrolment is and what it waits for. */
export type EnrolmentState = {
  enrolmentId: string | null;
  step: number | null;
  stepType: string | null;
  waitingFor: string | null;
  waitUntil: number | null;
  stepsDone: number;
  finished: boolean;
};

/** Starts and signals sequence enrolments (the dispatcher's side). */
export type EnrolmentSignalPort = {
  enrolContact(start: EnrolmentStart, events: EnrolmentEvent[]): Promise<void>;
  signalEnrolment(workflowId: string, events: EnrolmentEvent[]): Promise<void>;
  enrolmentWorkflowId(sequenceId: string, contactId: string): string;
};

/** Reads and stops sequence enrolments (the sequence service's side). */
export type EnrolmentPort = {
  enrolmentState(workflowId: string): Promise<EnrolmentState | undefined>;
  cancelEnrolment(workflowId: string): Promise<boolean>;
  /** Sends contactChangedSignal (an enrolment that has ended is fine). */
  nudgeEnrolment(workflowId: string): Promise<void>;
};

/** The workflows of sequences: the enrolments, from both sides. */
export type SequenceWorkflows = EnrolmentSignalPort & EnrolmentPort;
