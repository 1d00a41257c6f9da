import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

/** Longest string value a span keeps: error messages can quote whole SMTP replies. */
const MAX_VALUE_CHARS = 2048;
const LOCAL = /[A-Za-z0-9._%+=-]/;
const DOMAIN = /[A-Za-z0-9.-]/;

/**
 * Replaces each email address with `[address]`, scanning once: from every `@` outwards over the
 * characters an address can hold, never back past the last replacement.
 */
export function redactAddresses(text: string): string {
  let out = '';
  let done = 0;
  let at = text.indexOf('@');
  while (at !== -1) {
    let start = at;
    while (start > done && LOCAL.test(text[start - 1]!)) start--;
    let end = at + 1;
    while (end < text.length && DOMAIN.test(text[end]!)) end++;
    if (start < at && text.slice(at + 1, end).includes('.')) {
      out += `${text.slice(done, start)}[address]`;
      done = end;
      at = text.indexOf('@', end);
    } else at = text.indexOf('@', at + 1);
  }
  return out + text.slice(done);
}

/**
 * What a trace may not carry, whoever set the attribute (our spans, Temporal's interceptors, an error
 * message): email addresses, credentials (`svc_…` keys and passwords, Bearer values) and link tokens in
 * paths (`/unsubscribe/<token>`) or queries (`?token=`, `code=`, `sig=`…).
 */
export function scrubText(value: string): string {
  const text = value.length > MAX_VALUE_CHARS ? `${value.slice(0, MAX_VALUE_CHARS)}…` : value;
  return redactAddresses(text)
    .replace(/\bBearer\s+\S+/gi, 'Bearer [redacted]')
    .replace(/\bsvc_[a-z]+_[\w-]+/g, '[secret]')
    .replace(/(\/(?:unsubscribe|t\/o|t\/c)\/)[^/?#\s:][^/?#\s]*/g, '$1[token]') // a route's `:token` stays
    .replace(/([?&;](?:token|code|secret|key|password|sig|signature)=)[^&#\s]*/gi, '$1[redacted]');
}

function scrubValue(value: AttributeValue | undefined): AttributeValue | undefined {
  if (typeof value === 'string') return scrubText(value);
  if (Array.isArray(value)) return value.map((v) => (typeof v === 'string' ? scrubText(v) : v)) as AttributeValue;
  return value;
}

function scrubAttributes(attributes: Attributes): Attributes {
  return Object.fromEntries(Object.entries(attributes).map(([k, v]) => [k, scrubValue(v)]));
}

/** The span as exported: the same span, its name, attributes, status message and event attributes scrubbed. */
function scrubSpan(span: ReadableSpan): ReadableSpan {
  const scrubbed: Record<string | symbol, unknown> = {
    name: scrubText(span.name),
    attributes: scrubAttributes(span.attributes),
    status: span.status.message ? { ...span.status, message: scrubText(span.status.message) } : span.status,
    events: span.events.map((e) => (e.attributes ? { ...e, attributes: scrubAttributes(e.attributes) } : e)),
  };
  return new Proxy(span, {
    get: (target, prop) => (prop in scrubbed ? scrubbed[prop] : Reflect.get(target, prop, target)),
  });
}

/** Wraps the OTLP exporter so every span (the API's, the activities', the workflows' sink) is scrubbed on its way out. */
export function scrubbingExporter(inner: SpanExporter): SpanExporter {
  return {
    export: (spans: ReadableSpan[], done: Parameters<SpanExporter['export']>[1]) =>
      inner.export(spans.map(scrubSpan), done),
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}
