import type { Operation } from '../contract.js';
import * as accounts from './accounts.js';
import * as domains from './domains.js';
import * as hosted from './hosted.js';
import * as keys from './keys.js';
import * as me from './me.js';
import * as outbox from './outbox.js';
import * as registration from './registration.js';
import * as scopedKeys from './scoped-keys.js';

const ops = (m: Record<string, unknown>) => Object.values(m).filter((v): v is Operation => typeof v === 'object' && v !== null && 'handler' in v);

/** Every operation of the API. Fixed paths come before `:id` paths of the same prefix. */
export const operations: readonly Operation[] = [
  ...ops(accounts), ...ops(keys), ...ops(scopedKeys), ...ops(me), ...ops(outbox),
  ...ops(hosted), ...ops(registration), ...ops(domains),
];
