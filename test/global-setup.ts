import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { TestProject } from 'vitest/node';
import { WORKFLOW_INTERCEPTORS } from '../temporal/bundle.js';
import { startDevServer } from '../temporal/dev-server.js';
import { WORKFLOWS_PATH } from '../worker.js';
import { freePort } from './helpers/ports.js';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    workflowBundlePath: string;
  }
}

/** One real Temporal dev server (in memory) and one workflow bundle for the whole run. */
export default async function setup(project: TestProject) {
  // Continue-as-new is suggested after 30 events, so the long-running loops reach it within a test (DESIGN.md, Testing strategy).
  const server = await startDevServer({ port: await freePort(), namespace: 'default', dynamicConfig: ['limit.historyCount.suggestContinueAsNew=30'] });
  const { code } = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, workflowInterceptorModules: [WORKFLOW_INTERCEPTORS], logger: quietLogger });
  const bundlePath = join(mkdtempSync(join(tmpdir(), 'svc-bundle-')), 'workflows.js');
  writeFileSync(bundlePath, code);
  project.provide('temporalAddress', server.address);
  project.provide('workflowBundlePath', bundlePath);
  return () => server.stop();
}

const noop = () => undefined;
const quietLogger = { trace: noop, debug: noop, info: noop, warn: console.warn, error: console.error, log: noop };
