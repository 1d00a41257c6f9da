import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BASE_TEMPLATES } from '../core/templates/base.js';
import { fillMergeTags, mergeData } from '../core/render/merge.js';
import { startStack, type TestStack } from './helpers/stack.js';

describe('fillMergeTags', () => {
  it('escapes values in HTML mode and leaves them alone in text mode', () => {
    const data = { name: '<b>Tom & "Jerry"</b> \'s' };
    expect(fillMergeTags('<p>{{name}}</p>', data, { html: true })).toBe(
      '<p>&lt;b&gt;Tom &amp; &quot;Jerry&quot;&lt;/b&gt; &#39;s</p>',
    );
    expect(fillMergeTags('Hi {{name}}', data, { html: false })).toBe('Hi <b>Tom & "Jerry"</b> \'s');
  });

  it('inserts triple-brace tags raw, in both modes', () => {
    expect(fillMergeTags('<div>{{{ block }}}</div>', { block: '<em>hi</em>' }, { html: true })).toBe(
      '<div><em>hi</em></div>',
    );
    expect(fillMergeTags('{{{block}}}', { block: '<em>' }, { html: false })).toBe('<em>');
  });

  it('allows whitespace inside the braces and keys with digits, _, - and .', () => {
    const data = { first_name: 'Ann', 'trigger.from': 'a@b.c', 'x-1': 'y' };
    expect(fillMergeTags('{{first_name}} {{  first_name  }} {{ trigger.from }} {{x-1}}', data, { html: false })).toBe(
      'Ann Ann a@b.c y',
    );
  });

  it('turns missing and null values into the empty string and prints numbers and booleans', () => {
    expect(
      fillMergeTags(
        '[{{missing}}][{{nil}}][{{n}}][{{f}}][{{t}}][{{zero}}]',
        { nil: null, n: 42.5, f: false, t: true, zero: 0 },
        { html: true },
      ),
    ).toBe('[][][42.5][false][true][0]');
  });

  it('never reads inherited properties', () => {
    expect(fillMergeTags('{{constructor}}{{toString}}{{__proto__}}', {}, { html: false })).toBe('');
  });

  it('keeps a value containing tags literal (one pass, no injection)', () => {
    const data = { a: '{{b}}', b: 'SECRET', c: '{{{b}}}' };
    expect(fillMergeTags('{{a}} {{c}}', data, { html: false })).toBe('{{b}} {{{b}}}');
    expect(fillMergeTags('{{{a}}}', data, { html: true })).toBe('{{b}}');
  });

  it('leaves text that is not a tag as written', () => {
    const template = '{{ two words }} {{}} {{a+b}} { {a} } {{name';
    expect(fillMergeTags(template, { name: 'x', a: 'y' }, { html: true })).toBe(template);
  });
});

describe('mergeData', () => {
  it('lets later layers win key by key and skips undefined layers', () => {
    expect(mergeData({ a: 1, b: 'shared', c: null }, undefined, { b: 'recipient', d: true })).toEqual({
      a: 1,
      b: 'recipient',
      c: null,
      d: true,
    });
    expect(mergeData()).toEqual({});
  });

  it('does not let a __proto__ key reach the prototype', () => {
    const merged = mergeData(JSON.parse('{"__proto__": {"polluted": "yes"}, "a": "1"}'));
    expect(Object.getPrototypeOf(merged)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe('base templates', () => {
  it('have base_ ids and fill without leftover tags', () => {
    for (const t of BASE_TEMPLATES) {
      expect(t.id).toMatch(/^base_[a-z_]+$/);
      for (const part of [t.subject, t.html, t.text])
        expect(fillMergeTags(part, {}, { html: true })).not.toMatch(/\{\{/);
    }
  });
});

describe('templates API', () => {
  let stack: TestStack;
  let token: string;
  let userId: string;
  let other: string;
  let otherUserId: string;
  const signup = async (email: string) => {
    const { body } = await stack.api('POST', '/api/auth/signup', { body: { email, password: 'templates password' } });
    return { token: body.token as string, userId: body.user.id as string };
  };

  beforeAll(async () => {
    stack = await startStack({ SERVICE_DOMAIN: 'templates.svc.test' });
    ({ token, userId } = await signup('templates@example.com'));
    ({ token: other, userId: otherUserId } = await signup('other-templates@example.com'));
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('creates, reads, updates and deletes a template', async () => {
    const created = await stack.api('POST', '/api/templates', {
      token,
      body: { name: 'Welcome', subject: 'Hi {{name}}', html: '<p>{{name}}</p>' },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: 'Welcome',
      subject: 'Hi {{name}}',
      html: '<p>{{name}}</p>',
      text: null,
      base: false,
    });
    expect(created.body.id).toMatch(/^tpl_/);
    expect(created.body.created_at).toBe(created.body.updated_at);
    const path = `/api/templates/${created.body.id}`;
    expect((await stack.api('GET', path, { token })).body).toEqual(created.body);

    const updated = await stack.api('PATCH', path, {
      token,
      body: { name: 'Welcome v2', text: 'Hi {{name}}', html: null },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({
      id: created.body.id,
      name: 'Welcome v2',
      subject: 'Hi {{name}}',
      html: null,
      text: 'Hi {{name}}',
    });
    expect(updated.body.updated_at).toBeGreaterThanOrEqual(created.body.updated_at);
    expect((await stack.api('GET', path, { token })).body).toEqual(updated.body);

    const cleared = await stack.api('PATCH', path, { token, body: { subject: null, text: null } });
    expect(cleared).toMatchObject({ status: 400, body: { code: 'validation_error' } });

    expect((await stack.api('DELETE', path, { token })).body).toEqual({ ok: true });
    expect(await stack.api('GET', path, { token })).toMatchObject({
      status: 404,
      body: { code: 'template_not_found' },
    });
    expect((await stack.api('DELETE', path, { token })).status).toBe(404);
  });

  it("lists the account's templates newest first", async () => {
    const fresh = (await signup('list-templates@example.com')).token;
    const ids: string[] = [];
    for (const name of ['one', 'two', 'three'])
      ids.push((await stack.api('POST', '/api/templates', { token: fresh, body: { name, text: name } })).body.id);
    const list = (await stack.api('GET', '/api/templates', { token: fresh })).body;
    expect(list.map((t: any) => t.id)).toEqual(ids.reverse());
    expect(list.every((t: any) => t.base === false)).toBe(true);
  });

  it('lists and reads the base templates, which are read-only', async () => {
    const list = await stack.api('GET', '/api/templates/base', { token });
    expect(list.status).toBe(200);
    expect(list.body.map((t: any) => t.id)).toEqual(BASE_TEMPLATES.map((t) => t.id));
    expect(list.body.map((t: any) => t.id)).toContain('base_welcome');
    const welcome = await stack.api('GET', '/api/templates/base_welcome', { token });
    expect(welcome.body).toMatchObject({ id: 'base_welcome', base: true, created_at: 0, updated_at: 0 });
    expect(welcome.body.html).toContain('{{name}}');

    const patch = await stack.api('PATCH', '/api/templates/base_welcome', { token, body: { name: 'Mine' } });
    expect(patch).toMatchObject({ status: 403, body: { code: 'base_template_readonly', error: expect.any(String) } });
    expect((await stack.api('DELETE', '/api/templates/base_welcome', { token })).status).toBe(403);
    expect((await stack.api('GET', '/api/templates/base_nope', { token })).status).toBe(404);
    expect((await stack.api('GET', '/api/templates', { token })).body.some((t: any) => t.base)).toBe(false);
  });

  it("treats another account's template as unknown", async () => {
    const mine = (await stack.api('POST', '/api/templates', { token, body: { name: 'Private', subject: 'secret' } }))
      .body.id;
    const path = `/api/templates/${mine}`;
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { name: 'stolen' }],
      ['DELETE', undefined],
    ] as const) {
      expect(await stack.api(method, path, { token: other, body }), method).toMatchObject({
        status: 404,
        body: { code: 'template_not_found' },
      });
    }
    expect((await stack.api('GET', '/api/templates', { token: other })).body.map((t: any) => t.id)).not.toContain(mine);
    expect((await stack.api('GET', path, { token })).body.name).toBe('Private');
  });

  it('answers invalid bodies with a JSON 400', async () => {
    const cases = [
      { name: 'x', subject: 'y', extra: 1 },
      { name: 'Empty' },
      {},
      { name: '', subject: 'y' },
      { name: 'x', subject: 's'.repeat(999) },
      { name: 'x', html: 'é'.repeat(300 * 1024) },
    ];
    for (const body of cases) {
      const res = await stack.api('POST', '/api/templates', { token, body });
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(res.body).toEqual({ error: expect.any(String), code: 'validation_error' });
    }
    const id = (await stack.api('POST', '/api/templates', { token, body: { name: 'Valid', text: 't' } })).body.id;
    expect((await stack.api('PATCH', `/api/templates/${id}`, { token, body: { nope: true } })).body.code).toBe(
      'validation_error',
    );
  });

  it('resolves a template for sending through core', async () => {
    const templates = stack.service.core.templates;
    const created = (
      await stack.api('POST', '/api/templates', {
        token,
        body: { name: 'Send me', subject: 'S {{a}}', html: '<p>{{a}}</p>' },
      })
    ).body;
    expect(await templates.resolve(userId, created.id)).toEqual({
      subject: 'S {{a}}',
      html: '<p>{{a}}</p>',
      text: null,
    });
    const base = await templates.resolve(userId, 'base_password_reset');
    expect(base.subject).toContain('{{product}}');
    await expect(templates.resolve(userId, 'tpl_unknown')).rejects.toMatchObject({
      status: 404,
      code: 'template_not_found',
    });
    await expect(templates.resolve(otherUserId, created.id)).rejects.toMatchObject({
      status: 404,
      code: 'template_not_found',
    });
  });
});
