import type { Core } from '../../core/index.js';

/** What the IMAP server and its sessions reach in core: its settings, app passwords and the mailboxes. */
export type ImapDeps = Pick<Core, 'config' | 'appPasswords' | 'mailboxStore' | 'mailboxes'>;
