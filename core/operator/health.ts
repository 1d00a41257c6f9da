import type { Database } from '../../db/index.js';
import type { Config } from '../config.js';
import type { OperationsWorkflows } from '../ports/operations.js';
import type { CheckResult } from './checks.js';
import { runDoctor } from './doctor.js';

/** What GET /api/health calls: a ping of the database and of Temporal, which database it is, and the doctor. */
export function createHealthService(deps: { config: Config; database: Database; temporal: OperationsWorkflows }) {
  const { config, database, temporal } = deps;
  return {
    /** `postgres` (DATABASE_URL) or `pglite` (embedded). */
    databaseKind: database.kind,
    pingDatabase: () => database.ping(),
    pingTemporal: () => temporal.ping(),
    /** The checks of `npm run doctor`, run against this process's database and Temporal connection. */
    doctor: (): Promise<CheckResult[]> =>
      runDoctor({
        config,
        database: { db: database.db, ping: () => database.ping() },
        temporal: { ping: () => temporal.ping(), retentionMs: () => temporal.retentionMs() },
      }),
  };
}
export type HealthService = ReturnType<typeof createHealthService>;
