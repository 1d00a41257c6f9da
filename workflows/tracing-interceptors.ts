/**
 * Workflow interceptors of the bundle (temporal/bundle.ts, test/global-setup.ts): OpenTelemetry spans for
 * a run started with a trace context in its headers (OTEL_EXPORTER_OTLP_ENDPOINT set where it was
 * started), nothing at all otherwise. A run decides once, at its start, from headers that replay sees
 * again, so an untraced run's history is the same with or without this module.
 */
import {
  OpenTelemetryInboundInterceptor,
  OpenTelemetryInternalsInterceptor,
  OpenTelemetryOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry/lib/workflow/index.js';
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
  inbound: OpenTelemetryInboundInterceptor;
  outbound: OpenTelemetryOutboundInterceptor;
  internals: OpenTelemetryInternalsInterceptor;
};
type AnyMethod = (input: unknown, next: (input: unknown) => unknown) => unknown;

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
    if (traced(input.headers))
      otel = {
        inbound: new OpenTelemetryInboundInterceptor(),
        outbound: new OpenTelemetryOutboundInterceptor(),
        internals: new OpenTelemetryInternalsInterceptor(),
      };
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
