import { Client, Connection } from '@temporalio/client';
import { SvcMessageId } from '../../workflows/search-attributes.js';
import { eventually } from './stack.js';

/**
 * What an operator types into the Temporal UI: `SvcMessageId = '<id>'`. Answers the workflow ids of the
 * runs found (visibility is written asynchronously: polls until `expected` is among them) and the
 * SvcMessageId list each carries.
 */
export async function runsOfMessage(
  address: string,
  messageId: string,
  expected: string,
): Promise<Map<string, string[]>> {
  const client = new Client({ connection: await Connection.connect({ address }) });
  try {
    return await eventually(
      async () => {
        const found = new Map<string, string[]>();
        for await (const w of client.workflow.list({ query: `SvcMessageId = '${messageId}'` })) {
          found.set(w.workflowId, w.typedSearchAttributes.get(SvcMessageId) ?? []);
        }
        return found.has(expected) ? found : undefined;
      },
      30_000,
      200,
    );
  } finally {
    await client.connection.close();
  }
}
