import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const WORKFLOWS_DIR = join(ROOT, 'workflows');
export const WORKFLOWS_ENTRY = join(WORKFLOWS_DIR, 'index.ts');
/** The workflow interceptors every bundle carries (tracing, active only for runs started with a trace context). */
export const WORKFLOW_INTERCEPTORS = join(WORKFLOWS_DIR, 'tracing-interceptors.ts');
/** Built at install (`npm run build:workflows`, run by postinstall) or image build; git-ignored. */
export const BUNDLE_PATH = join(ROOT, 'dist', 'workflows.js');
const HASH_PATH = `${BUNDLE_PATH}.sha256`;

/** A hash of everything the bundle is made of: the workflow sources and the SDK version. */
export function workflowSourcesHash(): string {
  const h = createHash('sha256');
  for (const f of readdirSync(WORKFLOWS_DIR)
    .filter((n) => n.endsWith('.ts'))
    .sort())
    h.update(f).update(readFileSync(join(WORKFLOWS_DIR, f)));
  h.update(
    JSON.parse(readFileSync(join(ROOT, 'node_modules', '@temporalio', 'workflow', 'package.json'), 'utf8')).version,
  );
  return h.digest('hex');
}

/** The prebuilt bundle when it was built from the current sources; undefined when missing or stale. */
export function prebuiltBundle(): string | undefined {
  if (!existsSync(BUNDLE_PATH) || !existsSync(HASH_PATH)) return undefined;
  return readFileSync(HASH_PATH, 'utf8').trim() === workflowSourcesHash() ? BUNDLE_PATH : undefined;
}

/** Bundles the workflows once and writes the bundle with the hash of its sources. */
export async function buildBundle(): Promise<string> {
  const { bundleWorkflowCode } = await import('@temporalio/worker');
  const noop = () => undefined;
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_ENTRY,
    workflowInterceptorModules: [WORKFLOW_INTERCEPTORS],
    logger: { trace: noop, debug: noop, info: noop, warn: console.warn, error: console.error, log: noop },
  });
  mkdirSync(dirname(BUNDLE_PATH), { recursive: true });
  writeFileSync(BUNDLE_PATH, code);
  writeFileSync(HASH_PATH, workflowSourcesHash() + '\n');
  return BUNDLE_PATH;
}
