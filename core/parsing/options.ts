import { availableParallelism } from 'node:os';

/** The parse pool's settings (PARSE_THREADS, PARSE_TIMEOUT_MS, PARSE_MEMORY_MB in docs/configuration.md). */
export type ParsePoolOptions = {
  /** Most threads (at least one is kept warm, so the common path pays no thread start). */
  threads: number;
  /** Budget of one task, from hand-in to answer. */
  timeoutMs: number;
  /** V8 old-generation limit of each thread (resourceLimits.maxOldGenerationSizeMb). */
  memoryMb: number;
  /** The thread's entry file; default the bundled parse worker (worker-file.ts). Tests hand in their own. */
  workerFile?: string;
};

/**
 * Two threads at least (one hostile input never holds up the next message), four at most by default. The
 * budget and memory leave room for the largest legitimate mail (SMTP_MAX_MESSAGE_BYTES, 30 MB): a 20 MB
 * HTML-only body takes mailparser about 11 s and more than 512 MB (measured), a 27 MB attachment about 1 s.
 */
export const PARSE_DEFAULTS: ParsePoolOptions = {
  threads: Math.max(2, Math.min(4, availableParallelism())),
  timeoutMs: 20_000,
  memoryMb: 1024,
};
