import express, { type Express } from 'express';
import type { Core } from '../core/index.js';
import { mountAttachmentRoutes } from './attachments-routes.js';
import { errorHandler, notFoundHandler } from './errors.js';
import { healthDetailSchema, healthSchema, mountHealth } from './health.js';
import { operations } from './ops/index.js';
import { mountAuthorize } from './oauth/authorize.js';
import { mountOAuthEndpoints } from './oauth/endpoints.js';
import { mountPages } from './pages.js';
import { mountTrackingRoutes } from './tracking-routes.js';
import { mountRest } from './rest.js';
import { collectSchemas, mountSchemaRoutes } from './schemas.js';
import { trpcMiddleware } from './trpc.js';

/** Largest JSON body accepted (attachments travel base64 inside sends). */
export const JSON_BODY_LIMIT = '30mb';

export const allSchemas = () => collectSchemas(operations, [healthSchema, healthDetailSchema]);

/** The one Express app: REST at SPEC.md paths, tRPC at /trpc, schemas, health and pages. */
export function createApp(core: Core): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', 'loopback');
  app.use(express.json({ limit: JSON_BODY_LIMIT, type: ['application/json', 'application/*+json'] }));
  // Before the form parser, so a raw upload sent as form-urlencoded (curl's default) keeps its bytes.
  mountAttachmentRoutes(app, core);
  app.use(express.urlencoded({ extended: false, limit: '1mb' }));
  mountHealth(app, core);
  mountSchemaRoutes(app, allSchemas(), core.config.publicUrl);
  mountPages(app);
  mountOAuthEndpoints(app, core);
  mountAuthorize(app, core);
  mountTrackingRoutes(app, core);
  app.use('/trpc', trpcMiddleware(operations, core));
  mountRest(app, operations, core, { checkOutput: core.config.env !== 'production' });
  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}
