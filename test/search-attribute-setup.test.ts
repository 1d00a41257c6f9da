import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, type Database } from '../db/index.js';
import { connectTemporal, type TemporalHandle } from '../temporal/client.js';
import { prepareSearchAttributes, probeQuery } from '../temporal/search-attribute-setup.js';
import { SEARCH_ATTRIBUTES } from '../temporal/search-attributes.js';
import { ALL_SEARCH_ATTRIBUTES, SvcMessageId } from '../workflows/search-attributes.js';
import { createTestDatabase } from './helpers/pg.js';
import { eventually } from './helpers/stack.js';
import { everySearchAttribute, freshNamespace as registerNamespace } from './helpers/search-attributes.js';

let pg: Awaited<ReturnType<typeof createTestDatabase>>;
let database: Database;
let dataDir: string;
const opened: TemporalHandle[] = [];
beforeAll(async () => {
  pg = await createTestDatabase();
  dataDir = mkdtempSync(join(tmpdir(), 'svc-sa-'));
  database = await openDatabase({ databaseUrl: pg.url, dataDir });
});
afterAll(async () => {
  for (const t of opened) await t.connection.close();
  await database?.close();
  await pg?.drop();
  rmSync(dataDir, { recursive: true, force: true });
});

const freshNamespace = () => registerNamespace(inject('temporalAddress'));

async function role(namespace: string): Promise<TemporalHandle> {
  const t = await connectTemporal({ address: inject('temporalAddress'), namespace, taskQueue: `sa-${namespace}` });
  opened.push(t);
  return t;
}

describe('search attributes on a server we did not start', () => {
  it('three roles starting together register every attribute once and serve only when a run can carry them all', async () => {
    const namespace = await freshNamespace();
    const roles = await Promise.all([role(namespace), role(namespace), role(namespace)]);
    const logs: string[] = [];
    await Promise.all(
      roles.map((t) => prepareSearchAttributes(t, { database, log: (m) => logs.push(m), timeoutMs: 60_000 })),
    );

    // One role registered (the others found them listed), and each name holds exactly one column.
    expect(logs.filter((l) => l.includes('registered search attributes'))).toHaveLength(1);
    const described = await roles[0]!.connection.workflowService.describeNamespace({ namespace });
    const aliases = Object.values(described.config?.customSearchAttributeAliases ?? {});
    expect(aliases.sort()).toEqual(Object.keys(SEARCH_ATTRIBUTES).sort());
    expect(Object.keys(SEARCH_ATTRIBUTES).sort()).toEqual(ALL_SEARCH_ATTRIBUTES.map((k) => k.name).sort());

    // Ready means ready: a start naming every attribute and a query naming every attribute both succeed now.
    const handle = await roles[1]!.client.workflow.start('noSuchWorkflow', {
      taskQueue: `sa-${namespace}`,
      workflowId: 'carries-all',
      typedSearchAttributes: everySearchAttribute(),
    });
    await handle.terminate('test done');
    await roles[2]!.connection.workflowService.listWorkflowExecutions({ namespace, pageSize: 1, query: probeQuery() });
  });

  it('a second start finds everything in place and returns without registering', async () => {
    const namespace = await freshNamespace();
    await prepareSearchAttributes(await role(namespace), { database });
    const logs: string[] = [];
    const started = Date.now();
    await prepareSearchAttributes(await role(namespace), { database, log: (m) => logs.push(m) });
    expect(logs).toEqual([]);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('after an upgrade that adds attributes, registers only the new ones', async () => {
    const namespace = await freshNamespace();
    const t = await role(namespace);
    const [first, ...rest] = ALL_SEARCH_ATTRIBUTES;
    await t.connection.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: {
        [first!.name]: proto.temporal.api.enums.v1.IndexedValueType[`INDEXED_VALUE_TYPE_${first!.type}`],
      },
    });
    const logs: string[] = [];
    await prepareSearchAttributes(t, { database, log: (m) => logs.push(m) });
    expect(logs[0]).toContain(
      `registered search attributes ${rest.map((k) => k.name).join(', ')} in namespace ${namespace}`,
    );
    const listed = await t.connection.operatorService.listSearchAttributes({ namespace });
    expect(Object.keys(listed.customAttributes ?? {}).sort()).toEqual(Object.keys(SEARCH_ATTRIBUTES).sort());
  });

  it('migrates SvcMessageId registered as a Keyword (before it held every id of a batch) to a KeywordList', async () => {
    const namespace = await freshNamespace();
    const t = await role(namespace);
    const { INDEXED_VALUE_TYPE_KEYWORD: KEYWORD, INDEXED_VALUE_TYPE_KEYWORD_LIST: KEYWORD_LIST } =
      proto.temporal.api.enums.v1.IndexedValueType;
    await t.connection.operatorService.addSearchAttributes({ namespace, searchAttributes: { SvcMessageId: KEYWORD } });
    const logs: string[] = [];
    await prepareSearchAttributes(t, { database, log: (m) => logs.push(m) });
    expect(logs[0]).toContain('search attributes SvcMessageId have another type');
    const listed = await t.connection.operatorService.listSearchAttributes({ namespace });
    expect(listed.customAttributes?.SvcMessageId).toBe(KEYWORD_LIST);
    // A run carrying a list of ids is accepted now, and found by any one of them.
    const handle = await t.client.workflow.start('noSuchWorkflow', {
      taskQueue: `sa-${namespace}`,
      workflowId: 'many-ids',
      typedSearchAttributes: [{ key: SvcMessageId, value: ['msg_a', 'msg_b', 'msg_c'] }],
    });
    await handle.terminate('test done');
    const found = await eventually(async () => {
      const ids: string[] = [];
      for await (const w of t.client.workflow.list({ query: "SvcMessageId = 'msg_b'" })) ids.push(w.workflowId);
      return ids.length ? ids : undefined;
    });
    expect(found).toEqual(['many-ids']);
  });

  it('names a namespace it cannot prepare, with the attributes, within the timeout', async () => {
    const t = await role(await freshNamespace());
    const missing = { ...t, namespace: 'no-such-namespace' };
    await expect(
      prepareSearchAttributes(missing, { database, timeoutMs: 1_500, address: inject('temporalAddress') }),
    ).rejects.toThrow(/namespace no-such-namespace.*SvcAccountId/);
  });
});
