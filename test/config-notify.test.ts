import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../db/index.js';
import { configGeneration, watchReceivingConfig } from '../core/mail/config-changes.js';
import { createTestDatabase } from './helpers/pg.js';
import { eventually } from './helpers/stack.js';

/**
 * The ingress caches a domain and its routes for a few seconds; a change committed by another process
 * reaches it by NOTIFY (migration 0027), so it never serves a changed config for the cache's lifetime.
 * Here the changes are raw SQL on another connection: nothing in this process says so.
 */
let pg: Awaited<ReturnType<typeof createTestDatabase>>;
let database: Database;
let listening = false;

beforeAll(async () => {
  pg = await createTestDatabase();
  database = await openDatabase({ databaseUrl: pg.url, dataDir: mkdtempSync(join(tmpdir(), 'svc-cfg-')) });
  const listen: Database['listen'] = (channel, h) =>
    database.listen(channel, {
      message: h.message,
      state(up) {
        listening = up;
        h.state(up);
      },
    });
  watchReceivingConfig(listen)();
  await eventually(async () => listening === true);
  const before = configGeneration();
  await database.db.execute(sql`insert into domains (id, user_id, domain, status, dkim_selector, dkim_public_key,
    dkim_private_key_sealed, provider, mx_token, created_at, updated_at)
    values ('dom_cfg', 'usr_cfg', 'cfg.example', 'verified', 's', 'p', 'k', 'manual', 't', 1, 1)`);
  // The insert's own notification, so the test's counts start after it.
  await eventually(async () => configGeneration() === before + 1);
});
afterAll(async () => {
  await database?.close();
  await pg?.drop();
});

describe('receiving config changes reach every process', () => {
  it('a change to a domain or a route committed elsewhere counts as a change here; webhook health alone does not', async () => {
    const g0 = configGeneration();
    await database.db.execute(sql`update domains set zero_retention = 1 where id = 'dom_cfg'`);
    await eventually(async () => configGeneration() === g0 + 1);
    // Health and updated_at alone: no notification. A route after it does notify; notifications arrive in
    // commit order, so once the route's has arrived, the health update's would have too.
    await database.db.execute(
      sql`update domains set webhook_health = '{"status":"healthy"}'::jsonb, updated_at = 2 where id = 'dom_cfg'`,
    );
    await database.db
      .execute(sql`insert into routes (id, user_id, domain_id, pattern, url, secret_sealed, created_at, updated_at)
      values ('rte_cfg', 'usr_cfg', 'dom_cfg', '*', 'https://hooks.example/x', 's', 1, 1)`);
    await eventually(async () => configGeneration() >= g0 + 2);
    expect(configGeneration()).toBe(g0 + 2);
    await database.db.execute(sql`delete from routes where id = 'rte_cfg'`);
    await eventually(async () => configGeneration() === g0 + 3);
  });
});
