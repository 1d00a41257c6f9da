import { expect } from 'vitest';
import type { Received } from './smtp-sink.js';
import { FROM_DOMAIN, type SendingStack } from './sending.js';
import { eventually } from './stack.js';

/** Broadcast helpers over a sending stack: lists of sink addresses, drafts, and counting copies per recipient. */
export function broadcastHelpers(env: SendingStack) {
  const api = (method: string, path: string, body?: unknown) => env.stack.api(method, path, { token: env.key, body });
  return {
    api,
    /** A list of `n` new contacts `<prefix>-<i>@rcpt.test` (the sink's domain). */
    async listOf(prefix: string, n: number) {
      const list = (await api('POST', '/api/lists', { name: prefix })).body;
      const emails = Array.from({ length: n }, (_, i) => `${prefix}-${i}@rcpt.test`);
      for (let i = 0; i < n; i += 1000) {
        const added = await api('POST', `/api/lists/${list.id}/contacts`, { emails: emails.slice(i, i + 1000) });
        expect(added.body).toEqual({ added: Math.min(1000, n - i), created: Math.min(1000, n - i) });
      }
      return { list, emails };
    },
    async draft(body: Record<string, unknown>) {
      const res = await api('POST', '/api/broadcasts', {
        from: `Acme News <news@${FROM_DOMAIN}>`,
        subject: 'News for {{name}}',
        html: '<p>Hi {{email}}</p>',
        text: 'Hi {{email}}',
        ...body,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body;
    },
    /** Copies the sink holds per recipient whose address starts with `<prefix>-`. */
    copies(prefix: string): Map<string, number> {
      const m = new Map<string, number>();
      for (const r of env.sink.received)
        for (const to of r.to) if (to.startsWith(`${prefix}-`)) m.set(to, (m.get(to) ?? 0) + 1);
      return m;
    },
    /** Waits until the broadcast is closed and answers it. */
    finished: (id: string, timeoutMs = 60_000) =>
      eventually(
        async () => {
          const b = (await api('GET', `/api/broadcasts/${id}`)).body;
          return ['sent', 'failed', 'canceled'].includes(b.status) ? b : undefined;
        },
        timeoutMs,
        200,
      ),
  };
}

/** One header of a received message, unfolded. */
export function headerOf(r: Received, name: string): string | undefined {
  const head = r.raw
    .toString('latin1')
    .split('\r\n\r\n')[0]!
    .replace(/\r\n[ \t]+/g, ' ');
  const line = head.split('\r\n').find((l) => l.toLowerCase().startsWith(`${name.toLowerCase()}:`));
  return line?.slice(name.length + 1).trim();
}
