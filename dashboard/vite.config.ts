import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/** The dashboard build: dashboard/ → dist/app, served by the API at /app (api/dashboard.ts). */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/app/',
  // JSX by esbuild (React's automatic runtime): no plugin needed.
  esbuild: { jsx: 'automatic' },
  build: {
    outDir: fileURLToPath(new URL('../dist/app', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    chunkSizeWarningLimit: 600,
    rollupOptions: {
      // TanStack Query marks its modules "use client" (for server components); meaningless in this bundle.
      onwarn(warning, warn) {
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning);
      },
    },
  },
  logLevel: 'warn',
});
