import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { isAppError } from '../core/errors.js';
import { cleanErrorMessage } from '../core/retry.js';

/**
 * The activity edge of the error family (STYLE.md 8): an AppError that retrying cannot fix becomes a
 * non-retryable ApplicationFailure; everything else a retryable one. Either way the message that reaches
 * the workflow history is clean: no SQL text, parameters, message bodies or addresses.
 */
export function toActivityFailure(err: unknown): Error {
  if (err instanceof CancelledFailure || err instanceof ApplicationFailure) return err;
  if (isAppError(err)) {
    return err.retryable
      ? ApplicationFailure.retryable(err.message, err.code)
      : ApplicationFailure.nonRetryable(err.message, err.code);
  }
  return ApplicationFailure.retryable(cleanErrorMessage(err), (err as Error)?.name ?? 'Error');
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyFn = (...args: any[]) => Promise<any>;

/** Wraps every activity once, so no activity can forget the mapping above. */
export function withFailureMapping<T extends Record<string, AnyFn>>(activities: T): T {
  return Object.fromEntries(
    Object.entries(activities).map(([name, fn]) => [
      name,
      async (...args: unknown[]) => {
        try {
          return await fn(...args);
        } catch (err) {
          throw toActivityFailure(err);
        }
      },
    ]),
  ) as T;
}
