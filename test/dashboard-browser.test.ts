import { eq } from 'drizzle-orm';
import nodemailer from 'nodemailer';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { buildApp } from '../scripts/build-app.js';
import { dashboardPage, hasChromium, launchChromium } from './helpers/browser.js';
import { freePort } from './helpers/ports.js';
import { tokenFromMail, waitForMail } from './helpers/outbox.js';
import { startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * The dashboard in a real browser (Chromium, headless: test/helpers/browser.ts), against the whole service: a new user
 * signs up, verifies by the mailed link, claims a hosted subdomain, finds an API-sent message with its
 * delivery trail, sets a webhook and tests it, rotates the account key and creates an app password.
 * axe-core checks every page it opens (no serious or critical violation), under the app's own CSP.
 */
const BASE = 'hosted.dash.test';
const LABEL = 'dash-test';
const EMAIL = 'dash-user@example.com';
const TEMPORAL_UI = 'http://127.0.0.1:8233';

let stack: TestStack;
let browser: Browser;
let context: BrowserContext;
let page: Page;
let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
let app: string;
const pageErrors: string[] = [];

beforeAll(async () => {
  // The app is built from the current sources first (postinstall built it too; this keeps it fresh).
  await buildApp();
  [stack, browser, receiver] = await Promise.all([
    (async () =>
      startStack({ SERVICE_DOMAIN: BASE, DNS_PORT: String(await freePort()), TEMPORAL_UI_URL: TEMPORAL_UI }))(),
    launchChromium(),
    startWebhookReceiver(),
  ]);
  // The mailed links point at PUBLIC_URL: the whole walk stays on that origin (sessionStorage is per origin).
  app = `${stack.config.publicUrl}/app`;
  context = await browser.newContext({ viewport: { width: 1024, height: 800 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.config.publicUrl });
  page = await context.newPage();
  page.on('pageerror', (err) => pageErrors.push(err.message));
});
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await receiver?.close();
});

const audit = (name: string) => dashboardPage(page).audit(name);
const heading = (name: string | RegExp) => dashboardPage(page).heading(name);
const go = (link: string, title: string | RegExp) => dashboardPage(page).go(link, title);

let key1: string;
let key2: string;
const domain = `${LABEL}.${BASE}`;

describe.skipIf(!hasChromium())('the dashboard in a real browser', () => {
  it('is served at /app with its security headers; app paths load index.html; a missing asset is a JSON 404', async () => {
    const res = await fetch(`${app}/messages/msg_anything`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(await res.text()).toContain('/app/assets/');
    const missing = await stack.api('GET', '/app/assets/nope.js');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ error: expect.any(String) });
  });

  it('signs up, and verifies the address by the mailed link', async () => {
    await page.goto(`${app}/signup`);
    await heading('Create an account').waitFor();
    await audit('sign up');
    await page.getByLabel('Email', { exact: true }).fill(EMAIL);
    await page.getByLabel('Password', { exact: true }).fill('short');
    await page.getByRole('button', { name: 'Create account' }).click();
    // The browser's own check stops a short password; the API's message shows for what it refuses.
    expect(
      await page.getByLabel('Password', { exact: true }).evaluate((el: HTMLInputElement) => el.validity.tooShort),
    ).toBe(true);
    await page.getByLabel('Password', { exact: true }).fill('a dashboard password');
    await page.getByRole('button', { name: 'Create account' }).click();
    await heading('Overview').waitFor();
    await page.getByText(`Verify ${EMAIL} to start sending`).waitFor();
    await audit('overview, unverified');

    const mail = await waitForMail(stack, EMAIL, /Verify/);
    const link = `${app}/verify?token=${tokenFromMail(mail.raw)}`;
    expect(mail.raw.replace(/=\r?\n/g, '').replace(/=3D/g, '=')).toContain(link);
    await page.goto(link);
    await heading('Verify your email address').waitFor();
    // Before anything changes: how the account was made and what it holds.
    await page.getByRole('heading', { level: 2, name: 'Is this account yours?' }).waitFor();
    await page.getByText('by signing up with a password').waitFor();
    await page.getByRole('button', { name: 'I did not ask for this' }).waitFor();
    await audit('verify');
    await page.getByRole('button', { name: 'Continue' }).click();
    await heading('Email address verified').waitFor();
    expect(new URL(page.url()).search).toBe('?done'); // the spent token left the address bar
    await audit('verified');
    await page.getByRole('link', { name: 'Go to the dashboard' }).click();
    await heading('Overview').waitFor();
    await page.getByText(`${EMAIL} (verified)`).waitFor();
    expect(await page.getByText('to start sending').count()).toBe(0);
    // Nothing is kept in localStorage; the session (only) is in sessionStorage.
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(await page.evaluate(() => Object.keys(sessionStorage))).toEqual(['svc-session']);
  });

  it('adds a domain: DNS records to copy, each check pending; deletes it with the cleanup report', async () => {
    await go('Domains', 'Domains');
    await audit('domains, empty');
    await page.getByLabel('Domain name').fill('own-domain.example');
    await page.getByRole('button', { name: 'Add domain' }).click();
    await heading('own-domain.example').waitFor();
    const records = page.getByRole('region', { name: 'DNS records' });
    // The MX value is the row's own host under the service domain (it proves the zone is this account's).
    await records.getByText(new RegExp(`^[0-9a-f]{20}\\.mx\\.${BASE.replace(/\./g, '\\.')}$`)).waitFor();
    await records.getByRole('button', { name: 'Copy MX value for own-domain.example' }).click();
    await records.getByRole('button', { name: 'Copied MX value for own-domain.example' }).waitFor();
    const copied = await page.evaluate(() => navigator.clipboard.readText());
    expect(copied).not.toBe('');
    expect(await records.getByText(copied, { exact: true }).count()).toBeGreaterThan(0);
    for (const check of ['MX', 'SPF', 'DKIM', 'DMARC']) await page.getByText(`${check} not yet`).waitFor();
    await page.getByText('updating every 5 s').waitFor();
    await audit('domain with records');
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Delete own-domain.example' }).click();
    await heading('Domain deleted').waitFor();
    await page.getByText('Hosted DNS records deleted: 0').waitFor();
    await audit('domain deleted');
  });

  it('claims a hosted subdomain and sees its checks', async () => {
    await go('Domains', 'Domains');
    await audit('domains');
    await page.getByLabel('Subdomain').fill('ab');
    await page.getByText('At least 3 characters').waitFor();
    await page.getByLabel('Subdomain').fill(LABEL);
    await page.getByText(`${domain} is available.`).waitFor();
    await page.getByRole('button', { name: 'Claim subdomain' }).click();
    await heading(domain).waitFor();
    for (const check of ['MX', 'SPF', 'DKIM', 'DMARC']) await page.getByText(`${check} passing`).waitFor();
    await page.getByText('nothing to publish').waitFor();
  });

  it('sets the inbound webhook, sends a test event and shows its answer', async () => {
    await page.getByLabel('Webhook URL').fill(`${receiver.base}/dash-hook`);
    await page.getByRole('button', { name: 'Save webhook' }).click();
    await page.getByText('Saved. Signing secret').waitFor();
    await page.getByRole('button', { name: 'Send a test event' }).click();
    await page.getByText('Test event accepted: HTTP 200').waitFor();
    expect(receiver.hitsOn('/dash-hook').length).toBeGreaterThanOrEqual(1);
    await audit('domain detail');
    // A DKIM rotation from the page: the hosted zone publishes the new selector at once.
    await page.getByRole('button', { name: 'Rotate DKIM key' }).click();
    await page
      .getByText(/Rotation started: new selector \S+ \(signing now: \S+\)\. Published at once in the hosted zone\./)
      .waitFor();
    // Real inbound mail for the domain, delivered to the webhook (replayed from the Inbound page below).
    const hits = receiver.hitsOn('/dash-hook').length;
    const smtp = nodemailer.createTransport({
      host: '127.0.0.1',
      port: stack.service.smtpPort!,
      secure: false,
      ignoreTLS: true,
    });
    await smtp.sendMail({
      from: 'sender@example.org',
      to: `support@${domain}`,
      subject: 'Inbound for replay',
      text: 'hello',
    });
    await receiver.waitFor('/dash-hook', hits + 1);
  });

  it("sets the domain's inbound policy and a sender rule; releases held mail; shows a webhook's control reply", async () => {
    // On the verified domain's page (left open above): thresholds and the DMARC box, saved and read back.
    await heading(domain).waitFor();
    await page.getByLabel('Hold score').fill('8');
    await page.getByLabel('Refuse score').fill('15.5');
    await page.getByLabel(/Refuse mail that fails DMARC/).check();
    await page.getByRole('button', { name: 'Save policy' }).click();
    await page.getByText('Policy saved: hold at 8, refuse at 15.5, DMARC p=reject refused.').waitFor();
    await audit('domain inbound policy');
    await page.reload();
    await heading(domain).waitFor();
    await page.getByRole('button', { name: 'Save policy' }).waitFor();
    expect(await page.getByLabel('Hold score').inputValue()).toBe('8');
    expect(await page.getByLabel('Refuse score').inputValue()).toBe('15.5');
    expect(await page.getByLabel(/Refuse mail that fails DMARC/).isChecked()).toBe(true);
    const [dom] = await stack.service.core.db.select().from(schema.domains).where(eq(schema.domains.domain, domain));
    expect(dom).toMatchObject({ spamHoldScore: 8, spamRefuseScore: 15.5, refuseDmarcReject: true });

    // A block rule: added, listed, deleted. A value the API refuses shows its message.
    await page.getByLabel('Kind').selectOption('ip');
    await page.getByLabel('Sender', { exact: true }).fill('not-an-ip');
    await page.getByRole('button', { name: 'Add rule' }).click();
    await page.getByRole('alert').getByText('value is not an IP address or CIDR').waitFor();
    await page.getByLabel('Kind').selectOption('address');
    await page.getByLabel('Sender', { exact: true }).fill('Spammer@Bad.example');
    await page.getByLabel('Rule action').selectOption('block');
    await page.getByRole('button', { name: 'Add rule' }).click();
    const rules = page.getByRole('region', { name: 'Sender rules' });
    await rules.getByText('spammer@bad.example', { exact: true }).waitFor();
    await audit('domain sender rules');
    await rules.getByRole('button', { name: 'Delete rule block spammer@bad.example' }).click();
    await page.getByText('No sender rules yet.').waitFor();
    expect(await rules.count()).toBe(0);

    // Held mail (a message the policy held, stored as the quarantine stores one): listed, then released.
    const [user] = await stack.service.core.db
      .select({ id: schema.users.id })
      .from(schema.users)
      .where(eq(schema.users.email, EMAIL));
    const heldId = `msg_dashheld${Date.now()}`;
    const now = Date.now();
    await stack.service.core.db.insert(schema.messages).values({
      id: heldId,
      userId: user!.id,
      direction: 'inbound',
      kind: 'user',
      domainId: dom!.id,
      fromAddr: 'grey@maybe.example',
      envelopeFrom: 'grey@maybe.example',
      toAddrs: [`held@${domain}`],
      subject: 'Held for review',
      status: 'held',
      heldReason: 'spam score 9 at or above 8',
      heldUntil: now + 10 * 86_400_000,
      spam: { scored: true, score: 9, required: 15, action: 'add header', symbols: [] },
      receivedAt: now,
      createdAt: now,
      updatedAt: now,
    });
    await go('Inbound', 'Inbound');
    const held = page.getByRole('region', { name: 'Held messages' });
    const row = held.getByRole('row', { name: /Held for review/ });
    await row.getByText('spam score 9 at or above 8').waitFor();
    await row.getByText('grey@maybe.example').waitFor();
    await audit('inbound with held mail');
    await row.getByRole('button', { name: 'Release Held for review' }).click();
    await page.getByText('Released Held for review: delivered as if it had just arrived.').waitFor();
    await page.getByText('No held mail.').waitFor();
    expect(await held.count()).toBe(0);
    const [released] = await stack.service.core.db
      .select({ status: schema.messages.status, releasedAt: schema.messages.releasedAt })
      .from(schema.messages)
      .where(eq(schema.messages.id, heldId));
    expect(released!.status).not.toBe('held');
    expect(released!.releasedAt).toEqual(expect.any(Number));

    // A webhook answering with a control reply: the message page shows it on the attempt, and the sender it
    // blocked is listed among the domain's rules as added by a webhook reply.
    receiver.on('/dash-control', () => ({
      status: 200,
      body: JSON.stringify({ status: 'ok', actions: [{ type: 'block-sender' }] }),
    }));
    await page.getByLabel('Address pattern').fill('report');
    await page.getByLabel('Webhook URL').fill(`${receiver.base}/dash-control`);
    await page.getByRole('button', { name: 'Add route' }).click();
    await page.getByText(`Route added for report@${domain}.`).waitFor();
    await nodemailer
      .createTransport({ host: '127.0.0.1', port: stack.service.smtpPort!, secure: false, ignoreTLS: true })
      .sendMail({ from: 'pest@noisy.example', to: `report@${domain}`, subject: 'Control reply check', text: 'hi' });
    await receiver.waitFor('/dash-control', 1);
    await page.reload();
    await page.getByRole('link', { name: 'Control reply check' }).click();
    await heading('Control reply check').waitFor();
    await page.getByRole('button', { name: 'Show attempts' }).first().click();
    await page
      .getByRole('region', { name: /^Attempts of dlv_/ })
      .getByText('ok · control: ok + block-sender')
      .waitFor();
    await audit('message with a control reply');
    await go('Domains', 'Domains');
    await page.getByRole('link', { name: domain }).click();
    await heading(domain).waitFor();
    await page
      .getByRole('region', { name: 'Sender rules' })
      .getByRole('row', { name: /pest@noisy\.example/ })
      .getByText('webhook reply')
      .waitFor();
  });

  it('reveals the account key; a message sent with it shows in the dashboard with its delivery trail', async () => {
    await go('Keys', 'Keys');
    await page.getByRole('button', { name: 'Reveal account key' }).click();
    key1 = (await page.getByTestId('account-key').textContent())!;
    expect(key1).toMatch(/^svc_live_/);
    const sent = await stack.api('POST', '/v1/send', {
      token: key1,
      body: { from: `Hello <hello@${domain}>`, to: 'friend@example.com', subject: 'Dashboard trail check', text: 'hi' },
    });
    expect(sent.status, JSON.stringify(sent.body)).toBeLessThan(300);

    await go('Messages', 'Messages');
    await page.getByLabel('Search subject, from or to').fill('trail check');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByRole('link', { name: 'Dashboard trail check' }).click();
    await heading('Dashboard trail check').waitFor();
    // The page re-reads a message on its way: the SMTP attempt (captured by the local outbox) appears.
    const trail = page.getByRole('region', { name: 'Delivery trail' });
    await trail.getByText('captured').waitFor({ timeout: 30_000 });
    const run = trail.getByRole('link').first();
    expect(await run.getAttribute('href')).toMatch(new RegExp(`^${TEMPORAL_UI}/`));
    await audit('message detail');
    await go('Messages', 'Messages');
    await audit('messages');
  });

  it('rotates the account key (the old one stops working) and creates an app password shown once', async () => {
    await go('Keys', 'Keys');
    page.once('dialog', (d) => void d.accept());
    await page.getByRole('button', { name: 'Rotate account key' }).click();
    await page.getByText('Rotated: the previous key no longer works').waitFor();
    key2 = (await page.getByTestId('account-key').textContent())!;
    expect(key2).toMatch(/^svc_live_/);
    expect(key2).not.toBe(key1);
    expect((await stack.api('GET', '/v1/me', { token: key1 })).status).toBe(401);
    expect((await stack.api('GET', '/v1/me', { token: key2 })).status).toBe(200);

    // The SMTP submission settings (GET /api/smtp-settings) next to the keys.
    const smtp = page.getByRole('region', { name: 'Send with SMTP' });
    await smtp.getByText(stack.config.submission.host, { exact: true }).waitFor();
    expect(await smtp.textContent()).toContain(`${stack.config.submission.publicPort} with STARTTLS`);

    await page.getByLabel('Label').fill('phone mail');
    await page.getByRole('checkbox', { name: 'SMTP' }).check();
    await page.getByText('The full address of a mailbox the pattern covers').waitFor();
    await page.getByRole('button', { name: 'Create app password' }).click();
    const secret = (await page.getByTestId('app-password').textContent())!;
    expect(secret).toMatch(/^svc_pw_/);
    await page.getByRole('region', { name: 'App passwords' }).getByText('phone mail').waitFor();
    await page.getByRole('region', { name: 'App passwords' }).getByText('imap, smtp').waitFor();
    await audit('keys');
    expect(await page.evaluate(() => JSON.stringify({ ...sessionStorage, ...localStorage }))).not.toContain(secret);
  });

  it('replays inbound deliveries, previews a template, imports a CSV and sends a broadcast with live progress; every page passes axe and works on a phone', async () => {
    await go('Inbound', 'Inbound');
    await page.getByRole('region', { name: 'Routes' }).getByText(`*@${domain}`).waitFor();
    const hits = receiver.hitsOn('/dash-hook').length;
    await page.getByLabel('Select Inbound for replay').check();
    await page.getByRole('button', { name: 'Replay selected (1)' }).click();
    await page.getByText('Replayed 1: 1 delivered, 0 failed, 0 skipped.').waitFor();
    expect(receiver.hitsOn('/dash-hook').length).toBe(hits + 1);
    // Only inbound mail is listed there (messages.list?direction=inbound): not the message sent above.
    expect(
      await page.getByRole('region', { name: 'Received messages' }).getByText('Dashboard trail check').count(),
    ).toBe(0);
    // The Spam column: this stack has no rspamd, so the message says it was delivered unscored, and why.
    await page
      .getByRole('row', { name: /Inbound for replay/ })
      .getByText('unscored (not configured)')
      .waitFor();
    await audit('inbound');
    await page.getByRole('link', { name: 'Inbound for replay' }).click();
    await heading('Inbound for replay').waitFor();
    // Its page shows the verdict too.
    await page.getByRole('definition').getByText('unscored (not configured)').waitFor();
    await page.getByRole('button', { name: 'Show attempts' }).first().click();
    await page
      .getByRole('region', { name: /^Attempts of dlv_/ })
      .first()
      .getByText('HTTP 200')
      .first()
      .waitFor();
    await audit('inbound message');

    await go('Templates', 'Templates');
    await page.getByRole('button', { name: 'New template' }).click();
    await page.getByLabel('Subject').fill('Hello {{name}}');
    await page.getByLabel('name', { exact: true }).fill('Ada');
    await page.getByText('Hello Ada').waitFor();
    await audit('templates');

    await go('Suppressions', 'Suppressions');
    await page.getByLabel('Suppress an address').fill('nope@example.com');
    await page.getByRole('button', { name: 'Suppress' }).click();
    await page.getByRole('region', { name: 'Suppressed addresses' }).getByText('nope@example.com').waitFor();
    await audit('suppressions');

    // A CSV import runs as a workflow: its counts update on the page until it is done.
    await go('Lists', 'Lists');
    await page.getByLabel('New list name').fill('Newsletter');
    await page.getByRole('button', { name: 'Create list' }).click();
    await page.getByRole('button', { name: 'Import CSV into Newsletter' }).click();
    await page
      .getByLabel('Or paste CSV')
      .fill('email,name\nada@example.com,Ada\ngrace@example.com,Grace\nnot-an-address,X\n');
    await page.getByRole('button', { name: 'Start import' }).click();
    await page.getByText('Import done: 3 rows read, 2 created, 0 updated, 1 rejected.').waitFor({ timeout: 30_000 });
    await page.getByRole('region', { name: 'Lists' }).getByRole('cell', { name: '2', exact: true }).waitFor();
    await audit('lists');

    // The account's footer address (Overview) prefills the broadcast below.
    await go('Overview', 'Overview');
    await page.getByLabel('Postal address').fill('1 Main Street, Springfield');
    await page.getByRole('button', { name: 'Save footer address' }).click();
    await page.getByText('Saved.').waitFor();
    await audit('overview');

    // A broadcast to the list: composed, sent, its progress shown until every recipient is done.
    await go('Broadcasts', 'Broadcasts');
    await page.getByLabel('From').fill(`News <news@${domain}>`);
    await page.getByLabel('Subject').fill('Monthly news');
    await page.getByLabel('HTML body').fill('<p>Hi {{name}}</p>');
    await page.getByLabel('Audience').selectOption('list');
    await page.getByLabel('List', { exact: true }).selectOption({ label: 'Newsletter (2)' });
    await page.getByRole('button', { name: 'Save draft' }).click();
    await heading('Monthly news').waitFor();
    await page.getByText('1 Main Street, Springfield').waitFor();
    await audit('broadcast draft');
    await page.getByRole('button', { name: 'Send now' }).click();
    await page.getByText(/^2 sent, 0 failed, 0 skipped/).waitFor({ timeout: 30_000 });
    await audit('broadcast sent');
    await go('Broadcasts', 'Broadcasts');
    await audit('broadcasts');

    await page.setViewportSize({ width: 360, height: 740 });
    for (const [link, title] of [
      ['Overview', 'Overview'],
      ['Domains', 'Domains'],
      ['Keys', 'Keys'],
      ['Messages', 'Messages'],
    ] as const) {
      await go(link, title);
      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(overflow, `${title} scrolls sideways on a phone`).toBeLessThanOrEqual(0);
    }
    await audit('messages on a phone');
  });

  it('signs out (the session ends on the server too), then signs in by emailed link and by password', async () => {
    const token = await page.evaluate(() => JSON.parse(sessionStorage.getItem('svc-session')!).token as string);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await heading('Sign in').waitFor();
    await audit('sign in');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect((await stack.api('GET', '/api/keys', { token })).status).toBe(401);

    // A wrong password: the API's own message shows.
    await page.getByLabel('Email', { exact: true }).fill(EMAIL);
    await page.getByLabel('Password', { exact: true }).fill('not the dashboard password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').getByText('Wrong email or password').waitFor();

    await page.getByLabel('A link sent by email').check();
    await page.getByRole('button', { name: 'Email me a link' }).click();
    await page.getByText('a sign-in link is on its way').waitFor();
    const mail = await waitForMail(stack, EMAIL, /sign-in link/);
    await page.goto(`${app}/signin?token=${tokenFromMail(mail.raw)}`);
    await page.getByRole('button', { name: 'Continue' }).click();
    await heading('Signed in').waitFor();
    // Verification kept the password chosen at sign-up, so the page offers none to set.
    expect(await page.getByRole('button', { name: 'Set password' }).count()).toBe(0);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await heading('Sign in').waitFor();
    // By keyboard alone: type, Tab to the password, Enter submits.
    await page.getByLabel('Email', { exact: true }).focus();
    await page.keyboard.type(EMAIL);
    await page.keyboard.press('Tab');
    await page.keyboard.type('a dashboard password');
    await page.keyboard.press('Enter');
    await heading('Overview').waitFor();
    expect(pageErrors, 'uncaught errors in the page').toEqual([]);
  });

  it('a sign-in link on an address never proven lists what it revokes, ticked; the one the owner unticks keeps working', async () => {
    // Someone signed up with an address that is not theirs: a password, and the account key they read.
    const email = 'squatted@example.com';
    const made = await stack.api('POST', '/api/auth/signup', { body: { email, password: 'the squatter password' } });
    expect(made.body.token).toEqual(expect.any(String));
    const squatterKey: string = (await stack.api('GET', '/api/keys', { token: made.body.token })).body.key;
    await context.clearCookies();
    await page.evaluate(() => sessionStorage.clear());
    // The owner of the mailbox asks for a link to the dashboard and opens it.
    expect((await stack.api('POST', '/api/auth/signin-link', { body: { email, linkTo: 'app' } })).status).toBeLessThan(
      300,
    );
    const mail = await waitForMail(stack, email, /sign-in link/);
    await page.goto(`${app}/signin?token=${tokenFromMail(mail.raw)}`);
    const revoke = page.getByRole('group', { name: 'Revoke when you continue' });
    await revoke.waitFor();
    await audit('sign-in link of an unproven address');
    const keyBox = revoke.getByRole('checkbox', { name: /account API key/ });
    const passwordBox = revoke.getByRole('checkbox', { name: 'The password' });
    expect([await keyBox.isChecked(), await passwordBox.isChecked()]).toEqual([true, true]);
    // Pretend the owner recognises the key (say, their own script provisioned it): untick it.
    await keyBox.uncheck();
    await page.getByRole('button', { name: 'Continue' }).click();
    await heading('Signed in').waitFor();
    expect((await stack.api('GET', '/v1/me', { token: squatterKey })).status).toBe(200);
    // What stayed ticked is revoked: the password signs nobody in, the earlier session has ended.
    expect(
      (await stack.api('POST', '/api/auth/login', { body: { email, password: 'the squatter password' } })).status,
    ).toBe(401);
    expect((await stack.api('GET', '/api/keys', { token: made.body.token })).status).toBe(401);
    expect(pageErrors, 'uncaught errors in the page').toEqual([]);
  });
});
