import { z } from 'zod';

/**
 * The definition of a sequence version: one zod schema used by the API (request validation and the
 * published JSON Schema), by core (stored as JSON per version) and, as a type, by the enrolment workflow.
 */
export const EVENT_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** Names reserved for platform events (SPEC.md; DESIGN.md spells the brand token `svc`). */
export const RESERVED_EVENT_PREFIXES = ['svc.', 'svc:', 'mailkite.', 'mailkite:', 'email.'] as const;
export const reservedPrefixOf = (name: string) => RESERVED_EVENT_PREFIXES.find((p) => name.toLowerCase().startsWith(p));

export const eventNameField = z
  .string()
  .min(1)
  .max(64)
  .regex(
    EVENT_NAME,
    'event names are 1 to 64 letters, digits, dots, dashes and underscores, starting with a letter or digit',
  )
  .refine((n) => !reservedPrefixOf(n), {
    message: `names starting ${RESERVED_EVENT_PREFIXES.join(', ')} are reserved for platform events`,
  })
  .describe(
    'Event name: 1 to 64 of letters, digits, . - _, starting alphanumeric; svc., svc:, mailkite., mailkite: and email. are reserved',
  );

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^(\d{1,9})\s?(ms|s|m|h|d)$/;
const MAX_DURATION_MS = 366 * 86_400_000;

/** `3s`, `10 m`, `2h`, `7d`, `500ms`, or a number of milliseconds; at most a year. */
export const durationField = z
  .union([z.number().int().min(0), z.string().max(20).regex(DURATION, 'a duration like 500ms, 30s, 10m, 2h or 7d')])
  .transform((v) =>
    typeof v === 'number' ? v : Number(DURATION.exec(v)![1]) * UNIT_MS[DURATION.exec(v)![2] as keyof typeof UNIT_MS],
  )
  .refine((n) => n <= MAX_DURATION_MS, 'at most 366 days')
  .describe('Milliseconds, or text like 30s, 10m, 2h, 7d');

const scalar = z.union([z.string().max(2000), z.number(), z.boolean(), z.null()]);
const stepId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'step ids: letters, digits, _ and -')
  .describe('Optional name a branch can jump to');
const target = z.string().max(64).describe('Where to go: `next` (default), `exit`, or the id of a LATER step');

export const sendStep = z
  .strictObject({
    type: z.literal('send'),
    id: stepId.optional(),
    templateId: z
      .string()
      .regex(/^(tpl|base)_/, 'must be a tpl_… or base_… id')
      .optional(),
    subject: z.string().max(998).optional(),
    html: z
      .string()
      .max(512 * 1024)
      .optional(),
    text: z
      .string()
      .max(512 * 1024)
      .optional(),
  })
  .describe(
    'Send one email to the contact. Merge tags: {{trigger.*}}, {{event.*}} (the payload of the event that started the enrolment, then of the last event a wait received), {{input.*}}, {{email}}, {{name}}, {{first_name}} and contact attributes',
  );
export const waitStep = z
  .strictObject({ type: z.literal('wait'), id: stepId.optional(), duration: durationField })
  .describe('Wait a duration (a durable timer)');
export const waitForEventStep = z
  .strictObject({
    type: z.literal('wait_for_event'),
    id: stepId.optional(),
    event: eventNameField,
    match: z
      .record(z.string().max(64), scalar)
      .refine((m) => Object.keys(m).length <= 20, 'at most 20 keys')
      .optional()
      .describe('Payload keys the event must carry with exactly these values'),
    timeout: durationField,
    onArrived: target.optional(),
    onTimeout: target.optional(),
  })
  .describe(
    'Wait for an application event of this contact (one posted after the trigger counts, even before the wait began), at most `timeout`; then branch',
  );
export const exitStep = z.strictObject({ type: z.literal('exit'), id: stepId.optional() });
export const stepSchema = z.discriminatedUnion('type', [sendStep, waitStep, waitForEventStep, exitStep]);

export const inputTypes = z.enum(['string', 'number', 'boolean']);
export const signatureField = z
  .record(z.string().regex(/^[A-Za-z0-9_]{1,64}$/, 'input names: letters, digits and _'), inputTypes)
  .refine((s) => Object.keys(s).length <= 50, 'at most 50 inputs')
  .describe('Declared input: name → scalar type; read in steps as {{input.<name>}}');
export const triggerField = z
  .discriminatedUnion('type', [
    z.strictObject({ type: z.literal('event'), event: eventNameField }),
    z.strictObject({ type: z.literal('send') }),
  ])
  .describe('What enrolls a contact: an application event of this name, or a send naming the sequence');

export const definitionFields = {
  from: z
    .string()
    .min(3)
    .max(320)
    .describe("Sender of every step's email, on a verified sending domain; may carry a display name"),
  replyTo: z.string().max(320).optional(),
  input: signatureField.optional(),
  trigger: triggerField,
  steps: z.array(stepSchema).min(1).max(50),
};
export const definitionSchema = z.object(definitionFields);
export type SequenceDefinition = z.output<typeof definitionSchema>;
export type SequenceStep = SequenceDefinition['steps'][number];
export type Scalar = string | number | boolean | null;

/** Branch targets must name a later step (so an enrolment always ends); answers the problem or undefined. */
export function checkBranches(steps: SequenceStep[]): string | undefined {
  const ids = new Map<string, number>();
  for (const [i, s] of steps.entries()) {
    if (s.id && ids.has(s.id)) return `steps[${i}].id: "${s.id}" is used twice`;
    if (s.id) ids.set(s.id, i);
  }
  for (const [i, s] of steps.entries()) {
    if (s.type !== 'wait_for_event') continue;
    for (const key of ['onArrived', 'onTimeout'] as const) {
      const t = s[key];
      if (t === undefined || t === 'next' || t === 'exit') continue;
      const at = ids.get(t);
      if (at === undefined) return `steps[${i}].${key}: no step has the id "${t}"`;
      if (at <= i) return `steps[${i}].${key}: "${t}" must be a later step`;
    }
  }
  return undefined;
}

/** Every event name the version's wait_for_event steps wait for. */
export const waitedEvents = (d: SequenceDefinition) => [
  ...new Set(d.steps.flatMap((s) => (s.type === 'wait_for_event' ? [s.event] : []))),
];

/**
 * Checks sequence input against the declared signature: unknown names and wrong types answer the field.
 * Auto-filled values (templateData, metadata) are kept only where the signature declares them.
 */
export function checkInput(
  signature: Record<string, 'string' | 'number' | 'boolean'>,
  auto: Record<string, Scalar>,
  explicit: Record<string, Scalar> | undefined,
): { input: Record<string, Scalar> } | { field: string; problem: string } {
  const input: Record<string, Scalar> = {};
  for (const [k, v] of Object.entries(auto))
    if (Object.hasOwn(signature, k) && (v === null || typeof v === signature[k])) input[k] = v;
  for (const [k, v] of Object.entries(explicit ?? {})) {
    if (!Object.hasOwn(signature, k))
      return {
        field: k,
        problem: `sequenceInput.${k} is not declared by the sequence (declared: ${Object.keys(signature).join(', ') || 'none'})`,
      };
    if (v !== null && typeof v !== signature[k])
      return { field: k, problem: `sequenceInput.${k} must be a ${signature[k]}` };
    input[k] = v;
  }
  return { input };
}
