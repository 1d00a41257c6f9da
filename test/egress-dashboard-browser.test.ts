import { eq } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEgressCounter } from '../core/egress/counters.js';
import { schema } from '../db/index.js';
import { buildApp } from '../scripts/build-app.js';
import { dashboardPage, hasChromium, launchChromium } from './helpers/browser.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * The Deliverability page's egress parts in a real browser: the owner's table of outcomes by source and pool
 * (the figures GET /api/metrics/egress answers, counted here by the worker's counter), then, with the
 * operator token, the sources, pools and streams of egress.toml, and an account assigned a pool through
 * the page's form (seen by GET /api/operator/egress). axe-core checks each state.
 */
const OPERATOR_TOKEN = 'egress-dashboard-operator-token-0123456789';
let env: SendingStack;
let browser: Browser;
let page: Page;
let userId: string;
const pageErrors: string[] = [];

beforeAll(async () => {
  await buildApp();
  [env, browser] = await Promise.all([
    startSendingStack({ env: { OPERATOR_TOKEN }, roles: ['api'] }),
    launchChromium(),
  ]);
  const db = env.stack.service.core.db;
  const [acme] = await db.select().from(schema.domains).where(eq(schema.domains.domain, FROM_DOMAIN));
  userId = acme!.userId;
  const counter = createEgressCounter({ db, flushMs: 3_600_000 });
  const owner = { userId, domainId: acme!.id };
  for (let i = 0; i < 5; i++) counter.count(owner, 'default', 'transactional', 'sent');
  counter.count(owner, 'default', 'transactional', 'deferred');
  counter.count(owner, 'default', 'bulk', 'bounced');
  await counter.close();
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (err) => pageErrors.push(err.message));
  await page.goto(`${env.stack.config.publicUrl}/app/signin`);
  await page.evaluate(
    (token) =>
      sessionStorage.setItem(
        'svc-session',
        JSON.stringify({ token, email: 'sender@example.com', emailVerified: true }),
      ),
    env.session,
  );
});
afterAll(async () => {
  await browser?.close();
  await env?.stop();
});

describe.skipIf(!hasChromium())('the Deliverability page: egress sources and pools', () => {
  it("shows the owner's outcomes by source and pool as the API answers them", async () => {
    const answer = (await env.stack.api('GET', '/api/metrics/egress', { token: env.session })).body;
    expect(answer.totals).toEqual({ sent: 5, deferred: 1, bounced: 1 });
    await page.goto(`${env.stack.config.publicUrl}/app`);
    await dashboardPage(page).go('Deliverability', 'Deliverability');
    const table = page.getByRole('region', { name: 'Your outcomes by source and pool', exact: true });
    await table.waitFor();
    const cells = async (name: RegExp) =>
      (await table.getByRole('row', { name }).innerText()).split('\t').map((c) => c.trim());
    expect(await cells(/^default transactional/)).toEqual(['default', 'transactional', '5', '1', '0', '83.3%']);
    expect(await cells(/^default bulk/)).toEqual(['default', 'bulk', '0', '0', '1', '0.0%']);
    expect(await cells(/^Total/)).toEqual(['Total', '5', '1', '1', '71.4%']);
    await dashboardPage(page).audit('deliverability, owner');
    expect(pageErrors).toEqual([]);
  });

  it('shows the operator the sources, pools and streams, and assigns a pool to an account', async () => {
    await page.getByLabel('Operator token (OPERATOR_TOKEN)').fill(OPERATOR_TOKEN);
    await page.getByRole('button', { name: 'Show sites' }).click();
    const sources = page.getByRole('region', { name: 'Egress sources', exact: true });
    await sources.waitFor();
    const source = (await sources.getByRole('row', { name: /^default/ }).innerText()).split('\t').map((c) => c.trim());
    expect(source).toEqual(['default', 'default route', 'service domain', '—', 'sending']);
    const pools = page.getByRole('region', { name: 'Egress pools', exact: true });
    expect(await pools.getByRole('row', { name: /^bulk/ }).innerText()).toContain('Broadcasts and sequences');
    await page.getByText('Transactional mail leaves from pool transactional').waitFor();
    const everyone = page.getByRole('region', { name: 'Outcomes by source and pool, every account', exact: true });
    expect(await everyone.getByRole('row', { name: /^Total/ }).innerText()).toMatch(/^Total\t5\t1\t1/);
    await dashboardPage(page).audit('deliverability, operator');

    const form = page.getByRole('form', { name: 'Assign a pool' });
    await form.getByLabel('Account id').fill(userId);
    await form.getByLabel('Stream').selectOption('bulk');
    await form.getByLabel('Pool', { exact: true }).selectOption('transactional');
    await form.getByRole('button', { name: 'Save the assignment' }).click();
    await form.getByRole('status').filter({ hasText: 'Saved' }).waitFor();
    const assigned = page.getByRole('region', { name: 'Accounts assigned a pool', exact: true });
    await assigned.waitFor();
    expect((await assigned.getByRole('row', { name: new RegExp(userId) }).innerText()).split('\t')).toEqual([
      userId,
      'sender@example.com',
      'bulk',
      'transactional',
    ]);
    await eventually(async () => {
      const view = (await env.stack.api('GET', '/api/operator/egress', { token: OPERATOR_TOKEN })).body;
      return view.assignments.some(
        (a: { account_id: string; stream: string; pool: string }) =>
          a.account_id === userId && a.stream === 'bulk' && a.pool === 'transactional',
      );
    });
    await dashboardPage(page).audit('deliverability, assigned');
    expect(pageErrors).toEqual([]);
  });
});
