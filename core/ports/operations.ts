/** What the operator's checks ask of Temporal itself (health and `npm run doctor`). */
export type OperationsWorkflows = {
  /** Answers when the Temporal server does. */
  ping(): Promise<void>;
  /** How long the namespace keeps closed runs, in ms (the doctor's retention check); null when unset. */
  retentionMs(): Promise<number | null>;
};
