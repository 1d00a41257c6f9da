import { Tokenizer, TokenizerMode, type Token, type TokenHandler } from 'parse5';

/** Elements whose content the tokenizer must read as text, as a tree builder would switch it to. */
const TEXT_MODES: Record<string, (typeof TokenizerMode)[keyof typeof TokenizerMode]> = {
  script: TokenizerMode.SCRIPT_DATA,
  style: TokenizerMode.RAWTEXT,
  xmp: TokenizerMode.RAWTEXT,
  iframe: TokenizerMode.RAWTEXT,
  noembed: TokenizerMode.RAWTEXT,
  noframes: TokenizerMode.RAWTEXT,
  textarea: TokenizerMode.RCDATA,
  title: TokenizerMode.RCDATA,
  plaintext: TokenizerMode.PLAINTEXT,
};

type Edit = { start: number; end: number; text: string };

/**
 * Rewrites the `href` of every `<a>`/`<area>` whose value is an http(s) URL, and finds where `</body>`
 * starts, with parse5's HTML tokenizer: one linear pass, and every byte outside the rewritten attributes
 * is kept as it was. `rewrite` receives the decoded URL and returns the new one (encoded here).
 */
export function rewriteLinks(
  html: string,
  rewrite: (url: string) => string,
): { html: string; bodyEnd: number | undefined } {
  const edits: Edit[] = [];
  let bodyEnd: number | undefined;
  const noop = () => undefined;
  const handler: TokenHandler = {
    onStartTag(tag: Token.TagToken) {
      const mode = TEXT_MODES[tag.tagName];
      if (mode !== undefined && !tag.selfClosing) tokenizer.state = mode;
      if (tag.tagName !== 'a' && tag.tagName !== 'area') return;
      const href = tag.attrs.find((a) => a.name === 'href');
      const loc = tag.location?.attrs?.href;
      if (!href || !loc || !/^\s*https?:\/\//i.test(href.value)) return;
      const original = html.slice(loc.startOffset, loc.endOffset);
      const name = /^[^\s=]+/.exec(original)?.[0] ?? 'href';
      edits.push({
        start: loc.startOffset,
        end: loc.endOffset,
        text: `${name}="${encodeAttr(rewrite(href.value.trim()))}"`,
      });
    },
    onEndTag(tag: Token.TagToken) {
      if (tag.tagName === 'body' && tag.location) bodyEnd = tag.location.startOffset;
    },
    onComment: noop,
    onDoctype: noop,
    onEof: noop,
    onCharacter: noop,
    onNullCharacter: noop,
    onWhitespaceCharacter: noop,
  };
  const tokenizer = new Tokenizer({ sourceCodeLocationInfo: true }, handler);
  tokenizer.write(html, true);
  return { html: apply(html, edits), bodyEnd: bodyEnd === undefined ? undefined : shift(bodyEnd, edits) };
}

function apply(html: string, edits: Edit[]): string {
  if (edits.length === 0) return html;
  const parts: string[] = [];
  let at = 0;
  for (const e of edits) {
    parts.push(html.slice(at, e.start), e.text);
    at = e.end;
  }
  parts.push(html.slice(at));
  return parts.join('');
}

/** Where an offset of the input lands in the output. */
function shift(offset: number, edits: Edit[]): number {
  let delta = 0;
  for (const e of edits) if (e.end <= offset) delta += e.text.length - (e.end - e.start);
  return offset + delta;
}

export const encodeAttr = (s: string) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
