import { readFileSync } from 'node:fs';

/**
 * The hostile corpus (test/fixtures/hostile/corpus.json) is stored as recipes, not as megabytes of bytes:
 * a piece is a string, a list of pieces (concatenated), a repetition, or a nesting. Strings may name
 * variables as `{NAME}`, filled from what the test set up (addresses, ids), before any repetition.
 */
export type Piece =
  | string
  | Piece[]
  | { repeat: Piece; times?: number; bytes?: number }
  | { nest: number; open: string; close: string; inner?: Piece };

export type SmtpCase = { name: string; protocol: 'smtp'; rcpt: string[]; data: Piece };
export type HttpStep = {
  method: string;
  path: string;
  auth?: 'key' | 'none';
  contentType?: string;
  body?: Piece;
  /** Keep the answer's `id` as this variable for the next steps. */
  save?: string;
  /** After a 2xx, wait until what it started (a message, an import) has finished: its work is part of the case. */
  settle?: 'message' | 'import';
  /** The answer's class when it matters: `4xx` for input that is the caller's error (never a 5xx). */
  expect?: '2xx' | '4xx';
};
export type HttpCase = { name: string; protocol: 'http'; steps: HttpStep[] };
export type ImapCase = { name: string; protocol: 'imap'; login?: boolean; command: Piece };
export type HostileCase = SmtpCase | HttpCase | ImapCase;

const CORPUS = new URL('../fixtures/hostile/corpus.json', import.meta.url);

export function loadCorpus(): HostileCase[] {
  return (JSON.parse(readFileSync(CORPUS, 'utf8')) as { cases: HostileCase[] }).cases;
}

/** Expands a piece to its bytes (latin1: one byte per character, so recipes may carry 8-bit bytes). */
export function expand(piece: Piece, vars: Record<string, string> = {}): Buffer {
  return Buffer.from(expandText(piece, vars), 'latin1');
}

function expandText(piece: Piece, vars: Record<string, string>): string {
  if (typeof piece === 'string') return piece.replace(/\{([A-Z_]+)\}/g, (m, name: string) => vars[name] ?? m);
  if (Array.isArray(piece)) return piece.map((p) => expandText(p, vars)).join('');
  if ('repeat' in piece) {
    const unit = expandText(piece.repeat, vars);
    if (piece.bytes !== undefined) return unit.repeat(Math.ceil(piece.bytes / unit.length)).slice(0, piece.bytes);
    return unit.repeat(piece.times ?? 1);
  }
  const inner = piece.inner === undefined ? '' : expandText(piece.inner, vars);
  // `{i}` in open/close is the depth (1-based), for nestings whose levels must differ (MIME boundaries).
  if (!piece.open.includes('{i}') && !piece.close.includes('{i}'))
    return piece.open.repeat(piece.nest) + inner + piece.close.repeat(piece.nest);
  const opens: string[] = [];
  const closes: string[] = [];
  for (let i = 1; i <= piece.nest; i++) {
    opens.push(piece.open.replaceAll('{i}', String(i)));
    closes.push(piece.close.replaceAll('{i}', String(i)));
  }
  return opens.join('') + inner + closes.reverse().join('');
}

/** SMTP DATA of a message: CRLF line ends, dot-stuffed, terminated. */
export function smtpData(message: Buffer): Buffer {
  const text = message.toString('latin1').replace(/\r?\n/g, '\r\n').replace(/^\./gm, '..');
  return Buffer.from(`${text}${text.endsWith('\r\n') ? '' : '\r\n'}.\r\n`, 'latin1');
}
