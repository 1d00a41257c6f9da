import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { requireKind } from '../../core/auth.js';
import { AppError } from '../../core/errors.js';
import { logError } from '../../core/log.js';
import type { AuthedContext } from '../contract.js';
import { validationError } from '../errors.js';
import { runOperation, splitKeyField } from '../idempotency.js';
import type { McpTool } from './tools.js';

/**
 * Runs one tool call as its REST route would: the credential kind checked, the input validated, the
 * handler called through the same actor and idempotency path, the answer checked against the output
 * schema. Every failure is a tool error (`isError`) whose text is the API's `{"error", "code"}`.
 */
export async function callTool(tool: McpTool, args: unknown, ctx: AuthedContext): Promise<CallToolResult> {
  try {
    const principal = requireKind(ctx.principal, tool.op.auth === 'public' ? [] : tool.op.auth);
    const parsed = tool.input.safeParse(args ?? {});
    if (!parsed.success) throw validationError(parsed.error.issues);
    const { input, key } = splitKeyField(parsed.data);
    // Parsed with the output schema as on REST (clients validate structured content against outputSchema).
    const answer = await runOperation(
      tool.op,
      input,
      { ...ctx, principal },
      { key, strictOutput: ctx.core.config.env !== 'production' },
    );
    const structured = (tool.wrapsOutput ? { items: answer.body } : answer.body) as Record<string, unknown>;
    return {
      content: [{ type: 'text', text: JSON.stringify(structured) }],
      structuredContent: structured,
      ...(answer.replayed ? { _meta: { idempotentReplayed: true } } : {}),
    };
  } catch (err) {
    return errorResult(err, tool.definition.name);
  }
}

function errorResult(err: unknown, name: string): CallToolResult {
  const known = err instanceof AppError ? err : err instanceof z.ZodError ? validationError(err.issues) : undefined;
  if (!known) logError(`[mcp] tool ${name} failed`, err);
  const body = known
    ? { error: known.message, code: known.code }
    : { error: 'Internal server error', code: 'internal_error' };
  return { isError: true, content: [{ type: 'text', text: JSON.stringify(body) }] };
}
