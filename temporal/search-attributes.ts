import { ALL_SEARCH_ATTRIBUTES } from '../workflows/search-attributes.js';

/** Name → type of every custom search attribute, for registering them on a server. */
export const SEARCH_ATTRIBUTES: Record<string, 'Keyword'> = Object.fromEntries(ALL_SEARCH_ATTRIBUTES.map((k) => [k.name, 'Keyword']));
