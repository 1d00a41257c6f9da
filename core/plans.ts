import { z } from 'zod';

/** A billing plan as held in configuration (env PLANS, JSON); the defaults below apply otherwise. */
const planSchema = z.strictObject({
  includedEmails: z
    .number()
    .int()
    .min(0)
    .nullable()
    .describe('Monthly bucket shared by inbound and outbound; null = unlimited'),
  dailySendCap: z.number().int().min(1).nullable().describe('Outbound messages per UTC day; null = no cap'),
  overage: z.enum(['block', 'metered']).describe('What happens past the bucket: refuse sends, or meter them'),
  paid: z.boolean().describe('Paid plans may pick a sending provider'),
});
export type Plan = z.infer<typeof planSchema>;

export const DEFAULT_PLANS: Record<string, Plan> = {
  free: { includedEmails: 3000, dailySendCap: 100, overage: 'block', paid: false },
  pro: { includedEmails: 50_000, dailySendCap: 10_000, overage: 'metered', paid: true },
  unlimited: { includedEmails: null, dailySendCap: null, overage: 'metered', paid: true },
};

export function parsePlans(raw: string | undefined): Record<string, Plan> {
  if (!raw) return DEFAULT_PLANS;
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch {
    throw new Error('not valid JSON');
  }
  const plans = z.record(z.string().min(1), planSchema).parse(json);
  if (Object.keys(plans).length === 0) throw new Error('at least one plan is required');
  return plans;
}
