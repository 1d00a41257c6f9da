import { SearchAttributeType } from '@temporalio/common';
import { ALL_SEARCH_ATTRIBUTES } from '../workflows/search-attributes.js';

/** The CLI's and the operator API's names for each attribute type we use. */
const CLI_TYPE = { [SearchAttributeType.KEYWORD]: 'Keyword', [SearchAttributeType.KEYWORD_LIST]: 'KeywordList' } as Record<string, 'Keyword' | 'KeywordList'>;

/** Name → type of every custom search attribute, for registering them on a server. */
export const SEARCH_ATTRIBUTES: Record<string, 'Keyword' | 'KeywordList'> = Object.fromEntries(ALL_SEARCH_ATTRIBUTES.map((k) => [k.name, CLI_TYPE[k.type] ?? 'Keyword']));
