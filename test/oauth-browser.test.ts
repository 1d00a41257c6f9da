import { eq } from 'drizzle-orm';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { hasChromium, launchChromium, startRedirectCatcher } from './helpers/browser.js';
import { waitForMail } from './helpers/outbox.js';
import { authorizeUrl, pkce, registerClient, startOAuthStack, tokenRequest } from './helpers/oauth.js';
import type { TestStack } from './helpers/stack.js';

/** A real browser (Chromium, headless: test/helpers/browser.ts) walks the consent page as a person would. */
let stack: TestStack;
let browser: Browser;
let redirect: string;
let app: Awaited<ReturnType<typeof startRedirectCatcher>>;
let clientId: string;
const EMAIL = 'browser-user@example.com';
const PASSWORD = 'a browser password';

beforeAll(async () => {
  [stack, browser] = await Promise.all([startOAuthStack(), launchChromium()]);
  app = await startRedirectCatcher('/browser/cb');
  redirect = app.url;
  clientId = (await registerClient(stack, [redirect], 'Browser Linked App')).client_id;
});
afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  await app?.close();
});

/** Opens the authorize page of a new browser context; the app's redirect lands on its loopback listener. */
async function openConsent(viewport = { width: 1024, height: 800 }) {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const { verifier, challenge } = pkce();
  const state = `s-${Math.random().toString(36).slice(2)}`;
  const returned = app.next();
  await page.goto(authorizeUrl(stack, { clientId, redirectUri: redirect, challenge, state }));
  return { context, page, verifier, state, returned };
}

/** The text body of the newest mail to `to` whose subject matches (read from the capture outbox). */
async function mailedLink(to: string, subject: RegExp): Promise<string> {
  const mail = await waitForMail(stack, to, subject);
  const [msg] = await stack.service.core.db
    .select()
    .from(schema.messages)
    .where(eq(schema.messages.id, mail.messageId));
  const link = /(http\S+\/oauth\/authorize\?\S+)/.exec(msg!.text ?? '')?.[1];
  if (!link) throw new Error(`no return link in:\n${msg!.text}`);
  return link;
}

/** Approves on the consent page, then finishes as the app would: token, then the account key. */
async function approveAndLink(page: Page, returned: Promise<URL>, verifier: string, state: string) {
  await page.getByRole('button', { name: 'Approve' }).waitFor({ timeout: 30_000 });
  await page.getByRole('button', { name: 'Approve' }).click();
  const back = await returned;
  expect(back.searchParams.get('state')).toBe(state);
  expect(back.searchParams.get('iss')).toBe(stack.config.publicUrl);
  const tokens = await tokenRequest(stack, {
    grant_type: 'authorization_code',
    code: back.searchParams.get('code')!,
    redirect_uri: redirect,
    client_id: clientId,
    code_verifier: verifier,
  });
  expect(tokens.status).toBe(200);
  const keys = await stack.api('GET', '/api/keys', { token: tokens.body.access_token });
  expect(keys.status).toBe(200);
  return keys.body.key as string;
}

let firstKey: string;

describe.skipIf(!hasChromium())('linking in a real browser', () => {
  it('creates an account on the page, verifies it by the emailed link, approves, and the app reads the account key', async () => {
    const { context, page, verifier, state, returned } = await openConsent();
    await page.getByRole('heading', { name: 'Link an app to your account' }).waitFor();
    expect(await page.title()).toBe('Link an app to your account');
    const body = await page.locator('main').innerText();
    expect(body).toContain('Browser Linked App');
    expect(body).toContain(new URL(redirect).host);
    expect(body).toContain('Send email from your verified domains');

    const signup = page.getByRole('form', { name: 'Create account' });
    await signup.getByLabel('Email').fill(EMAIL);
    await signup.getByLabel('Choose a password').fill(PASSWORD);
    await signup.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Verify your email to continue' }).waitFor();
    expect(await page.getByRole('button', { name: 'Approve' }).count()).toBe(0);

    // The verification mail brings this browser back to the same authorization request.
    await page.goto(await mailedLink(EMAIL, /Verify/));
    await page.getByRole('button', { name: 'Continue' }).click();
    firstKey = await approveAndLink(page, returned, verifier, state);
    expect(firstKey).toMatch(/^svc_live_/);
    const [user] = await stack.service.core.db.select().from(schema.users).where(eq(schema.users.email, EMAIL));
    expect(user!.emailVerified).toBe(true);
    await context.close();
  });

  it('signs an existing account in with its password and links again: the same account key', async () => {
    // The first verification reset the password the page's sign-up set (issue 10: credentials set before the
    // address was proven stop working); the owner sets one again through the emailed reset link.
    await stack.api('POST', '/api/auth/password/forgot', { body: { email: EMAIL } });
    const reset = await waitForMail(stack, EMAIL, /Reset/);
    const [msg] = await stack.service.core.db
      .select()
      .from(schema.messages)
      .where(eq(schema.messages.id, reset.messageId));
    const token = /reset\?token=([A-Za-z0-9_-]+)/.exec(msg!.text ?? '')![1]!;
    expect((await stack.api('POST', '/api/auth/password/reset', { body: { token, password: PASSWORD } })).status).toBe(
      200,
    );
    const { context, page, verifier, state, returned } = await openConsent();
    const signin = page.getByRole('form', { name: 'Sign in' });
    await signin.getByLabel('Email').fill(EMAIL);
    await signin.getByLabel('Password').fill(PASSWORD);
    await signin.getByRole('button', { name: 'Sign in' }).click();
    expect(await approveAndLink(page, returned, verifier, state)).toBe(firstKey);
    await context.close();
  });

  it('signs an existing account in with an emailed link that returns to the same request', async () => {
    const { context, page, verifier, state, returned } = await openConsent();
    const linkForm = page.getByRole('form', { name: 'Email me a sign-in link' });
    await linkForm.getByLabel('Email').fill(EMAIL);
    await linkForm.getByRole('button', { name: 'Email me a sign-in link' }).click();
    await page.getByRole('status').waitFor();
    await page.goto(await mailedLink(EMAIL, /sign-in link/));
    await page.getByRole('button', { name: 'Continue' }).click();
    expect(await approveAndLink(page, returned, verifier, state)).toBe(firstKey);
    await context.close();
  });

  it('fits a phone screen and keeps a sensible keyboard order', async () => {
    const { context, page } = await openConsent({ width: 360, height: 740 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(360);
    expect(await page.locator('meta[name=viewport]').getAttribute('content')).toContain('width=device-width');
    const order: string[] = [];
    for (let i = 0; i < 4; i++) {
      await page.keyboard.press('Tab');
      order.push(await page.evaluate(() => document.activeElement?.id || document.activeElement?.textContent || ''));
    }
    expect(order).toEqual(['signin-email', 'signin-password', 'Sign in', 'link-email']);
    // Every visible input has a label.
    const unlabeled = await page.evaluate(
      () =>
        [...document.querySelectorAll('input:not([type=hidden])')].filter(
          (i) => (i as HTMLInputElement).labels?.length === 0,
        ).length,
    );
    expect(unlabeled).toBe(0);
    await context.close();
  });
});
