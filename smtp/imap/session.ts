import type { Socket } from 'node:net';
import { TLSSocket, type TlsOptions } from 'node:tls';
import type { Core } from '../../core/index.js';
import type { MailboxLogin } from '../../core/mailboxes/service.js';
import type { MailboxRow } from '../../core/mailboxes/store.js';
import { Framer, type Frame } from './framer.js';
import { parseCommand, ParseError, type Command } from './parser.js';

export type ImapOptions = {
  core: Core; tls: TlsOptions; maxLiteral: number; idleTimeoutMs: number; commandTimeoutMs: number; pollMs: number;
};
/** The selected folder as this session sees it: sequence numbers are positions in `uids`. */
export type View = { box: MailboxRow; readOnly: boolean; uids: number[]; flags: Map<number, string[]> };
export type Handler = (s: Session, cmd: Command) => Promise<void>;

const MAX_LINE = 64 * 1024;
const SMALL_LITERAL = 64 * 1024;
const MAX_QUEUED = 50;

/** Status responses a handler throws to end its command: `NO` or `BAD`, with an optional response code. */
export class ImapReply extends Error {
  constructor(readonly status: 'NO' | 'BAD', message: string, readonly code?: string) {
    super(message);
  }
}
export const no = (message: string, code?: string) => new ImapReply('NO', message, code);
export const bad = (message: string, code?: string) => new ImapReply('BAD', message, code);

/**
 * One IMAP connection: framing, the state machine of RFC 3501 §3, revocation checks before each
 * command, timeouts, STARTTLS, and a serial command queue (pipelined commands run one after another).
 */
export class Session {
  state: 'notauth' | 'auth' | 'selected' | 'logout' = 'notauth';
  login?: MailboxLogin;
  view?: View;
  secure: boolean;
  /** Set while a command waits for a continuation line (AUTHENTICATE, IDLE). */
  private waiter?: (line: string) => void;
  private framer: Framer;
  private queue: Frame[] = [];
  private busy = false;
  private closed = false;
  private cleanups: (() => void)[] = [];

  constructor(public socket: Socket, readonly opts: ImapOptions, private readonly handlers: Record<string, Handler>, readonly ip: string) {
    this.secure = socket instanceof TLSSocket;
    this.framer = this.newFramer();
    this.attach();
    this.untagged(`OK [CAPABILITY ${this.capabilities()}] svc-mail IMAP4rev1 ready`);
  }

  get core() {
    return this.opts.core;
  }

  capabilities(): string {
    const caps = ['IMAP4rev1', 'LITERAL-', 'SASL-IR', 'ID', 'IDLE', 'UIDPLUS', 'MOVE', 'UNSELECT', 'SPECIAL-USE', 'AUTH=PLAIN'];
    if (!this.secure && this.state === 'notauth') caps.push('STARTTLS');
    return caps.join(' ');
  }

  private newFramer(): Framer {
    return new Framer({
      maxLine: MAX_LINE, maxCommand: this.opts.maxLiteral + MAX_LINE,
      literalLimit: (head) => (/^\S+ APPEND /i.test(head) ? this.opts.maxLiteral : SMALL_LITERAL),
    });
  }

  private attach(): void {
    const s = this.socket;
    s.on('data', (chunk: Buffer) => {
      for (const f of this.framer.push(chunk)) {
        if (f.type === 'continue') this.write(`+ ${f.text}`);
        else if (f.type === 'command' && this.waiter && this.queue.length === 0) this.answerWaiter(f.parts);
        else this.queue.push(f);
      }
      if (this.queue.length > MAX_QUEUED) s.pause();
      this.armTimeout();
      void this.pump();
    });
    s.on('timeout', () => this.close('Autologout; idle for too long'));
    s.on('error', () => this.destroy());
    s.on('close', () => this.destroy());
    this.armTimeout();
  }

  private armTimeout(): void {
    this.socket.setTimeout(this.framer.midCommand ? this.opts.commandTimeoutMs : this.opts.idleTimeoutMs);
  }

  write(data: string | Buffer | (string | Buffer)[]): void {
    if (this.closed || this.socket.destroyed) return;
    const parts = Array.isArray(data) ? data : [data];
    this.socket.write(Buffer.concat([...parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p, 'utf8'))), Buffer.from('\r\n')]));
  }
  untagged(text: string | (string | Buffer)[]): void {
    this.write(Array.isArray(text) ? ['* ', ...text] : `* ${text}`);
  }
  /** Waits until the socket has room again (large FETCH responses). */
  async drained(): Promise<void> {
    if (this.socket.writableNeedDrain && !this.socket.destroyed) await new Promise((r) => this.socket.once('drain', r).once('close', r));
  }

  /** The next line the client sends (a SASL response, IDLE's DONE), taken ahead of the command queue. */
  nextLine(): Promise<string> {
    const i = this.queue.findIndex((f) => f.type === 'command');
    if (i === 0) {
      const f = this.queue.shift() as Extract<Frame, { type: 'command' }>;
      return Promise.resolve(f.parts.map((p) => p.toString()).join(''));
    }
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  private answerWaiterOnClose(): void {
    if (this.waiter) this.answerWaiter(['*']);
  }

  private answerWaiter(parts: (string | Buffer)[]): void {
    const w = this.waiter!;
    this.waiter = undefined;
    w(parts.map((p) => p.toString()).join(''));
  }

  /** Registers work to undo when the connection ends (IDLE listeners, timers). */
  onClose(fn: () => void): void {
    this.cleanups.push(fn);
  }

  close(reason: string): void {
    if (this.closed) return;
    this.write(`* BYE ${reason}`);
    this.closed = true;
    this.socket.end();
    setTimeout(() => this.socket.destroy(), 1000).unref();
    this.destroy();
  }

  private destroy(): void {
    this.closed = true;
    this.state = 'logout';
    this.answerWaiterOnClose();
    for (const fn of this.cleanups.splice(0)) fn();
  }

  /** Swaps the plain socket for TLS after `OK Begin TLS negotiation`; bytes pipelined before it are dropped. */
  startTls(): void {
    const plain = this.socket;
    plain.removeAllListeners('data');
    plain.removeAllListeners('timeout');
    this.queue = [];
    this.framer = this.newFramer();
    this.socket = new TLSSocket(plain, { isServer: true, ...this.opts.tls });
    this.secure = true;
    this.attach();
  }

  private async pump(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      while (this.queue.length && !this.closed) {
        const frame = this.queue.shift()!;
        if (this.queue.length < MAX_QUEUED / 2) this.socket.resume();
        await this.run(frame).catch((err) => {
          console.error('[imap] command failed:', err);
          this.close('Internal error');
        });
      }
    } finally {
      this.busy = false;
      if (!this.closed) this.armTimeout();
    }
  }

  private async run(frame: Frame): Promise<void> {
    if (frame.type === 'error') return this.untagged(`BAD ${frame.reason}`);
    if (frame.type === 'reject') {
      const tag = /^([^\s(){%*"\\]+) /.exec(frame.head)?.[1];
      return tag ? this.write(`${tag} NO [${frame.code}] ${frame.reason}`) : this.untagged(`BAD ${frame.reason}`);
    }
    if (frame.type !== 'command') return;
    let cmd: Command;
    try {
      cmd = parseCommand(frame.parts);
    } catch (err) {
      const tag = err instanceof ParseError ? err.tag : undefined;
      return tag ? this.write(`${tag} BAD ${(err as Error).message}`) : this.untagged(`BAD ${(err as Error).message}`);
    }
    await this.dispatch(cmd);
  }

  private async dispatch(cmd: Command): Promise<void> {
    const handler = this.handlers[cmd.name];
    try {
      if (this.login && !(await this.core.appPasswords.stillValid(this.login.scope))) {
        return this.close('Credentials revoked or changed; log in again');
      }
      if (!handler) throw bad(`Unknown command ${cmd.name}`);
      await handler(this, cmd);
    } catch (err) {
      if (err instanceof ImapReply) return this.write(`${cmd.tag} ${err.status} ${err.code ? `[${err.code}] ` : ''}${err.message}`);
      if (err instanceof ParseError) return this.write(`${cmd.tag} BAD ${err.message}`);
      console.error(`[imap] ${cmd.name} failed:`, err);
      this.write(`${cmd.tag} NO [SERVERBUG] Internal error, try again`);
    }
  }

  ok(tag: string, text: string): void {
    this.write(`${tag} OK ${text}`);
  }

  requireAuth(): MailboxLogin {
    if (!this.login) throw bad('Log in first');
    return this.login;
  }
  requireSelected(): View {
    if (!this.view) throw bad('Select a mailbox first');
    return this.view;
  }
}
