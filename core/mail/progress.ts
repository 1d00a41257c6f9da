/** How an activity follows the work: a heartbeat per message, and whether it was asked to stop. */
export type Progress = { beat(): void; stopped(): boolean };

/** The progress of work nobody follows (tests, the API's inline paths): no heartbeat, never stopped. */
export const idle: Progress = { beat() {}, stopped: () => false };
