import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENTRY = join(ROOT, 'core', 'parsing', 'worker.ts');

let built: string | undefined;

/**
 * The parse worker as one plain ES module a worker thread can load without a TypeScript loader: esbuild
 * bundles core/parsing/worker.ts and the pure modules it imports (packages stay imports of node_modules)
 * into dist/parse-worker-<hash>.mjs, once per process and only when its content changed. The same file
 * works under `tsx`, vitest and a bundled deployment (which ships dist/ beside node_modules). The write
 * goes through a temporary name, so processes building at once never load half a file.
 */
export function parseWorkerFile(): string {
  if (built) return built;
  // A deployment that ships dist/ without the sources runs the newest bundle built at install or image build.
  if (!existsSync(ENTRY)) return (built = newestBuilt());
  const out = buildSync({
    entryPoints: [ENTRY],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    write: false,
    logLevel: 'warning',
    sourcemap: false,
  });
  const code = out.outputFiles[0]!.contents;
  const hash = createHash('sha256').update(code).digest('hex').slice(0, 16);
  const file = join(ROOT, 'dist', `parse-worker-${hash}.mjs`);
  if (!existsSync(file)) {
    mkdirSync(dirname(file), { recursive: true });
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    writeFileSync(tmp, code);
    renameSync(tmp, file);
  }
  built = file;
  return file;
}

function newestBuilt(): string {
  const dist = join(ROOT, 'dist');
  const files = (existsSync(dist) ? readdirSync(dist) : [])
    .filter((f) => /^parse-worker-[0-9a-f]{16}\.mjs$/.test(f))
    .map((f) => join(dist, f));
  const newest = files.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
  if (!newest)
    throw new Error(
      `The parse worker's source (${ENTRY}) and a built dist/parse-worker-*.mjs are both missing: run npm run build:workflows`,
    );
  return newest;
}
