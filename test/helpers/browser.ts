import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect, inject } from 'vitest';

/**
 * True when the run found a Chromium that starts (test/global-setup.ts, test/helpers/find-chromium.ts). The
 * browser test files skip their describes when it is false; the run then prints one line naming them.
 */
export const hasChromium = (): boolean => inject('chromium') !== null;

/** The Chromium the run found, headless, with the flags that keep it off this machine's closed network. */
export function launchChromium(): Promise<Browser> {
  const found = inject('chromium');
  if (!found) throw new Error('no Chromium: skip this test with describe.skipIf(!hasChromium())');
  return chromium.launch({
    executablePath: found.path,
    env: { ...process.env, ...found.env } as Record<string, string>,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * A loopback listener standing in for an app's redirect URI: it answers 200 and hands over each URL the browser
 * lands on at `path`. A real listener, not page.route: Chromium builds older than the one Playwright expects do
 * not let Playwright intercept the target of a redirect.
 */
export async function startRedirectCatcher(path: string, body = 'back at the app') {
  const waiting: ((url: URL) => void)[] = [];
  const arrived: URL[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', `http://${req.headers.host}`);
    res.writeHead(url.pathname === path ? 200 : 404, { 'content-type': 'text/plain' }).end(body);
    if (url.pathname !== path) return;
    const waiter = waiting.shift();
    if (waiter) waiter(url);
    else arrived.push(url);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`,
    /** The next URL the browser is sent to. */
    next: (): Promise<URL> => {
      const first = arrived.shift();
      return first ? Promise.resolve(first) : new Promise<URL>((resolve) => waiting.push(resolve));
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** The dashboard's page helpers: axe-core on the page as it is now, headings, and the main navigation. */
export function dashboardPage(page: Page) {
  const heading = (name: string | RegExp) => page.getByRole('heading', { level: 1, name });
  return {
    heading,
    /** Runs axe-core; serious and critical violations fail the test. */
    async audit(name: string) {
      await page.evaluate(axeSource);
      const result = await page.evaluate(() => (window as any).axe.run(document, { resultTypes: ['violations'] }));
      const bad = (result.violations as any[])
        .filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n: any) => n.target.join(' ')).join(', ')}`);
      expect(bad, `axe on ${name}`).toEqual([]);
    },
    /** Follows a link of the main navigation and waits for the page's heading. */
    async go(link: string, title: string | RegExp) {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: link, exact: true }).click();
      await heading(title).waitFor();
    },
  };
}
