import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { connectTemporal, type TemporalHandle } from '../temporal/client.js';
import { dkimRotationScheduleId, dkimRotationWorkflowId } from '../workflows/ids.js';
import { scheduleDkimRotationsWorkflow } from '../workflows/dkim-rotation.js';
import { publishOwnMx, resolverFor } from './helpers/dns.js';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

/**
 * DKIM key rotation: mail signed before, during and after a rotation verifies with an independent verifier
 * (mailauth) against the records published at that moment, for a customer zone (the test DNS: the rotation
 * waits until the new record resolves, nudged by POST /api/domains/:id/verify) and for a hosted zone (the
 * built-in DNS server: published at once). The grace period is the shortest allowed (twice the key cache).
 */
let env: SendingStack;
let t: TemporalHandle;
const BRAND = 'brand.example';
const OPERATOR = 'operator-token-for-dkim-rotation-0123456789';
type Rec = { type: string; name: string; value: string };
const txtOf = (dns: Rec[], name: string) => dns.find((r) => r.type === 'TXT' && r.name === name)?.value;

beforeAll(async () => {
  // The rotation's own checks wait 10 minutes: only the nudge of POST /verify can move it on in time.
  env = await startSendingStack({
    env: {
      DKIM_ROTATION_GRACE_MS: '0',
      DOMAIN_VERIFY_INITIAL_MS: '600000',
      DKIM_ROTATION_DAYS: '30',
      OPERATOR_TOKEN: OPERATOR,
    },
  });
  t = await connectTemporal({
    address: env.stack.service.temporalAddress,
    namespace: 'default',
    taskQueue: env.stack.config.temporal.taskQueue,
  });
});
afterAll(async () => {
  await t?.connection.close();
  await env?.stop();
});

let seq = 0;
/** Sends one message from `from`, waits for it at the MX and verifies its signature against `dnsAddress` now. */
async function sendAndVerify(from: string, dnsAddress: string) {
  const subject = `rotation ${++seq}`;
  expect((await env.send({ from, to: 'reader@rcpt.test', subject })).status).toBe(200);
  const got = await env.sink.waitFor((r) => r.raw.toString().includes(`Subject: ${subject}`));
  const r = resolverFor(dnsAddress);
  const verdict = await dkimVerify(got.raw, { resolver: ((name: string, rr: string) => r.resolve(name, rr)) as never });
  return { raw: got.raw, result: verdict.results[0] as { status: { result: string }; selector: string } };
}
const verifyAgain = async (raw: Buffer, dnsAddress: string) => {
  const r = resolverFor(dnsAddress);
  return (await dkimVerify(raw, { resolver: ((name: string, rr: string) => r.resolve(name, rr)) as never }))
    .results[0] as { status: { result: string } };
};
const row = async (id: string) =>
  (await env.stack.service.core.db.select().from(schema.domains).where(eq(schema.domains.id, id)))[0]!;

describe('DKIM key rotation', () => {
  it('a customer zone: the new record is listed, awaited until it resolves, then signs; the old one is retired after the grace period', async () => {
    const added = await env.stack.api('POST', '/api/domains', { token: env.session, body: { domain: BRAND } });
    expect(added.status).toBe(201);
    const id: string = added.body.domain.id;
    const dns: Rec[] = added.body.dns;
    publishOwnMx(env.dns.zone, BRAND, dns);
    env.dns.zone.set(BRAND, 'TXT', [{ value: txtOf(dns, BRAND)! }]);
    env.dns.zone.set(`svc1._domainkey.${BRAND}`, 'TXT', [{ value: txtOf(dns, `svc1._domainkey.${BRAND}`)! }]);
    env.dns.zone.set(`_dmarc.${BRAND}`, 'TXT', [{ value: 'v=DMARC1; p=none' }]);
    expect((await env.stack.api('POST', `/api/domains/${id}/verify`, { token: env.session })).body).toMatchObject({
      status: 'verified',
      sending: { ok: true },
    });
    const customer = env.dns.server.address;
    const from = `hello@${BRAND}`;

    const before = await sendAndVerify(from, customer);
    expect(before.result).toMatchObject({ status: { result: 'pass' }, selector: 'svc1' });

    // Another account never reaches the domain.
    const other = (
      await env.stack.api('POST', '/api/auth/signup', {
        body: { email: 'other@example.com', password: 'other account pw' },
      })
    ).body.token;
    expect((await env.stack.api('POST', `/api/domains/${id}/dkim/rotate`, { token: other })).status).toBe(404);

    const rotate = await env.stack.api('POST', `/api/domains/${id}/dkim/rotate`, { token: env.session });
    expect(rotate.status).toBe(200);
    expect(rotate.body.rotation).toEqual({ selector: 'svc2', previousSelector: 'svc1', published: false });
    const svc2 = txtOf(rotate.body.dns, `svc2._domainkey.${BRAND}`);
    expect(svc2).toMatch(/^v=DKIM1; k=rsa; p=/);
    expect(txtOf(rotate.body.dns, `svc1._domainkey.${BRAND}`)).toBeDefined();
    expect((await env.stack.api('POST', `/api/domains/${id}/dkim/rotate`, { token: env.session })).body.code).toBe(
      'dkim_rotation_in_progress',
    );

    // Not yet published: signing stays on svc1 and verifies.
    const waiting = await sendAndVerify(from, customer);
    expect(waiting.result).toMatchObject({ status: { result: 'pass' }, selector: 'svc1' });
    expect((await row(id)).dkimSelector).toBe('svc1');

    // The customer publishes it; verify-now nudges the rotation, which switches signing to svc2.
    env.dns.zone.set(`svc2._domainkey.${BRAND}`, 'TXT', [{ value: svc2! }]);
    await env.stack.api('POST', `/api/domains/${id}/verify`, { token: env.session });
    await eventually(async () => ((await row(id)).dkimSelector === 'svc2' ? true : undefined), 30_000, 100);

    // The grace period: both selectors published (listed in dns), mail signed by either verifies.
    const during = await sendAndVerify(from, customer);
    expect(during.result.status.result).toBe('pass');
    const graceDns: Rec[] = (await env.stack.api('GET', `/api/domains/${id}`, { token: env.session })).body.dns;
    expect(
      [txtOf(graceDns, `svc1._domainkey.${BRAND}`), txtOf(graceDns, `svc2._domainkey.${BRAND}`)].every(Boolean),
    ).toBe(true);

    const result = await t.client.workflow.getHandle(dkimRotationWorkflowId(id)).result();
    expect(result).toEqual({ outcome: 'rotated', selector: 'svc2' });
    const afterDns: Rec[] = (await env.stack.api('GET', `/api/domains/${id}`, { token: env.session })).body.dns;
    expect(txtOf(afterDns, `svc1._domainkey.${BRAND}`)).toBeUndefined();
    expect(txtOf(afterDns, `svc2._domainkey.${BRAND}`)).toBe(svc2);
    // The customer removes what the list no longer names.
    env.dns.zone.set(`svc1._domainkey.${BRAND}`, 'TXT', []);

    const after = await sendAndVerify(from, customer);
    expect(after.result).toMatchObject({ status: { result: 'pass' }, selector: 'svc2' });
    expect((await verifyAgain(before.raw, customer)).status.result).not.toBe('pass');
  });

  it('a hosted zone: published at once by the built-in DNS server, switched, and the old selector retired', async () => {
    const hosted = `127.0.0.1:${env.dnsPort}`;
    const from = `hello@${FROM_DOMAIN}`;
    const domains = (await env.stack.api('GET', '/api/domains', { token: env.session })).body as {
      id: string;
      domain: string;
    }[];
    const id = domains.find((d) => d.domain === FROM_DOMAIN)!.id;
    const scoped = (
      await env.stack.api('POST', '/api/keys/scoped', { token: env.session, body: { domainId: id, name: 'acme only' } })
    ).body.key as string;
    const brandId = domains.find((d) => d.domain === BRAND)!.id;
    // A domain-scoped key rotates its own domain alone.
    expect((await env.stack.api('POST', `/api/domains/${brandId}/dkim/rotate`, { token: scoped })).status).toBe(404);

    const before = await sendAndVerify(from, hosted);
    expect(before.result).toMatchObject({ status: { result: 'pass' }, selector: 'svc1' });
    const rotate = await env.stack.api('POST', `/api/domains/${id}/dkim/rotate`, { token: scoped });
    expect(rotate.status).toBe(200);
    expect(rotate.body.rotation).toEqual({ selector: 'svc2', previousSelector: 'svc1', published: true });
    expect(rotate.body.dns).toEqual([]);
    await eventually(async () => ((await row(id)).dkimSelector === 'svc2' ? true : undefined), 30_000, 100);

    const during = await sendAndVerify(from, hosted);
    expect(during.result.status.result).toBe('pass');
    expect((await verifyAgain(before.raw, hosted)).status.result).toBe('pass');

    expect(await t.client.workflow.getHandle(dkimRotationWorkflowId(id)).result()).toEqual({
      outcome: 'rotated',
      selector: 'svc2',
    });
    const after = await sendAndVerify(from, hosted);
    expect(after.result).toMatchObject({ status: { result: 'pass' }, selector: 'svc2' });
    // The old selector is gone from the zone: what it signed no longer verifies.
    await expect(resolverFor(hosted).resolveTxt(`svc1._domainkey.${FROM_DOMAIN}`)).rejects.toThrow();
    expect((await verifyAgain(before.raw, hosted)).status.result).not.toBe('pass');
  });

  it("SERVICE_DOMAIN's own key (system mail): rotated on the operator's request, published at once by the built-in DNS server, switched, retired", async () => {
    const hosted = `127.0.0.1:${env.dnsPort}`;
    const service = env.stack.config.serviceDomain;
    /** A sign-up's verification mail (system mail, from SERVICE_DOMAIN), verified against the built-in DNS server now. */
    const systemMail = async (who: string) => {
      expect(
        (
          await env.stack.api('POST', '/api/auth/signup', {
            body: { email: `${who}@rcpt.test`, password: 'system mail password' },
          })
        ).status,
      ).toBe(201);
      const got = await env.sink.waitFor((r) => r.to.includes(`${who}@rcpt.test`));
      const r = resolverFor(hosted);
      const verdict = await dkimVerify(got.raw, {
        resolver: ((name: string, rr: string) => r.resolve(name, rr)) as never,
      });
      return {
        raw: got.raw,
        result: verdict.results[0] as { status: { result: string }; selector: string; signingDomain: string },
      };
    };
    const before = await systemMail('sys-before');
    expect(before.result).toMatchObject({ status: { result: 'pass' }, selector: 'svc1', signingDomain: service });

    // The operator's credential alone: no token, an account's session, or no OPERATOR_TOKEN at all are refused.
    expect((await env.stack.api('POST', '/api/service-domain/dkim/rotate')).status).toBe(401);
    expect((await env.stack.api('POST', '/api/service-domain/dkim/rotate', { token: env.session })).status).toBe(401);
    const rotate = await env.stack.api('POST', '/api/service-domain/dkim/rotate', { token: OPERATOR });
    expect(rotate.status).toBe(200);
    expect(rotate.body).toMatchObject({
      domain: service,
      rotation: { selector: 'svc2', previousSelector: 'svc1', published: true },
    });
    expect(txtOf(rotate.body.dns, `svc2._domainkey.${service}`)).toMatch(/^v=DKIM1; k=rsa; p=/);
    expect(txtOf(rotate.body.dns, `svc1._domainkey.${service}`)).toMatch(/^v=DKIM1; k=rsa; p=/);
    expect((await env.stack.api('POST', '/api/service-domain/dkim/rotate', { token: OPERATOR })).body.code).toBe(
      'dkim_rotation_in_progress',
    );

    // During the grace period both selectors resolve: mail signed by either verifies.
    await eventually(
      async () =>
        (await env.stack.service.core.db.select().from(schema.serviceDomains))[0]!.dkimSelector === 'svc2'
          ? true
          : undefined,
      30_000,
      100,
    );
    const during = await systemMail('sys-during');
    expect(during.result.status.result).toBe('pass');
    expect((await verifyAgain(before.raw, hosted)).status.result).toBe('pass');

    expect(await t.client.workflow.getHandle(dkimRotationWorkflowId('service')).result()).toEqual({
      outcome: 'rotated',
      selector: 'svc2',
    });
    const after = await systemMail('sys-after');
    expect(after.result).toMatchObject({ status: { result: 'pass' }, selector: 'svc2', signingDomain: service });
    await expect(resolverFor(hosted).resolveTxt(`svc1._domainkey.${service}`)).rejects.toThrow();
    expect((await verifyAgain(before.raw, hosted)).status.result).not.toBe('pass');
  });

  it('DKIM_ROTATION_DAYS: a schedule starts the rotation of every sending domain whose key is older than that', async () => {
    const desc = await t.client.schedule.getHandle(dkimRotationScheduleId(t.taskQueue)).describe();
    expect(desc.action).toMatchObject({ type: 'startWorkflow', args: [{ olderThanMs: 30 * 86_400_000 }] });
    const claimed = await env.stack.api('POST', '/api/domains/subdomain', {
      token: env.session,
      body: { subdomain: 'aged' },
    });
    const id: string = claimed.body.domain.id;
    await env.stack.service.core.db
      .update(schema.domains)
      .set({ createdAt: Date.now() - 40 * 86_400_000 })
      .where(eq(schema.domains.id, id));
    // The domains rotated above count from their switch, so only the aged one is due.
    const run = await t.client.workflow.execute(scheduleDkimRotationsWorkflow, {
      taskQueue: t.taskQueue,
      workflowId: `dkim-schedule-test-${Date.now()}`,
      args: [{ olderThanMs: 30 * 86_400_000 }],
    });
    expect(run).toEqual({ started: 1 });
    expect(await t.client.workflow.getHandle(dkimRotationWorkflowId(id)).result()).toEqual({
      outcome: 'rotated',
      selector: 'svc2',
    });
    expect(await row(id)).toMatchObject({
      dkimSelector: 'svc2',
      dkimPrevSelector: null,
      dkimNextSelector: null,
      dkimRotatedAt: expect.any(Number),
    });
    // SERVICE_DOMAIN's key is due by the same rule (it was rotated above: counted from that switch).
    const core = env.stack.service.core;
    expect(await core.dkimRotation.due(30 * 86_400_000, 10)).not.toContain('service');
    await core.db.update(schema.serviceDomains).set({ dkimRotatedAt: Date.now() - 40 * 86_400_000 });
    // (The row is read again once this process's copy is SIGNING_KEY_CACHE_MS old.)
    expect(
      await eventually(
        async () => ((await core.dkimRotation.due(30 * 86_400_000, 10)).includes('service') ? true : undefined),
        30_000,
        250,
      ),
    ).toBe(true);
  });
});
