/** The protocols an app password can grant. */
export type Protocol = 'imap' | 'api';

/** What a password may open: the account, one domain (null for legacy), and a local-part pattern. */
export type MailboxScope = { passwordId: string; secretHash: string; userId: string; domainId: string | null; domain: string; pattern: string; protocols: Protocol[]; legacy: boolean };
