import type { Socket } from 'node:net';
import { TLSSocket, type TlsOptions } from 'node:tls';
import type { ImapDeps } from './deps.js';
import type { MailboxLogin } from '../../core/mailboxes/service.js';
import type { MailboxRow } from '../../core/mailboxes/store.js';
import { answerLine, bad, imapAnswerOf, SERVER_BUG } from './answers.js';
import { Framer, type Frame } from './framer.js';
import { parseCommand, ParseError, type Command } from './parser.js';

export type ImapOptions = {
  core: ImapDeps;
  tls: TlsOptions;
  maxLiteral: number;
  idleTimeoutMs: number;
  loginTimeoutMs: number;
  commandTimeoutMs: number;
  pollMs: number;
  preauthCommands: number;
};
/** The selected folder as this session sees it: sequence numbers are positions in `uids`. */
export type View = { box: MailboxRow; readOnly: boolean; uids: number[]; flags: Map<number, string[]> };
export type Handler = (s: Session, cmd: Command) => Promise<void>;

/** Bounds of what one connection may hold (see docs/mailboxes.md, "Limits"). */
export const LIMITS = {
  /** One line of a command. */
  line: 64 * 1024,
  /** A literal of any command but APPEND, after login. */
  literal: 64 * 1024,
  /** A whole command after login, APPEND's message aside (that adds IMAP_MAX_LITERAL_BYTES). */
  command: 256 * 1024,
  /** Before login: a whole command, and a literal (LOGIN and AUTHENTICATE only). */
  preauthCommand: 8 * 1024,
  preauthLiteral: 1024,
  /** Framed commands waiting to run before the socket stops being read (before login, then after). */
  preauthQueued: 4,
  queued: 50,
  /** Bytes of replies waiting in the socket before the socket stops being read and commands wait. */
  output: 256 * 1024,
  /** Work units of one SEARCH: bytes decoded and scanned, plus 1 KiB per key and message. */
  work: 256 * 1024 * 1024,
  /** Work units of one FETCH: bytes parsed and rendered, plus 64 per item and message (a mailbox streams whole). */
  fetchWork: 2 * 1024 * 1024 * 1024,
  /** Raw messages loaded from the database at once by SEARCH and FETCH. */
  rawBatch: 8,
  /** Data items of one FETCH (after macros). */
  fetchItems: 64,
};
const APPEND_HEAD = /^\S+ APPEND /i;
const LOGIN_HEAD = /^\S+ (?:LOGIN|AUTHENTICATE)(?: |$)/i;

// What handlers throw to end a command; answers.ts turns any error into its tagged answer.
export { bad, ImapReply, no } from './answers.js';

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
  /** The absolute deadline of the command being received (armed at its first byte, never extended). */
  private deadline?: NodeJS.Timeout;
  private preauthCount = 0;
  private waitingDrain = false;

  constructor(
    public socket: Socket,
    readonly opts: ImapOptions,
    private readonly handlers: Record<string, Handler>,
    readonly ip: string,
  ) {
    this.secure = socket instanceof TLSSocket;
    this.framer = this.newFramer();
    this.attach();
    this.untagged(`OK [CAPABILITY ${this.capabilities()}] svc-mail IMAP4rev1 ready`);
  }

  get core() {
    return this.opts.core;
  }

  capabilities(): string {
    const caps = [
      'IMAP4rev1',
      'LITERAL-',
      'SASL-IR',
      'ID',
      'IDLE',
      'UIDPLUS',
      'MOVE',
      'UNSELECT',
      'SPECIAL-USE',
      'AUTH=PLAIN',
    ];
    if (!this.secure && this.state === 'notauth') caps.push('STARTTLS');
    return caps.join(' ');
  }

  private get authed(): boolean {
    return this.state !== 'notauth';
  }

  /** Limits read as each command starts: before login they are small, and literals are LOGIN's and AUTHENTICATE's only. */
  private newFramer(): Framer {
    return new Framer({
      maxLine: LIMITS.line,
      maxCommand: (head) =>
        !this.authed ? LIMITS.preauthCommand : LIMITS.command + (APPEND_HEAD.test(head) ? this.opts.maxLiteral : 0),
      literalLimit: (head) => {
        if (!this.authed) return LOGIN_HEAD.test(head) ? LIMITS.preauthLiteral : -1;
        return APPEND_HEAD.test(head) ? this.opts.maxLiteral : LIMITS.literal;
      },
      // After login a refused non-synchronizing literal up to 4 × IMAP_MAX_LITERAL_BYTES is read and dropped (the
      // command deadline bounds its time); before login none is: the connection ends.
      maxSkip: () => (this.authed ? 4 * this.opts.maxLiteral : 0),
    });
  }

  private attach(): void {
    const s = this.socket;
    s.on('data', (chunk: Buffer) => {
      for (const f of this.framer.push(chunk)) {
        if (f.type === 'fatal') return this.close(f.reason);
        if (f.type === 'continue') this.write(`+ ${f.text}`);
        else if (f.type === 'command' && this.waiter && this.queue.length === 0) this.answerWaiter(f.parts);
        else this.queue.push(f);
      }
      this.armDeadline();
      this.flow();
      void this.pump();
    });
    s.on('timeout', () => this.close('Autologout; idle for too long'));
    s.on('error', () => this.destroy());
    s.on('close', () => this.destroy());
    this.armTimeout();
  }

  /** Idle autologout: IMAP_LOGIN_TIMEOUT_MS before login, IMAP_IDLE_TIMEOUT_MS after. */
  private armTimeout(): void {
    this.socket.setTimeout(
      this.authed ? this.opts.idleTimeoutMs : Math.min(this.opts.loginTimeoutMs, this.opts.idleTimeoutMs),
    );
  }

  /** A command must arrive whole within IMAP_COMMAND_TIMEOUT_MS of its first byte, however it trickles in. */
  private armDeadline(): void {
    if (!this.framer.midCommand) {
      clearTimeout(this.deadline);
      this.deadline = undefined;
    } else if (!this.deadline) {
      this.deadline = setTimeout(
        () => this.close('Autologout; command not completed in time'),
        this.opts.commandTimeoutMs,
      );
      this.deadline.unref();
    }
  }

  /**
   * Reads only while there is room: at most a few commands queued (fewer before login) and the
   * replies already written under LIMITS.output (a client that sends and never reads stops being read).
   */
  private flow(): void {
    if (this.closed) return;
    const s = this.socket;
    const max = this.authed ? LIMITS.queued : LIMITS.preauthQueued;
    const outputFull = s.writableLength > LIMITS.output;
    if (outputFull && !this.waitingDrain) {
      this.waitingDrain = true;
      s.once('drain', () => {
        this.waitingDrain = false;
        this.flow();
        void this.pump();
      });
    }
    if (outputFull || this.queue.length >= max) s.pause();
    else s.resume();
  }

  write(data: string | Buffer | (string | Buffer)[]): void {
    if (this.closed || this.socket.destroyed) return;
    const parts = Array.isArray(data) ? data : [data];
    this.socket.write(
      Buffer.concat([...parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.from(p, 'utf8'))), Buffer.from('\r\n')]),
    );
  }
  untagged(text: string | (string | Buffer)[]): void {
    this.write(Array.isArray(text) ? ['* ', ...text] : `* ${text}`);
  }
  /** Waits until the socket has room again (large FETCH responses). */
  async drained(): Promise<void> {
    if (!this.socket.writableNeedDrain || this.socket.destroyed) return;
    // Whichever comes first removes the other listener: a long FETCH session would otherwise keep one per wait.
    const socket = this.socket;
    await new Promise<void>((resolve) => {
      const done = () => {
        socket.off('drain', done).off('close', done);
        resolve();
      };
      socket.once('drain', done).once('close', done);
    });
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

  /**
   * Registers work to undo when the connection ends (IDLE listeners, timers); answers the function that
   * drops it again, which a command calls when it ends on its own, so a long session holds nothing per command.
   */
  onClose(fn: () => void): () => void {
    this.cleanups.push(fn);
    Session.held += 1;
    return () => {
      const i = this.cleanups.indexOf(fn);
      if (i < 0) return;
      this.cleanups.splice(i, 1);
      Session.held -= 1;
    };
  }

  /** Close work registered by every open session of this process (a measure of what sessions hold; tests read it). */
  static held = 0;

  close(reason: string): void {
    if (this.closed) return;
    this.write(`* BYE ${reason}`);
    this.closed = true;
    this.socket.end();
    setTimeout(() => this.socket.destroy(), 1000).unref();
    this.destroy();
  }

  private destroy(): void {
    clearTimeout(this.deadline);
    this.closed = true;
    this.state = 'logout';
    this.answerWaiterOnClose();
    const cleanups = this.cleanups.splice(0);
    Session.held -= cleanups.length;
    for (const fn of cleanups) fn();
  }

  /** Swaps the plain socket for TLS after `OK Begin TLS negotiation`; bytes pipelined before it are dropped. */
  startTls(): void {
    const plain = this.socket;
    plain.removeAllListeners('data');
    plain.removeAllListeners('timeout');
    plain.removeAllListeners('drain');
    this.waitingDrain = false;
    clearTimeout(this.deadline);
    this.deadline = undefined;
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
      // Replies waiting to be read hold the next command back (the drain listener of flow() restarts the pump).
      while (this.queue.length && !this.closed && this.socket.writableLength <= LIMITS.output) {
        const frame = this.queue.shift()!;
        this.flow();
        await this.run(frame).catch((err) => {
          console.error('[imap] command failed:', err);
          this.close('Internal error');
        });
      }
    } finally {
      this.busy = false;
      if (!this.closed) {
        this.armTimeout();
        this.flow();
      }
    }
  }

  private async run(frame: Frame): Promise<void> {
    if (!this.authed && ++this.preauthCount > this.opts.preauthCommands)
      return this.close('Too many commands before login');
    if (frame.type === 'error') return this.untagged(`BAD ${frame.reason}`);
    if (frame.type === 'reject') {
      const tag = /^([^\s(){%*"\\]+) /.exec(frame.head)?.[1];
      if (!tag) return this.untagged(`BAD ${frame.reason}`);
      return this.write(
        frame.code === 'BAD' ? `${tag} BAD ${frame.reason}` : `${tag} NO [${frame.code}] ${frame.reason}`,
      );
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
      const answer = imapAnswerOf(err, cmd.name);
      if (answer === SERVER_BUG) console.error(`[imap] ${cmd.name} failed:`, err);
      this.write(answerLine(cmd.tag, answer));
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
