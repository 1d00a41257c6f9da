import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { NextFunction, Request, Response } from 'express';

const tracer = trace.getTracer('svc-mail');

/**
 * A server span per API request (mounted only when tracing is on). Everything the request starts (a
 * workflow, say) is its child. A caller's `traceparent` is continued only with `trustIncoming`
 * (TRACE_TRUST_INCOMING): otherwise anyone could graft spans onto, or sample, traces of their choosing.
 * Named by the matched route, and `url.path` is that route too: paths carry unsubscribe and link tokens,
 * ids and addresses, and the query (`?token=`) is never recorded.
 */
export function traceRequests(opts: { trustIncoming: boolean }) {
  return (req: Request, res: Response, next: NextFunction) => {
    const parent = opts.trustIncoming ? propagation.extract(context.active(), req.headers) : ROOT_CONTEXT;
    const span = tracer.startSpan(
      `${req.method}`,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method } },
      parent,
    );
    res.once('finish', () => {
      const route = req.route?.path as string | undefined;
      const name = route ? `${req.baseUrl}${route}` : req.baseUrl || 'unmatched';
      span.updateName(`${req.method} ${name}`);
      if (route) span.setAttribute('http.route', `${req.baseUrl}${route}`);
      span.setAttribute('url.path', name);
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    context.with(trace.setSpan(parent, span), next);
  };
}
