/**
 * Workflow interceptors of the bundle (temporal/bundle.ts, test/global-setup.ts): OpenTelemetry spans for
 * a run started with a trace context in its headers (OTEL_EXPORTER_OTLP_ENDPOINT set where it was
 * started), nothing at all otherwise. A run decides once, at its start, from headers that replay sees
 * again, so an untraced run's history is the same with or without this module.
 *
 * The OpenTelemetry side (Temporal's workflow interceptors and the trace SDK under them, some hundred
 * modules) is required only when a traced run starts. The worker reuses one V8 context, but each run
 * evaluates the bundle's modules afresh, so a top-level import would cost every run that evaluation.
 */
import type * as OtelWorkflow from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
import type { Headers } from '@temporalio/common';
import type {
  WorkflowInboundCallsInterceptor,
  WorkflowInterceptors,
  WorkflowInternalsInterceptor,
  WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';

/** The header the OpenTelemetry interceptors carry a span context in (`TRACE_HEADER` of the package). */
const TRACE_HEADER = '_tracer-data';
type Otel = {
  inbound: OtelWorkflow.OpenTelemetryInboundInterceptor;
  outbound: OtelWorkflow.OpenTelemetryOutboundInterceptor;
  internals: OtelWorkflow.OpenTelemetryInternalsInterceptor;
};
type AnyMethod = (input: unknown, next: (input: unknown) => unknown) => unknown;

/**
 * Temporal's OpenTelemetry workflow interceptors, evaluated on this call. Webpack bundles the module (the
 * `require` is static) but runs it only here, in the run's context, as a top-level import would have.
 */
function loadOtel(): typeof OtelWorkflow {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require('@temporalio/interceptors-opentelemetry/lib/workflow/index.js') as typeof OtelWorkflow;
}

/** An interceptor whose every method goes to `target()` when it is there, else straight to `next`. */
function delegating<T>(target: () => object | undefined, methods: string[]): T {
  return Object.fromEntries(
    methods.map((name) => [
      name,
      (input: unknown, next: (input: unknown) => unknown) => {
        const t = target() as Record<string, AnyMethod> | undefined;
        return t ? t[name]!.call(t, input, next) : next(input);
      },
    ]),
  ) as T;
}

export const interceptors = (): WorkflowInterceptors => {
  let otel: Otel | undefined;
  const traced = (headers: Headers | undefined) => Boolean(headers && TRACE_HEADER in headers);
  const inbound = delegating<WorkflowInboundCallsInterceptor>(
    () => otel?.inbound,
    ['handleSignal', 'handleUpdate', 'validateUpdate', 'handleQuery'],
  );
  inbound.execute = (input, next) => {
    if (traced(input.headers)) {
      const o = loadOtel();
      otel = {
        inbound: new o.OpenTelemetryInboundInterceptor(),
        outbound: new o.OpenTelemetryOutboundInterceptor(),
        internals: new o.OpenTelemetryInternalsInterceptor(),
      };
    }
    return otel ? otel.inbound.execute(input, next) : next(input);
  };
  const outbound = delegating<WorkflowOutboundCallsInterceptor>(
    () => otel?.outbound,
    [
      'scheduleActivity',
      'scheduleLocalActivity',
      'startNexusOperation',
      'startChildWorkflowExecution',
      'continueAsNew',
      'signalWorkflow',
      'getLogAttributes',
      'getMetricTags',
    ],
  );
  const internals = delegating<WorkflowInternalsInterceptor>(() => otel?.internals, ['dispose']);
  return { inbound: [inbound], outbound: [outbound], internals: [internals] };
};
