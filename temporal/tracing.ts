import type { WorkerOptions } from '@temporalio/worker';
import type { WorkflowClientInterceptor } from '@temporalio/client';
import { scrubbingExporter } from './span-scrub.js';

/**
 * OpenTelemetry tracing, on only when OTEL_EXPORTER_OTLP_ENDPOINT is set: the SDK, the OTLP/HTTP (JSON)
 * exporter and Temporal's interceptors are imported here and nowhere else, so a service without the
 * variable loads none of them. Spans the service opens itself (HTTP request, SMTP transaction, webhook
 * POST) use @opentelemetry/api, which without a registered provider does nothing.
 */
export type Tracing = {
  /** For the Temporal client: starts carry the active span's context in their headers. */
  clientInterceptors: WorkflowClientInterceptor[];
  /** For Worker.create: activity spans, and the sink workflow spans are exported through. */
  worker: Pick<WorkerOptions, 'sinks'> & {
    activityInterceptors: NonNullable<NonNullable<WorkerOptions['interceptors']>['activity']>;
  };
  shutdown(): Promise<void>;
};

let active: Tracing | undefined;

/** Registers the global tracer provider once per process (a second call answers the first). */
export async function startTracing(endpoint: string | undefined, role: string): Promise<Tracing | undefined> {
  if (!endpoint) return undefined;
  if (active) return active;
  const [{ NodeTracerProvider }, { BatchSpanProcessor }, { OTLPTraceExporter }, { Resource }, otel] = await Promise.all(
    [
      import('@opentelemetry/sdk-trace-node'),
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
      import('@temporalio/interceptors-opentelemetry'),
    ],
  );
  const resource = new Resource({ 'service.name': 'svc-mail', 'service.role': role });
  // Scrubbed on the way out: no address, credential or link token leaves in a span (temporal/span-scrub.ts).
  const exporter = scrubbingExporter(
    new OTLPTraceExporter({ url: `${endpoint.replace(/(?<!\/)\/+$/, '')}/v1/traces` }),
  );
  const processor = new BatchSpanProcessor(exporter, { scheduledDelayMillis: 1000 });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  provider.register();
  active = {
    clientInterceptors: [new otel.OpenTelemetryWorkflowClientInterceptor()],
    worker: {
      activityInterceptors: [(ctx) => ({ inbound: new otel.OpenTelemetryActivityInboundInterceptor(ctx) })],
      sinks: { exporter: otel.makeWorkflowExporter(processor, resource) } as WorkerOptions['sinks'],
    },
    shutdown: () => provider.forceFlush(),
  };
  return active;
}
