import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';
import { WORKFLOW_INTERCEPTORS } from '../temporal/bundle.js';
import { startDevServer } from '../temporal/dev-server.js';
import { WORKFLOWS_PATH } from '../worker.js';
import { browserTestFiles, findChromium, SKIP_HINT, type FoundChromium } from './helpers/find-chromium.js';
import { freePort } from './helpers/ports.js';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    workflowBundlePath: string;
    /** The Chromium the browser tests launch, or null: they skip (test/helpers/browser.ts). */
    chromium: FoundChromium | null;
  }
}

/**
 * One real Temporal dev server (in memory) and one workflow bundle for the whole run, and the Chromium the
 * browser tests use. Without one, the run ends with one line naming the browser test files that skipped.
 */
export default async function setup(project: TestProject) {
  const browser = await findChromium();
  project.provide('chromium', browser.found ?? null);
  // Continue-as-new is suggested after 30 events, so the long-running loops reach it within a test (DESIGN.md, Testing strategy).
  const server = await startDevServer({
    port: await freePort(),
    namespace: 'default',
    dynamicConfig: ['limit.historyCount.suggestContinueAsNew=30'],
  });
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: [WORKFLOW_INTERCEPTORS],
    logger: quietLogger,
  });
  const bundlePath = join(mkdtempSync(join(tmpdir(), 'svc-bundle-')), 'workflows.js');
  writeFileSync(bundlePath, code);
  project.provide('temporalAddress', server.address);
  project.provide('workflowBundlePath', bundlePath);
  return async () => {
    await server.stop();
    if (!browser.found) reportSkippedBrowserTests(project);
  };
}

/** "browser tests skipped: no Chromium (…): <files>", for the browser test files this run held. */
function reportSkippedBrowserTests(project: TestProject): void {
  const ran = new Set(project.vitest.state.getTestModules().map((m) => m.moduleId));
  const skipped = browserTestFiles(join(project.config.root, 'test')).filter((f) => ran.has(f));
  if (skipped.length === 0) return;
  const names = skipped.map((f) => relative(project.config.root, f)).join(', ');
  project.vitest.logger.log(`browser tests skipped: ${SKIP_HINT}: ${names}`);
}

const noop = () => undefined;
const quietLogger = { trace: noop, debug: noop, info: noop, warn: console.warn, error: console.error, log: noop };
