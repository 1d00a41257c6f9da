/** What the fan-out workflow answers to `progressQuery`. */
export type BroadcastProgress = {
  phase: string;
  sent: number;
  failed: number;
  skipped: number;
  remaining: number | null;
  currentBatch: number;
  audience: number | null;
};

/** The fan-out workflow of a broadcast. */
export type BroadcastWorkflows = {
  /** Starts the fan-out workflow of a broadcast (starting twice is success); it waits until `scheduledAt` when given. */
  startBroadcast(b: { broadcastId: string; userId: string; scheduledAt?: number }): Promise<void>;
  /** Sends `cancelSignal` to a broadcast's run; false when no run is open. */
  cancelBroadcast(broadcastId: string): Promise<boolean>;
  /** The running broadcast's `progressQuery` answer (short timeout); undefined when it cannot answer. */
  broadcastProgress(broadcastId: string): Promise<BroadcastProgress | undefined>;
};
