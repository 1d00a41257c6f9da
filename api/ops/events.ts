import { z } from 'zod';
import { defineOperation, emailField } from '../contract.js';
import { eventNameField } from '../../core/sequences/definition.js';
import { contactIdField } from './contact-schemas.js';

/** Events group (SPEC.md Authentication): API key; events are account-wide, so not a domain-scoped key. */
const AUTH = ['account_key', 'oauth'] as const;
/** Reading events is also open to a session (the dashboard's Events page); recording them needs an API key. */
const READ_AUTH = [...AUTH, 'session'] as const;
const payload = z
  .record(z.string().max(100), z.unknown())
  .refine((p) => Object.keys(p).length <= 100, 'payload has at most 100 keys')
  // JSON.stringify recurses: a payload nested thousands deep throws RangeError, and is as much too large.
  .refine((p) => {
    try {
      return JSON.stringify(p).length <= 16_384;
    } catch {
      return false;
    }
  }, 'payload is at most 16 KB of JSON')
  .describe('Context of the event, read in sequence steps as {{event.<key>}}');
export const customEvent = z
  .object({
    id: z.string().describe('cev_…'),
    name: z.string(),
    email: z.string().describe('Lowercased address the event is about'),
    contactId: z.string().nullable(),
    payload: z.record(z.string(), z.unknown()).nullable(),
    dedupeKey: z.string().nullable(),
    createdAt: z.number().int().describe('ms epoch'),
  })
  .describe('Custom event (cev_…)');

export const postEvent = defineOperation({
  name: 'events.post',
  method: 'POST',
  path: '/v1/events',
  auth: AUTH,
  status: 202,
  schemaName: 'event',
  idempotencyKey: true,
  mcp: { name: 'events_record', title: 'Record an application event' },
  summary:
    'Record an application event; sequences triggered by its name start and enrolments waiting for it wake, after the answer. 403 events_limit once the account stores APP_EVENTS_PER_ACCOUNT events.',
  body: z
    .strictObject({
      name: eventNameField.optional(),
      event: eventNameField.optional().describe('Alias of name; name wins'),
      email: emailField.optional(),
      contactId: contactIdField.optional(),
      payload: payload.optional(),
      dedupeKey: z
        .string()
        .min(1)
        .max(200)
        .optional()
        .describe('A repeat answers the original event with duplicate: true and enrolls nobody again'),
    })
    .refine((b) => b.name !== undefined || b.event !== undefined, { message: 'name is required', path: ['name'] })
    .refine((b) => (b.email === undefined) !== (b.contactId === undefined), {
      message: 'give exactly one of email and contactId',
      path: ['email'],
    }),
  output: z.object({
    id: z.string().describe('cev_…'),
    object: z.literal('event'),
    name: z.string(),
    email: z.string(),
    duplicate: z.boolean().describe('true when the dedupeKey was seen: the original event is answered'),
  }),
  handler: (b, { core, actor }) =>
    core.appEvents.record(actor, {
      name: b.name ?? b.event ?? '',
      email: b.email,
      contactId: b.contactId,
      payload: b.payload,
      dedupeKey: b.dedupeKey,
    }),
});

export const listEvents = defineOperation({
  name: 'events.list',
  method: 'GET',
  path: '/v1/events',
  auth: READ_AUTH,
  mcp: { title: 'List application events' },
  summary: 'Application events, newest first; filter by name and/or email; page with `before` (the last id seen).',
  query: z.object({
    name: z.string().max(64).optional(),
    email: z.string().max(254).optional(),
    before: z
      .string()
      .regex(/^cev_[A-Za-z0-9_-]{20,}$/, 'an event id (cev_…)')
      .optional(),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  }),
  output: z.object({ events: z.array(customEvent) }),
  handler: (q, { core, actor }) => core.appEvents.list(actor, q),
});

export const eventNames = defineOperation({
  name: 'events.names',
  method: 'GET',
  path: '/v1/events/names',
  auth: READ_AUTH,
  summary:
    'Event names: counts, last seen, and the sequences that trigger on or wait for each; most recently seen first, then names only sequences declare, alphabetically.',
  output: z.object({
    events: z.array(
      z.object({
        name: z.string(),
        count: z.number().int().describe('0 for a name only a sequence declares'),
        lastSeenAt: z.number().int().nullable(),
        usedBy: z.array(z.string()).describe('Names of sequences that trigger on or wait for it'),
      }),
    ),
  }),
  handler: (_i, { core, actor }) => core.appEvents.names(actor),
});
