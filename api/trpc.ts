import {
  initTRPC,
  TRPCError,
  type TRPCBuiltRouter,
  type TRPCMutationProcedure,
  type TRPCQueryProcedure,
} from '@trpc/server';
import { createExpressMiddleware } from '@trpc/server/adapters/express';
import type { Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { AppError } from '../core/errors.js';
import type { Core } from '../core/index.js';
import { logError } from '../core/log.js';
import { combinedInput, type Operation, type OpContext } from './contract.js';
import type { AnyOperation } from './ops/index.js';
import { describeIssues } from './errors.js';
import { contextFor } from './rest.js';
import { REPLAYED_HEADER, runOperation, splitKeyField } from './idempotency.js';

type TrpcContext = { req: Request; res: Response; core: Core };

const TRPC_CODES: Record<number, TRPCError['code']> = {
  400: 'BAD_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  405: 'METHOD_NOT_SUPPORTED',
  408: 'TIMEOUT',
  409: 'CONFLICT',
  410: 'NOT_FOUND',
  412: 'PRECONDITION_FAILED',
  413: 'PAYLOAD_TOO_LARGE',
  422: 'UNPROCESSABLE_CONTENT',
  429: 'TOO_MANY_REQUESTS',
  503: 'SERVICE_UNAVAILABLE',
};

/** Most calls one tRPC batch request may carry. */
export const TRPC_MAX_BATCH = 10;

const t = initTRPC.context<TrpcContext>().create({
  errorFormatter({ shape, error }) {
    const cause = error.cause;
    const appCode =
      cause instanceof AppError ? cause.code : cause instanceof z.ZodError ? 'validation_error' : undefined;
    const message = cause instanceof z.ZodError ? describeIssues(cause.issues) : shape.message;
    return { ...shape, message, data: { ...shape.data, appCode, stack: undefined } };
  },
});

function toTrpcError(err: unknown): unknown {
  if (err instanceof AppError)
    return new TRPCError({ code: TRPC_CODES[err.status] ?? 'INTERNAL_SERVER_ERROR', message: err.message, cause: err });
  return err;
}

// The router's type, built from the operation definitions: what a typed client (the dashboard) is checked against.
type IsAny<T> = 0 extends 1 & T ? true : false;
/** A part of the input that an operation does not define (params, query or body) contributes nothing. */
type PartInput<S> = S extends z.ZodType & { shape: infer Shape }
  ? IsAny<Shape> extends true
    ? unknown
    : z.input<S>
  : unknown;
type Simplify<T> = { [K in keyof T]: T[K] } & {};
type RequiredKeys<T> = { [K in keyof T]-?: object extends Pick<T, K> ? never : K }[keyof T];
/** The `idempotencyKey` field of an operation that takes one (`idempotencyKey: true` in its definition). */
type KeyInput<Op> = Op extends { idempotencyKey?: infer K }
  ? true extends K
    ? { idempotencyKey?: string }
    : unknown
  : unknown;
/** params, query and body merged as `combinedInput` merges them; optional altogether when no field is required. */
type InputOf<Op> = Op extends { params?: infer P; query?: infer Q; body?: infer B }
  ? Simplify<
      PartInput<NonNullable<P>> & PartInput<NonNullable<Q>> & PartInput<NonNullable<B>> & KeyInput<Op>
    > extends infer I
    ? RequiredKeys<I> extends never
      ? I | void
      : I
    : never
  : never;
type ProcedureOf<Op> = Op extends { method: infer M; output: infer O extends z.ZodType }
  ? M extends 'GET'
    ? TRPCQueryProcedure<{ input: InputOf<Op>; output: z.output<O>; meta: object }>
    : TRPCMutationProcedure<{ input: InputOf<Op>; output: z.output<O>; meta: object }>
  : never;
type Resource<N> = N extends `${infer R}.${string}` ? R : never;
type Verb<N, R extends string> = N extends `${R}.${infer V}` ? V : never;
type RecordOf<Ops extends { name: string }> = {
  [R in Resource<Ops['name']>]: { [V in Verb<Ops['name'], R>]: ProcedureOf<Extract<Ops, { name: `${R}.${V}` }>> };
};

/** The tRPC router of every operation, typed: `<resource>.<verb>` → the operation's zod input and output. */
export type AppRouter = TRPCBuiltRouter<(typeof t)['_config']['$types'], RecordOf<AnyOperation>>;

/** Builds the tRPC router at /trpc from the same operations as REST: GET ops are queries, the rest mutations. */
export function trpcMiddleware(ops: readonly Operation[], core: Core, opts: { strictOutput: boolean }): RequestHandler {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const tree: Record<string, any> = {};
  for (const op of ops) {
    // Authentication runs before input parsing, as on REST: no validation detail for anonymous callers.
    const procedure = t.procedure
      .use(async ({ ctx, next }) => {
        try {
          return await next({ ctx: { ...ctx, op: await contextFor(op, ctx.req, ctx.core) } });
        } catch (err) {
          throw toTrpcError(err);
        }
      })
      .input(combinedInput(op));
    const resolver = async ({ ctx, input }: { ctx: TrpcContext & { op: OpContext }; input: unknown }) => {
      try {
        // As on REST: the answer is parsed with the declared output (api/output.ts), so the type holds.
        const keyed = splitKeyField(input);
        const answer = await runOperation(op, keyed.input, ctx.op, { key: keyed.key, strictOutput: opts.strictOutput });
        if (answer.replayed) ctx.res.setHeader(REPLAYED_HEADER, 'true');
        return answer.body;
      } catch (err) {
        throw toTrpcError(err);
      }
    };
    const built = op.method === 'GET' ? procedure.query(resolver) : procedure.mutation(resolver);
    const segments = op.name.split('.');
    let node = tree;
    for (const seg of segments.slice(0, -1)) node = node[seg] ??= {};
    node[segments.at(-1)!] = built;
  }
  return createExpressMiddleware({
    router: t.router(tree),
    createContext: ({ req, res }) => ({ req, res, core }),
    // Express has parsed JSON bodies (sized by route, api/body-limits.ts); this bounds any body tRPC reads itself.
    maxBodySize: 100 * 1024,
    maxBatchSize: TRPC_MAX_BATCH,
    onError: ({ error, path }) => {
      if (error.code === 'INTERNAL_SERVER_ERROR') logError(`[trpc] ${path} failed`, error.cause ?? error);
    },
  });
}
