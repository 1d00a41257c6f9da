import { z } from 'zod';
import { defineOperation } from '../contract.js';

const MANAGE = ['session', 'oauth', 'account_key'] as const;
const accountKey = z.object({ key: z.string().describe('The unrestricted account key (svc_live_…)') });

export const getAccountKey = defineOperation({
  name: 'keys.get',
  method: 'GET',
  path: '/api/keys',
  auth: MANAGE,
  summary: 'Read the account key, minting it on the first call.',
  output: accountKey,
  handler: async (_input, { core, actor }) => ({ key: await core.keys.getOrCreateAccountKey(actor.userId) }),
});

export const rotateAccountKey = defineOperation({
  name: 'keys.rotate',
  method: 'POST',
  path: '/api/keys/rotate',
  auth: MANAGE,
  summary: 'Replace the account key; the old key stops working immediately.',
  output: accountKey,
  handler: async (_input, { core, actor }) => ({ key: await core.keys.rotateAccountKey(actor.userId) }),
});
