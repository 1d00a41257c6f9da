import { eq } from 'drizzle-orm';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { generateDkimKey, dkimRecordValue } from '../core/domains/dkim.js';
import { SIGNING_KEY_CACHE_MS } from '../core/transport/dkim.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * The delivery path keeps a sending domain's row (its parsed signing key) for SIGNING_KEY_CACHE_MS and
 * parses a key again only when the sealed key changed: a key put on the row (a rotation switching keys)
 * signs the domain's mail once that time has passed, and what it signs verifies against its record.
 */
let env: SendingStack;
beforeAll(async () => {
  env = await startSendingStack();
});
afterAll(async () => {
  await env?.stop();
});

const selectorOf = (raw: Buffer) => /\bs=([^;\s]+)/.exec(raw.toString('latin1').split('\r\n\r\n')[0]!)?.[1];

describe('the delivery path’s view of a sending domain', () => {
  it('signs with a new key put on the domain row once SIGNING_KEY_CACHE_MS has passed', async () => {
    const { db, sealer } = env.stack.service.core;
    const first = await env.send({ to: 'before@rcpt.test' });
    expect(first.status).toBe(200);
    expect(selectorOf((await env.sink.waitFor((r) => r.to.includes('before@rcpt.test'))).raw)).toBe('svc1');

    const next = await generateDkimKey();
    await db
      .update(schema.domains)
      .set({ dkimSelector: 'svcnew', dkimPrivateKeySealed: sealer.seal(next.privateKeyPem) })
      .where(eq(schema.domains.domain, FROM_DOMAIN));

    // The old key may sign for up to SIGNING_KEY_CACHE_MS more (a rotation keeps its record published); then the new one.
    let n = 0;
    const signed = await eventually(
      async () => {
        const to = `after${n++}@rcpt.test`;
        expect((await env.send({ to })).status).toBe(200);
        const got = await env.sink.waitFor((r) => r.to.includes(to));
        return selectorOf(got.raw) === 'svcnew' ? got.raw : undefined;
      },
      SIGNING_KEY_CACHE_MS * 3,
      250,
    );
    const verdict = await dkimVerify(signed, {
      resolver: (async (name: string, rr: string) => {
        if (rr === 'TXT' && name === `svcnew._domainkey.${FROM_DOMAIN}`) return [[dkimRecordValue(next.publicKeyB64)]];
        throw Object.assign(new Error('no such record'), { code: 'ENOTFOUND' });
      }) as never,
    });
    expect(verdict.results[0]).toMatchObject({ status: { result: 'pass' }, selector: 'svcnew' });
  });
});
