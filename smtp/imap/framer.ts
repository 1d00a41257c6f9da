/**
 * IMAP command framing (RFC 3501 §2.2, §7.5): splits the byte stream into command lines with their
 * literals. Every buffer is bounded: a line longer than `maxLine` is answered BAD and skipped, a
 * literal is accepted only when `allowLiteral` says its announced size fits (a synchronizing literal
 * that does not fit is refused before a single byte of it is sent; a non-synchronizing one is
 * skipped without being kept), and a command's literals together never exceed `maxCommand`.
 */
export type Frame =
  | { type: 'command'; parts: (string | Buffer)[] }
  | { type: 'continue'; text: string }
  | { type: 'reject'; head: string; reason: string; code: 'TOOBIG' | 'BAD' }
  | { type: 'error'; reason: string };

export type FramerOptions = {
  maxLine: number;
  maxCommand: number;
  /** Largest literal the command starting with `head` may carry (APPEND carries messages). */
  literalLimit: (head: string) => number;
};

const LITERAL = /\{(\d{1,20})(\+?)\}$/;

export class Framer {
  private buf: Buffer = Buffer.alloc(0);
  private parts: (string | Buffer)[] = [];
  private size = 0;
  private literalLeft = 0;
  private literalChunks: Buffer[] = [];
  private skipLeft = 0;
  private discardLine = false;

  constructor(private readonly opts: FramerOptions) {}

  /** True while a command is half received (a literal or continuation line is outstanding). */
  get midCommand(): boolean {
    return this.parts.length > 0 || this.literalLeft > 0 || this.skipLeft > 0 || this.buf.length > 0;
  }

  /** Feeds bytes; answers the frames they complete, in order. */
  push(chunk: Buffer): Frame[] {
    const out: Frame[] = [];
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
      const limit = Math.min(this.opts.literalLimit(head), this.opts.maxCommand - this.size);
      if (!Number.isSafeInteger(size) || size > limit) {
        out.push({ type: 'reject', head, reason: `Literal of ${m[1]} bytes is larger than the ${limit} allowed`, code: 'TOOBIG' });
        this.reset();
        if (nonSync) this.skipLeft = Number.isSafeInteger(size) ? size : Number.MAX_SAFE_INTEGER;
        continue;
      }
      this.parts.push(line);
      this.size += size;
      if (!nonSync) out.push({ type: 'continue', text: 'Ready for literal data' });
      if (size === 0) this.parts.push(Buffer.alloc(0));
      else this.literalLeft = size;
    }
  }

  private reset(): void {
    this.parts = [];
    this.size = 0;
    this.literalChunks = [];
    this.literalLeft = 0;
  }
}
