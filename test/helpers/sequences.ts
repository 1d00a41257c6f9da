import { expect } from 'vitest';
import { FROM_DOMAIN, type SendingStack } from './sending.js';
import { eventually } from './stack.js';

/** Sequence helpers over a sending stack: active sequences, events, enrolments, and the mail the sink got. */
export function sequenceHelpers(env: SendingStack, token = env.key) {
  const api = (method: string, path: string, body?: unknown) => env.stack.api(method, path, { token, body });
  return {
    api,
    async sequence(body: Record<string, unknown>) {
      const res = await api('POST', '/api/sequences', {
        status: 'active',
        from: `Acme <hello@${FROM_DOMAIN}>`,
        ...body,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body;
    },
    async contact(email: string, name?: string) {
      const res = await api('POST', '/api/contacts', { email, name });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body;
    },
    async event(body: Record<string, unknown>) {
      const res = await api('POST', '/v1/events', body);
      expect(res.status, JSON.stringify(res.body)).toBe(202);
      return res.body;
    },
    enrolments: async (sequenceId: string) =>
      (await api('GET', `/api/sequences/${sequenceId}/enrolments?limit=500`)).body as any[],
    /** Waits until `n` enrolments of the sequence for `email` have ended; answers them. */
    ended: (sequenceId: string, email: string, n = 1, timeoutMs = 30_000) =>
      eventually(
        async () => {
          const all = (await api('GET', `/api/sequences/${sequenceId}/enrolments?limit=500`)).body as any[];
          const mine = all.filter((e) => e.email === email);
          return mine.length >= n && mine.every((e) => e.status !== 'running') ? mine : undefined;
        },
        timeoutMs,
        100,
      ),
    /** Subjects of the mail the sink received for `email`, in arrival order. */
    subjects: (email: string) =>
      env.sink.received
        .filter((r) => r.to.includes(email))
        .map((r) => /^Subject: (.*)$/m.exec(r.raw.toString('latin1'))?.[1]?.trim() ?? ''),
  };
}
