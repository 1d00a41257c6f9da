import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { allSchemas } from '../api/app.js';
import { toJsonSchema } from '../api/schemas.js';
import { breakingChanges, stripAnnotations } from './helpers/schema-compat.js';

/**
 * The committed snapshot of every schema /v1/schemas serves (annotations stripped). A change must be
 * additive against it; after a deliberate release, record the new baseline with
 *   UPDATE_SCHEMA_SNAPSHOT=1 npx vitest run test/schema-compat.test.ts
 */
const SNAPSHOT = fileURLToPath(new URL('./schema-snapshot.json', import.meta.url));
type Schemas = Record<string, unknown>;

const served = (): Schemas =>
  Object.fromEntries(allSchemas().map((e) => [e.name, stripAnnotations(toJsonSchema(e, 'https://schemas.invalid'))]));
/** One schema per line, sorted by name: a change shows as the lines of the schemas it touched. */
const render = (s: Schemas) =>
  `{\n${Object.keys(s)
    .sort()
    .map((name) => `${JSON.stringify(name)}: ${JSON.stringify(s[name])}`)
    .join(',\n')}\n}\n`;

/** Every way the served schemas break the snapshot's (a schema gone, a field gone, a type narrowed…). */
function problemsAgainst(before: Schemas, now: Schemas): string[] {
  return Object.entries(before).flatMap(([name, schema]) =>
    name in now ? breakingChanges(schema, now[name], name) : [`${name}: no longer published`],
  );
}

describe('published schemas only grow', () => {
  it('every schema of the committed snapshot is still served and accepts and documents at least what it did', () => {
    const now = served();
    if (process.env.UPDATE_SCHEMA_SNAPSHOT === '1') writeFileSync(SNAPSHOT, render(now));
    expect(
      existsSync(SNAPSHOT),
      'no snapshot: run UPDATE_SCHEMA_SNAPSHOT=1 npx vitest run test/schema-compat.test.ts',
    ).toBe(true);
    const before = JSON.parse(readFileSync(SNAPSHOT, 'utf8')) as Schemas;
    expect(Object.keys(before).length).toBeGreaterThan(100);
    expect(problemsAgainst(before, now)).toEqual([]);
  });

  it('the check fails on a removed field, a removed enum value, a new required field or a narrowed type, in a real schema', () => {
    const now = served();
    const mutate = (name: string, change: (s: any) => void) => {
      const copy = structuredClone(now);
      change(copy[name]);
      return problemsAgainst(now, copy);
    };
    expect(mutate('domains-get-response', (s) => delete s.properties.domain.properties.track_opens)).toEqual([
      'domains-get-response.domain.track_opens: field removed',
    ]);
    expect(
      mutate('domains-get-response', (s) =>
        s.properties.domain.properties.webhookStatus.anyOf[0].properties.status.anyOf[0].enum.pop(),
      ),
    ).toEqual(['domains-get-response.domain.webhookStatus.status: value "timeout" removed']);
    expect(mutate('send-request', (s) => s.required.push('html'))).toEqual(['send-request.html: became required']);
    expect(
      mutate(
        'deliveries-retry-many-response',
        (s) => void (s.properties.results.items.properties.status.anyOf[0].type = 'string'),
      ),
    ).toEqual(['deliveries-retry-many-response.results.<items>.status: type integer no longer accepted (now string)']);
    expect(
      mutate('billing-usage-response', (s) => {
        s.properties.emails.properties.extra = { type: 'string' };
        s.properties.emails.properties.included.type.push('string');
      }),
    ).toEqual([]);
    expect(mutate('webhook-email-received', () => undefined)).toEqual([]);
  });
});

describe('the additive comparison', () => {
  const obj = (properties: Record<string, unknown>, required: string[] = []) => ({
    type: 'object',
    properties,
    required,
  });
  it.each([
    ['a new optional field', obj({ a: { type: 'string' } }), obj({ a: { type: 'string' }, b: { type: 'number' } })],
    ['integer widened to number', { type: 'integer' }, { type: 'number' }],
    ['made nullable', { type: 'string' }, { anyOf: [{ type: 'string' }, { type: 'null' }] }],
    ['an enum value added', { type: 'string', enum: ['a'] }, { type: 'string', enum: ['a', 'b'] }],
    ['a required field made optional', obj({ a: { type: 'string' } }, ['a']), obj({ a: { type: 'string' } })],
    ['a longer maximum length', { type: 'string', maxLength: 5 }, { type: 'string', maxLength: 10 }],
    ['a const widened to a string', { type: 'string', const: 'x' }, { type: 'string' }],
    ['a description changed', { type: 'string', description: 'old' }, { type: 'string', description: 'new' }],
  ])('passes: %s', (_what, before, after) => {
    expect(breakingChanges(before, after)).toEqual([]);
  });

  it.each([
    [
      'a field removed',
      obj({ a: { type: 'string' }, b: { type: 'string' } }),
      obj({ a: { type: 'string' } }),
      'field removed',
    ],
    ['number narrowed to integer', { type: 'number' }, { type: 'integer' }, 'type number no longer accepted'],
    [
      'null no longer accepted',
      { anyOf: [{ type: 'string' }, { type: 'null' }] },
      { type: 'string' },
      'type null no longer accepted',
    ],
    [
      'an enum value removed',
      { type: 'string', enum: ['a', 'b'] },
      { type: 'string', enum: ['a'] },
      'value "b" removed',
    ],
    [
      'a field became required',
      obj({ a: { type: 'string' } }),
      obj({ a: { type: 'string' } }, ['a']),
      'became required',
    ],
    [
      'a shorter maximum length',
      { type: 'string', maxLength: 10 },
      { type: 'string', maxLength: 5 },
      'maxLength lowered',
    ],
    ['a pattern added', { type: 'string' }, { type: 'string', pattern: '^a' }, 'pattern now'],
    [
      'extra properties refused',
      obj({}),
      { ...obj({}), additionalProperties: false },
      'no longer accepts other properties',
    ],
    [
      'array items narrowed',
      { type: 'array', items: { type: 'number' } },
      { type: 'array', items: { type: 'integer' } },
      '<items>: type number',
    ],
    ['any value narrowed to a type', {}, { type: 'string' }, 'narrowed from any value'],
  ])('fails: %s', (_what, before, after, message) => {
    expect(breakingChanges(before, after).join('\n')).toContain(message);
  });
});
