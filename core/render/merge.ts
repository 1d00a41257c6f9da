/** Values that fill `{{merge_tags}}` (SPEC.md, POST /v1/send `templateData`): scalars only. */
export type MergeData = Record<string, string | number | boolean | null>;

/**
 * `{{{ key }}}` (raw) or `{{ key }}` (escaped in HTML). Keys: letters, digits, `_`, `-`, `.`; whitespace
 * inside the braces is allowed. Anything else between braces is not a tag and stays as written.
 */
const TAG = /\{\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}\}|\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes the five characters that can change the meaning of HTML text or a quoted attribute. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/**
 * Fills the merge tags of `template` from `data` in one pass, so a value containing `{{other}}` stays literal.
 * In HTML mode `{{ key }}` is escaped and `{{{ key }}}` inserted raw (the documented escape hatch for trusted markup).
 * Missing or null values become the empty string.
 */
export function fillMergeTags(template: string, data: MergeData, opts: { html: boolean }): string {
  return template.replace(TAG, (_match, rawKey: string | undefined, key: string | undefined) => {
    const value = valueOf(data, (rawKey ?? key)!);
    return opts.html && key !== undefined ? escapeHtml(value) : value;
  });
}

/** Merges layers of merge data; later layers win key by key, undefined layers are skipped. */
export function mergeData(...layers: (MergeData | undefined)[]): MergeData {
  // Spread (not Object.assign) defines own properties, so a `__proto__` key from JSON cannot reach the prototype.
  return layers.reduce<MergeData>((acc, layer) => (layer ? { ...acc, ...layer } : acc), {});
}

function valueOf(data: MergeData, key: string): string {
  // Own properties only: `{{constructor}}` must not print Object's constructor.
  if (!Object.hasOwn(data, key)) return '';
  const value: unknown = data[key];
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return '';
}
