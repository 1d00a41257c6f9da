import { INLINE_BYTES, runParse } from './pool.js';
import { tasks, type TaskInput } from './tasks.js';
import type { Content } from '../render/compose.js';

type RenderInput = TaskInput<'renderSend'>;

/**
 * A send's content (merge tags, then tracking): in the parse pool, unless its output is bounded small.
 * Both steps are linear scans (the merge-tag regex and parse5's tokenizer), so for a small message the
 * hop to a thread costs more than the work (measured: about 0.4 ms a hop against a few µs of work): a
 * message whose merged size cannot pass INLINE_BYTES (64 KiB) is rendered on the calling loop. The bound
 * counts what merging can produce, not only what came in: every `{{` could become the longest value.
 */
export async function renderContent(input: RenderInput): Promise<Content> {
  if (mergedBound(input) < INLINE_BYTES) return tasks.renderSend(input);
  return runParse('renderSend', input);
}

/** An upper bound, in characters, of the merged subject, html and text (before the few bytes tracking adds per link). */
export function mergedBound(input: RenderInput): number {
  const fields = [
    input.explicit.subject ?? input.template?.subject,
    input.explicit.html ?? input.template?.html,
    input.explicit.text ?? input.template?.text,
  ];
  let longest = 0;
  for (const v of Object.values(input.data ?? {})) if (typeof v === 'string' && v.length > longest) longest = v.length;
  let bound = 0;
  for (const f of fields) {
    if (!f) continue;
    bound += f.length + tagCount(f) * Math.max(longest, 24); // numbers and booleans print in at most 24 characters
    if (bound >= INLINE_BYTES) return bound;
  }
  return bound;
}

function tagCount(s: string): number {
  let n = 0;
  for (let i = s.indexOf('{{'); i >= 0; i = s.indexOf('{{', i + 2)) n++;
  return n;
}
