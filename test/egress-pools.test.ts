import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, schema, type Database } from '../db/index.js';
import { parseEgress } from '../core/egress/config.js';
import { sourcesInOrder } from '../core/transport/sources.js';
import { parseShaping } from '../core/shaping/config.js';
import { createShapingStore } from '../core/shaping/store.js';
import { isThrottled, mxTransport, type OutboundTransport, type SendContext } from '../core/transport/transport.js';
import type { RecipientResult } from '../core/mail/recipients.js';
import { resolverFor, startTestDns } from './helpers/dns.js';
import { createTestDatabase } from './helpers/pg.js';
import { freePort } from './helpers/ports.js';
import { selfSignedFor, startRecordingMx, type RecordingMx } from './helpers/recording-mx.js';

/**
 * Egress sources and pools on the shaped MX path (docs/egress.md), against loopback MXs that record the
 * peer address and EHLO name: each stream leaves from its pool's source (bound to 127.0.0.2 or
 * 127.0.0.3, announcing its own name); a source an MX suspends (421 4.7.28 to that address only) hands
 * the site's mail to the other source of its pool at once, each recipient exactly once; a pool all of
 * whose sources are suspended is throttled and sends nothing.
 */
const EGRESS = `
[source.a]
bind_address = "127.0.0.2"
ehlo_name = "a.egress.test"

[source.b]
bind_address = "127.0.0.3"
ehlo_name = "b.egress.test"

[pool.transactional]
sources = ["a"]

[pool.bulk]
sources = ["b"]

[pool.both]
sources = [{ name = "a", weight = 1 }, { name = "b", weight = 1 }]

# A source whose address is not on this host (TEST-NET-1), first in its pool.
[source.gone]
bind_address = "192.0.2.55"
ehlo_name = "gone.egress.test"

[pool.broken]
sources = [{ name = "gone", weight = 1000 }, { name = "b", weight = 1 }]

[streams]
transactional = "transactional"
bulk = "bulk"
`;
/** A smarthost source, on the test's MX port (known once the servers start). */
const RELAY = (port: number) => `
[source.relay]
relay = { host = "relay.egress.test", port = ${port}, security = "starttls", username = "apikey", password_env = "RELAY_PASSWORD" }

[pool.relayed]
sources = ["relay"]
`;
const SHAPING = `
["default"]
connection_limit = 2

[["default".automation]]
regex = '^421[ -]4\\.7\\.28'
action = "Suspend"
duration = "5m"
`;

let pg: Awaited<ReturnType<typeof createTestDatabase>>;
let database: Database;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let open: RecordingMx;
let picky: RecordingMx;
let relay: RecordingMx;
let transport: OutboundTransport;
let egress = parseEgress(EGRESS);
const certDir = mkdtempSync(join(tmpdir(), 'svc-egress-relay-'));

beforeAll(async () => {
  pg = await createTestDatabase();
  database = await openDatabase({ databaseUrl: pg.url, dataDir: mkdtempSync(join(tmpdir(), 'svc-egress-')) });
  const port = await freePort();
  open = await startRecordingMx({ host: '127.0.0.31', port });
  // Suspends source a: 421 4.7.28 at the greeting to connections from 127.0.0.2 only.
  picky = await startRecordingMx({ host: '127.0.0.32', port, refuse: (peer) => peer === '127.0.0.2' });
  const relayCert = await selfSignedFor(certDir, 'relay', ['relay.egress.test']);
  relay = await startRecordingMx({
    host: '127.0.0.33',
    port,
    tls: relayCert,
    auth: { user: 'apikey', pass: 'relay-secret' },
  });
  egress = parseEgress(EGRESS + RELAY(port), null, { RELAY_PASSWORD: 'relay-secret' });
  dns = await startTestDns();
  dns.zone.set('open.test', 'MX', [{ value: 'mx.open.test', priority: 10 }]);
  dns.zone.set('mx.open.test', 'A', [{ value: '127.0.0.31' }]);
  dns.zone.set('picky.test', 'MX', [{ value: 'mx.picky.test', priority: 10 }]);
  dns.zone.set('mx.picky.test', 'A', [{ value: '127.0.0.32' }]);
  dns.zone.set('relay.egress.test', 'A', [{ value: '127.0.0.33' }]);
  transport = mxTransport({
    resolver: resolverFor(dns.server.address),
    port,
    heloName: 'svc.egress.test',
    timeouts: { timeoutMs: 10_000 },
    allowPrivate: true,
    shaping: { db: database.db, config: parseShaping(SHAPING) },
    egress,
    trustedCa: relayCert.cert.toString(),
  });
});
afterAll(async () => {
  transport?.close();
  await open?.close();
  await picky?.close();
  await relay?.close();
  rmSync(certDir, { recursive: true, force: true });
  await dns?.close();
  await database?.close();
  await pg?.drop();
});

const raw = Buffer.from('Subject: egress\r\n\r\nhello\r\n');
const send = async (id: string, to: string, ctx: SendContext) => {
  const out = await transport.send(id, { from: 'x@sender.test', to: [to] }, raw, 'egress', ctx);
  return out;
};

describe('egress sources and pools', () => {
  it('transactional mail leaves from the transactional pool’s source, bulk from the bulk pool’s', async () => {
    const t = await send('msg_t1', 'reset@open.test', { stream: 'transactional' });
    const b = await send('msg_b1', 'news@open.test', { stream: 'bulk' });
    expect(t).toMatchObject([{ status: 'sent', source: 'a', pool: 'transactional', site: 'mx.open.test' }]);
    expect(b).toMatchObject([{ status: 'sent', source: 'b', pool: 'bulk', site: 'mx.open.test' }]);
    expect(open.copies.get('reset@open.test')).toEqual({ count: 1, peer: '127.0.0.2', ehlo: 'a.egress.test' });
    expect(open.copies.get('news@open.test')).toEqual({ count: 1, peer: '127.0.0.3', ehlo: 'b.egress.test' });
    // A pool named by the sender wins over its stream's.
    const chosen = await send('msg_t2', 'chosen@open.test', { stream: 'transactional', pool: 'bulk' });
    expect(chosen).toMatchObject([{ status: 'sent', source: 'b', pool: 'bulk' }]);
    // Each source shapes the site on its own: a (source, site) row per source, leases held under it.
    const sites = (await database.db.select({ site: schema.shapingSites.site }).from(schema.shapingSites)).map(
      (r) => r.site,
    );
    expect(sites).toEqual(expect.arrayContaining(['a|mx.open.test', 'b|mx.open.test']));
    const leases = await database.db.select({ site: schema.shapingLeases.site }).from(schema.shapingLeases);
    expect(leases.map((l) => l.site).sort()).toEqual(['a|mx.open.test', 'b|mx.open.test']);
  });

  it('a pool picks its sources by weight per message and keeps the others as fallbacks', () => {
    const firsts = new Set<string>();
    for (let i = 0; i < 40; i++) {
      const order = sourcesInOrder(egress, 'both', `msg_${i}`).map((s) => s.name);
      expect(order.sort()).toEqual(['a', 'b']);
      firsts.add(sourcesInOrder(egress, 'both', `msg_${i}`)[0]!.name);
      // The same message picks the same source every time (a retry goes the same way).
      expect(sourcesInOrder(egress, 'both', `msg_${i}`)[0]!.name).toBe(
        sourcesInOrder(egress, 'both', `msg_${i}`)[0]!.name,
      );
    }
    expect([...firsts].sort()).toEqual(['a', 'b']);
  });

  it('a source suspended for a site (421 4.7.28 to it only) fails over to the next source, each recipient once', async () => {
    // Messages whose weighted pick is source a, so every one meets the refusal first (or a's suspension).
    const ids = Array.from({ length: 200 }, (_, i) => `msg_fail_${i}`)
      .filter((id) => sourcesInOrder(egress, 'both', id)[0]!.name === 'a')
      .slice(0, 6);
    expect(ids).toHaveLength(6);
    const results: (RecipientResult[] | { throttled: true })[] = [];
    for (const [i, id] of ids.entries()) results.push(await send(id, `r${i}@picky.test`, { pool: 'both' }));
    for (const r of results) expect(r).toMatchObject([{ status: 'sent', source: 'b', pool: 'both' }]);
    for (let i = 0; i < ids.length; i++)
      expect(picky.copies.get(`r${i}@picky.test`)).toEqual({ count: 1, peer: '127.0.0.3', ehlo: 'b.egress.test' });
    // Source a met the refusal once, was suspended for this site only, and was not tried again.
    const fromA = picky.sessions.filter((s) => s.peer === '127.0.0.2');
    expect(fromA).toHaveLength(1);
    expect(fromA[0]!.mailFrom).toBe(0);
    const store = createShapingStore(database.db);
    expect((await store.state('a|mx.picky.test')).suspendedUntil).toBeGreaterThan(Date.now());
    expect((await store.state('b|mx.picky.test')).suspendedUntil ?? 0).toBeLessThan(Date.now());
    // Source a still delivers to another site.
    expect(await send('msg_other', 'still@open.test', { stream: 'transactional' })).toMatchObject([
      { status: 'sent', source: 'a' },
    ]);
  });

  it('a source whose bind address is not on this host hands its mail to the next source of the pool', async () => {
    expect(sourcesInOrder(egress, 'broken', 'msg_gone')[0]!.name).toBe('gone');
    const out = await send('msg_gone', 'moved@open.test', { pool: 'broken' });
    expect(out).toMatchObject([{ status: 'sent', source: 'b', pool: 'broken' }]);
    expect(open.copies.get('moved@open.test')).toEqual({ count: 1, peer: '127.0.0.3', ehlo: 'b.egress.test' });
  });

  it('when every source of the pool is suspended for the site, the message is throttled and nothing is sent', async () => {
    const before = picky.sessions.length;
    const out = await send('msg_stuck', 'stuck@picky.test', { pool: 'transactional' });
    expect(isThrottled(out)).toBe(true);
    expect(out).toMatchObject({ throttled: true, cause: expect.stringMatching(/^suspended: 421[ -]4\.7\.28/) });
    expect((out as { waitMs: number }).waitMs).toBeGreaterThan(60_000);
    expect(picky.sessions.length).toBe(before);
    expect(picky.copies.has('stuck@picky.test')).toBe(false);
  });
});

describe('a relay source', () => {
  it('sends every transaction to its relay over STARTTLS with AUTH, whatever the recipient domain', async () => {
    const out = await send('msg_relay', 'via@open.test', { pool: 'relayed' });
    expect(out).toMatchObject([{ status: 'sent', source: 'relay', pool: 'relayed', site: 'mx.open.test' }]);
    expect(relay.copies.get('via@open.test')?.count).toBe(1);
    expect(open.copies.has('via@open.test')).toBe(false);
    const used = relay.sessions.filter((s) => s.mailFrom > 0);
    expect(used.length).toBeGreaterThan(0);
    for (const s of used) expect(s).toMatchObject({ secure: true, user: 'apikey', ehlo: 'svc.egress.test' });
    // Shaped as its own site: the relay host, seen from the relay source.
    const [row] = await database.db
      .select({ site: schema.shapingSites.site })
      .from(schema.shapingSites)
      .where(eq(schema.shapingSites.site, 'relay|relay.egress.test'));
    expect(row).toBeDefined();
  });
});
