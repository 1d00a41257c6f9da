import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { broadcastHelpers } from './helpers/broadcasts.js';
import { SERVICE, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * Egress pools end to end (docs/egress.md): the running service with an egress.toml whose transactional
 * pool is one source bound to 127.0.0.2 and whose bulk pool is two sources on 127.0.0.3 (weight 100) and 127.0.0.4 (1),
 * each announcing its own EHLO name; the recipient MX records the peer address and the EHLO name.
 */
const dir = mkdtempSync(join(tmpdir(), 'egress-stack-'));
const file = join(dir, 'egress.toml');
writeFileSync(
  file,
  `
[source.tx]
bind_address = "127.0.0.2"
ehlo_name = "tx.${SERVICE}"

[source.bulk-a]
bind_address = "127.0.0.3"
ehlo_name = "bulk-a.${SERVICE}"

[source.bulk-b]
bind_address = "127.0.0.4"
ehlo_name = "bulk-b.${SERVICE}"

[pool.transactional]
sources = ["tx"]

[pool.bulk]
sources = [{ name = "bulk-a", weight = 100 }, { name = "bulk-b", weight = 1 }]

[streams]
transactional = "transactional"
bulk = "bulk"
`,
);

let env: SendingStack;
/** While set, the MX answers `421 4.7.28` to every recipient offered from 127.0.0.3 (the first bulk source). */
let refuseBulkA = false;
let refusedFromA = 0;

beforeAll(async () => {
  env = await startSendingStack({
    env: { EGRESS_FILE: file },
    onRcpt: (_address, peer) => {
      if (!refuseBulkA || !peer.endsWith('127.0.0.3')) return undefined;
      refusedFromA += 1;
      return {
        code: 421,
        message: '4.7.28 Our system has detected an unusual rate of unsolicited mail. Rate limited.',
      };
    },
  });
}, 120_000);
afterAll(async () => {
  await env?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const peerOf = (p: string) => p.replace(/^::ffff:/, '');

describe('streams leave from their pools', () => {
  it('a transactional send leaves from the transactional source, its EHLO name, and the trail names the source', async () => {
    const res = await env.send({ to: 'tx-one@rcpt.test', subject: 'transactional' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const got = await env.sink.waitFor((r) => r.to.includes('tx-one@rcpt.test'));
    expect(peerOf(got.peer)).toBe('127.0.0.2');
    expect(got.ehlo).toBe(`tx.${SERVICE}`);
    const detail = await eventually(async () => {
      const d = (await env.stack.api('GET', `/api/messages/${res.body.id}`, { token: env.key })).body;
      return d.message.status === 'sent' ? d : undefined;
    });
    expect(detail.trail.find((t: { status: string }) => t.status === 'sent')).toMatchObject({ source: 'tx' });
    // The worker counts it by source and pool (written every few seconds): the account's view shows it.
    await eventually(async () => {
      const m = (await env.stack.api('GET', '/api/metrics/egress', { token: env.key })).body;
      const row = m.rows?.find(
        (r: { source: string; pool: string }) => r.source === 'tx' && r.pool === 'transactional',
      );
      return row?.sent >= 1 ? row : undefined;
    }, 30_000);
  });

  it("a broadcast's copies leave from the bulk pool's sources only", async () => {
    const b = broadcastHelpers(env);
    const { list, emails } = await b.listOf('bulk', 12);
    const draft = await b.draft({ audience: { type: 'list', id: list.id } });
    expect((await b.api('POST', `/api/broadcasts/${draft.id}/send`, {})).status).toBe(202);
    await b.finished(draft.id);
    const copies = env.sink.received.filter((r) => r.to.some((t) => t.startsWith('bulk-')));
    expect(new Set(copies.flatMap((r) => r.to))).toEqual(new Set(emails));
    for (const r of copies) {
      expect(['127.0.0.3', '127.0.0.4']).toContain(peerOf(r.peer));
      expect(r.ehlo).toBe(peerOf(r.peer) === '127.0.0.3' ? `bulk-a.${SERVICE}` : `bulk-b.${SERVICE}`);
    }
  });
});

describe('a source suspended for a site fails over', () => {
  it('421 4.7.28 to one source only: the site’s mail moves to the other source, each recipient exactly once', async () => {
    refuseBulkA = true;
    try {
      const b = broadcastHelpers(env);
      const { list, emails } = await b.listOf('fo', 10);
      const draft = await b.draft({ audience: { type: 'list', id: list.id } });
      expect((await b.api('POST', `/api/broadcasts/${draft.id}/send`, {})).status).toBe(202);
      await b.finished(draft.id);
      await eventually(async () => (emails.every((e) => b.copies('fo').get(e) === 1) ? true : undefined), 60_000);
      // bulk-a weighs 100 to bulk-b's 1: mail was offered to it first, and refused.
      expect(refusedFromA).toBeGreaterThan(0);
      expect([...b.copies('fo').values()].every((n) => n === 1)).toBe(true);
      expect(b.copies('fo').size).toBe(10);
      const fo = env.sink.received.filter((r) => r.to.some((t) => t.startsWith('fo-')));
      for (const r of fo) expect(peerOf(r.peer)).toBe('127.0.0.4');
    } finally {
      refuseBulkA = false;
    }
  });
});
