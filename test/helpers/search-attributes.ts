import { Connection } from '@temporalio/client';
import { msToTs, type SearchAttributePair, type SearchAttributeType } from '@temporalio/common';
import { ALL_SEARCH_ATTRIBUTES } from '../../workflows/search-attributes.js';

/** A valid value of each type, to start a run that carries every attribute. */
const SAMPLE: Record<SearchAttributeType, unknown> = {
  TEXT: 'text',
  KEYWORD: 'kw',
  KEYWORD_LIST: ['a', 'b'],
  INT: 1,
  DOUBLE: 1.5,
  BOOL: true,
  DATETIME: new Date(0),
};

/** Every search attribute of ALL_SEARCH_ATTRIBUTES with a sample value, for `typedSearchAttributes`. */
export function everySearchAttribute(): SearchAttributePair[] {
  return ALL_SEARCH_ATTRIBUTES.map((key) => ({ key, value: SAMPLE[key.type] }) as SearchAttributePair);
}

/** Registers a namespace of its own with no custom search attributes: what a fresh server starts with. */
export async function freshNamespace(address: string): Promise<string> {
  const namespace = `sa-${Math.random().toString(36).slice(2, 10)}`;
  const conn = await Connection.connect({ address });
  try {
    await conn.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  } finally {
    await conn.close();
  }
  return namespace;
}
