import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { describe, expect, it } from 'vitest';
import { openDatabase, schema } from '../db/index.js';
import { createTestDatabase } from './helpers/pg.js';

const user = (id: string) => ({ id, email: `${id}@example.com`, plan: 'free', createdAt: 1, updatedAt: 1 });

describe('database', () => {
  it('embedded PGlite keeps data across a restart', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'svc-pglite-'));
    const first = await openDatabase({ dataDir });
    expect(first.kind).toBe('pglite');
    await first.db.insert(schema.users).values(user('usr_persisted'));
    await first.close();
    const second = await openDatabase({ dataDir });
    const rows = await second.db.select().from(schema.users).where(eq(schema.users.id, 'usr_persisted'));
    expect(rows).toHaveLength(1);
    await second.close();
  });

  it('PostgreSQL: migrations apply once, concurrently started processes agree, data survives reopening', async () => {
    const pg = await createTestDatabase();
    try {
      const opened = await Promise.all(
        [0, 1, 2].map(() => openDatabase({ databaseUrl: pg.url, dataDir: '/nonexistent' })),
      );
      await opened[0]!.db.insert(schema.users).values(user('usr_pg'));
      await Promise.all(opened.map((d) => d.close()));
      const again = await openDatabase({ databaseUrl: pg.url, dataDir: '/nonexistent' });
      expect(await again.db.select().from(schema.users)).toHaveLength(1);
      await again.close();
    } finally {
      await pg.drop();
    }
  });
});
