import type { Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CredentialKind } from '../../core/tenancy.js';
import { combinedObject, type Operation } from '../contract.js';

/** One operation as an MCP tool: its definition (what tools/list answers) and the zod input that checks a call. */
export type McpTool = {
  op: Operation;
  definition: Tool;
  input: z.ZodType;
  /** The REST answer is not an object (a list): structured content carries it as `{ items }`. */
  wrapsOutput: boolean;
};

/** The tool name: the one the operation gives, else its name in snake case (`lists.addContacts` → `lists_add_contacts`). */
export const toolName = (op: Operation): string =>
  op.mcp?.name ??
  op.name
    .replace(/([a-z])([A-Z])/g, '$1_$2')
    .replace(/\./g, '_')
    .toLowerCase();

/** JSON Schema 2020-12 (the MCP default dialect, so no `$schema` key) of a zod schema, as REST and /v1/schemas derive theirs. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  return rest;
}

/** One tool from one operation: input = its params, query and body (and `idempotencyKey`), output = its REST answer. */
function toolOf(op: Operation): McpTool {
  const meta = op.mcp!;
  const input = combinedObject(op);
  const wrapsOutput = !(op.output instanceof z.ZodObject);
  const output = jsonSchema(op.output, 'output');
  return {
    op,
    input,
    wrapsOutput,
    definition: {
      name: toolName(op),
      title: meta.title,
      description: `${op.summary}\n\nThe same operation as REST ${op.method} ${op.path} and tRPC ${op.name}.`,
      inputSchema: jsonSchema(input, 'input') as Tool['inputSchema'],
      outputSchema: (wrapsOutput
        ? { type: 'object', properties: { items: output }, required: ['items'] }
        : output) as Tool['outputSchema'],
      annotations: {
        title: meta.title,
        readOnlyHint: meta.readOnly ?? op.method === 'GET',
        destructiveHint: meta.destructive ?? op.method === 'DELETE',
        idempotentHint: meta.idempotent ?? ['GET', 'PUT', 'DELETE'].includes(op.method),
        openWorldHint: meta.openWorld ?? false,
      },
    },
  };
}

/** Every operation marked `mcp`, as tools, built once at boot (their schemas are reused by every request). */
export function buildTools(ops: readonly Operation[]): McpTool[] {
  const tools = ops.filter((op) => op.mcp && op.auth !== 'public').map(toolOf);
  const seen = new Set<string>();
  for (const t of tools) {
    if (seen.has(t.definition.name)) throw new Error(`duplicate MCP tool name ${t.definition.name}`);
    seen.add(t.definition.name);
  }
  return tools;
}

/** The tools a credential may call: exactly the operations that take its kind on REST (a scoped key sees its subset). */
export function toolsFor(tools: readonly McpTool[], kind: CredentialKind): McpTool[] {
  return tools.filter((t) => t.op.auth !== 'public' && t.op.auth.includes(kind));
}
