/** IMAP system flags; stored with their backslash, shown by the mailbox API without it (SPEC.md, Mailbox). */
const SYSTEM = ['\\Seen', '\\Answered', '\\Flagged', '\\Deleted', '\\Draft'];
const byName = new Map(SYSTEM.map((f) => [f.slice(1).toLowerCase(), f]));
const KEYWORD = /^[^\s(){%*"\\\]]{1,64}$/;

/** A flag as IMAP writes it (`\Seen`, `$Label`), or undefined when it is not a storable flag (`\Recent`, junk). */
export function imapFlag(flag: string): string | undefined {
  if (flag.startsWith('\\')) return byName.get(flag.slice(1).toLowerCase());
  return KEYWORD.test(flag) ? flag : undefined;
}

/** The API's space-separated set (`Seen Flagged label`) as stored IMAP flags; system names match case-insensitively. */
export function flagsFromApi(text: string): string[] {
  const out: string[] = [];
  for (const word of text.split(/\s+/).filter(Boolean)) {
    const f = byName.get(word.replace(/^\\/, '').toLowerCase()) ?? imapFlag(word);
    if (f && !out.includes(f)) out.push(f);
  }
  return out;
}

/** Stored flags as the API shows them: space-separated, without leading backslashes. */
export const flagsToApi = (flags: string[]) => flags.map((f) => f.replace(/^\\/, '')).join(' ');

/** The flags a client may store (and `\\*` for keywords). */
export const PERMANENT_FLAGS = SYSTEM;
