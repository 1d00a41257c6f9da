/** The one account-wide scope (SPEC.md: a single scope acting on the whole account). */
export const SCOPE = 'account';
/** Scope names accepted as that scope: its own name, and `mcp`, which existing clients already send. */
export const SCOPE_ALIASES: readonly string[] = [SCOPE, 'mcp'];

/** Reads a requested scope: absent or made only of accepted names → the account scope; otherwise undefined. */
export function parseScope(raw: string | undefined): string | undefined {
  const names = (raw ?? '').split(' ').filter(Boolean);
  return names.every((n) => SCOPE_ALIASES.includes(n)) ? SCOPE : undefined;
}

/** What the one scope lets an app do, as the consent page says it. */
export const SCOPE_DESCRIPTION = [
  'Read your account key, which lets it act on your whole account',
  'Send email from your verified domains',
  'Manage your domains, webhooks, keys and app passwords',
];
