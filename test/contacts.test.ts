import { eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { parseFilter } from '../core/broadcasts/filter.js';
import { touchWithinCap } from '../core/contacts/cap.js';
import { schema } from '../db/index.js';
import { startWorker } from '../worker.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

let env: SendingStack;
beforeAll(async () => {
  // Room under the caps for the broadcast at the end (caps are test/send-gate-background.test.ts's).
  const PLANS = JSON.stringify({
    free: { includedEmails: 100_000, dailySendCap: 10_000, overage: 'block', paid: false },
  });
  env = await startSendingStack({ env: { IMPORT_CHUNK_ROWS: '50', PLANS } });
});
afterAll(async () => {
  await env?.stop();
});
const api = (method: string, path: string, body?: unknown) => env.stack.api(method, path, { token: env.key, body });

describe('contacts', () => {
  it('create, read, update, delete; duplicates are 409; the suppression routes still answer', async () => {
    const created = await api('POST', '/api/contacts', {
      email: 'Ada@Example.com',
      name: 'Ada',
      attributes: { plan: 'pro', seats: 3 },
    });
    expect(created).toMatchObject({
      status: 201,
      body: { id: expect.stringMatching(/^ctc_/), email: 'ada@example.com', subscribed: true, last_seen_at: null },
    });
    expect((await api('POST', '/api/contacts', { email: 'ada@example.com' })).body.code).toBe('contact_exists');
    const id = created.body.id;
    expect((await api('PATCH', `/api/contacts/${id}`, { name: 'Ada L', subscribed: false })).body).toMatchObject({
      name: 'Ada L',
      subscribed: false,
      attributes: { plan: 'pro' },
    });
    expect((await api('GET', `/api/contacts/${id}`)).body.name).toBe('Ada L');
    expect((await api('POST', '/api/contacts/suppressions', { email: 'gone@example.com' })).status).toBe(201);
    expect((await api('GET', '/api/contacts/suppressions')).body.map((s: any) => s.email)).toContain(
      'gone@example.com',
    );
    expect((await api('DELETE', `/api/contacts/${id}`)).body).toEqual({ ok: true });
    expect((await api('GET', `/api/contacts/${id}`)).status).toBe(404);
    expect((await api('GET', '/api/contacts/nope')).body.code).toBe('validation_error');
  });

  it('pages with before/limit (bare arrays) and searches', async () => {
    const list = (await api('POST', '/api/lists', { name: 'paging' })).body;
    await api('POST', `/api/lists/${list.id}/contacts`, {
      emails: Array.from({ length: 25 }, (_, i) => `page-${i}@example.com`),
    });
    const seen: string[] = [];
    let before: string | undefined;
    for (;;) {
      const page = (await api('GET', `/api/contacts?limit=10&search=page-${before ? `&before=${before}` : ''}`))
        .body as { id: string; email: string }[];
      expect(Array.isArray(page)).toBe(true);
      seen.push(...page.map((c) => c.email));
      if (page.length < 10) break;
      before = page.at(-1)!.id;
    }
    expect(seen.sort()).toEqual(Array.from({ length: 25 }, (_, i) => `page-${i}@example.com`).sort());
    const members: string[] = [];
    before = undefined;
    for (;;) {
      const page = (await api('GET', `/api/lists/${list.id}/contacts?limit=7${before ? `&before=${before}` : ''}`))
        .body as { id: string; email: string }[];
      members.push(...page.map((c) => c.email));
      if (page.length < 7) break;
      before = page.at(-1)!.id;
    }
    expect(new Set(members).size).toBe(25);
    expect((await api('GET', `/api/lists/${list.id}/contacts?limit=501`)).status).toBe(400);
  });

  it('traffic addresses from many calls and accounts share one upsert, one row per account and address', async () => {
    const core = env.stack.service.core;
    const [me] = await core.db
      .select({ id: schema.users.id })
      .from(schema.users)
      .where(eq(schema.users.email, 'sender@example.com'));
    const other = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'touch-other@example.com', password: 'other password' },
      })
    ).body.user.id;
    await Promise.all([
      core.contacts.touch(me!.id, ['Touch-A@rcpt.test', 'touch-b@rcpt.test']),
      core.contacts.touch(me!.id, ['touch-a@rcpt.test', 'not-an-address']),
      core.contacts.touch(other, ['touch-a@rcpt.test']),
    ]);
    const rows = await core.db.select().from(schema.contacts).where(eq(schema.contacts.email, 'touch-a@rcpt.test'));
    expect(rows.map((r) => r.userId).sort()).toEqual([me!.id, other].sort());
    expect(rows.every((r) => r.lastSeenAt! > 0)).toBe(true);
    expect((await api('GET', '/api/contacts?search=touch-b@rcpt.test')).body).toHaveLength(1);
    expect((await api('GET', '/api/contacts?search=not-an-address')).body).toHaveLength(0);
  });

  it('traffic past the contact cap: known addresses move, new ones fill the room in address order, per account, in one statement', async () => {
    const db = env.stack.service.core.db;
    const signup = async (email: string) =>
      (await env.stack.api('POST', '/api/auth/signup', { body: { email, password: 'cap test password' } })).body.user
        .id as string;
    const [a, b] = [await signup('cap-a@example.com'), await signup('cap-b@example.com')];
    await touchWithinCap(db, [{ userId: a, email: 'known@cap.test', subscribed: false }], 3, 1_000);
    await touchWithinCap(
      db,
      [
        { userId: a, email: 'known@cap.test', subscribed: false },
        { userId: a, email: 'z@cap.test', subscribed: false },
        { userId: a, email: 'c@cap.test', subscribed: false },
        { userId: a, email: 'd@cap.test', subscribed: false },
        { userId: b, email: 'known@cap.test', subscribed: true },
      ],
      3,
      2_000,
    );
    const rows = await db
      .select({ userId: schema.contacts.userId, email: schema.contacts.email, seen: schema.contacts.lastSeenAt })
      .from(schema.contacts)
      .where(eq(schema.contacts.email, 'known@cap.test'));
    expect(rows.map((r) => [r.userId === a ? 'a' : 'b', r.seen]).sort()).toEqual([
      ['a', 2_000],
      ['b', 2_000],
    ]);
    const ofA = await db
      .select({ email: schema.contacts.email })
      .from(schema.contacts)
      .where(eq(schema.contacts.userId, a));
    // Room for two more under a cap of 3: c and d come first in address order, z is not recorded.
    expect(ofA.map((r) => r.email).sort()).toEqual(['c@cap.test', 'd@cap.test', 'known@cap.test']);
    // At the cap, a known address still moves and a new one is not recorded.
    await touchWithinCap(
      db,
      [
        { userId: a, email: 'c@cap.test', subscribed: false },
        { userId: a, email: 'e@cap.test', subscribed: false },
      ],
      3,
      3_000,
    );
    const after = await db
      .select({ email: schema.contacts.email, seen: schema.contacts.lastSeenAt })
      .from(schema.contacts)
      .where(eq(schema.contacts.userId, a));
    expect(after.map((r) => r.email).sort()).toEqual(['c@cap.test', 'd@cap.test', 'known@cap.test']);
    expect(after.find((r) => r.email === 'c@cap.test')!.seen).toBe(3_000);
  });

  it('addresses the account sends to or receives from become contacts, last seen now', async () => {
    const t0 = Date.now();
    await env.send({ to: ['Bob <traffic-bob@rcpt.test>'], cc: 'traffic-cc@rcpt.test' });
    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: env.stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    await smtp.sendMail({
      from: 'Carol <traffic-carol@far.example>',
      to: `inbox@${FROM_DOMAIN}`,
      subject: 'hi',
      text: 'hello',
    });
    for (const email of ['traffic-bob@rcpt.test', 'traffic-cc@rcpt.test', 'traffic-carol@far.example']) {
      const c = await eventually(async () => (await api('GET', `/api/contacts?search=${email}`)).body[0]);
      // Recipients are subscribed; an inbound sender never subscribed (test/inbound-contacts.test.ts).
      expect(c).toMatchObject({ email, subscribed: email !== 'traffic-carol@far.example', unsubscribed_at: null });
      expect(c.last_seen_at).toBeGreaterThanOrEqual(t0);
    }
  });
});

describe('lists', () => {
  it('CRUD, members by ids, emails and contacts (upserting), counting only new members', async () => {
    const list = (await api('POST', '/api/lists', { name: 'Customers' })).body;
    expect(list).toMatchObject({ id: expect.stringMatching(/^lst_/), name: 'Customers', contact_count: 0 });
    expect((await api('PATCH', `/api/lists/${list.id}`, { name: 'VIP' })).body.name).toBe('VIP');
    const c = (await api('POST', '/api/contacts', { email: 'member-1@example.com' })).body;
    expect((await api('POST', `/api/lists/${list.id}/contacts`, { contactIds: [c.id] })).body).toEqual({
      added: 1,
      created: 0,
    });
    expect((await api('POST', `/api/lists/${list.id}/contacts`, { contactIds: [c.id] })).body).toEqual({
      added: 0,
      created: 0,
    });
    expect(
      (
        await api('POST', `/api/lists/${list.id}/contacts`, {
          emails: ['member-1@example.com', 'member-2@example.com'],
        })
      ).body,
    ).toEqual({ added: 1, created: 1 });
    const up = await api('POST', `/api/lists/${list.id}/contacts`, {
      contacts: [{ email: 'member-1@example.com', name: 'One', attributes: { tier: 'gold' } }],
    });
    expect(up.body).toEqual({ added: 0, created: 0 });
    expect((await api('GET', `/api/contacts/${c.id}`)).body).toMatchObject({
      name: 'One',
      attributes: { tier: 'gold' },
    });
    expect(
      (await api('POST', `/api/lists/${list.id}/contacts`, { contactIds: ['ctc_unknown0000000000000000'] })).status,
    ).toBe(404);
    expect((await api('GET', `/api/lists/${list.id}`)).body.contact_count).toBe(2);
    expect((await api('GET', '/api/lists')).body.map((l: any) => l.id)).toContain(list.id);
    expect((await api('DELETE', `/api/lists/${list.id}/contacts/${c.id}`)).body).toEqual({ ok: true });
    expect((await api('DELETE', `/api/lists/${list.id}/contacts/${c.id}`)).status).toBe(404);
    expect((await api('DELETE', `/api/lists/${list.id}`)).body).toEqual({ ok: true });
    expect((await api('GET', `/api/lists/${list.id}`)).status).toBe(404);
  });

  it('imports a CSV as a durable workflow in chunks, resuming after a worker restart, with rows rejected and why', async () => {
    const list = (await api('POST', '/api/lists', { name: 'Imported' })).body;
    await api('POST', '/api/contacts', { email: 'csv-3@example.com', name: 'Existing' });
    const rows = Array.from({ length: 400 }, (_, i) =>
      i === 10
        ? 'not-an-email,Bad,x'
        : i === 20
          ? ',NoMail,y'
          : `csv-${i}@example.com,Person ${i},${i % 2 ? 'pro' : 'free'}`,
    );
    const csv = `Email,Name,Plan\n${rows.join('\n')}\n`;
    const service = env.stack.service;
    await service.worker!.shutdown();
    const started = await env.stack.api('POST', `/api/lists/${list.id}/import`, {
      token: env.key,
      raw: csv,
      headers: { 'content-type': 'text/csv' },
    });
    expect(started).toMatchObject({
      status: 202,
      body: { id: expect.stringMatching(/^imp_/), status: 'running', rows_read: 0 },
    });
    // Half-way: let one chunk commit its checkpoint by hand (as a worker that died after it would have), then restart.
    await service.core.imports.importChunk({ importId: started.body.id, offset: 0, limit: 50 });
    service.worker = await startWorker({
      core: service.core,
      address: service.temporalAddress,
      workflowBundle: { codePath: inject('workflowBundlePath') },
    });
    const done = await eventually(async () => {
      const r = (await api('GET', `/api/lists/${list.id}/imports/${started.body.id}`)).body;
      return r.status === 'done' ? r : undefined;
    }, 30_000);
    expect(done).toMatchObject({ rows_read: 400, created: 397, updated: 1, rejected: 2 });
    expect(done.rejections).toEqual([
      { row: 12, reason: 'invalid email "not-an-email"' },
      { row: 22, reason: 'missing email' },
    ]);
    expect((await api('GET', `/api/lists/${list.id}`)).body.contact_count).toBe(398);
    const [imp] = await service.core.db
      .select()
      .from(schema.contactImports)
      .where(eq(schema.contactImports.id, started.body.id));
    expect(imp!.offset).toBe(400);
    expect((await api('GET', '/api/contacts?search=csv-5@')).body[0]).toMatchObject({
      name: 'Person 5',
      attributes: { plan: 'pro' },
    });
    expect((await api('POST', `/api/lists/${list.id}/import`, { csv: 'name\nx\n' })).body.code).toBe('invalid_csv');
  });

  it("parses the CSV once, at upload, into staged rows the chunks apply and delete; a contact's limits apply to the columns", async () => {
    const list = (await api('POST', '/api/lists', { name: 'Staged' })).body;
    const wide = `email,${Array.from({ length: 101 }, (_, i) => `col${i}`).join(',')}\nw@example.com\n`;
    const refused = await api('POST', `/api/lists/${list.id}/import`, { csv: wide });
    expect(refused).toMatchObject({ status: 400, body: { code: 'invalid_csv' } });
    expect(refused.body.error).toContain('at most 100 attribute columns');
    const rows = Array.from({ length: 120 }, (_, i) =>
      i === 5
        ? `staged-${i}@example.com,${'n'.repeat(201)},x`
        : i === 6
          ? `staged-${i}@example.com,Six,${'v'.repeat(2001)}`
          : `staged-${i}@example.com,Person ${i},v${i}`,
    );
    const service = env.stack.service;
    await service.worker!.shutdown();
    const started = await api('POST', `/api/lists/${list.id}/import`, { csv: `email,name,note\n${rows.join('\n')}\n` });
    expect(started.status).toBe(202);
    const imp = schema.contactImports;
    const staged = () =>
      service.core.db
        .select()
        .from(schema.contactImportRows)
        .where(eq(schema.contactImportRows.importId, started.body.id));
    // Parsed once: the rows are staged and the CSV itself is not kept for the chunks to read again.
    expect((await service.core.db.select().from(imp).where(eq(imp.id, started.body.id)))[0]).toMatchObject({
      csv: '',
      rowsTotal: 120,
    });
    expect((await staged()).length).toBe(120);
    service.worker = await startWorker({
      core: service.core,
      address: service.temporalAddress,
      workflowBundle: { codePath: inject('workflowBundlePath') },
    });
    const done = await eventually(async () => {
      const r = (await api('GET', `/api/lists/${list.id}/imports/${started.body.id}`)).body;
      return r.status === 'done' ? r : undefined;
    }, 30_000);
    expect(done).toMatchObject({ rows_read: 120, created: 118, rejected: 2 });
    expect(done.rejections).toEqual([
      { row: 7, reason: 'name: at most 200 characters' },
      { row: 8, reason: 'note: at most 2000 characters' },
    ]);
    expect(await staged()).toEqual([]);
  });

  it('an import started before staging existed (its CSV kept, no rows_total) is staged once by its next chunk and finishes', async () => {
    const list = (await api('POST', '/api/lists', { name: 'Legacy' })).body;
    const id = 'imp_legacyimportlegacyimport01';
    const now = Date.now();
    const csv = `email,plan\n${Array.from({ length: 30 }, (_, i) => `legacy-${i}@example.com,p${i}`).join('\n')}\n`;
    const [{ userId }] = (await env.stack.service.core.db
      .select({ userId: schema.lists.userId })
      .from(schema.lists)
      .where(eq(schema.lists.id, list.id))) as [{ userId: string }];
    await env.stack.service.core.db.insert(schema.contactImports).values({
      id,
      userId,
      listId: list.id,
      status: 'running',
      csv,
      offset: 10,
      rowsRead: 10,
      createdAt: now,
      updatedAt: now,
    });
    const imports = env.stack.service.core.imports;
    const first = await imports.importChunk({ importId: id, offset: 10, limit: 15 });
    expect(first).toMatchObject({ offset: 25, done: false });
    const [row] = await env.stack.service.core.db
      .select()
      .from(schema.contactImports)
      .where(eq(schema.contactImports.id, id));
    expect(row).toMatchObject({ csv: '', rowsTotal: 30 });
    expect(await imports.importChunk({ importId: id, offset: 25, limit: 15 })).toMatchObject({
      offset: 30,
      done: true,
      progress: { rowsRead: 30 },
    });
    expect((await api('GET', `/api/lists/${list.id}`)).body.contact_count).toBe(20);
  });
});

describe('a list as a broadcast audience', () => {
  it('sends at the default batch size (100 per delivery run) and closes sent', async () => {
    const list = (await api('POST', '/api/lists', { name: 'default batches' })).body;
    await api('POST', `/api/lists/${list.id}/contacts`, {
      emails: Array.from({ length: 130 }, (_, i) => `big-${i}@rcpt.test`),
    });
    const b = (
      await api('POST', '/api/broadcasts', {
        from: `news@${FROM_DOMAIN}`,
        subject: 'Hi',
        text: 'Hi {{email}}',
        audience: { type: 'list', id: list.id },
      })
    ).body;
    expect((await api('POST', `/api/broadcasts/${b.id}/send`, {})).body).toMatchObject({
      status: 'sending',
      audienceCount: 130,
    });
    const done = await eventually(
      async () => {
        const r = (await api('GET', `/api/broadcasts/${b.id}`)).body;
        return r.status !== 'sending' ? r : undefined;
      },
      60_000,
      200,
    );
    expect(done).toMatchObject({ status: 'sent', sent_count: 130, fail_count: 0 });
    expect(new Set(env.sink.received.flatMap((r) => r.to).filter((a) => a.startsWith('big-'))).size).toBe(130);
  });
});

describe('the filter language', () => {
  it('parses conditions with and/or/not and parentheses, and refuses anything else with a position', () => {
    expect(parseFilter('attributes.plan = "pro" and last_seen_at > 2026-01-01')).toMatchObject({ type: 'and' });
    expect(parseFilter('not (name contains "x" or email starts_with "a") and subscribed = true')).toMatchObject({
      type: 'and',
      left: { type: 'not' },
    });
    for (const bad of [
      'attributes.plan = pro',
      'plan = "x"',
      'email =',
      '(email = "a"',
      'email = "a" extra',
      'email ~ "a"',
      '"unterminated',
      `${'('.repeat(40)}email = "a"${')'.repeat(40)}`,
    ]) {
      expect(() => parseFilter(bad), bad).toThrow(/audience\.query/);
    }
    // Linear: a long adversarial input is refused or parsed at once.
    const t = performance.now();
    expect(() => parseFilter(`email = "${'a'.repeat(1990)}`)).toThrow(/unterminated/);
    expect(performance.now() - t).toBeLessThan(50);
  });
});
