import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import express, { type Express, type Response } from 'express';
import { AppError } from '../core/errors.js';

/** Where `npm run build:app` (run by postinstall) writes the dashboard: dist/app. */
export const DASHBOARD_DIR = fileURLToPath(new URL('../dist/app/', import.meta.url));

// The app's own files only: scripts and styles from this origin, API calls to this origin, nothing framed.
// Template previews are sandboxed srcdoc frames (no scripts), so they stay under this policy too.
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
  "frame-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'";

function secure(res: Response): void {
  res.set({
    'Content-Security-Policy': CSP,
    'Referrer-Policy': 'no-referrer',
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
  });
}

/**
 * The dashboard at /app: the static build of dashboard/ (hashed assets cached for good, index.html never),
 * and index.html for every other /app path so the app's own routes (/app/messages/msg_…) load on refresh.
 */
export function mountDashboard(app: Express, dir = DASHBOARD_DIR): void {
  const index = `${dir}index.html`;
  app.use(
    '/app/assets',
    express.static(`${dir}assets`, {
      immutable: true,
      maxAge: '365d',
      index: false,
      fallthrough: false,
      setHeaders: (res) => secure(res),
    }),
  );
  app.get(['/app', '/app/{*rest}'], (_req, res) => {
    if (!existsSync(index))
      throw new AppError(503, 'dashboard_not_built', 'The dashboard is not built: run `npm run build:app`');
    secure(res);
    res.set('Cache-Control', 'no-cache').sendFile(index);
  });
}
