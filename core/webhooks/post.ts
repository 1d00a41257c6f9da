import { isAppError } from '../errors.js';
import { webhookAttempts, webhookDuration } from '../metrics.js';
import { inSpan } from '../tracing.js';
import { resolveAllowed } from '../net/address-guard.js';
import { requestPinned } from '../net/pinned-http.js';
import { parseControl, type ControlReply } from './control.js';
import { signatureHeaders } from './sign.js';
import type { NetPolicy } from './url.js';

export const WEBHOOK_TIMEOUT_MS = 15_000;
const CAPTURE_BYTES = 4096;
const cut = (s: string) =>
  Buffer.byteLength(s) > CAPTURE_BYTES ? Buffer.from(s).subarray(0, CAPTURE_BYTES).toString('utf8') : s;

/** Failure classes of an attempt (att_ `reason`); bulk replay reports them as http, timeout, network, redirect, no-ack. */
export type FailureReason = 'http_4xx' | 'http_5xx' | 'timeout' | 'network' | 'redirect' | 'no-ack';
export const failureClass = (r: string | null) => (r?.startsWith('http_') ? 'http' : r);

export type AttemptCapture = {
  ok: boolean;
  reason: FailureReason | null;
  status: number | null;
  requestHeaders: string;
  requestBody: string;
  responseHeaders: string | null;
  responseBody: string | null;
  durationMs: number;
  requestedAt: number;
  /** A 2xx answered with a control-mode reply (core/webhooks/control.ts); applied and recorded by the store. */
  control?: ControlReply | null;
};

/**
 * One signed POST of a webhook payload (re-signed on every attempt). 15 s timeout (WEBHOOK_TIMEOUT_MS may shorten it), redirects are not
 * followed (a 3xx is a failure); `ack` mode needs 2xx plus `{"status":"ok"}`, `x-svc-ack: ok` or a control reply. The host is
 * resolved once and checked (no internal addresses), and the request goes to that checked address.
 */
export async function postWebhook(opts: PostOptions): Promise<AttemptCapture> {
  const capture = await inSpan('webhook POST', { 'server.address': hostOf(opts.url) }, () => attempt(opts));
  const result = capture.reason ?? 'ok';
  webhookAttempts.inc({ result });
  webhookDuration.observe({ result }, capture.durationMs / 1000);
  return capture;
}

const hostOf = (url: string) => URL.parse(url)?.hostname ?? '';

type PostOptions = {
  url: string;
  body: string;
  secret: string;
  ackMode: 'lenient' | 'ack';
  net: NetPolicy;
  timeoutMs?: number;
};

async function attempt(opts: PostOptions): Promise<AttemptCapture> {
  const requestedAt = Date.now();
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'svc-mail-webhooks/1',
    ...signatureHeaders(opts.secret, opts.body, requestedAt),
  };
  const base = { requestHeaders: JSON.stringify(headers), requestBody: cut(opts.body), requestedAt };
  const started = performance.now();
  try {
    const url = new URL(opts.url);
    const address = await resolveAllowed(url.hostname, { ...opts.net, what: 'Webhook host' });
    const res = await requestPinned(url, address, {
      method: 'POST',
      headers,
      body: opts.body,
      timeoutMs: opts.timeoutMs ?? opts.net.webhookTimeoutMs ?? WEBHOOK_TIMEOUT_MS,
      maxResponseBytes: CAPTURE_BYTES * 2,
    });
    const responseHeaders = JSON.stringify(res.headers);
    const durationMs = Math.round(performance.now() - started);
    const ack = res.headers['x-svc-ack'];
    const control = res.status >= 200 && res.status < 300 ? parseControl(res.text) : null;
    const reason = control
      ? null
      : classify(res.status, Array.isArray(ack) ? (ack[0] ?? null) : (ack ?? null), res.text, opts.ackMode);
    return {
      control,
      ...base,
      ok: reason === null,
      reason,
      status: res.status,
      responseHeaders,
      responseBody: cut(res.text),
      durationMs,
    };
  } catch (err) {
    if (isAppError(err))
      return {
        ...base,
        ok: false,
        reason: 'network',
        status: null,
        responseHeaders: null,
        responseBody: err.message,
        durationMs: Math.round(performance.now() - started),
      };
    const timedOut = (err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError';
    return {
      ...base,
      ok: false,
      reason: timedOut ? 'timeout' : 'network',
      status: null,
      responseHeaders: null,
      responseBody: (err as Error).message,
      durationMs: Math.round(performance.now() - started),
    };
  }
}

function classify(
  status: number,
  ackHeader: string | null,
  body: string,
  mode: 'lenient' | 'ack',
): FailureReason | null {
  if (status >= 300 && status < 400) return 'redirect';
  if (status >= 500) return 'http_5xx';
  if (status < 200 || status >= 300) return 'http_4xx';
  if (mode === 'lenient' || ackHeader?.trim().toLowerCase() === 'ok') return null;
  try {
    return (JSON.parse(body) as { status?: unknown }).status === 'ok' ? null : 'no-ack';
  } catch {
    return 'no-ack';
  }
}
