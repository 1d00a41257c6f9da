import { MutationCache, QueryCache, QueryClient } from '@tanstack/react-query';
import { createTRPCClient, httpBatchLink, TRPCClientError } from '@trpc/client';
import type { inferRouterInputs, inferRouterOutputs } from '@trpc/server';
import type { AppRouter } from '../../api/trpc.js';
import { readSession, saveSession } from './session.js';

/** The one way the dashboard calls the API: tRPC, typed by the server's AppRouter. */
export const api = createTRPCClient<AppRouter>({
  links: [
    httpBatchLink({
      url: '/trpc',
      maxItems: 10, // the server's TRPC_MAX_BATCH
      headers: () => {
        const token = readSession()?.token;
        return token ? { authorization: `Bearer ${token}` } : {};
      },
    }),
  ],
});

export type Inputs = inferRouterInputs<AppRouter>;
export type Outputs = inferRouterOutputs<AppRouter>;

/** The API's own message for an error (tRPC carries it as the error message). */
export function errorMessage(err: unknown): string {
  if (err instanceof TRPCClientError) return err.message;
  if (err instanceof Error) return err.message;
  return String(err);
}

/**
 * A 401 means the session ended (expired, or signed out elsewhere): sign in again.
 * A wrong current password (401 invalid_credentials) is only an answer to show.
 */
function endSessionOn401(err: unknown): void {
  const data =
    err instanceof TRPCClientError ? (err.data as { httpStatus?: number; appCode?: string } | undefined) : undefined;
  if (data?.httpStatus === 401 && data.appCode !== 'invalid_credentials' && readSession()) saveSession(undefined);
}

export const queryClient = new QueryClient({
  queryCache: new QueryCache({ onError: endSessionOn401 }),
  mutationCache: new MutationCache({ onError: endSessionOn401 }),
  defaultOptions: {
    queries: { retry: false, refetchOnWindowFocus: false, staleTime: 2_000 },
    mutations: { retry: false },
  },
});
