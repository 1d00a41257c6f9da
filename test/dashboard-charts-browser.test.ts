import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { buildApp } from '../scripts/build-app.js';
import { dashboardPage, hasChromium, launchChromium } from './helpers/browser.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * The dashboard's charts in a real browser (Chromium, headless: test/helpers/browser.ts), against the whole
 * service with real delivery to a loopback MX that refuses one address: the Overview draws the account's
 * activity on a canvas whose accessible name carries the figures GET /api/metrics answers (the mail sent
 * and bounced here), the domain page its activity, DMARC sources (the platform's own address marked) and TLS
 * failures, the Deliverability page the complaint and bounce rates. axe-core checks each page; screenshots
 * go to <tmpdir>/svc-dashboard-charts/ (the path is printed).
 */
const PLATFORM_IP = '192.0.2.10';
const SHOTS = join(tmpdir(), 'svc-dashboard-charts');
let env: SendingStack;
let browser: Browser;
let page: Page;
let app: string;
let acmeId: string;
const pageErrors: string[] = [];

const audit = (name: string) => dashboardPage(page).audit(name);
const heading = (name: string | RegExp) => dashboardPage(page).heading(name);
const go = (link: string, title: string | RegExp) => dashboardPage(page).go(link, title);
/** Saves a full-page screenshot and prints where. */
async function shot(name: string) {
  mkdirSync(SHOTS, { recursive: true });
  const path = join(SHOTS, `dashboard-charts-${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`[dashboard-charts] screenshot: ${path}`);
}
/** How many pixels of a chart's canvas are in colour: axes, grid and labels are grey, only the lines are not. */
const inked = (chart: Locator) =>
  chart.locator('canvas').evaluateAll((canvases) =>
    (canvases as HTMLCanvasElement[]).reduce((n, c) => {
      const px = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      for (let i = 0; i < px.length; i += 4) {
        const [r, g, b, a] = [px[i]!, px[i + 1]!, px[i + 2]!, px[i + 3]!];
        if (a > 200 && Math.max(r, g, b) - Math.min(r, g, b) > 60) n++;
      }
      return n;
    }, 0),
  );

/** One DMARC report and one TLS report as the lead's summaries read them (the reports' own parsing is tested apart). */
async function storeReports(userId: string) {
  const db = env.stack.service.core.db;
  const day = Math.floor(Date.now() / 86_400_000) * 86_400_000;
  const report = { userId, domainId: acmeId, reporter: 'google.com', beginAt: day, endAt: day + 86_399_999 };
  await db.insert(schema.dmarcReports).values({
    ...report,
    id: 'dmr_charts_0000000000000001',
    reportId: 'charts-1',
    records: 2,
    messages: 43,
    receivedAt: Date.now(),
  });
  const row = { reportId: 'dmr_charts_0000000000000001', userId, domainId: acmeId, reporter: 'google.com', day };
  await db.insert(schema.dmarcRows).values([
    {
      ...row,
      idx: 0,
      sourceIp: PLATFORM_IP,
      headerFrom: FROM_DOMAIN,
      count: 40,
      disposition: 'none',
      dkimAligned: true,
      spfAligned: true,
    },
    {
      ...row,
      idx: 1,
      sourceIp: '203.0.113.5',
      headerFrom: FROM_DOMAIN,
      count: 3,
      disposition: 'quarantine',
      dkimAligned: false,
      spfAligned: false,
    },
  ]);
  await db.insert(schema.tlsReports).values({
    ...report,
    id: 'tlr_charts_0000000000000001',
    reporter: 'Microsoft Corporation',
    reportId: 'charts-tls-1',
    success: 120,
    failure: 4,
    policies: [{ failures: [{ resultType: 'certificate-expired', failedSessions: 4 }] }],
    receivedAt: Date.now(),
  });
}

beforeAll(async () => {
  await buildApp();
  [env, browser] = await Promise.all([
    startSendingStack({
      onRcpt: (address) => (address.startsWith('gone') ? { code: 550, message: '5.1.1 No such user here' } : undefined),
      env: { PUBLIC_IP: PLATFORM_IP },
    }),
    launchChromium(),
  ]);
  const db = env.stack.service.core.db;
  acmeId = (await db.select().from(schema.domains).where(eq(schema.domains.domain, FROM_DOMAIN)))[0]!.id;
  const [user] = await db.select().from(schema.users).where(eq(schema.users.email, 'sender@example.com'));
  await storeReports(user!.id);
  // Four recipients sent to, one of them refused by the MX.
  const ids = [
    (await env.send({ to: ['a@rcpt.test', 'b@rcpt.test'] })).body.id,
    (await env.send({ to: 'c@rcpt.test' })).body.id,
    (await env.send({ to: 'gone@rcpt.test' })).body.id,
  ] as string[];
  for (const id of ids)
    await eventually(async () => {
      const [m] = await db.select().from(schema.messages).where(eq(schema.messages.id, id));
      return m && ['sent', 'bounced'].includes(m.status);
    });
  app = `${env.stack.config.publicUrl}/app`;
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (err) => pageErrors.push(err.message));
  await page.goto(`${app}/signin`);
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

describe.skipIf(!hasChromium())('the dashboard charts in a real browser', () => {
  it('the Overview draws the account activity with the figures the metrics endpoint answers', async () => {
    const metrics = (await env.stack.api('GET', '/api/metrics', { token: env.session })).body;
    expect(metrics.totals).toMatchObject({
      sent: 4,
      delivered: 3,
      bounced: 1,
      bounced_by_class: { invalid_recipient: 1 },
    });
    await page.goto(app);
    await heading('Overview').waitFor();
    const sending = page.getByRole('img', { name: /sending per day/ });
    await sending.waitFor();
    const label = await sending.getAttribute('aria-label');
    expect(label).toContain(`sent ${metrics.totals.sent}`);
    expect(label).toContain(`delivered ${metrics.totals.delivered}`);
    expect(label).toContain(`bounced ${metrics.totals.bounced}`);
    expect(await sending.locator('canvas').count()).toBeGreaterThan(0);
    await eventually(async () => (await inked(sending)) > 0);
    const tiles = page.getByRole('list', { name: /totals over the last 30 days/ });
    const tileText = (await tiles.innerText()).replace(/\s+/g, ' ');
    expect(tileText).toContain('4 Sent');
    expect(tileText).toContain('1 Bounced');
    expect(tileText).toContain('25.00% Bounce rate');
    await page.getByText('Bounces by class: invalid recipient 1.').waitFor();
    // The same numbers as a table, for whoever does not see the drawing.
    await page.getByText('Sending per day: the numbers').click();
    const table = page.getByRole('region', { name: 'Sending per day: the numbers' });
    const total = await table.getByRole('row', { name: /^Total/ }).innerText();
    expect(total.split('\t').map((c) => c.trim())).toEqual(['Total', '4', '3', '0', '1', '0']);
    await audit('overview with charts');
    await shot('overview');

    await page.getByLabel('Per hour, 48 hours').check();
    const hourly = page.getByRole('img', { name: /sending per hour over the last 48 hours: sent 4,/ });
    await hourly.waitFor();
    expect(await hourly.getAttribute('aria-label')).toContain('bounced 1');
    await audit('overview per hour');
    expect(pageErrors).toEqual([]);
  });

  it('the domain page draws its activity, DMARC with the platform marked, and TLS failures', async () => {
    await go('Domains', 'Domains');
    await page.getByRole('link', { name: FROM_DOMAIN }).click();
    await heading(FROM_DOMAIN).waitFor();
    const activity = page.getByRole('img', { name: new RegExp(`^${FROM_DOMAIN}, sending per day`) });
    await activity.waitFor();
    expect(await activity.getAttribute('aria-label')).toContain('sent 4, delivered 3, deferred 0, bounced 1');
    const dmarc = page.getByRole('img', { name: /^DMARC over 30 days/ });
    expect(await dmarc.getAttribute('aria-label')).toBe(
      'DMARC over 30 days: 43 messages reported, 40 aligned (93.02%), 3 failed, in 1 report.',
    );
    await eventually(async () => (await inked(dmarc)) > 0);
    const sources = page.getByRole('region', { name: 'Sources sending as the domain' });
    expect(await sources.getByRole('row', { name: new RegExp(PLATFORM_IP) }).innerText()).toContain('this platform');
    expect(await sources.getByRole('row', { name: /203\.0\.113\.5/ }).innerText()).not.toContain('this platform');
    const tls = page.getByRole('img', { name: /^TLS over 30 days/ });
    expect(await tls.getAttribute('aria-label')).toContain('120 successful and 4 failed sessions');
    const failures = page.getByRole('region', { name: 'TLS failures by type' });
    expect(await failures.innerText()).toContain('certificate-expired');
    await audit('domain with charts');
    await shot('domain');
  });

  it('the Deliverability page draws the complaint and bounce rates', async () => {
    await go('Deliverability', 'Deliverability');
    const rates = page.getByRole('img', { name: /complaint rate/ });
    await rates.waitFor();
    expect(await rates.getAttribute('aria-label')).toBe(
      'Over the last 30 days: complaint rate 0.00% (0 complaints of 3 delivered), bounce rate 25.00% (1 bounce of 4).',
    );
    await eventually(async () => (await inked(rates)) > 0);
    await audit('deliverability with rates');
    await shot('deliverability');
    // On a phone the charts shrink to the screen: no page scrolls sideways.
    await page.setViewportSize({ width: 360, height: 740 });
    for (const [link, title] of [
      ['Overview', 'Overview'],
      ['Deliverability', 'Deliverability'],
    ] as const) {
      await go(link, title);
      await page
        .getByRole('img', { name: /sending per day|complaint rate/ })
        .first()
        .waitFor();
      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(overflow, `${title} scrolls sideways on a phone`).toBeLessThanOrEqual(0);
    }
    await shot('overview-phone');
    expect(pageErrors).toEqual([]);
  });
});
