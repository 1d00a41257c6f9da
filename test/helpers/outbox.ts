import { desc, sql } from 'drizzle-orm';
import { schema } from '../../db/index.js';
import type { TestStack } from './stack.js';
import { eventually } from './stack.js';

/** Waits for the capture-mode outbox to hold a message to `to` whose subject matches, and returns it. */
export async function waitForMail(stack: TestStack, to: string, subject: RegExp) {
  return eventually(async () => {
    const rows = await stack.service.core.db
      .select()
      .from(schema.outbox)
      .where(sql`${schema.outbox.envelopeTo} @> ${JSON.stringify([to])}::jsonb`)
      .orderBy(desc(schema.outbox.createdAt));
    return rows.find((r) => subject.test(r.subject ?? ''));
  });
}

/** The value of `token=` in the first link of a captured message (quoted-printable soft breaks undone). */
export function tokenFromMail(raw: string): string {
  const unfolded = raw.replace(/=\r?\n/g, '').replace(/=3D/g, '=');
  const m = /token=([A-Za-z0-9_-]+)/.exec(unfolded);
  if (!m) throw new Error(`no token link in mail:\n${raw}`);
  return m[1]!;
}
