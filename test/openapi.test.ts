import { Validator } from '@seriousme/openapi-schema-validator';
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../api/openapi.js';
import { operations } from '../api/ops/index.js';
import { allSchemas } from '../api/app.js';
import { toJsonSchema } from '../api/schemas.js';
import { checkPublishedSchema } from './helpers/webhook-receiver.js';

describe('OpenAPI 3.1 document', () => {
  const doc = openApiDocument(operations, 'https://mail.example.com') as any;

  it('validates against the OpenAPI 3.1 schema', async () => {
    const result = await new Validator().validate(doc);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
  });

  it('carries the contract version of SPEC.md as info.version', () => {
    expect(doc.info.version).toBe('0.19.0');
  });

  it('lists every operation once, at its path and method, with its parameters and bodies', () => {
    const listed: string[] = [];
    for (const [path, item] of Object.entries<any>(doc.paths))
      for (const [method, op] of Object.entries<any>(item))
        listed.push(`${method.toUpperCase()} ${path} ${op.operationId}`);
    const expected = operations.map((op) => `${op.method} ${op.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')} ${op.name}`);
    expect(listed.sort()).toEqual(expected.sort());
    const post = doc.paths['/v1/events'].post;
    expect(post.responses['202'].content['application/json'].schema.properties.duplicate).toEqual({
      type: 'boolean',
      description: expect.any(String),
    });
    expect(Object.keys(post.requestBody.content['application/json'].schema.properties)).toEqual([
      'name',
      'event',
      'email',
      'contactId',
      'payload',
      'dedupeKey',
    ]);
    const enrol = doc.paths['/api/sequences/{id}/enrolments'].get;
    expect(enrol.parameters.map((p: any) => [p.in, p.name, p.required])).toEqual([
      ['path', 'id', true],
      ['query', 'status', false],
      ['query', 'before', false],
      ['query', 'limit', false],
    ]);
    expect(doc.paths['/api/health']).toBeUndefined(); // a plain route, not an operation
    // Creates and sends take an Idempotency-Key header (docs/idempotency.md); reads do not.
    expect(doc.paths['/v1/send'].post.parameters).toEqual([
      expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }),
    ]);
    expect(doc.paths['/api/domains'].get.parameters).toBeUndefined();
  });

  it('every webhook payload and the application event record are published schemas', () => {
    const names = allSchemas().map((s) => s.name);
    for (const n of [
      'webhook-email-received',
      'webhook-email-sent',
      'webhook-email-bounced',
      'webhook-email-complained',
      'webhook-email-opened',
      'webhook-email-clicked',
      'webhook-test',
      'custom-event',
    ]) {
      expect(names).toContain(n);
    }
    const received = toJsonSchema(
      allSchemas().find((s) => s.name === 'webhook-email-received')!,
      'https://mail.example.com',
    ) as any;
    expect(received.required).toEqual(
      expect.arrayContaining([
        'id',
        'type',
        'from',
        'to',
        'subject',
        'text',
        'html',
        'threadId',
        'receivedAt',
        'auth',
        'attachments',
      ]),
    );
    expect(received.properties.type).toEqual({ type: 'string', const: 'email.received' });
  });

  it('the test webhook receiver holds every body to its published schema', () => {
    const now = Date.now();
    const test = {
      id: 'evt_1',
      type: 'webhook.test',
      createdAt: now,
      createdAtIso: new Date(now).toISOString(),
      data: { domain: 'a.example' },
    };
    expect(checkPublishedSchema(test)).toBeUndefined();
    expect(checkPublishedSchema({ ...test, data: {} })).toContain('domain');
    expect(
      checkPublishedSchema({
        ...test,
        type: 'email.opened',
        data: { messageId: 'msg_1', from: null, to: [], subject: null },
      }),
    ).toContain('open');
    expect(checkPublishedSchema({ type: 'email.unknown' })).toContain('no published schema');
  });
});
