import { randomBytes } from 'node:crypto';
import { createServer, request, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchRemote } from '../core/attachments/fetch-remote.js';
import { createAttachmentService, MAX_ATTACHMENT_BYTES } from '../core/attachments/service.js';
import { schema } from '../db/index.js';
import { connectTemporal } from '../temporal/client.js';
import { cleanupAttachmentsScheduleId } from '../workflows/ids.js';
import { eventually, startStack, type TestStack } from './helpers/stack.js';

let stack: TestStack;
let session: string;
let userId: string;
let origin: Server;
let originUrl: string;
const hits: string[] = [];
const pdf = randomBytes(70_000);

/** Streams `total` bytes from one reused 64 KB chunk, so the test never holds the whole file. */
function streamBytes(res: ServerResponse, total: number, declareLength: boolean): void {
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  res.writeHead(200, {
    'content-type': 'application/octet-stream',
    ...(declareLength ? { 'content-length': String(total) } : {}),
  });
  let sent = 0;
  const pump = () => {
    while (sent < total && !res.destroyed) {
      const n = Math.min(chunk.length, total - sent);
      sent += n;
      if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return void res.once('drain', pump);
    }
    res.end();
  };
  pump();
}

/** A plain HTTP file server on loopback playing the remote host of attachment URLs. */
function startOrigin(): Promise<Server> {
  const server = createServer((req, res) => {
    hits.push(req.url ?? '');
    const path = req.url ?? '/';
    if (path === '/files/report.pdf') return void res.writeHead(200, { 'content-type': 'application/pdf' }).end(pdf);
    if (path === '/download?id=7') {
      return void res
        .writeHead(200, {
          'content-type': 'text/plain; charset=utf-8',
          'content-disposition': 'attachment; filename="x.txt"; filename*=UTF-8\'\'r%C3%A9sum%C3%A9.txt',
        })
        .end('résumé');
    }
    if (path === '/huge') return streamBytes(res, MAX_ATTACHMENT_BYTES + 1, false);
    if (path === '/huge-declared') return streamBytes(res, MAX_ATTACHMENT_BYTES + 1, true);
    if (path.startsWith('/redirect?to='))
      return void res.writeHead(302, { location: decodeURIComponent(path.slice(13)) }).end();
    if (path.startsWith('/loop')) return void res.writeHead(301, { location: `/loop${path.length}` }).end();
    res.writeHead(404).end('nope');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Signed URLs carry PUBLIC_URL (localhost); the test reaches the same path on the stack's loopback address. */
const local = (url: string) => {
  const u = new URL(url);
  return `${stack.baseUrl}${u.pathname}${u.search}`;
};
const upload = (body: unknown, token: string | null = session) =>
  stack.api('POST', '/v1/attachments', { token: token ?? undefined, body });
const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');

beforeAll(async () => {
  [stack, origin] = await Promise.all([startStack({ ATTACHMENT_FETCH_ALLOW_PRIVATE: '1' }), startOrigin()]);
  originUrl = `http://127.0.0.1:${(origin.address() as AddressInfo).port}`;
  const signup = await stack.api('POST', '/api/auth/signup', {
    body: { email: 'files@example.com', password: 'attachment password' },
  });
  session = signup.body.token;
  userId = signup.body.user.id;
});
afterAll(async () => {
  origin?.close();
  await stack?.stop();
});

describe('POST /v1/attachments', () => {
  it('stores base64 content and serves identical bytes through the signed URL', async () => {
    const before = Date.now();
    const res = await upload({ filename: 'notes.txt', content: b64('hello attachments') });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^file_/),
      filename: 'notes.txt',
      contentType: 'text/plain',
      size: 17,
    });
    const expiresAt = Date.parse(res.body.expiresAt);
    expect(expiresAt).toBeGreaterThanOrEqual(before + 7 * 86_400_000);
    expect(expiresAt).toBeLessThan(Date.now() + 7 * 86_400_000 + 1000);
    expect(res.body.url).toMatch(
      new RegExp(
        `^${stack.config.publicUrl}/v1/attachments/${res.body.id}/notes\\.txt\\?expires=${expiresAt}&sig=[0-9a-f]{64}$`,
      ),
    );
    const dl = await fetch(local(res.body.url));
    expect(dl.status).toBe(200);
    expect(await dl.text()).toBe('hello attachments');
    expect(dl.headers.get('content-type')).toBe('text/plain');
    expect(dl.headers.get('content-disposition')).toBe(
      'attachment; filename="notes.txt"; filename*=UTF-8\'\'notes.txt',
    );
    expect(dl.headers.get('cache-control')).toMatch(/^private, max-age=\d+$/);
    expect(dl.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('fetches a url, keeping its content type, and derives the name from the path or Content-Disposition', async () => {
    const res = await upload({ url: `${originUrl}/files/report.pdf`, retentionDays: 30 });
    expect(res).toMatchObject({
      status: 201,
      body: { filename: 'report.pdf', contentType: 'application/pdf', size: pdf.length },
    });
    expect(Date.parse(res.body.expiresAt)).toBeGreaterThan(Date.now() + 29 * 86_400_000);
    expect(Buffer.from(await (await fetch(local(res.body.url))).arrayBuffer()).equals(pdf)).toBe(true);

    const named = await upload({ url: `${originUrl}/download?id=7` });
    expect(named.body).toMatchObject({
      filename: 'résumé.txt',
      contentType: 'text/plain; charset=utf-8',
      size: Buffer.byteLength('résumé'),
    });
    const dl = await fetch(local(named.body.url));
    expect(dl.headers.get('content-disposition')).toBe(
      'attachment; filename="r_sum_.txt"; filename*=UTF-8\'\'r%C3%A9sum%C3%A9.txt',
    );
  });

  it('takes raw bytes with ?filename=, authenticated like the JSON operation', async () => {
    const png = randomBytes(4096);
    const post = (query: string, headers: Record<string, string>, body: Buffer = png) =>
      fetch(`${stack.baseUrl}/v1/attachments${query}`, { method: 'POST', headers, body: new Uint8Array(body) });
    const res = await post('?filename=pixel.png&retentionDays=90', {
      authorization: `Bearer ${session}`,
      'content-type': 'image/png',
    });
    expect(res.status).toBe(201);
    const body = await res.json();
    expect(body).toMatchObject({ filename: 'pixel.png', contentType: 'image/png', size: 4096 });
    expect(Buffer.from(await (await fetch(local(body.url))).arrayBuffer()).equals(png)).toBe(true);

    const key = (await stack.api('GET', '/api/keys', { token: session })).body.key;
    // curl --data-binary labels bytes form-urlencoded: they are kept as they are and typed by extension.
    const curlish = await post(
      '?filename=data.csv',
      { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
      Buffer.from('a=1&b=2'),
    );
    expect(await curlish.json()).toMatchObject({ filename: 'data.csv', contentType: 'text/csv', size: 7 });

    const noName = await post('', { authorization: `Bearer ${session}`, 'content-type': 'image/png' });
    expect(noName.status).toBe(400);
    expect(await noName.json()).toMatchObject({ code: 'filename_required' });
    const noAuth = await post('?filename=pixel.png', { 'content-type': 'image/png' });
    expect(noAuth.status).toBe(401);
    expect(await noAuth.json()).toEqual({ error: expect.any(String), code: 'unauthorized' });
  });

  it('answers a raw body past 25 MB with a JSON 413 while it is still being sent', async () => {
    const { port } = new URL(stack.baseUrl);
    const res = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/attachments?filename=big.bin',
          headers: {
            authorization: `Bearer ${session}`,
            'content-type': 'application/octet-stream',
            'transfer-encoding': 'chunked',
          },
        },
        (r) => {
          let text = '';
          r.setEncoding('utf8')
            .on('data', (d) => (text += d))
            .on('end', () => resolve({ status: r.statusCode ?? 0, body: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      const chunk = Buffer.alloc(64 * 1024);
      let sent = 0;
      const pump = () => {
        while (sent <= MAX_ATTACHMENT_BYTES && !req.destroyed) {
          sent += chunk.length;
          if (!req.write(chunk)) return void req.once('drain', pump);
        }
        req.end();
      };
      pump();
    });
    expect(res).toMatchObject({ status: 413, body: { code: 'payload_too_large' } });
  });

  it('refuses path, missing credentials, bad retention, bad base64 and two sources at once', async () => {
    const path = await upload({ path: '/etc/passwd' });
    expect(path).toMatchObject({ status: 400, body: { code: 'path_not_supported' } });
    expect(path.body.error).toContain('never reads its own disk');
    expect(await upload({ filename: 'a.txt', content: b64('x') }, null)).toMatchObject({
      status: 401,
      body: { code: 'unauthorized' },
    });
    expect(await upload({ filename: 'a.txt', content: b64('x'), retentionDays: 8 })).toMatchObject({
      status: 400,
      body: { code: 'validation_error' },
    });
    expect(await upload({ filename: 'a.txt', content: 'not base64!' })).toMatchObject({
      status: 400,
      body: { code: 'invalid_base64' },
    });
    expect(await upload({ filename: 'a.txt', content: b64('x'), url: `${originUrl}/files/report.pdf` })).toMatchObject({
      status: 400,
      body: { code: 'multiple_sources' },
    });
    expect(await upload({ content: b64('x') })).toMatchObject({ status: 400, body: { code: 'filename_required' } });
    expect(await upload({ url: 'file:///etc/passwd' })).toMatchObject({
      status: 400,
      body: { code: 'attachment_fetch_failed' },
    });
    expect(await upload({ url: `${originUrl}/missing` })).toMatchObject({
      status: 400,
      body: { code: 'attachment_fetch_failed' },
    });
  });

  it('aborts a remote file past 25 MB with 413, streamed or declared', async () => {
    for (const path of ['/huge', '/huge-declared']) {
      const res = await upload({ url: `${originUrl}${path}` });
      expect(res, path).toMatchObject({ status: 413, body: { code: 'attachment_too_large' } });
    }
  });

  it('follows redirects, refuses a hop to a never-allowed address and stops after 5', async () => {
    const ok = await upload({ url: `${originUrl}/redirect?to=${encodeURIComponent('/files/report.pdf')}` });
    expect(ok).toMatchObject({ status: 201, body: { filename: 'report.pdf', size: pdf.length } });
    // Link-local (cloud metadata) stays blocked even with ATTACHMENT_FETCH_ALLOW_PRIVATE; it is refused before any connection.
    const metadata = await upload({
      url: `${originUrl}/redirect?to=${encodeURIComponent('http://169.254.169.254/latest/meta-data/')}`,
    });
    expect(metadata).toMatchObject({ status: 400, body: { code: 'attachment_url_blocked' } });
    const scheme = await upload({ url: `${originUrl}/redirect?to=${encodeURIComponent('file:///etc/passwd')}` });
    expect(scheme).toMatchObject({ status: 400, body: { code: 'attachment_fetch_failed' } });
    const loop = await upload({ url: `${originUrl}/loop` });
    expect(loop).toMatchObject({ status: 400, body: { code: 'attachment_fetch_failed' } });
    expect(loop.body.error).toMatch(/more than 5/);
  });

  it('blocks loopback and private hosts when private fetches are not allowed', async () => {
    const strict = createAttachmentService({
      db: stack.service.core.db,
      publicUrl: stack.config.publicUrl,
      secretKey: stack.config.secretKey,
      allowPrivate: false,
    });
    const port = (origin.address() as AddressInfo).port;
    const before = hits.length;
    for (const host of ['127.0.0.1', 'localhost', '[::1]', '[::ffff:127.0.0.1]', '10.0.0.1', '0.0.0.0']) {
      await expect(
        strict.upload(userId, { url: `http://${host}:${port}/files/report.pdf` }),
        host,
      ).rejects.toMatchObject({ status: 400, code: 'attachment_url_blocked' });
    }
    await expect(
      fetchRemote(`${originUrl}/redirect?to=x`, { maxBytes: 10, allowPrivate: false }),
    ).rejects.toMatchObject({ code: 'attachment_url_blocked' });
    expect(hits.length).toBe(before);
  });
});

describe('signed download URLs', () => {
  let url: string;
  let id: string;
  beforeAll(async () => {
    ({ url, id } = (await upload({ filename: 'secret.bin', content: b64('top secret') })).body);
  });

  it('answers 403 for any tampering and 410 once expired', async () => {
    const u = new URL(local(url));
    const sig = u.searchParams.get('sig')!;
    const variants: [string, (x: URL) => void][] = [
      ['flipped sig', (x) => x.searchParams.set('sig', `${sig.slice(0, -1)}${sig.endsWith('0') ? '1' : '0'}`)],
      ['later expires', (x) => x.searchParams.set('expires', String(Number(x.searchParams.get('expires')) + 1))],
      ['no sig', (x) => x.searchParams.delete('sig')],
      ['other id', (x) => void (x.pathname = x.pathname.replace(id, 'file_someoneelse'))],
    ];
    for (const [what, change] of variants) {
      const x = new URL(u);
      change(x);
      const res = await stack.api('GET', `${x.pathname}${x.search}`);
      expect(res, what).toMatchObject({ status: 403, body: { code: 'invalid_signature' } });
    }
    const expired = stack.service.core.attachments.signedUrl(id, 'secret.bin', Date.now() - 1000);
    const res = await stack.api('GET', new URL(local(expired)).pathname + new URL(expired).search);
    expect(res).toMatchObject({ status: 410, body: { code: 'link_expired' } });
    expect((await fetch(local(url))).status).toBe(200);
  });
});

describe('attachments on sends', () => {
  it('prepares at accept time and loads at delivery time: stored content, fetched URLs and our own links', async () => {
    const core = stack.service.core.attachments;
    const own = (await upload({ filename: 'own.txt', content: b64('our own file') })).body.url as string;
    const prepared = await core.prepareForSend(userId, [
      { filename: 'inline.txt', content: b64('inline bytes') },
      { filename: 'report.pdf', url: `${originUrl}/files/report.pdf` },
      { filename: 'own.txt', url: own, contentType: 'text/x-own' },
    ]);
    expect(prepared).toEqual([
      { filename: 'inline.txt', contentType: 'text/plain', fileId: expect.stringMatching(/^file_/) },
      { filename: 'report.pdf', contentType: 'application/pdf', url: `${originUrl}/files/report.pdf` },
      { filename: 'own.txt', contentType: 'text/x-own', url: own },
    ]);
    const loaded = await Promise.all(prepared.map((p) => core.loadForSend(userId, p)));
    expect(loaded.map((l) => [l.filename, l.contentType, l.content.length])).toEqual([
      ['inline.txt', 'text/plain', 12],
      ['report.pdf', 'application/pdf', pdf.length],
      ['own.txt', 'text/x-own', 12],
    ]);
    expect(loaded[1]!.content.equals(pdf)).toBe(true);
    // Our own links are read from the database, so even the strict (no private fetch) service resolves them.
    const strict = createAttachmentService({
      db: stack.service.core.db,
      publicUrl: stack.config.publicUrl,
      secretKey: stack.config.secretKey,
      allowPrivate: false,
    });
    expect((await strict.loadForSend(userId, prepared[2]!)).content.toString()).toBe('our own file');
    await expect(core.loadForSend('usr_someone_else', prepared[0]!)).rejects.toMatchObject({ status: 410 });
  });

  it('validates each entry and caps the total at 25 MB', async () => {
    const core = stack.service.core.attachments;
    await expect(
      core.prepareForSend(userId, [{ filename: 'a.txt', content: b64('x'), url: `${originUrl}/x` }]),
    ).rejects.toMatchObject({ status: 400, code: 'invalid_attachment' });
    await expect(
      core.prepareForSend(userId, [{ filename: 'a.txt', url: 'ftp://example.com/a.txt' }]),
    ).rejects.toMatchObject({ status: 400, code: 'invalid_attachment' });
    await expect(core.prepareForSend(userId, [{ filename: 'a.txt', content: '%%%' }])).rejects.toMatchObject({
      status: 400,
      code: 'invalid_base64',
    });
    const half = 'A'.repeat(Math.ceil((MAX_ATTACHMENT_BYTES / 2 + 1024) / 3) * 4); // decodes to just over 12.5 MB
    await expect(
      core.prepareForSend(userId, [
        { filename: 'a.bin', content: half },
        { filename: 'b.bin', content: half },
      ]),
    ).rejects.toMatchObject({ status: 413, code: 'attachment_too_large' });
  });
});

describe('retention cleanup', () => {
  it('the hourly schedule deletes expired files and keeps the rest', async () => {
    const db = stack.service.core.db;
    const f = schema.storedFiles;
    const expired = (await upload({ filename: 'old.txt', content: b64('old') })).body;
    const fresh = (await upload({ filename: 'new.txt', content: b64('new') })).body;
    await db
      .update(f)
      .set({ expiresAt: Date.now() - 60_000 })
      .where(eq(f.id, expired.id));
    const t = await connectTemporal({
      address: stack.service.temporalAddress,
      namespace: 'default',
      taskQueue: stack.config.temporal.taskQueue,
    });
    try {
      await t.client.schedule.getHandle(cleanupAttachmentsScheduleId(stack.config.temporal.taskQueue)).trigger();
      await eventually(
        async () => (await db.select({ id: f.id }).from(f).where(eq(f.id, expired.id))).length === 0,
        30_000,
      );
    } finally {
      await t.connection.close();
    }
    expect(await db.select({ id: f.id }).from(f).where(eq(f.id, fresh.id))).toHaveLength(1);
    // The link was signed for 7 days, but the file is gone: 410, not 404.
    expect(await stack.api('GET', new URL(expired.url).pathname + new URL(expired.url).search)).toMatchObject({
      status: 410,
      body: { code: 'link_expired' },
    });
  });
});
