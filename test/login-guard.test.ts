import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLoginGuard } from '../core/mailboxes/login-guard.js';
import { openDatabase, type Database } from '../db/index.js';
import { createTestDatabase } from './helpers/pg.js';

/**
 * Mailbox login throttling (docs/mailboxes.md) kept in PostgreSQL: two guards on one database stand
 * for two IMAP or API processes of a scaled-out deployment, and count the same failures.
 */
let pg: Awaited<ReturnType<typeof createTestDatabase>>;
let a: Database;
let b: Database;
beforeAll(async () => {
  pg = await createTestDatabase();
  a = await openDatabase({ databaseUrl: pg.url, dataDir: mkdtempSync(join(tmpdir(), 'svc-login-guard-')) });
  b = await openDatabase({ databaseUrl: pg.url, dataDir: mkdtempSync(join(tmpdir(), 'svc-login-guard-')) });
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await pg?.drop();
});

describe('mailbox login guard across processes', () => {
  const opts = { maxFailures: 3, lockoutMs: 60_000 };

  it('failures counted by one process lock the address out in the other, until the lockout has passed', async () => {
    const one = createLoginGuard(a.db, opts);
    const two = createLoginGuard(b.db, opts);
    const t0 = Date.now();
    await one.fail('198.51.100.7', t0);
    await two.fail('198.51.100.7', t0 + 1000);
    expect(await one.check('198.51.100.7', t0 + 1500)).toBe(2);
    await one.fail('198.51.100.7', t0 + 2000);
    for (const g of [one, two]) {
      await expect(g.check('198.51.100.7', t0 + 3000)).rejects.toMatchObject({
        status: 429,
        code: 'login_locked',
        details: { retryAfter: 59 },
      });
    }
    // Another address is not touched; the lockout ends lockoutMs after the last failure.
    expect(await two.check('198.51.100.8', t0 + 3000)).toBe(0);
    expect(await two.check('198.51.100.7', t0 + 2000 + 60_000)).toBe(3);
  });

  it('a failure long after the last starts a new count; a good login gives back its own attempt only', async () => {
    const one = createLoginGuard(a.db, opts);
    const two = createLoginGuard(b.db, opts);
    const t0 = Date.now();
    await one.fail('203.0.113.9', t0);
    await one.fail('203.0.113.9', t0 + 1000);
    await two.fail('203.0.113.9', t0 + 1000 + 60_000);
    expect(await two.check('203.0.113.9', t0 + 1001 + 60_000)).toBe(1);
    await two.begin('203.0.113.9', t0 + 1002 + 60_000); // a guess, counted before it is checked: it fails
    await one.begin('203.0.113.9', t0 + 1003 + 60_000); // a good login: counted, then given back
    await one.succeed('203.0.113.9');
    // The good login did not wipe the failure before it (else one good password would reset the count between guesses).
    expect(await two.check('203.0.113.9', t0 + 1004 + 60_000)).toBe(2);
  });

  it('attempts are counted before their secret is checked: of a concurrent burst, at most maxFailures go through', async () => {
    const guards = [createLoginGuard(a.db, opts), createLoginGuard(b.db, opts)];
    const t0 = Date.now();
    const results = await Promise.allSettled(
      Array.from({ length: 40 }, (_, i) => guards[i % 2]!.begin('192.0.2.44', t0)),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(opts.maxFailures);
    for (const r of results.filter((x) => x.status === 'rejected'))
      expect((r as PromiseRejectedResult).reason).toMatchObject({ status: 429, code: 'login_locked' });
    // Refused attempts do not push the lockout's end: it ends lockoutMs after the last attempt that was let through.
    await expect(guards[0]!.begin('192.0.2.44', t0 + 59_000)).rejects.toMatchObject({ details: { retryAfter: 1 } });
    await expect(guards[1]!.begin('192.0.2.44', t0 + 60_000)).resolves.toBeUndefined();
  });
});
