import type { SearchAttributeType } from '@temporalio/common';
import { ALL_SEARCH_ATTRIBUTES } from '../workflows/search-attributes.js';

/** Name → type of every custom search attribute (always derived from ALL_SEARCH_ATTRIBUTES), for registering them on a server. */
export const SEARCH_ATTRIBUTES: Record<string, SearchAttributeType> = Object.fromEntries(
  ALL_SEARCH_ATTRIBUTES.map((k) => [k.name, k.type]),
);

/** How `temporal server start-dev --search-attribute name=Type` spells each type. */
export const CLI_TYPE_NAMES: Record<SearchAttributeType, string> = {
  TEXT: 'Text',
  KEYWORD: 'Keyword',
  INT: 'Int',
  DOUBLE: 'Double',
  BOOL: 'Bool',
  DATETIME: 'Datetime',
  KEYWORD_LIST: 'KeywordList',
};
