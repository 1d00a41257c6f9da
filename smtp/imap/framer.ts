/**
 * IMAP command framing (RFC 3501 §2.2, §7.5): splits the byte stream into command lines with their
 * literals. Every buffer is bounded, and one byte budget covers a whole command: each line (its line
 * end included, so `{0+}` continuation lines count too) and each literal is charged to it, and a
 * command that goes over is answered with a `fatal` frame (the session ends the connection; there is
 * no telling where such a command would end). A line longer than `maxLine` is answered BAD and
 * skipped. A literal is accepted only when `literalLimit` allows its announced size: a synchronizing
 * literal that does not fit is refused before a single byte of it is sent; a non-synchronizing one is
 * skipped without being kept when it is at most `maxSkip` bytes, and ends the connection when larger.
 */
export type Frame =
  | { type: 'command'; parts: (string | Buffer)[] }
  | { type: 'continue'; text: string }
  | { type: 'reject'; head: string; reason: string; code: 'TOOBIG' | 'BAD' }
  | { type: 'error'; reason: string }
  | { type: 'fatal'; reason: string };

export type FramerOptions = {
  maxLine: number;
  /** The byte budget of the command whose first line is `head` (lines, line ends and literals together). */
  maxCommand: (head: string) => number;
  /** Largest literal the command starting with `head` may carry; negative: it may carry none. */
  literalLimit: (head: string) => number;
  /** Largest refused non-synchronizing literal that is skipped (read and dropped) rather than ending the connection. */
  maxSkip: () => number;
};

const LITERAL = /\{(\d{1,20})(\+?)\}$/;
/** What each line costs beyond its bytes (the part it adds to the command). */
const PART_COST = 32;

export class Framer {
  private buf: Buffer = Buffer.alloc(0);
  private parts: (string | Buffer)[] = [];
  private size = 0;
  private budget = 0;
  private literalLeft = 0;
  private literalChunks: Buffer[] = [];
  private skipLeft = 0;
  private discardLine = false;
  private dead = false;

  constructor(private readonly opts: FramerOptions) {}

  /** True while a command is half received (a literal or continuation line is outstanding). */
  get midCommand(): boolean {
    return (
      this.parts.length > 0 || this.literalLeft > 0 || this.skipLeft > 0 || this.buf.length > 0 || this.discardLine
    );
  }

  /** Feeds bytes; answers the frames they complete, in order. After a `fatal` frame it answers nothing more. */
  push(chunk: Buffer): Frame[] {
    const out: Frame[] = [];
    if (this.dead) return out;
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    for (;;) {
      if (this.skipLeft > 0) {
        const n = Math.min(this.skipLeft, this.buf.length);
        this.skipLeft -= n;
        this.buf = this.buf.subarray(n);
        if (this.skipLeft > 0) return out;
        this.discardLine = true;
        continue;
      }
      if (this.literalLeft > 0) {
        const n = Math.min(this.literalLeft, this.buf.length);
        if (n === 0) return out;
        this.literalChunks.push(Buffer.from(this.buf.subarray(0, n)));
        this.literalLeft -= n;
        this.buf = this.buf.subarray(n);
        if (this.literalLeft > 0) return out;
        this.parts.push(Buffer.concat(this.literalChunks));
        this.literalChunks = [];
        continue;
      }
      const nl = this.buf.indexOf(0x0a);
      if (nl < 0) {
        if (this.buf.length > this.opts.maxLine) {
          // Too long: keep nothing, drop bytes up to the next line end, answer once.
          if (!this.discardLine) out.push({ type: 'error', reason: 'Command line too long' });
          this.discardLine = true;
          this.reset();
          this.buf = Buffer.alloc(0);
        }
        return out;
      }
      const line = this.buf.subarray(0, nl).toString('utf8').replace(/\r$/, '');
      this.buf = this.buf.subarray(nl + 1);
      if (this.discardLine) {
        this.discardLine = false;
        this.reset();
        continue;
      }
      if (line.length > this.opts.maxLine) {
        out.push({ type: 'error', reason: 'Command line too long' });
        this.reset();
        continue;
      }
      if (this.parts.length === 0) this.budget = this.opts.maxCommand(line);
      this.size += nl + 1 + PART_COST;
      if (this.size > this.budget) return this.die(out, `Command larger than the ${this.budget} bytes allowed`);
      const m = LITERAL.exec(line);
      if (!m) {
        this.parts.push(line);
        out.push({ type: 'command', parts: this.parts });
        this.reset();
        continue;
      }
      const size = Number(m[1]);
      const nonSync = m[2] === '+';
      const head = (typeof this.parts[0] === 'string' ? this.parts[0] : line) as string;
      const allowed = this.opts.literalLimit(head);
      const limit = Math.min(allowed, this.budget - this.size);
      if (!Number.isSafeInteger(size) || size > limit) {
        const reason =
          allowed < 0
            ? 'Literals are accepted before login only in LOGIN and AUTHENTICATE'
            : `Literal of ${m[1]} bytes is larger than the ${Math.max(0, limit)} allowed`;
        if (nonSync && !(Number.isSafeInteger(size) && size <= this.opts.maxSkip())) return this.die(out, reason);
        out.push({ type: 'reject', head, reason, code: allowed < 0 ? 'BAD' : 'TOOBIG' });
        this.reset();
        if (nonSync) this.skipLeft = size;
        continue;
      }
      this.parts.push(line);
      this.size += size;
      if (!nonSync) out.push({ type: 'continue', text: 'Ready for literal data' });
      if (size === 0) this.parts.push(Buffer.alloc(0));
      else this.literalLeft = size;
    }
  }

  private die(out: Frame[], reason: string): Frame[] {
    out.push({ type: 'fatal', reason });
    this.dead = true;
    this.reset();
    this.buf = Buffer.alloc(0);
    return out;
  }

  private reset(): void {
    this.parts = [];
    this.size = 0;
    this.literalChunks = [];
    this.literalLeft = 0;
  }
}
