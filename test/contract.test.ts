import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eq } from 'drizzle-orm';
import { operations } from '../api/ops/index.js';
import { schema } from '../db/index.js';
import { schemaBaseName, type Operation } from '../api/contract.js';
import { approveOverHttp, authorizeUrl, pkce, registerClient, tokenRequest } from './helpers/oauth.js';
import { tokenFromMail, waitForMail } from './helpers/outbox.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';
import nodemailer from 'nodemailer';

let stack: TestStack;
let session: string;
let accountKey: string;
let n = 0;
const uniqueEmail = () => `contract-${++n}-${Date.now()}@example.com`;

beforeAll(async () => {
  stack = await startStack({
    REGISTRAR: 'simulated',
    SERVICE_DOMAIN: 'contract.svc.test',
    DNS_SERVERS: '127.0.0.1:9',
    DOMAIN_VERIFY_INITIAL_MS: '600000',
  });
  session = (
    await stack.api('POST', '/api/auth/signup', {
      body: { email: 'contract@example.com', password: 'contract password' },
    })
  ).body.token;
  accountKey = (await stack.api('GET', '/api/keys', { token: session })).body.key;
  await stack.service.core.db
    .update(schema.users)
    .set({ emailVerified: true })
    .where(eq(schema.users.email, 'contract@example.com'));
  await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: 'sender' } });
});
const FROM = 'hello@sender.contract.svc.test';
let receiver: Awaited<ReturnType<typeof startWebhookReceiver>> | undefined;
const senderDomainId = async () =>
  (await stack.api('GET', '/api/domains', { token: session })).body.find(
    (d: any) => d.domain === 'sender.contract.svc.test',
  ).id as string;
/** A real inbound message delivered to a loopback webhook; answers its delivery id. */
async function inboundDelivery(): Promise<string> {
  receiver ??= await startWebhookReceiver();
  const id = await senderDomainId();
  await stack.api('PUT', `/api/domains/${id}/webhook`, { token: session, body: { url: `${receiver.base}/c` } });
  const t = nodemailer.createTransport({
    host: '127.0.0.1',
    port: stack.service.smtpPort!,
    secure: false,
    ignoreTLS: true,
  });
  const subject = `inbound ${++n}`;
  await t.sendMail({ from: 'x@far.example', to: 'in@sender.contract.svc.test', subject, text: 'hi' });
  const hit =
    (await receiver.waitFor('/c', 1)).find((h) => h.json?.subject === subject) ??
    (await eventually(async () => receiver!.hitsOn('/c').find((h) => h.json?.subject === subject)));
  return (await eventually(
    async () => (await stack.api('GET', `/api/messages/${hit.json.id}`, { token: session })).body.deliveries?.[0]?.id,
  )) as string;
}
const key = async () => (await stack.api('GET', '/api/keys', { token: session })).body.key as string;
const sendOne = async (extra: Record<string, unknown> = {}) =>
  (
    await stack.api('POST', '/v1/send', {
      token: await key(),
      body: { from: FROM, to: `r${++n}@example.com`, subject: 's', text: 't', ...extra },
    })
  ).body.id as string;
afterAll(async () => {
  await stack?.stop();
  await receiver?.close();
});

type Example = { path?: string; body?: unknown; query?: string; token?: string };
/** A real, valid call for every operation. A new operation without an example fails the walk below. */
const examples: Record<string, () => Promise<Example>> = {
  'account.provision': async () => ({ body: { email: uniqueEmail(), channel: 'docs' } }),
  'auth.signup': async () => ({ body: { email: uniqueEmail(), password: 'a long password' } }),
  'auth.login': async () => ({ body: { email: 'contract@example.com', password: 'contract password' } }),
  'auth.signinLink': async () => ({ body: { email: 'contract@example.com' } }),
  'auth.signin': async () => {
    const email = uniqueEmail();
    await stack.api('POST', '/api/auth/signup', { body: { email, password: 'a long password' } });
    await stack.api('POST', '/api/auth/signin-link', { body: { email } });
    return { body: { token: tokenFromMail((await waitForMail(stack, email, /sign-in/)).raw) } };
  },
  'auth.verify': async () => {
    const email = uniqueEmail();
    await stack.api('POST', '/api/v1/provision', { body: { email } });
    return { body: { token: tokenFromMail((await waitForMail(stack, email, /Verify/)).raw) } };
  },
  'auth.linkDetails': async () => {
    const email = uniqueEmail();
    await stack.api('POST', '/api/v1/provision', { body: { email, channel: 'cli' } });
    return { query: `token=${tokenFromMail((await waitForMail(stack, email, /Verify/)).raw)}` };
  },
  'auth.disown': async () => {
    const email = uniqueEmail();
    await stack.api('POST', '/api/v1/provision', { body: { email } });
    return { body: { token: tokenFromMail((await waitForMail(stack, email, /Verify/)).raw) } };
  },
  'auth.redeemLink': async () => {
    const email = uniqueEmail();
    await stack.api('POST', '/api/auth/signup', { body: { email, password: 'a long password', linkTo: 'app' } });
    const mail = await waitForMail(stack, email, /Verify/);
    expect(mail.raw.replace(/=\r?\n/g, '').replace(/=3D/g, '=')).toContain(
      `${stack.config.publicUrl}/app/verify?token=`,
    );
    return { body: { token: tokenFromMail(mail.raw) } };
  },
  'auth.signout': async () => {
    const email = uniqueEmail();
    return {
      token: (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'a long password' } })).body.token,
      body: {},
    };
  },
  'auth.resendVerification': async () => ({ token: session, body: {} }),
  'auth.changePassword': async () => {
    const email = uniqueEmail();
    const fresh = (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'a long password' } })).body
      .token;
    return { token: fresh, body: { currentPassword: 'a long password', password: 'another long password' } };
  },
  'auth.forgotPassword': async () => ({ body: { email: 'contract@example.com' } }),
  'auth.resetPassword': async () => {
    const email = uniqueEmail();
    await stack.api('POST', '/api/auth/signup', { body: { email, password: 'a long password' } });
    await stack.api('POST', '/api/auth/password/forgot', { body: { email } });
    return {
      body: { token: tokenFromMail((await waitForMail(stack, email, /Reset/)).raw), password: 'a new long password' },
    };
  },
  'smtpSettings.get': async () => ({ token: session }),
  'metrics.get': async () => ({ token: session, query: 'period=hour' }),
  'metrics.egress': async () => ({ token: session }),
  'keys.get': async () => ({ token: session }),
  'keys.rotate': async () => ({ token: session }),
  'me.get': async () => ({ token: (await stack.api('GET', '/api/keys', { token: session })).body.key }),
  'billing.usage': async () => ({ token: session }),
  'account.settings': async () => ({ token: session }),
  'account.updateSettings': async () => ({ token: session, body: { footerAddress: '1 Main St, Springfield' } }),
  'outbox.list': async () => ({ token: session, query: 'limit=5' }),
  'templates.list': async () => ({ token: session }),
  'templates.listBase': async () => ({ token: session }),
  'templates.create': async () => ({
    token: session,
    body: { name: 'Contract', subject: 'Hi {{name}}', html: '<p>{{name}}</p>' },
  }),
  'templates.get': async () => ({ token: session, path: '/api/templates/base_welcome' }),
  'templates.update': async () => {
    const created = await stack.api('POST', '/api/templates', {
      token: session,
      body: { name: `t${++n}`, subject: 'Hello', text: 'Hi {{name}}' },
    });
    return { token: session, path: `/api/templates/${created.body.id}`, body: { name: 'Renamed', text: null } };
  },
  'templates.delete': async () => {
    const created = await stack.api('POST', '/api/templates', {
      token: session,
      body: { name: `t${++n}`, subject: 'Hello' },
    });
    return { token: session, path: `/api/templates/${created.body.id}` };
  },
  'attachments.upload': async () => ({
    token: session,
    body: { filename: 'a.txt', content: Buffer.from('hi').toString('base64') },
  }),
  'send.single': async () => ({
    token: await key(),
    body: { from: FROM, to: 'one@example.com', subject: 'Hello', text: 'Hi', metadata: { a: 1 } },
  }),
  'send.batch': async () => ({
    token: await key(),
    body: {
      from: FROM,
      subject: 'Hi {{n}}',
      text: 'x',
      recipients: [{ to: 'a@example.com', templateData: { n: 1 } }, { to: 'bad' }],
    },
  }),
  'scheduled.list': async () => ({ token: await key() }),
  'scheduled.get': async () => ({
    token: await key(),
    path: `/v1/scheduled/${await sendOne({ scheduledAt: 'in 1 hour' })}`,
  }),
  'scheduled.cancel': async () => ({
    token: await key(),
    path: `/v1/scheduled/${await sendOne({ scheduledAt: 'in 1 hour' })}`,
  }),
  'messages.list': async () => ({ token: session, query: 'limit=5' }),
  'messages.get': async () => ({ token: session, path: `/api/messages/${await sendOne({ metadata: { k: 'v' } })}` }),
  'messages.raw': async () => ({ token: session, path: `/api/messages/${await routedOne()}/raw` }),
  'inbound.route': async () => ({
    token: await key(),
    body: { routeId: await storeRoute(), from: 'Ops <ops@example.com>', subject: 'Routed', text: 'Please handle.' },
  }),
  'events.timeline': async () => ({ token: session }),
  'suppressions.list': async () => ({ token: session }),
  'suppressions.add': async () => ({ token: session, body: { email: `s${++n}@example.com`, reason: 'manual' } }),
  'suppressions.remove': async () => {
    const email = `s${++n}@example.com`;
    await stack.api('POST', '/api/contacts/suppressions', { token: session, body: { email } });
    return { token: session, path: `/api/contacts/suppressions/${email}` };
  },
  'domains.setEncryption': async () => ({
    token: session,
    path: `/api/domains/${await newDomainId()}/encryption`,
    body: {
      publicKey: generateKeyPairSync('rsa', { modulusLength: 2048 })
        .publicKey.export({ type: 'spki', format: 'pem' })
        .toString(),
    },
  }),
  'domains.clearEncryption': async () => ({ token: session, path: `/api/domains/${await newDomainId()}/encryption` }),
  'webhooks.set': async () => ({
    token: session,
    path: `/api/domains/${await senderDomainId()}/webhook`,
    body: { url: 'https://hooks.example.com/in', ackMode: 'ack' },
  }),
  'webhooks.delete': async () => ({ token: session, path: `/api/domains/${await claimId()}/webhook` }),
  'webhooks.secret': async () => {
    const id = await claimId();
    await stack.api('PUT', `/api/domains/${id}/webhook`, {
      token: session,
      body: { url: 'https://hooks.example.com/s' },
    });
    return { token: session, path: `/api/domains/${id}/webhook/secret` };
  },
  'webhooks.test': async () => {
    receiver ??= await startWebhookReceiver();
    const id = await claimId();
    await stack.api('PUT', `/api/domains/${id}/webhook`, { token: session, body: { url: `${receiver.base}/t` } });
    return { token: session, path: `/api/domains/${id}/webhook/test` };
  },
  'webhooks.accountSecret': async () => ({ token: session }),
  'webhooks.rotateAccountSecret': async () => ({ token: session }),
  'routes.list': async () => ({ token: session }),
  'routes.create': async () => ({
    token: session,
    body: { domainId: await claimId(), address: 'support-*', url: 'https://hooks.example.com/support' },
  }),
  'routes.delete': async () => {
    const r = await stack.api('POST', '/api/routes', {
      token: session,
      body: { domainId: await claimId(), address: 'ops', url: 'https://hooks.example.com/ops' },
    });
    return { token: session, path: `/api/routes/${r.body.id}` };
  },
  'deliveries.retry': async () => ({ token: session, path: `/api/deliveries/${await inboundDelivery()}/retry` }),
  'deliveries.retryMany': async () => ({
    token: session,
    body: { deliveryIds: [await inboundDelivery()], messageIds: ['msg_unknown00000000000000000'] },
  }),
  'deliveries.attempts': async () => ({ token: session, path: `/api/deliveries/${await inboundDelivery()}/attempts` }),
  'engagement.setTrackingWebhook': async () => ({
    token: session,
    path: `/api/domains/${await claimId()}/tracking-webhook`,
    body: { url: 'https://hooks.example.com/track' },
  }),
  'engagement.clearTrackingWebhook': async () => ({
    token: session,
    path: `/api/domains/${await claimId()}/tracking-webhook`,
  }),
  'engagement.setWebhookEvents': async () => ({
    token: session,
    path: `/api/domains/${await claimId()}/webhook-events`,
    body: { events: ['email.opened', 'email.clicked'] },
  }),
  'engagement.clearWebhookEvents': async () => ({
    token: session,
    path: `/api/domains/${await claimId()}/webhook-events`,
  }),
  'domains.list': async () => ({ token: session }),
  'domains.add': async () => ({ token: session, body: { domain: `d${++n}.example.com` } }),
  'domains.get': async () => ({ token: session, path: `/api/domains/${await newDomainId()}` }),
  'domains.update': async () => ({
    token: session,
    path: `/api/domains/${await newDomainId()}`,
    body: { track_opens: 1, zero_retention: false, tls: 'enforced' },
  }),
  'inboundPolicy.get': async () => ({ token: session, path: `/api/domains/${await senderDomainId()}/inbound-policy` }),
  'inboundPolicy.update': async () => ({
    token: session,
    path: `/api/domains/${await senderDomainId()}/inbound-policy`,
    body: { spam_hold_score: 6, spam_refuse_score: null, refuse_dmarc_reject: false },
  }),
  'senderRules.list': async () => ({ token: session, path: `/api/domains/${await senderDomainId()}/sender-rules` }),
  'senderRules.create': async () => ({
    token: session,
    path: `/api/domains/${await senderDomainId()}/sender-rules`,
    body: { kind: 'ip', value: '192.0.2.0/24', action: 'block', note: 'a bad network' },
  }),
  'senderRules.delete': async () => {
    const id = await senderDomainId();
    const r = await stack.api('POST', `/api/domains/${id}/sender-rules`, {
      token: session,
      body: { kind: 'domain', value: `gone${++n}.example`, action: 'block' },
    });
    return { token: session, path: `/api/domains/${id}/sender-rules/${r.body.rule.id}` };
  },
  'heldMessages.list': async () => {
    await heldMessage();
    return { token: session, path: '/api/inbound/held', query: 'limit=10' };
  },
  'heldMessages.release': async () => ({ token: session, path: `/api/inbound/held/${await heldMessage()}/release` }),
  'heldMessages.delete': async () => ({ token: session, path: `/api/inbound/held/${await heldMessage()}` }),
  'domains.dmarc': async () => ({ token: session, path: `/api/domains/${await newDomainId()}/dmarc?days=7` }),
  'domains.tlsReports': async () => ({ token: session, path: `/api/domains/${await newDomainId()}/tls-reports` }),
  'domains.delete': async () => ({ token: session, path: `/api/domains/${await newDomainId()}` }),
  'domains.verify': async () => ({ token: session, path: `/api/domains/${await newDomainId()}/verify` }),
  'domains.rotateDkim': async () => ({ token: session, path: `/api/domains/${await newDomainId()}/dkim/rotate` }),
  'domains.resumeSending': async () => ({
    token: session,
    path: `/api/domains/${await newDomainId()}/resume-sending`,
  }),
  'domains.startWarmup': async () => ({
    token: session,
    path: `/api/domains/${await newDomainId()}/warmup`,
    body: { schedule: [10, 20] },
  }),
  'domains.stopWarmup': async () => {
    const id = await newDomainId();
    await stack.api('PUT', `/api/domains/${id}/warmup`, { token: session, body: {} });
    return { token: session, path: `/api/domains/${id}/warmup` };
  },
  'subdomains.suggest': async () => ({ token: session }),
  'subdomains.check': async () => ({ token: session, query: 'name=ok-label' }),
  'subdomains.claim': async () => ({ token: session, body: { subdomain: `claim-${++n}` } }),
  'registration.check': async () => ({ token: session, query: 'domain=contract-shop.com' }),
  'registration.register': async () => ({
    token: session,
    body: {
      domain: `contract-${++n}.com`,
      contact: {
        firstName: 'A',
        lastName: 'B',
        email: 'a@example.com',
        phone: '+1.4155550100',
        address: '1 Main St',
        city: 'SF',
        zip: '94105',
        country: 'US',
      },
    },
  }),
  'oauthGrants.list': async () => ({ token: (await linkedApp()).accessToken }),
  'oauthGrants.revoke': async () => ({ token: session, path: `/api/oauth/grants/${(await linkedApp()).grantId}` }),
  'appPasswords.list': async () => ({ token: session }),
  'appPasswords.create': async () => ({
    token: session,
    body: { domain: 'sender.contract.svc.test', address: 'support-*', protocols: ['imap', 'api'], label: 'desk' },
  }),
  'appPasswords.update': async () => ({
    token: session,
    path: `/api/app-passwords/${(await newPassword()).id}`,
    body: { protocols: ['api'], address: 'agent-*' },
  }),
  'appPasswords.rotate': async () => ({
    token: session,
    path: `/api/app-passwords/${(await newPassword()).id}/rotate`,
  }),
  'appPasswords.delete': async () => ({ token: session, path: `/api/app-passwords/${(await newPassword()).id}` }),
  'mailbox.list': async () => ({ token: (await mailboxMessage()).secret, query: 'limit=10' }),
  'mailbox.raw': async () => {
    const m = await mailboxMessage();
    return { token: m.secret, path: `/api/mailbox/messages/${m.uid}/raw` };
  },
  'mailbox.setFlags': async () => {
    const m = await mailboxMessage();
    return { token: m.secret, path: `/api/mailbox/messages/${m.uid}/flags`, body: { flags: 'Seen Flagged' } };
  },
  'scopedKeys.list': async () => ({ token: session }),
  'scopedKeys.create': async () => ({ token: session, body: { domainId: await newDomainId() } }),
  'scopedKeys.revoke': async () => {
    const created = await stack.api('POST', '/api/keys/scoped', {
      token: session,
      body: { domainId: await newDomainId() },
    });
    return { token: session, path: `/api/keys/scoped/${created.body.id}` };
  },
  'contacts.list': async () => ({ token: session, query: 'limit=10&search=example' }),
  'contacts.create': async () => ({
    token: session,
    body: { email: `c${++n}@example.com`, name: 'Ada', attributes: { plan: 'pro', seats: 3 } },
  }),
  'contacts.get': async () => ({ token: session, path: `/api/contacts/${await newContactId()}` }),
  'contacts.update': async () => ({
    token: session,
    path: `/api/contacts/${await newContactId()}`,
    body: { name: 'Renamed', attributes: { plan: 'free' }, subscribed: false },
  }),
  'contacts.delete': async () => ({ token: session, path: `/api/contacts/${await newContactId()}` }),
  'lists.list': async () => ({ token: session }),
  'lists.create': async () => ({ token: session, body: { name: 'Newsletter' } }),
  'lists.get': async () => ({ token: session, path: `/api/lists/${await newListId()}` }),
  'lists.update': async () => ({
    token: session,
    path: `/api/lists/${await newListId()}`,
    body: { name: 'Renamed list' },
  }),
  'lists.delete': async () => ({ token: session, path: `/api/lists/${await newListId()}` }),
  'lists.contacts': async () => ({
    token: session,
    path: `/api/lists/${await newListId(3)}/contacts`,
    query: 'limit=2',
  }),
  'lists.addContacts': async () => ({
    token: session,
    path: `/api/lists/${await newListId()}/contacts`,
    body: { contactIds: [await newContactId()] },
  }),
  'lists.removeContact': async () => {
    const contactId = await newContactId();
    const listId = await newListId();
    await stack.api('POST', `/api/lists/${listId}/contacts`, { token: session, body: { contactIds: [contactId] } });
    return { token: session, path: `/api/lists/${listId}/contacts/${contactId}` };
  },
  'lists.import': async () => ({
    token: session,
    path: `/api/lists/${await newListId()}/import`,
    body: { csv: `email,name,plan\ncsv${++n}@example.com,Ada,pro\n` },
  }),
  'lists.importStatus': async () => {
    const listId = await newListId();
    const started = await stack.api('POST', `/api/lists/${listId}/import`, {
      token: session,
      body: { csv: `email\ncsv${++n}@example.com\n` },
    });
    return { token: session, path: `/api/lists/${listId}/imports/${started.body.id}` };
  },
  'broadcasts.list': async () => ({ token: session }),
  'broadcasts.create': async () => ({
    token: session,
    body: {
      name: 'Launch',
      from: `News <${FROM}>`,
      replyTo: 'support@example.com',
      subject: 'Hello {{first_name}}',
      preview: 'Big news',
      audience: { type: 'list', id: await newListId(1) },
      html: '<p>Hi {{name}}</p>',
      text: 'Hi {{name}}',
      footerAddress: '1 Main St, Springfield',
    },
  }),
  'broadcasts.get': async () => ({ token: session, path: `/api/broadcasts/${await newBroadcastId()}` }),
  'broadcasts.update': async () => ({
    token: session,
    path: `/api/broadcasts/${await newBroadcastId()}`,
    body: {
      from: FROM,
      subject: 'Changed',
      audience: { type: 'filter', query: 'attributes.plan = "pro" and last_seen_at > 2026-01-01' },
    },
  }),
  'broadcasts.delete': async () => ({ token: session, path: `/api/broadcasts/${await newBroadcastId()}` }),
  'broadcasts.send': async () => ({
    token: session,
    path: `/api/broadcasts/${await newBroadcastId()}/send`,
    body: { scheduledAt: new Date(Date.now() + 3_600_000).toISOString() },
  }),
  'broadcasts.cancel': async () => {
    const id = await newBroadcastId();
    await stack.api('POST', `/api/broadcasts/${id}/send`, { token: session, body: { scheduledAt: 'in 1 hour' } });
    return { token: session, path: `/api/broadcasts/${id}/cancel` };
  },
  'sequences.list': async () => ({ token: session }),
  'sequences.create': async () => ({ token: session, body: sequenceBody() }),
  'sequences.get': async () => ({ token: session, path: `/api/sequences/${await newSequenceId()}` }),
  'sequences.update': async () => ({
    token: session,
    path: `/api/sequences/${await newSequenceId()}`,
    body: { status: 'paused', steps: [{ type: 'wait', duration: '1h' }] },
  }),
  'sequences.delete': async () => ({ token: session, path: `/api/sequences/${await newSequenceId('draft')}` }),
  'sequences.enrolments': async () => ({
    token: session,
    path: `/api/sequences/${(await newEnrolment()).sequenceId}/enrolments`,
  }),
  'enrolments.get': async () => ({ token: session, path: `/api/enrolments/${(await newEnrolment()).id}` }),
  'enrolments.cancel': async () => ({ token: session, path: `/api/enrolments/${(await newEnrolment()).id}/cancel` }),
  'events.post': async () => ({
    token: await key(),
    body: {
      name: 'contract.event',
      email: `e${++n}@example.com`,
      payload: { plan: 'pro', nested: { a: 1 } },
      dedupeKey: `d${n}`,
    },
  }),
  'events.list': async () => ({ token: await key(), query: 'name=contract.event&limit=5' }),
  'events.names': async () => ({ token: await key() }),
};

const sequenceBody = (status = 'active') => ({
  name: `s${++n}`,
  status,
  from: FROM,
  input: { plan: 'string' },
  trigger: { type: 'event', event: `contract-start-${n}` },
  steps: [
    { type: 'wait_for_event', event: 'contract-never', match: { plan: 'pro' }, timeout: '1h', onArrived: 'exit' },
    { type: 'send', subject: 'Hi {{input.plan}}', text: 't' },
  ],
});
async function newSequenceId(status = 'active'): Promise<string> {
  return (await stack.api('POST', '/api/sequences', { token: session, body: sequenceBody(status) })).body.id;
}
/** An enrolment parked on a one-hour wait_for_event. */
async function newEnrolment(): Promise<{ id: string; sequenceId: string }> {
  const body = sequenceBody();
  const sequenceId = (await stack.api('POST', '/api/sequences', { token: session, body })).body.id;
  const contactId = await newContactId();
  await stack.api('POST', '/v1/events', { token: await key(), body: { name: body.trigger.event, contactId } });
  const [e] = await eventually(async () => {
    const l = (await stack.api('GET', `/api/sequences/${sequenceId}/enrolments`, { token: session })).body;
    return l.length ? l : undefined;
  });
  return { id: e.id, sequenceId };
}

/** Links a new app to the contract account over the real OAuth flow; answers its access token and grant id. */
async function linkedApp(): Promise<{ accessToken: string; grantId: string }> {
  const redirectUri = 'http://127.0.0.1:9/contract/cb';
  const { client_id: clientId } = await registerClient(stack, [redirectUri], `Contract app ${++n}`);
  const { verifier, challenge } = pkce();
  const back = await approveOverHttp(stack, authorizeUrl(stack, { clientId, redirectUri, challenge }), {
    email: 'contract@example.com',
    password: 'contract password',
  });
  const tokens = await tokenRequest(stack, {
    grant_type: 'authorization_code',
    code: back.searchParams.get('code')!,
    redirect_uri: redirectUri,
    client_id: clientId,
    code_verifier: verifier,
  });
  const grants = (await stack.api('GET', '/api/oauth/grants', { token: tokens.body.access_token })).body as {
    id: string;
    client_id: string;
  }[];
  return { accessToken: tokens.body.access_token, grantId: grants.find((g) => g.client_id === clientId)!.id };
}

async function newPassword(): Promise<{ id: string; secret: string }> {
  return (
    await stack.api('POST', '/api/app-passwords', {
      token: session,
      body: { domainId: await senderDomainId(), protocols: ['api'] },
    })
  ).body;
}

/** A message filed into a mailbox through the SMTP ingress, and an `api` password that reads it. */
async function mailboxMessage(): Promise<{ secret: string; uid: number }> {
  const { secret } = await newPassword();
  const subject = `mailbox ${++n}`;
  const t = nodemailer.createTransport({
    host: '127.0.0.1',
    port: stack.service.smtpPort!,
    secure: false,
    ignoreTLS: true,
  });
  await t.sendMail({ from: 'x@far.example', to: 'box@sender.contract.svc.test', subject, text: 'hi' });
  const uid = await eventually(
    async () =>
      (await stack.api('GET', '/api/mailbox/messages', { token: secret })).body.messages?.find(
        (m: any) => m.subject === subject,
      )?.uid,
  );
  return { secret, uid: uid as number };
}

async function newContactId(): Promise<string> {
  return (await stack.api('POST', '/api/contacts', { token: session, body: { email: `c${++n}@example.com` } })).body.id;
}

/** A new list with `members` new contacts in it. */
async function newListId(members = 0): Promise<string> {
  const id = (await stack.api('POST', '/api/lists', { token: session, body: { name: `l${++n}` } })).body.id;
  if (members)
    await stack.api('POST', `/api/lists/${id}/contacts`, {
      token: session,
      body: { emails: Array.from({ length: members }, () => `m${++n}@example.com`) },
    });
  return id;
}

async function newBroadcastId(): Promise<string> {
  const body = { from: FROM, subject: 'Hi', text: 'Hi {{name}}', audience: { type: 'list', id: await newListId(1) } };
  return (await stack.api('POST', '/api/broadcasts', { token: session, body })).body.id;
}

async function claimId(): Promise<string> {
  return (await stack.api('POST', '/api/domains/subdomain', { token: session, body: { subdomain: `c${++n}-hook` } }))
    .body.domain.id;
}

/** A `store` route of a fresh domain of the contract account (POST /v1/route's target). */
async function storeRoute(): Promise<string> {
  const res = await stack.api('POST', '/api/routes', {
    token: session,
    body: { domainId: await claimId(), address: 'keep', action: 'store' },
  });
  return res.body.id;
}

/** An inbound message made by POST /v1/route into a store route: its mailbox copy is the stored copy. */
async function routedOne(): Promise<string> {
  const res = await stack.api('POST', '/v1/route', {
    token: session,
    body: { routeId: await storeRoute(), from: 'ops@example.com', subject: 'Raw', text: 'Body' },
  });
  return res.body.id;
}

/** A held inbound message of the contract account, as the inbound policy stores one (a message row `held`). */
async function heldMessage(): Promise<string> {
  const [user] = await stack.service.core.db
    .select({ id: schema.users.id })
    .from(schema.users)
    .where(eq(schema.users.email, 'contract@example.com'));
  const id = `msg_contractheld${++n}x${Date.now()}`;
  await stack.service.core.db.insert(schema.messages).values({
    id,
    userId: user!.id,
    direction: 'inbound',
    kind: 'user',
    domainId: await senderDomainId(),
    fromAddr: 'held@far.example',
    envelopeFrom: 'held@far.example',
    toAddrs: ['in@sender.contract.svc.test'],
    subject: 'held',
    status: 'held',
    heldReason: 'spam score 9 at or above 6',
    heldUntil: Date.now() + 86_400_000,
    spam: { scored: true, score: 9, required: 15, action: 'add header', symbols: [] },
    receivedAt: Date.now(),
    createdAt: Date.now(),
    updatedAt: Date.now(),
  });
  return id;
}
async function newDomainId(): Promise<string> {
  return (await stack.api('POST', '/api/domains', { token: session, body: { domain: `x${++n}.example.com` } })).body
    .domain.id;
}

const ajv = new Ajv({ allErrors: true, strict: false });
(addFormatsModule as unknown as { default: (a: Ajv) => void }).default(ajv);
async function served(name: string) {
  const res = await fetch(`${stack.baseUrl}/v1/schemas/${name}.json`);
  expect(res.status, name).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/schema\+json/);
  const schema = await res.json();
  expect(schema.$id).toBe(`${stack.config.publicUrl}/v1/schemas/${name}.json`);
  expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
  return schema;
}

describe('every operation', () => {
  it('is listed at /v1/schemas with absolute urls', async () => {
    const list = (await stack.api('GET', '/v1/schemas')).body.schemas as { name: string; url: string }[];
    for (const op of operations) {
      const base = schemaBaseName(op);
      expect(list.map((s) => s.name)).toContain(`${base}-response`);
      if (op.body) expect(list.map((s) => s.name)).toContain(`${base}-request`);
    }
    for (const s of list) expect(s.url).toBe(`${stack.config.publicUrl}/v1/schemas/${s.name}.json`);
    expect((await stack.api('GET', '/v1/schemas/nope.json')).status).toBe(404);
  });

  it.each(operations.map((op) => [op.name, op] as const))(
    '%s: a real call validates against its served schemas',
    async (name, op: Operation) => {
      expect(examples[name], `add an example call for ${name} to test/contract.test.ts`).toBeDefined();
      const ex = await examples[name]!();
      const base = schemaBaseName(op);
      if (op.body)
        expect(ajv.validate(await served(`${base}-request`), ex.body), JSON.stringify(ajv.errors)).toBe(true);
      const res = await stack.api(op.method, `${ex.path ?? op.path}${ex.query ? `?${ex.query}` : ''}`, {
        token: ex.token,
        body: ex.body,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(op.status ?? 200);
      const valid = ajv.validate(await served(`${base}-response`), res.body);
      expect(valid, `${name}: ${JSON.stringify(ajv.errors)}`).toBe(true);
    },
  );

  it.each(operations.filter((op) => op.auth !== 'public').map((op) => [op.name, op] as const))(
    '%s: no credential is a JSON 401',
    async (_n, op: Operation) => {
      const res = await stack.api(op.method, op.path, op.body ? { body: {} } : {});
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: expect.any(String), code: 'unauthorized' });
    },
  );

  it.each(operations.filter((op) => op.body).map((op) => [op.name, op] as const))(
    '%s: extra fields and wrong types are a JSON 400',
    async (name, op: Operation) => {
      const ex = await examples[name]!();
      const extra = await stack.api(op.method, ex.path ?? op.path, {
        token: ex.token,
        body: { ...(ex.body as object), notAField: 1 },
      });
      expect(extra.status).toBe(400);
      expect(extra.body.code).toBe('validation_error');
      expect(extra.body.error).toContain('notAField');
      const keys = Object.keys(op.body!.shape);
      if (keys.length === 0) return;
      const wrong = await stack.api(op.method, ex.path ?? op.path, {
        token: ex.token,
        body: Object.fromEntries(keys.map((k) => [k, { nested: true }])),
      });
      expect([400]).toContain(wrong.status);
      expect(typeof wrong.body.error).toBe('string');
    },
  );
});

describe('OpenAPI', () => {
  it('serves the generated OpenAPI 3.1 document at /v1/openapi.json', async () => {
    const res = await stack.api('GET', '/v1/openapi.json');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ openapi: '3.1.0', servers: [{ url: stack.config.publicUrl }] });
    expect(Object.values(res.body.paths).reduce((k: number, item: any) => k + Object.keys(item).length, 0)).toBe(
      operations.length,
    );
  });
});

describe('wire conventions', () => {
  it('answers malformed JSON 400, oversized bodies 413 and unknown routes 404, all as JSON', async () => {
    expect((await stack.api('POST', '/api/auth/login', { raw: '{"email": ' })).body).toEqual({
      error: 'Malformed JSON body',
      code: 'invalid_json',
    });
    const big = await stack.api('POST', '/api/auth/login', {
      raw: JSON.stringify({ email: 'x'.repeat(31 * 1024 * 1024) }),
    });
    expect(big).toMatchObject({ status: 413, body: { code: 'payload_too_large' } });
    expect(await stack.api('DELETE', '/api/nothing-here')).toMatchObject({ status: 404, body: { code: 'not_found' } });
    expect((await stack.api('POST', '/api/auth/login', { raw: '[1,2]' })).status).toBe(400);
  });

  it('serves health with the database and Temporal reachable', async () => {
    const res = await stack.api('GET', '/api/health');
    expect(res).toMatchObject({
      status: 200,
      body: { ok: true, database: { ok: true, kind: 'postgres' }, temporal: { ok: true } },
    });
    expect(ajv.validate(await served('health-response'), res.body)).toBe(true);
  });

  it('exposes the same operations over tRPC with the same errors', async () => {
    accountKey = (await stack.api('GET', '/api/keys', { token: session })).body.key;
    const me = await stack.api('GET', '/trpc/me.get', { token: accountKey });
    expect(me.status).toBe(200);
    expect(me.body.result.data).toMatchObject({ email: 'contract@example.com' });
    const rotated = await stack.api('POST', '/trpc/keys.rotate', { token: session, body: {} });
    expect(rotated.body.result.data.key).toMatch(/^svc_live_/);
    accountKey = rotated.body.result.data.key;
    const noAuth = await stack.api('GET', '/trpc/billing.usage');
    expect(noAuth.status).toBe(401);
    expect(noAuth.body.error.data.appCode).toBe('unauthorized');
    expect((await stack.api('POST', '/trpc/domains.add', { body: { domain: 42 } })).status).toBe(401);
    const bad = await stack.api('POST', '/trpc/auth.signup', { body: { email: 'nope', password: 'x' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.data.appCode).toBe('validation_error');
  });
});
