import {
  constants,
  createCipheriv,
  createDecipheriv,
  createHash,
  generateKeyPairSync,
  privateDecrypt,
  publicEncrypt,
  randomBytes,
} from 'node:crypto';
import nodemailer from 'nodemailer';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../db/index.js';
import { decryptRsaOaepEnvelope, encryptForStorage, parseEncryptionKey } from '../core/inbound/encryption.js';
import { parseControl } from '../core/webhooks/control.js';
import { startTestDns } from './helpers/dns.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';
import { startWebhookReceiver } from './helpers/webhook-receiver.js';

/**
 * What the official MailKite SDKs send and read (issue 34, item 4): their control-mode replies, `route()`
 * (POST /v1/route) and the at-rest envelope their `encrypt`/`decrypt` use. The reply strings are the SDK's
 * documented return values (docs/replySpam.md, replyDrop.md, replyBlockSender.md of mailkite-node); the
 * envelope functions below are written here from the SDK's documented algorithm, not taken from it.
 */
const SDK = {
  replyOk: '{"status":"ok"}',
  replySpam: '{"status":"spam"}',
  replyDrop: '{"status":"drop"}',
  replyBlockSender: '{"status":"ok","actions":[{"type":"block-sender"}]}',
};

/** The SDK's documented decrypt: RSA-OAEP (SHA-256) unwraps the AES-256-GCM key; the last 16 bytes of ciphertext are the tag. */
function sdkDecrypt(envelope: string, privateKeyPem: string): string {
  const env = JSON.parse(envelope) as { wrappedKey: string; iv: string; ciphertext: string };
  const cek = privateDecrypt(
    { key: privateKeyPem, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
    Buffer.from(env.wrappedKey, 'base64'),
  );
  const all = Buffer.from(env.ciphertext, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', cek, Buffer.from(env.iv, 'base64'));
  decipher.setAuthTag(all.subarray(all.length - 16));
  return Buffer.concat([decipher.update(all.subarray(0, all.length - 16)), decipher.final()]).toString('utf8');
}

/** The SDK's documented encrypt: `{v:1, keyAlg, fp, enc, iv, wrappedKey, ciphertext}`, fp the SHA-256 of the SPKI DER. */
function sdkEncrypt(plaintext: string, publicKeyPem: string, spkiDer: Buffer): string {
  const cek = randomBytes(32);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', cek, iv);
  const body = Buffer.concat([cipher.update(Buffer.from(plaintext, 'utf8')), cipher.final(), cipher.getAuthTag()]);
  const wrapped = publicEncrypt(
    { key: publicKeyPem, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
    cek,
  );
  return JSON.stringify({
    v: 1,
    keyAlg: 'RSA-OAEP-256',
    fp: createHash('sha256').update(spkiDer).digest('hex'),
    enc: 'A256GCM',
    iv: iv.toString('base64'),
    wrappedKey: wrapped.toString('base64'),
    ciphertext: body.toString('base64'),
  });
}

const SERVICE = 'sdk.svc.test';
const DOMAIN = `ctl.${SERVICE}`;
const SEALED = `vault.${SERVICE}`;
let stack: TestStack;
let dns: Awaited<ReturnType<typeof startTestDns>>;
let hooks: Awaited<ReturnType<typeof startWebhookReceiver>>;
const A = { token: '', key: '', domainId: '', sealedId: '' };
const B = { token: '', key: '', domainId: '' };
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const publicPem = rsa.publicKey.export({ type: 'spki', format: 'pem' }).toString();
const privatePem = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
const spkiDer = rsa.publicKey.export({ type: 'spki', format: 'der' });

async function account(email: string, sub: string) {
  const token = (await stack.api('POST', '/api/auth/signup', { body: { email, password: 'sdk compat password' } })).body
    .token as string;
  const key = (await stack.api('GET', '/api/keys', { token })).body.key as string;
  const domainId = (await stack.api('POST', '/api/domains/subdomain', { token, body: { subdomain: sub } })).body.domain
    .id as string;
  return { token, key, domainId };
}

beforeAll(async () => {
  dns = await startTestDns();
  hooks = await startWebhookReceiver();
  stack = await startStack({ SERVICE_DOMAIN: SERVICE, DNS_SERVERS: dns.server.address });
  Object.assign(A, await account('sdk-a@example.com', 'ctl'));
  Object.assign(B, await account('sdk-b@example.com', 'other'));
  A.sealedId = (
    await stack.api('POST', '/api/domains/subdomain', { token: A.token, body: { subdomain: 'vault' } })
  ).body.domain.id;
});
afterAll(async () => {
  await stack?.stop();
  await hooks?.close();
  await dns?.close();
});

const smtp = () =>
  nodemailer.createTransport({ host: '127.0.0.1', port: stack.service.smtpPort!, secure: false, ignoreTLS: true });
const db = () => stack.service.core.db;

/** A webhook route in ack mode for `local@` whose receiver answers `reply`. */
async function hookRoute(domainId: string, local: string, path: string, reply: string) {
  const res = await stack.api('POST', '/api/routes', {
    token: A.token,
    body: { domainId, address: local, action: 'webhook', destination: `${hooks.base}${path}`, ackMode: 'ack' },
  });
  expect(res.status).toBe(201);
  hooks.secret(path, res.body.signingSecret);
  hooks.on(path, () => ({ status: 200, body: reply }));
  return res.body.id as string;
}
const attemptOf = async (messageId: string) =>
  eventually(async () => {
    const [a] = await db()
      .select()
      .from(schema.deliveryAttempts)
      .where(eq(schema.deliveryAttempts.messageId, messageId));
    return a;
  });
const messageRow = async (id: string) =>
  (await db().select().from(schema.messages).where(eq(schema.messages.id, id)))[0];

describe('control-mode replies, as the SDK writes them', () => {
  it('parses exactly the SDK strings; a bare ack or an oversized body is no control reply', () => {
    expect(parseControl(SDK.replySpam)).toEqual({ status: 'spam', actions: [] });
    expect(parseControl(SDK.replyDrop)).toEqual({ status: 'drop', actions: [] });
    expect(parseControl(SDK.replyBlockSender)).toEqual({ status: 'ok', actions: ['block-sender'] });
    expect(parseControl(SDK.replyOk)).toBeNull();
    expect(parseControl(`{"status":"spam","pad":"${'x'.repeat(5000)}"}`)).toBeNull();
    expect(parseControl('{"status":"quarantine"}')).toBeNull();
  });

  it('replySpam marks the message spam, acknowledges the delivery and is recorded on the attempt', async () => {
    await hookRoute(A.domainId, 'spam', '/spam', SDK.replySpam);
    await smtp().sendMail({ from: 'sam@spammer.example', to: `spam@${DOMAIN}`, subject: 'buy now', text: 'cheap' });
    const [hit] = await hooks.waitFor('/spam');
    expect(hit!.verified).toBe(true);
    const id = hit!.json.id as string;
    const attempt = await attemptOf(id);
    expect(attempt.ok).toBe(1);
    expect(attempt.control).toMatchObject({ status: 'spam', actions: [], applied: ['spam'] });
    expect((await messageRow(id))!.spam).toMatchObject({ marked: true });
    const got = await stack.api('GET', `/api/messages/${id}`, { token: A.token });
    expect(got.body.deliveries[0]).toMatchObject({ status: 'delivered' });
    expect(got.body.message.spam).toMatchObject({ marked: true });
    const attempts = await stack.api('GET', `/api/deliveries/${got.body.deliveries[0].id}/attempts`, {
      token: A.token,
    });
    expect(attempts.body.attempts[0].control).toMatchObject({ status: 'spam', applied: ['spam'] });
    // The message is still there, still readable: spam is a mark, not a deletion.
    expect(got.body.message).toMatchObject({ subject: 'buy now', status: expect.not.stringMatching(/dropped/) });
  });

  it('replyDrop discards the message: its stored copies go, the row stays as a record', async () => {
    await hookRoute(A.domainId, 'drop', '/drop', SDK.replyDrop);
    await smtp().sendMail({ from: 'dan@sender.example', to: `drop@${DOMAIN}`, subject: 'throw away', text: 'bye' });
    const [hit] = await hooks.waitFor('/drop');
    const id = hit!.json.id as string;
    const attempt = await attemptOf(id);
    expect(attempt.control).toMatchObject({ status: 'drop', applied: ['drop'] });
    const row = await eventually(async () => {
      const m = await messageRow(id);
      return m?.status === 'dropped' ? m : undefined;
    });
    expect(row).toMatchObject({ subject: null, text: null, html: null });
    expect(await db().select().from(schema.inboundRaw).where(eq(schema.inboundRaw.messageId, id))).toEqual([]);
    expect(await db().select().from(schema.mailboxMessages).where(eq(schema.mailboxMessages.messageId, id))).toEqual(
      [],
    );
    expect((await stack.api('GET', `/api/messages/${id}/raw`, { token: A.token })).status).toBe(404);
  });

  it('replyBlockSender acknowledges and adds a block rule for the sender on that domain', async () => {
    await hookRoute(A.domainId, 'block', '/block', SDK.replyBlockSender);
    await smtp().sendMail({ from: 'Bob <Bob@Pest.example>', to: `block@${DOMAIN}`, subject: 'again', text: 'hi' });
    const [hit] = await hooks.waitFor('/block');
    const id = hit!.json.id as string;
    const attempt = await attemptOf(id);
    expect(attempt.ok).toBe(1);
    expect(attempt.control).toMatchObject({ status: 'ok', actions: ['block-sender'], applied: ['block-sender'] });
    const rules = await db().select().from(schema.senderRules).where(eq(schema.senderRules.domainId, A.domainId));
    expect(rules).toEqual([
      expect.objectContaining({
        userId: expect.any(String),
        kind: 'address',
        value: 'bob@pest.example',
        action: 'block',
        origin: 'webhook-reply',
      }),
    ]);
    expect((await messageRow(id))!.status).not.toBe('dropped');
    // The rule acts at SMTP: Bob's next message to the domain is refused for good (docs/inbound-policy.md).
    const refused = await smtp()
      .sendMail({ from: 'bob@pest.example', to: `block@${DOMAIN}`, subject: 'once more', text: 'hi' })
      .then(
        () => undefined,
        (err: { responseCode?: number }) => err,
      );
    expect(refused?.responseCode).toBeGreaterThanOrEqual(500);
    expect(hooks.hitsOn('/block')).toHaveLength(1);
  });
});

describe('POST /v1/route, as the SDK calls it', () => {
  it("runs a message through the caller's route (webhook) and answers the SDK's RouteResult", async () => {
    const routeId = await hookRoute(A.domainId, 'api', '/api-route', SDK.replyOk);
    const res = await stack.api('POST', '/v1/route', {
      token: A.key,
      body: { routeId, from: 'ops@example.com', subject: 'Process this', text: 'Please handle.' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: expect.stringMatching(/^msg_/), routed: true, action: 'webhook' });
    const [hit] = await hooks.waitFor('/api-route');
    expect(hit!.json).toMatchObject({
      id: res.body.id,
      from: { address: 'ops@example.com' },
      to: [{ address: `api@${DOMAIN}` }],
      subject: 'Process this',
    });
    expect(hit!.json.text.trim()).toBe('Please handle.');
  });

  it('routes by address to a store route: the message lands in the mailbox', async () => {
    await stack.api('POST', '/api/routes', {
      token: A.token,
      body: { domainId: A.domainId, address: 'keep', action: 'store' },
    });
    const res = await stack.api('POST', '/v1/route', {
      token: A.key,
      body: { address: `keep@${DOMAIN}`, from: 'Ops <ops@example.com>', subject: 'Stored', html: '<p>kept</p>' },
    });
    expect(res.body).toMatchObject({ routed: true, action: 'store' });
    const raw = await stack.api('GET', `/api/messages/${res.body.id}/raw`, { token: A.token });
    expect(raw.body).toMatchObject({ encrypted: false, alg: null });
    expect(raw.body.raw).toContain('Subject: Stored');
  });

  it("another tenant's route is 404, by id and by address; neither id nor address is 400", async () => {
    const routeId = (await stack.api('GET', '/api/routes', { token: A.token })).body.find(
      (r: { pattern: string }) => r.pattern === 'api',
    ).id as string;
    const byId = await stack.api('POST', '/v1/route', {
      token: B.key,
      body: { routeId, from: 'x@example.com', text: 'hijack' },
    });
    expect(byId.status).toBe(404);
    const byAddress = await stack.api('POST', '/v1/route', {
      token: B.key,
      body: { address: `api@${DOMAIN}`, from: 'x@example.com', text: 'hijack' },
    });
    expect(byAddress.status).toBe(404);
    const neither = await stack.api('POST', '/v1/route', { token: B.key, body: { from: 'x@example.com' } });
    expect(neither.status).toBe(400);
    expect(hooks.hitsOn('/api-route').some((h) => h.json?.text?.includes('hijack'))).toBe(false);
  });
});

describe("at-rest encryption in the SDK's envelope", () => {
  it('a stored copy is fetched by its owner and opened by the SDK algorithm', async () => {
    const set = await stack.api('PUT', `/api/domains/${A.sealedId}/encryption`, {
      token: A.token,
      body: { publicKey: publicPem },
    });
    expect(set.status).toBe(200);
    const hook = await stack.api('PUT', `/api/domains/${A.sealedId}/webhook`, {
      token: A.token,
      body: { url: `${hooks.base}/vault` },
    });
    hooks.secret('/vault', hook.body.signingSecret);
    await smtp().sendMail({ from: 'eve@sender.example', to: `x@${SEALED}`, subject: 'eyes only', text: 'sealed body' });
    const [hit] = await hooks.waitFor('/vault');
    const id = hit!.json.id as string;
    const got = await stack.api('GET', `/api/messages/${id}`, { token: A.token });
    expect(got.body.message).toMatchObject({ subject: null, text: null, sealed: { alg: 'RSA-OAEP-256' } });
    const envelope = got.body.message.sealed.envelope as string;
    const parsed = JSON.parse(envelope);
    expect(Object.keys(parsed).sort()).toEqual(['ciphertext', 'enc', 'fp', 'iv', 'keyAlg', 'v', 'wrappedKey']);
    expect(parsed).toMatchObject({
      v: 1,
      keyAlg: 'RSA-OAEP-256',
      enc: 'A256GCM',
      fp: createHash('sha256').update(spkiDer).digest('hex'),
    });
    const plain = sdkDecrypt(envelope, privatePem);
    expect(plain).toContain('Subject: eyes only');
    expect(plain).toContain('sealed body');
    // The raw download: the same envelope, as JSON or as the bytes themselves.
    const raw = await stack.api('GET', `/api/messages/${id}/raw`, { token: A.token });
    expect(raw.body).toMatchObject({ id, encrypted: true, alg: 'RSA-OAEP-256', raw: envelope });
    const bytes = await fetch(`${stack.baseUrl}/api/messages/${id}/raw`, {
      headers: { authorization: `Bearer ${A.key}`, accept: 'application/octet-stream' },
    });
    expect(bytes.status).toBe(200);
    expect(bytes.headers.get('content-type')).toMatch(/^application\/json/);
    expect(sdkDecrypt(await bytes.text(), privatePem)).toBe(plain);
    // Only the owner.
    expect((await stack.api('GET', `/api/messages/${id}/raw`, { token: B.token })).status).toBe(404);
    expect((await stack.api('GET', `/api/messages/${id}`, { token: B.token })).status).toBe(404);
  });

  it('an envelope the platform seals opens with the SDK algorithm, and an SDK envelope opens with the platform', async () => {
    const key = await parseEncryptionKey(publicPem);
    const text = 'Subject: round trip\r\n\r\nHällo wörld\r\n';
    const sealed = await encryptForStorage(key, Buffer.from(text, 'utf8'));
    expect(sdkDecrypt(sealed.toString('utf8'), privatePem)).toBe(text);
    const made = sdkEncrypt(text, publicPem, spkiDer);
    expect(decryptRsaOaepEnvelope(Buffer.from(made, 'utf8'), privatePem).toString('utf8')).toBe(text);
    expect(JSON.parse(made).fp).toBe(key.fingerprint);
  });

  it('a copy sealed before, in the older {alg, key, tag} layout, still opens', () => {
    const cek = randomBytes(32);
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', cek, iv);
    const ciphertext = Buffer.concat([cipher.update('old copy'), cipher.final()]);
    const legacy = JSON.stringify({
      v: 1,
      alg: 'RSA-OAEP-256',
      enc: 'A256GCM',
      key: publicEncrypt(
        { key: publicPem, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
        cek,
      ).toString('base64'),
      iv: iv.toString('base64'),
      tag: cipher.getAuthTag().toString('base64'),
      ciphertext: ciphertext.toString('base64'),
    });
    expect(decryptRsaOaepEnvelope(Buffer.from(legacy), privatePem).toString()).toBe('old copy');
  });
});
