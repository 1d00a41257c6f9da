/**
 * `npm run build:workflows` (run by postinstall and the Docker build): bundles workflows/ once into
 * dist/workflows.js, so a worker starts without bundling. A worker whose sources changed since (the
 * hash differs) bundles at start instead, so a stale bundle never runs.
 */
import { parseWorkerFile } from '../core/parsing/worker-file.js';
import { buildBundle } from '../temporal/bundle.js';

const path = await buildBundle();
console.log(`build-workflows: ${path}`);
// The parse pool's worker too (core/parsing/worker-file.ts), so a deployment without sources has it.
console.log(`build-workflows: ${parseWorkerFile()}`);
