import { AppError } from './errors.js';

/**
 * Inbound mail rules. Recipients are accepted only on domains whose MX is verified; until domains exist
 * (issue: Domains) no domain qualifies, so every recipient is refused with 550.
 */
export function createInboundService() {
  return {
    async checkRecipient(address: string): Promise<void> {
      const domain = address.slice(address.lastIndexOf('@') + 1).toLowerCase();
      throw new AppError(550, 'unknown_domain', `5.1.2 <${address}>: ${domain} is not a verified domain here`);
    },
  };
}
export type InboundService = ReturnType<typeof createInboundService>;
