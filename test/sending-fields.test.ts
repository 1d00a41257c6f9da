import { simpleParser } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FROM_DOMAIN, startSendingStack, type SendingStack } from './helpers/sending.js';
import { eventually } from './helpers/stack.js';

let env: SendingStack;
let domainId: string;
beforeAll(async () => {
  env = await startSendingStack();
  domainId = (await env.stack.api('GET', '/api/domains', { token: env.session })).body.find(
    (d: any) => d.domain === FROM_DOMAIN,
  ).id;
});
afterAll(async () => {
  await env?.stop();
});

const api = (method: string, path: string, body?: unknown, token = env.session) =>
  env.stack.api(method, path, { token, body });
const to = (addr: string) => (r: { to: string[] }) => r.to.includes(addr);
const arrived = async (addr: string) => {
  const got = await env.sink.waitFor(to(addr));
  return { envelope: got.to, raw: got.raw.toString('utf8'), mail: await simpleParser(got.raw) };
};
const PIXEL = /src="[^"]+\/t\/o\/[^"]+"/;

describe('PATCH /api/domains/:id (zero_retention, track_opens)', () => {
  it('sets either flag as 0/1 or a boolean and answers the stored row', async () => {
    const on = await api('PATCH', `/api/domains/${domainId}`, { track_opens: 1 });
    expect(on.status, JSON.stringify(on.body)).toBe(200);
    expect(on.body.domain).toMatchObject({ id: domainId, track_opens: 1, zero_retention: 0 });
    const both = await api('PATCH', `/api/domains/${domainId}`, { zero_retention: true, track_opens: false });
    expect(both.body.domain).toMatchObject({ track_opens: 0, zero_retention: 1 });
    expect((await api('GET', `/api/domains/${domainId}`)).body.domain).toMatchObject({
      track_opens: 0,
      zero_retention: 1,
    });
    expect((await api('PATCH', `/api/domains/${domainId}`, { zero_retention: 0 })).body.domain.zero_retention).toBe(0);
    expect((await api('PATCH', `/api/domains/${domainId}`, {})).body.code).toBe('validation_error');
    expect((await api('PATCH', `/api/domains/${domainId}`, { track_opens: 2 })).status).toBe(400);
    expect((await api('PATCH', `/api/domains/${domainId}`, { status: 'verified' })).status).toBe(400);
  });

  it("is loaded through the credential: another account and another domain's scoped key get 404", async () => {
    const other = (
      await api('POST', '/api/auth/signup', { email: 'patch-intruder@example.com', password: 'intruder password' }, '')
    ).body.token;
    expect((await api('PATCH', `/api/domains/${domainId}`, { track_opens: 1 }, other)).status).toBe(404);
    const second = (await api('POST', '/api/domains/subdomain', { subdomain: 'patch-second' })).body.domain.id;
    const foreignKey = (await api('POST', '/api/keys/scoped', { domainId: second })).body.key;
    expect((await api('PATCH', `/api/domains/${domainId}`, { track_opens: 1 }, foreignKey)).status).toBe(404);
    const ownKey = (await api('POST', '/api/keys/scoped', { domainId })).body.key;
    expect((await api('PATCH', `/api/domains/${domainId}`, { track_opens: 1 }, ownKey)).body.domain.track_opens).toBe(
      1,
    );
    expect((await api('PATCH', `/api/domains/${domainId}`, { track_opens: 0 }, ownKey)).body.domain.track_opens).toBe(
      0,
    );
  });
});

describe('the domain default for open tracking', () => {
  it('a send without trackOpens gets the pixel from a track_opens=1 domain; trackOpens:false overrides; the pixel records an open', async () => {
    await api('PATCH', `/api/domains/${domainId}`, { track_opens: 1 });
    const tracked = await env.send({ to: 'default-open@rcpt.test', html: '<p>Hello</p>' });
    expect(tracked.status).toBe(200);
    const html = (await arrived('default-open@rcpt.test')).mail.html as string;
    expect(html).toMatch(PIXEL);
    const pixel = /src="([^"]+\/t\/o\/[^"]+)"/
      .exec(html)![1]!
      .replace(/&amp;/g, '&')
      .replace(env.stack.config.publicUrl, '');
    expect((await fetch(`${env.stack.baseUrl}${pixel}`)).headers.get('content-type')).toBe('image/gif');
    await eventually(async () =>
      (await api('GET', `/api/events?messageId=${tracked.body.id}`, undefined, env.key)).body.some(
        (e: any) => e.type === 'email.opened',
      ),
    );

    await env.send({ to: 'override-open@rcpt.test', html: '<p>Hello</p>', trackOpens: false });
    expect((await arrived('override-open@rcpt.test')).mail.html).not.toMatch(PIXEL);

    await api('PATCH', `/api/domains/${domainId}`, { track_opens: 0 });
    await env.send({ to: 'default-off@rcpt.test', html: '<p>Hello</p>' });
    expect((await arrived('default-off@rcpt.test')).mail.html).not.toMatch(PIXEL);
  });
});

describe('single send: bcc and replyTo', () => {
  it('bcc recipients are in the envelope and never in the headers; replyTo is the Reply-To header', async () => {
    const res = await env.send({
      to: 'visible@rcpt.test',
      bcc: ['hidden-one@rcpt.test', 'Hidden Two <hidden-two@rcpt.test>'],
      replyTo: 'Support <support@example.org>',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const got = await arrived('visible@rcpt.test');
    expect(got.envelope.sort()).toEqual(['hidden-one@rcpt.test', 'hidden-two@rcpt.test', 'visible@rcpt.test']);
    expect(got.raw).not.toMatch(/^bcc:/im);
    expect(got.raw).not.toContain('hidden-');
    expect(got.mail.replyTo?.value).toEqual([{ address: 'support@example.org', name: 'Support' }]);
    expect(got.mail.to && 'text' in got.mail.to ? got.mail.to.text : '').toBe('visible@rcpt.test');
  });
});

describe('batch send: every shared field reaches each message', () => {
  it('templateId, replyTo, inReplyTo, attachments, trackOpens and trackClicks', async () => {
    const tpl = (
      await api('POST', '/api/templates', {
        name: 'batch-shared',
        subject: 'Batch for {{name}}',
        html: '<p>Hi {{name}}, <a href="https://example.org/docs">docs</a></p>',
      })
    ).body;
    const res = await api(
      'POST',
      '/v1/send/batch',
      {
        from: `hello@${FROM_DOMAIN}`,
        templateId: tpl.id,
        replyTo: 'replies@example.org',
        inReplyTo: '<root-42@example.org>',
        attachments: [
          { filename: 'terms.txt', content: Buffer.from('the terms').toString('base64'), contentType: 'text/plain' },
        ],
        trackOpens: true,
        trackClicks: true,
        recipients: [
          { to: 'batch-a@rcpt.test', templateData: { name: 'Ann' } },
          { to: 'batch-b@rcpt.test', templateData: { name: 'Bo' } },
        ],
      },
      env.key,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ sent: 2, failed: 0 });
    for (const [addr, name] of [
      ['batch-a@rcpt.test', 'Ann'],
      ['batch-b@rcpt.test', 'Bo'],
    ] as const) {
      const { mail, envelope } = await arrived(addr);
      expect(envelope).toEqual([addr]);
      expect(mail.subject).toBe(`Batch for ${name}`);
      expect(mail.replyTo?.value).toEqual([{ address: 'replies@example.org', name: '' }]);
      expect(mail.inReplyTo).toBe('<root-42@example.org>');
      expect(mail.references).toBe('<root-42@example.org>');
      expect(mail.attachments.map((a) => [a.filename, a.contentType, a.content.toString()])).toEqual([
        ['terms.txt', 'text/plain', 'the terms'],
      ]);
      const html = mail.html as string;
      expect(html).toContain(`Hi ${name}`);
      expect(html).toMatch(PIXEL);
      expect(html).toMatch(/href="[^"]+\/t\/c\/[^"]+"/);
      expect(html).not.toContain('href="https://example.org/docs"');
    }
  });
});
