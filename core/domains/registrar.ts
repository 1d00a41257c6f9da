import { createHash } from 'node:crypto';

export type Price = { amount: number; currency: string; period: number; periodUnit: 'y' | 'm' };
export type Availability = { available: boolean; premium: boolean; reason: string; price?: Price };
export type Contact = {
  firstName: string;
  lastName: string;
  email: string;
  phone: string;
  address: string;
  city: string;
  zip: string;
  country: string;
  state?: string;
  organization?: string;
  type?: 'individual' | 'company' | 'association' | 'publicbody';
};

/** A domain registrar the service can buy names through. */
export type Registrar = {
  name: string;
  check(domain: string): Promise<Availability>;
  register(domain: string, years: number, contact: Contact): Promise<{ status: string; reference: string }>;
};

const PRICES: Record<string, number> = { com: 12, net: 14, org: 13, io: 39, dev: 15, app: 17 };

/**
 * SIMULATED registrar, for development and tests only: nothing is bought and no registry is asked.
 * Deterministic rules: names with `taken` in them are registered already; labels of 3 characters or
 * fewer, or containing `premium`, are premium; prices per TLD from a fixed table.
 */
export function simulatedRegistrar(): Registrar {
  return {
    name: 'simulated',
    async check(domain) {
      const [label = '', ...rest] = domain.split('.');
      const tld = rest.at(-1) ?? '';
      const amount = PRICES[tld];
      if (amount === undefined) return { available: false, premium: false, reason: `.${tld} is not offered` };
      if (label.includes('taken')) return { available: false, premium: false, reason: 'Already registered' };
      if (label.length <= 3 || label.includes('premium')) {
        return {
          available: true,
          premium: true,
          reason: 'Premium name: cannot be registered here',
          price: { amount: amount * 100, currency: 'USD', period: 1, periodUnit: 'y' },
        };
      }
      return {
        available: true,
        premium: false,
        reason: 'Available',
        price: { amount, currency: 'USD', period: 1, periodUnit: 'y' },
      };
    },
    async register(domain) {
      return {
        status: 'registered',
        reference: `sim-${createHash('sha256').update(domain).digest('hex').slice(0, 16)}`,
      };
    },
  };
}
