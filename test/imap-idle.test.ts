import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Session } from '../smtp/imap/session.js';
import { rawImap } from './helpers/imap-wire.js';
import { mintPassword } from './helpers/mailbox.js';
import { startStack, type TestStack } from './helpers/stack.js';

// Issue 29: "IDLE keeps a closure per command". Each IDLE registers close work on its session (its change
// listener and poll timer); DONE must drop it, or one long-lived client grows the process without bound.
let stack: TestStack;
let session: string;
let domainId: string;

beforeAll(async () => {
  stack = await startStack({ SERVICE_DOMAIN: 'idle.svc.test' }, ['api', 'imap']);
  session = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'idle@example.com', password: 'idle owner password' },
    })
  ).body.token;
  domainId = (await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'loop' } })).body
    .domain.id;
});
afterAll(async () => {
  await stack?.stop();
});

describe('IMAP IDLE', () => {
  it('thousands of IDLE/DONE cycles on one connection leave nothing registered behind', async () => {
    const pw = await mintPassword(stack, session, { domainId, address: 'cycler' });
    const raw = await rawImap(stack.service.imapPort!);
    expect(await raw.cmd('a1', `LOGIN cycler@loop.idle.svc.test ${pw.secret}`)).toMatch(/^a1 OK/);
    expect(await raw.cmd('a2', 'SELECT INBOX')).toMatch(/^a2 OK/);
    const before = Session.held;

    // One IDLE held open registers its close work; DONE takes it away again.
    raw.send('i0 IDLE\r\n');
    await raw.until(() => raw.text.includes('+ idling'));
    expect(Session.held).toBe(before + 1);
    raw.send('DONE\r\n');
    await raw.until(() => raw.text.includes('i0 OK'));
    expect(Session.held).toBe(before);

    // Then 3,000 cycles, pipelined in rounds (the server takes each DONE as the IDLE's continuation line).
    for (let round = 0; round < 6; round++) {
      const cycles = Array.from({ length: 500 }, (_, i) => `r${round}x${i} IDLE\r\nDONE\r\n`).join('');
      raw.send(cycles);
      await raw.until(() => raw.text.includes(`r${round}x499 OK`), 30_000);
    }
    expect(raw.text.match(/ OK IDLE terminated/g)?.length).toBe(3001);
    expect(Session.held).toBe(before);
    expect(await raw.cmd('a3', 'NOOP')).toMatch(/^a3 OK/);
    raw.close();
    await raw.until(() => raw.closed);
  });
});
