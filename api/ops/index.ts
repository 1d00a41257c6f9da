import type { Operation } from '../contract.js';
import * as accounts from './accounts.js';
import * as keys from './keys.js';
import * as me from './me.js';
import * as outbox from './outbox.js';

/** Every operation of the API, in the order they are documented. */
export const operations: readonly Operation[] = [
  ...Object.values(accounts), ...Object.values(keys), ...Object.values(me), ...Object.values(outbox),
] as unknown as Operation[];
