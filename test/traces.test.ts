import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { OpenTelemetryWorkflowClientInterceptor } from '@temporalio/interceptors-opentelemetry';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOtlpReceiver, type ReceivedSpan } from './helpers/otlp-receiver.js';
import { startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/** OTEL_EXPORTER_OTLP_ENDPOINT set: one trace runs from the API request through the workflow and activity to the SMTP transaction. */
describe('traces', () => {
  let s: SendingStack;
  let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;
  beforeAll(async () => {
    otlp = await startOtlpReceiver();
    s = await startSendingStack({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint } });
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
    await otlp?.close();
  });

  it('a send is one trace: API request, workflow run, activity, SMTP transaction, each the child of the one before', async () => {
    const sent = await s.send({ to: 'trace@rcpt.test' });
    expect(sent.status).toBe(200);
    await s.sink.waitFor((r) => r.to.includes('trace@rcpt.test'));
    const smtp = await eventually(
      async () =>
        otlp.spans.find((sp) => sp.name === 'smtp transaction' && sp.attributes['svc.message_id'] === sent.body.id),
      20_000,
    );
    const trace = otlp.spans.filter((sp) => sp.traceId === smtp.traceId);
    const byId = new Map(trace.map((sp) => [sp.spanId, sp]));
    const ancestry = (sp: ReceivedSpan): string[] => {
      const parent = sp.parentSpanId ? byId.get(sp.parentSpanId) : undefined;
      return parent ? [...ancestry(parent), sp.name] : [sp.name];
    };
    // The spans in between arrive in batches: wait until the chain reaches the API request.
    const chain = await eventually(async () => {
      const t = otlp.spans.filter((sp) => sp.traceId === smtp.traceId);
      for (const sp of t) byId.set(sp.spanId, sp);
      const names = ancestry(smtp);
      return names[0] === 'POST /v1/send' ? names : undefined;
    }, 20_000);
    expect(chain[0]).toBe('POST /v1/send');
    const at = (re: RegExp) => chain.findIndex((n) => re.test(n));
    expect(at(/^StartWorkflow:deliverOutbound/)).toBeGreaterThan(0);
    expect(at(/^RunWorkflow:deliverOutbound/)).toBeGreaterThan(at(/^StartWorkflow:deliverOutbound/));
    expect(at(/^RunActivity:sendQueuedMessages$/)).toBeGreaterThan(at(/^RunWorkflow:deliverOutbound/));
    expect(chain.at(-1)).toBe('smtp transaction');
    expect(smtp).toMatchObject({ service: 'svc-mail', attributes: { 'svc.site': 'rcpt.test', 'svc.recipients': 1 } });
  }, 60_000);

  it("a caller's traceparent starts no trace of its choosing, and no span carries a link token or an address", async () => {
    const token = s.stack.service.core.unsubscribe.token(`ctc_${randomBytes(18).toString('base64url')}`);
    const foreignTrace = '0af7651916cd43dd8448eb211c80319c';
    const headers = { traceparent: `00-${foreignTrace}-b7ad6b7169203331-01` };
    expect((await fetch(`${s.stack.baseUrl}/unsubscribe/${token}`, { headers })).status).toBe(200);
    const address = 'trace.leak@example.org';
    await s.stack.api('DELETE', `/api/contacts/suppressions/${address}`, { token: s.session, headers });
    await s.stack.api('GET', `/auth/verify?token=${token}`, { headers });
    const spans = await eventually(async () => {
      const found = [
        otlp.spans.find((sp) => sp.name === 'GET /unsubscribe/:token'),
        otlp.spans.find((sp) => sp.name.startsWith('DELETE ') && sp.name.includes('suppressions')),
        otlp.spans.find((sp) => sp.name === 'GET /auth/verify'),
      ];
      return found.every(Boolean) ? (found as ReceivedSpan[]) : undefined;
    }, 20_000);
    for (const sp of spans) {
      expect(sp.traceId).not.toBe(foreignTrace);
      expect(sp.parentSpanId).toBeUndefined();
    }
    expect(spans[0]!.attributes['url.path']).toBe('/unsubscribe/:token');
    const all = JSON.stringify(otlp.spans);
    expect(all).not.toContain(token);
    expect(all).not.toContain('trace.leak');
    expect(all).not.toContain(foreignTrace);
  }, 60_000);
  it('a run started without a trace context opens no span; one started with a context still does', async () => {
    const connection = await Connection.connect({ address: s.stack.service.temporalAddress });
    try {
      const taskQueue = s.stack.config.temporal.taskQueue;
      const run = (client: Client, id: string) =>
        client.workflow.execute('referenceWorkflow', {
          taskQueue,
          workflowId: `trace-${id}-${randomBytes(6).toString('hex')}`,
        });
      // Untraced first, to its end: its spans, were there any, would leave the worker's exporter before the traced run's.
      await run(new Client({ connection }), 'untraced');
      const traced = new Client({
        connection,
        interceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] },
      });
      await run(traced, 'traced');
      const start = await eventually(
        async () => otlp.spans.find((sp) => sp.name === 'StartWorkflow:referenceWorkflow'),
        20_000,
      );
      const runSpan = await eventually(
        async () =>
          otlp.spans.find((sp) => sp.name === 'RunWorkflow:referenceWorkflow' && sp.traceId === start.traceId),
        20_000,
      );
      expect(runSpan.parentSpanId).toBe(start.spanId);
      expect(otlp.spans.filter((sp) => sp.name === 'RunWorkflow:referenceWorkflow')).toEqual([runSpan]);
    } finally {
      await connection.close();
    }
  }, 60_000);
});
