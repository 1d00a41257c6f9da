import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect } from 'vitest';

/** Debian's Chromium, headless, with the flags that keep it off this machine's closed network. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
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
      const bad = (result.violations as any[]).filter((v) => v.impact === 'serious' || v.impact === 'critical')
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
