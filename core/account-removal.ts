import { eq, sql } from 'drizzle-orm';
import type { Db } from '../db/index.js';
import { schema } from '../db/index.js';
import { describeError, log } from './log.js';
import type { VerificationWorkflows } from './ports/domains.js';
import type { EnrolmentPort } from './ports/sequences.js';

type Tx = Parameters<Parameters<Db['transaction']>[0]>[0];
const rowsOf = <T>(res: unknown): T[] => (res as { rows?: T[] }).rows ?? (res as T[]);

/**
 * Rows that hang off an account's rows without a user column of their own, deleted before their parents:
 * `[table, column, parent table]` = delete from table where column in (ids of the account's parent rows).
 */
const CHILDREN: [string, string, string][] = [
  ['delivery_attempts', 'message_id', 'messages'],
  ['inbound_raw', 'message_id', 'messages'],
  ['outbox', 'message_id', 'messages'],
  ['mailbox_messages', 'mailbox_id', 'mailboxes'],
  ['broadcast_recipients', 'broadcast_id', 'broadcasts'],
  ['list_members', 'list_id', 'lists'],
  ['sequence_versions', 'sequence_id', 'sequences'],
  ['hosted_dns_records', 'domain_id', 'domains'],
  ['warmup_counts', 'domain_id', 'domains'],
  ['contact_import_rows', 'import_id', 'contact_imports'],
];

/**
 * Deletes an account that was never verified, with everything it holds: keys, app passwords, routes,
 * domains with their hosted records and warm-up counts, OAuth grants (their tokens cascade), mail, contacts,
 * imports with their staged rows, files, and every other row of a table with a `user_id` column (found in
 * the catalog, so such a table added later is covered; a table without one belongs in CHILDREN, and
 * test/account-removal.test.ts counts every table to find one that is not).
 * Sessions end with it: session tokens and the consent page's cookie name an account that no longer exists.
 * The database part is one transaction that re-checks, under a row lock, that the account is unverified;
 * afterwards the account's workflows are stopped (best effort: each one also finds its rows gone).
 */
export function createAccountRemoval(deps: { db: Db; workflows: VerificationWorkflows & EnrolmentPort }) {
  const { db } = deps;

  async function deleteRows(tx: Tx, userId: string): Promise<{ domainIds: string[]; enrolments: string[] }> {
    const domainIds = (
      await tx.select({ id: schema.domains.id }).from(schema.domains).where(eq(schema.domains.userId, userId))
    ).map((r) => r.id);
    const enrolments = (
      await tx
        .select({ id: schema.sequenceEnrolments.workflowId })
        .from(schema.sequenceEnrolments)
        .where(sql`${schema.sequenceEnrolments.userId} = ${userId} and ${schema.sequenceEnrolments.status} = 'running'`)
    ).map((r) => r.id);
    for (const [table, column, parent] of CHILDREN) {
      await tx.execute(
        sql`delete from ${sql.identifier(table)} where ${sql.identifier(column)} in (select id from ${sql.identifier(parent)} where user_id = ${userId})`,
      );
    }
    const tables = rowsOf<{ table_name: string }>(
      await tx.execute(sql`select table_name from information_schema.columns
      where table_schema = current_schema() and column_name = 'user_id' and table_name <> 'users' order by table_name`),
    );
    for (const { table_name } of tables)
      await tx.execute(sql`delete from ${sql.identifier(table_name)} where user_id = ${userId}`);
    await tx.delete(schema.users).where(eq(schema.users.id, userId));
    return { domainIds, enrolments };
  }

  return {
    /** Deletes the account if it is still unverified; answers false (nothing deleted) once it is verified or gone. */
    async removeUnverified(userId: string): Promise<boolean> {
      const removed = await db.transaction(async (tx) => {
        const [user] = await tx
          .select({ verified: schema.users.emailVerified })
          .from(schema.users)
          .where(eq(schema.users.id, userId))
          .for('update');
        if (!user || user.verified) return undefined;
        return deleteRows(tx, userId);
      });
      if (!removed) return false;
      const stops = [
        ...removed.domainIds.map((id) => deps.workflows.stopDomainVerification(id)),
        ...removed.enrolments.map((id) => deps.workflows.cancelEnrolment(id)),
      ];
      for (const r of await Promise.allSettled(stops)) {
        if (r.status === 'rejected')
          log.error(
            `[accounts] a workflow of the removed account ${userId} could not be stopped (it ends when it finds its rows gone): ${describeError(r.reason)}`,
          );
      }
      return true;
    },
  };
}
export type AccountRemoval = ReturnType<typeof createAccountRemoval>;
