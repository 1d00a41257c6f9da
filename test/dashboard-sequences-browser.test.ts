import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../scripts/build-app.js';
import { dashboardPage, hasChromium, launchChromium } from './helpers/browser.js';
import { sequenceHelpers } from './helpers/sequences.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';

/**
 * The dashboard's sequence pages in a real browser (Chromium, headless: test/helpers/browser.ts), against the whole
 * service with real mail delivery: a sequence made in the dashboard enrolls a contact on an event, its
 * enrolment shows where it waits and moves on without a reload when the awaited event is posted; a
 * second enrolment is cancelled from the page; events are listed. axe-core checks every page it opens.
 */

let env: SendingStack;
let h: ReturnType<typeof sequenceHelpers>;
let browser: Browser;
let page: Page;
let app: string;
const pageErrors: string[] = [];

beforeAll(async () => {
  await buildApp();
  [env, browser] = await Promise.all([startSendingStack(), launchChromium()]);
  h = sequenceHelpers(env);
  app = `${env.stack.config.publicUrl}/app`;
  const context = await browser.newContext({ viewport: { width: 1024, height: 800 } });
  page = await context.newPage();
  page.on('pageerror', (err) => pageErrors.push(err.message));
  // Signed in as the sending stack's verified account: its session token, where the sign-in page keeps it.
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

const audit = (name: string) => dashboardPage(page).audit(name);
const heading = (name: string | RegExp) => dashboardPage(page).heading(name);
const go = (link: string, title: string | RegExp) => dashboardPage(page).go(link, title);
const alert = () => page.getByRole('alert');
const steps = (list: unknown[]) => JSON.stringify(list, null, 2);
const GOOD = [
  { type: 'send', subject: 'Welcome aboard', text: 'Hello {{email}}' },
  { type: 'wait_for_event', event: 'activated', timeout: '1d' },
  { type: 'send', subject: 'Glad you are in', text: 'Activated.' },
];
/** Set by the test on the page; still there later proves the page changed without a reload. */
const mark = () =>
  page.evaluate(() => {
    (window as any).__noReload = true;
  });
const notReloaded = async () => expect(await page.evaluate(() => (window as any).__noReload)).toBe(true);

describe.skipIf(!hasChromium())('sequences in the dashboard', () => {
  it("creates a sequence, showing the API's message for a bad definition, and shows its steps readably", async () => {
    await page.goto(`${app}/sequences`);
    await heading('Sequences').waitFor();
    await page.getByText('No sequences yet.').waitFor();
    await audit('sequences, empty');

    await page.getByLabel('Name', { exact: true }).fill('Onboarding');
    await page.getByLabel('From').fill(`Acme <hello@${FROM_DOMAIN}>`);
    await page.getByLabel('Trigger event name').fill('signup');
    await page.getByLabel('Status').selectOption('active');
    // Not JSON: said before anything is sent.
    await page.getByLabel('Steps (JSON)').fill('[{"type": "send",');
    await page.getByRole('button', { name: 'Create sequence' }).click();
    await alert().getByText('Steps is not valid JSON').waitFor();
    // JSON, but not a definition the API takes: its own message.
    await page
      .getByLabel('Steps (JSON)')
      .fill(steps([{ type: 'wait_for_event', event: 'activated', timeout: '1d', onArrived: 'later' }]));
    await page.getByRole('button', { name: 'Create sequence' }).click();
    await alert().getByText('no step has the id "later"').waitFor();
    await audit('sequences, bad definition');

    await page.getByLabel('Steps (JSON)').fill(steps(GOOD));
    await page.getByRole('button', { name: 'Create sequence' }).click();
    await heading('Onboarding').waitFor();
    const list = page.getByRole('list', { name: /^Steps/ });
    await list.getByText('Send “Welcome aboard”').waitFor();
    await list
      .getByText(
        'Wait for event “activated”, at most 1 d; when it arrives go to the next step, on timeout to the next step',
      )
      .waitFor();
    await page.getByText('Event “signup”').waitFor();
    await page.getByText('No enrolments yet.').waitFor();
    await audit('sequence detail');

    await go('Sequences', 'Sequences');
    const row = page.getByRole('region', { name: 'Sequences' }).getByRole('row', { name: /Onboarding/ });
    await row.getByText('active').waitFor();
    await row.getByText('Event “signup”').waitFor();
  });

  it('shows an enrolment waiting for its event, then moving on and finishing without a reload', async () => {
    await page.getByRole('link', { name: 'Onboarding' }).click();
    await heading('Onboarding').waitFor();
    await mark();
    await h.contact('ada@rcpt.test', 'Ada');
    await h.event({ name: 'signup', email: 'ada@rcpt.test' });
    // The enrolments list is re-read: the new enrolment appears, stopped at the wait.
    const enrolments = page.getByRole('region', { name: 'Enrolments' });
    await enrolments.getByText('Step 2 of 3, waiting for “activated”').waitFor({ timeout: 30_000 });
    await notReloaded();
    await audit('sequence with enrolments');

    await enrolments.getByRole('link', { name: 'ada@rcpt.test' }).click();
    await heading('Enrolment of ada@rcpt.test').waitFor();
    await mark();
    const now = page.getByRole('region', { name: 'Now' });
    await now.getByText('Step 2 of 3: Wait for event “activated”').waitFor();
    await now.getByText(/^Waiting for the event “activated” until /).waitFor();
    await now.getByText('Live from the running workflow').waitFor();
    const done = page.getByRole('region', { name: 'Steps done' });
    await done.getByRole('row', { name: /Send “Welcome aboard”.*sent/ }).waitFor();
    await audit('enrolment waiting');

    await h.event({ name: 'activated', email: 'ada@rcpt.test' });
    await now.getByText('Enrolment completed.').waitFor({ timeout: 30_000 });
    await done.getByRole('row', { name: /Wait for event “activated”.*arrived/ }).waitFor();
    await done.getByRole('row', { name: /Send “Glad you are in”.*sent/ }).waitFor();
    expect(await page.getByRole('button', { name: 'Cancel enrolment' }).count()).toBe(0);
    await notReloaded();
    // The step's message is linked.
    await done.getByRole('link', { name: 'the message' }).first().click();
    await heading(/Welcome aboard|Glad you are in/).waitFor();
    await page.goBack();
    await heading('Enrolment of ada@rcpt.test').waitFor();
    await audit('enrolment completed');
  });

  it('cancels a running enrolment from its page; pauses and edits the sequence (a new version)', async () => {
    await h.contact('grace@rcpt.test', 'Grace');
    await h.event({ name: 'signup', email: 'grace@rcpt.test' });
    await page.getByRole('link', { name: 'Back to Onboarding' }).click();
    await heading('Onboarding').waitFor();
    const enrolments = page.getByRole('region', { name: 'Enrolments' });
    await enrolments
      .getByRole('row', { name: /grace@rcpt\.test.*waiting for “activated”/ })
      .waitFor({ timeout: 30_000 });
    await enrolments.getByRole('link', { name: 'grace@rcpt.test' }).click();
    await heading('Enrolment of grace@rcpt.test').waitFor();
    await page.getByText('Live from the running workflow').waitFor();
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Cancel enrolment' }).click();
    await page.getByText('Enrolment canceled.').waitFor({ timeout: 15_000 });
    await page.getByRole('link', { name: 'Back to Onboarding' }).click();
    await heading('Onboarding').waitFor();
    await page.getByLabel('Show').selectOption('canceled');
    await enrolments.getByRole('link', { name: 'ada@rcpt.test' }).waitFor({ state: 'detached' });
    await enrolments.getByRole('link', { name: 'grace@rcpt.test' }).waitFor();

    await page.getByRole('button', { name: 'Pause' }).click();
    await page.getByText('Now paused.').waitFor();
    await page.getByRole('button', { name: 'Resume' }).waitFor();
    await page.getByRole('button', { name: 'Edit' }).click();
    await page.getByLabel('Steps (JSON)').fill(steps([{ type: 'exit' }, ...GOOD]));
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { name: 'Steps (version 2)' }).waitFor();
    await page
      .getByRole('list', { name: /^Steps/ })
      .getByText('Exit', { exact: true })
      .waitFor();
    await audit('sequence paused, edited');
  });

  it("lists events and event names (a session reads them; only its own account's)", async () => {
    await go('Events', 'Events');
    const names = page.getByRole('region', { name: 'Event names' });
    await names.getByRole('row', { name: /signup\s+2\b.*Onboarding/ }).waitFor();
    await names.getByRole('row', { name: /activated\s+1\b.*Onboarding/ }).waitFor();
    const recent = page.getByRole('region', { name: 'Recent events' });
    await recent.getByText('grace@rcpt.test').waitFor();
    await audit('events');
    await names.getByRole('button', { name: 'Show events named activated' }).click();
    await recent.getByText('grace@rcpt.test').waitFor({ state: 'detached' });
    await recent.getByText('ada@rcpt.test').waitFor();
    await page.getByLabel('Address').fill('nobody@rcpt.test');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.getByText('No events matching the filter.').waitFor();

    const other = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'other@example.com', password: 'other password' },
      })
    ).body;
    const theirs = await env.stack.api('GET', '/v1/events', { token: other.token });
    expect(theirs).toMatchObject({ status: 200, body: { events: [] } });
    expect((await env.stack.api('GET', '/v1/events/names', { token: other.token })).body).toEqual({ events: [] });
    // Recording an event still takes an API key.
    expect(
      (await env.stack.api('POST', '/v1/events', { token: env.session, body: { name: 'x', email: 'ada@rcpt.test' } }))
        .status,
    ).toBe(403);
  });

  it('works on a phone', async () => {
    await page.setViewportSize({ width: 360, height: 740 });
    for (const [link, title] of [
      ['Sequences', 'Sequences'],
      ['Events', 'Events'],
    ] as const) {
      await go(link, title);
      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(overflow, `${title} scrolls sideways on a phone`).toBeLessThanOrEqual(0);
    }
    await go('Sequences', 'Sequences');
    await page.getByRole('link', { name: 'Onboarding' }).click();
    await heading('Onboarding').waitFor();
    expect(
      await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth),
    ).toBeLessThanOrEqual(0);
    await audit('sequence on a phone');
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(pageErrors, 'uncaught errors in the page').toEqual([]);
  });
});
