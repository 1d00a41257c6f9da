import express, { type Express } from 'express';
import type { Core } from '../core/index.js';
import { mountAttachmentRoutes } from './attachments-routes.js';
import { mountDashboard } from './dashboard.js';
import { jsonBodyParser, mountImportBody } from './body-limits.js';
import { errorHandler, notFoundHandler } from './errors.js';
import { denyFraming } from './frame-guard.js';
import { mountMailboxRaw } from './mailbox-routes.js';
import { mountMessageRaw } from './message-raw-route.js';
import { healthDetailSchema, healthSchema, mountHealth } from './health.js';
import { mountMetrics } from './metrics.js';
import { traceRequests } from './tracing.js';
import { mountDeliverability } from './deliverability.js';
import { mountMtaStsRoutes } from './mta-sts-routes.js';
import { mountEgressRoutes } from './egress-routes.js';
import { mountEgressOutcomes } from './egress-outcomes.js';
import { operations } from './ops/index.js';
import { mountAuthorize } from './oauth/authorize.js';
import { mountOAuthEndpoints } from './oauth/endpoints.js';
import { mountMcp } from './mcp/server.js';
import { mountPages } from './pages.js';
import { mountTrackingRoutes } from './tracking-routes.js';
import { mountUnsubscribeRoutes } from './unsubscribe-routes.js';
import { mountRest } from './rest.js';
import { mountOpenApi } from './openapi.js';
import { collectSchemas, mountSchemaRoutes, type SchemaEntry } from './schemas.js';
import { WEBHOOK_PAYLOADS } from '../core/webhooks/payload-schemas.js';
import { customEvent } from './ops/events.js';
import { trpcMiddleware } from './trpc.js';

/** Published besides the operations: every webhook payload, and the application event record (SPEC.md Custom event). */
const payloadSchemas: SchemaEntry[] = [
  ...Object.entries(WEBHOOK_PAYLOADS).map(([type, p]) => ({
    name: p.name,
    title: `${type} webhook payload`,
    schema: p.schema,
    io: 'output' as const,
  })),
  {
    name: 'custom-event',
    title: 'Application event (cev_…) as GET /v1/events answers it',
    schema: customEvent,
    io: 'output',
  },
];

export const allSchemas = () => collectSchemas(operations, [healthSchema, healthDetailSchema, ...payloadSchemas]);

/** The one Express app: REST at SPEC.md paths, tRPC at /trpc, schemas, health and pages. */
export function createApp(core: Core): Express {
  const app = express();
  app.disable('x-powered-by');
  // TRUST_PROXY: X-Forwarded-For names the client only behind a proxy the operator trusts; else anyone could.
  app.set('trust proxy', core.config.trustProxy);
  app.use(denyFraming);
  app.use(jsonBodyParser(core));
  // Before the form parser, so a raw upload sent as form-urlencoded (curl's default) keeps its bytes.
  mountAttachmentRoutes(app, core);
  app.use(express.urlencoded({ extended: false, limit: '100kb', parameterLimit: 100 }));
  // After the body parsers: their stream callbacks would run outside the request's trace context.
  if (core.config.otlpEndpoint) app.use(traceRequests({ trustIncoming: core.config.traceTrustIncoming }));
  mountHealth(app, core);
  mountMetrics(app, core);
  mountDeliverability(app, core);
  mountMtaStsRoutes(app, core);
  mountEgressRoutes(app, core);
  mountEgressOutcomes(app, core);
  mountSchemaRoutes(app, allSchemas(), core.config.publicUrl);
  mountOpenApi(app, operations, core.config.publicUrl);
  mountPages(app, core);
  mountDashboard(app);
  mountOAuthEndpoints(app, core);
  mountAuthorize(app, core);
  mountMcp(app, core, operations);
  mountTrackingRoutes(app, core);
  mountUnsubscribeRoutes(app, core);
  mountImportBody(app, core);
  // Answers are parsed with their output schemas in every mode; outside production an undeclared field fails the call (api/output.ts).
  app.use('/trpc', trpcMiddleware(operations, core, { strictOutput: core.config.env !== 'production' }));
  mountMailboxRaw(app, core);
  mountMessageRaw(app, core);
  mountRest(app, operations, core, { strictOutput: core.config.env !== 'production' });
  app.use(notFoundHandler);
  app.use(errorHandler);
  return app;
}
