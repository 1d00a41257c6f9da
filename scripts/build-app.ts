/**
 * `npm run build:app` (run by postinstall and the Docker build): bundles the dashboard (dashboard/src,
 * React + TypeScript) with esbuild into dist/app, which the API serves at /app (api/dashboard.ts).
 * `--watch` rebuilds on every change (the running API serves the new files; reload the page).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as esbuild from 'esbuild';

const root = fileURLToPath(new URL('..', import.meta.url));
export const APP_OUT = `${root}dist/app`;

const page = (js: string, css: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>svc-mail dashboard</title>
<link rel="stylesheet" href="/app/assets/${css}">
<script type="module" src="/app/assets/${js}"></script>
</head>
<body>
<div id="root"></div>
</body>
</html>
`;

const options = (): esbuild.BuildOptions => ({
  entryPoints: { app: `${root}dashboard/src/main.tsx` },
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  jsx: 'automatic',
  minify: true,
  sourcemap: 'linked',
  define: { 'process.env.NODE_ENV': '"production"' },
  outdir: `${APP_OUT}/assets`,
  entryNames: '[name]-[hash]',
  metafile: true,
  logLevel: 'warning',
  plugins: [
    {
      name: 'index-html',
      setup(build) {
        // Old hashed files go before each build; index.html names the new ones after it.
        build.onStart(() => {
          rmSync(APP_OUT, { recursive: true, force: true });
          mkdirSync(`${APP_OUT}/assets`, { recursive: true });
        });
        build.onEnd((result) => {
          if (!result.metafile) return;
          const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
          const js = outputs.find((f) => f.endsWith('.js'));
          const css = outputs.find((f) => f.endsWith('.css'));
          if (js && css) writeFileSync(`${APP_OUT}/index.html`, page(js, css));
        });
      },
    },
  ],
});

/** Builds dist/app once. */
export async function buildApp(): Promise<void> {
  await esbuild.build(options());
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv.includes('--watch')) {
    const ctx = await esbuild.context(options());
    await ctx.watch();
    console.log('build-app: watching dashboard/src');
  } else {
    await buildApp();
    console.log(`build-app: ${APP_OUT}`);
  }
}
