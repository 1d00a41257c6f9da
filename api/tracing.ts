import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { NextFunction, Request, Response } from 'express';

const tracer = trace.getTracer('svc-mail');

/**
 * A server span per API request (mounted only when tracing is on), continuing a caller's `traceparent`.
 * Everything the request starts (a workflow, say) is its child. Named by the matched route, not the path,
 * so ids stay out of span names.
 */
export function traceRequests() {
  return (req: Request, res: Response, next: NextFunction) => {
    const parent = propagation.extract(context.active(), req.headers);
    const span = tracer.startSpan(`${req.method}`, { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method, 'url.path': req.path } }, parent);
    res.once('finish', () => {
      const route = req.route?.path as string | undefined;
      span.updateName(`${req.method} ${route ? `${req.baseUrl}${route}` : req.baseUrl || 'unmatched'}`);
      if (route) span.setAttribute('http.route', `${req.baseUrl}${route}`);
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    context.with(trace.setSpan(parent, span), next);
  };
}
