import { ReportRefusal } from './report-refusal.js';

/**
 * One linear pass over an XML document before any parser sees it: a DOCTYPE (and with it every entity
 * declaration, the billion-laughs) is refused, the elements are counted, and the elements named `name`
 * (any namespace prefix) past the first `keep` are cut out of the text. Comments and CDATA are skipped
 * whole, so a `<` inside them counts nothing.
 */
export type Scanned = {
  /** The document, with the `name` elements after the first `keep` removed. */
  text: string;
  /** `name` elements in the original document. */
  found: number;
  /** Elements left in `text`. */
  elements: number;
};

const isNameEnd = (c: number) => c === 0x3e || c === 0x2f || c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

export function scanXml(text: string, name: string, keep: number): Scanned {
  let found = 0;
  let elements = 0;
  let cutFrom = -1;
  let elementsAtCut = 0;
  let lastCloseEnd = -1;
  let sinceLastClose = 0;
  let i = text.indexOf('<');
  while (i !== -1) {
    const c = text.charCodeAt(i + 1);
    if (c === 0x21 /* ! */) {
      i = skipMarkup(text, i);
    } else if (c === 0x3f /* ? */) {
      i = text.indexOf('?>', i + 2);
      if (i === -1) throw new ReportRefusal('bad_xml');
      i += 2;
    } else {
      const closing = c === 0x2f;
      const from = i + (closing ? 2 : 1);
      let end = from;
      let local = from;
      while (end < text.length && !isNameEnd(text.charCodeAt(end))) {
        if (text.charCodeAt(end) === 0x3a /* : */) local = end + 1;
        end += 1;
      }
      const matches = end - local === name.length && text.startsWith(name, local);
      if (!closing) {
        elements += 1;
        sinceLastClose += 1;
        if (matches && ++found === keep + 1) {
          cutFrom = i;
          elementsAtCut = elements - 1;
        }
      } else if (matches) {
        const gt = text.indexOf('>', end);
        if (gt === -1) throw new ReportRefusal('bad_xml');
        lastCloseEnd = gt + 1;
        sinceLastClose = 0;
      }
      i = end;
    }
    i = text.indexOf('<', i);
  }
  if (cutFrom === -1) return { text, found, elements };
  if (lastCloseEnd < cutFrom) throw new ReportRefusal('bad_xml'); // the records past `keep` never close
  return {
    text: text.slice(0, cutFrom) + text.slice(lastCloseEnd),
    found,
    elements: elementsAtCut + sinceLastClose,
  };
}

/** Past a comment or CDATA section; any other `<!` (DOCTYPE, ENTITY) is refused. */
function skipMarkup(text: string, at: number): number {
  const [open, close] = text.startsWith('<!--', at)
    ? ['<!--', '-->']
    : text.startsWith('<![CDATA[', at)
      ? ['<![CDATA[', ']]>']
      : [null, null];
  if (open === null) throw new ReportRefusal('doctype_refused');
  const end = text.indexOf(close, at + open.length);
  if (end === -1) throw new ReportRefusal('bad_xml');
  return end + close.length;
}
