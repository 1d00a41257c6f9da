import type { Express } from 'express';
import { z } from 'zod';
import { notFound } from '../core/errors.js';
import { schemaBaseName, type Operation } from './contract.js';

export type SchemaEntry = { name: string; title: string; schema: z.ZodType; io: 'input' | 'output' };

/** Every schema the service publishes: each operation's request, query and response, plus extra ones (event payloads). */
export function collectSchemas(ops: readonly Operation[], extra: readonly SchemaEntry[] = []): SchemaEntry[] {
  const entries: SchemaEntry[] = [];
  for (const op of ops) {
    const base = schemaBaseName(op);
    const what = `${op.method} ${op.path}`;
    if (op.body) entries.push({ name: `${base}-request`, title: `${what} request body`, schema: op.body, io: 'input' });
    if (op.query && Object.keys(op.query.shape).length > 0)
      entries.push({ name: `${base}-query`, title: `${what} query parameters`, schema: op.query, io: 'input' });
    entries.push({ name: `${base}-response`, title: `${what} response body`, schema: op.output, io: 'output' });
  }
  entries.push(...extra);
  const seen = new Set<string>();
  for (const e of entries) {
    if (seen.has(e.name)) throw new Error(`duplicate schema name ${e.name}`);
    seen.add(e.name);
  }
  return entries;
}

/** draft-07 JSON Schema of one entry, with an absolute `$id` under PUBLIC_URL. */
export function toJsonSchema(entry: SchemaEntry, publicUrl: string): Record<string, unknown> {
  const json = z.toJSONSchema(entry.schema, { target: 'draft-07', io: entry.io, unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    $id: schemaUrl(entry.name, publicUrl),
    title: entry.title,
    ...withoutSchemaKey(json),
  };
}

export const schemaUrl = (name: string, publicUrl: string) => `${publicUrl}/v1/schemas/${name}.json`;

function withoutSchemaKey(json: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = json;
  return rest;
}

/** GET /v1/schemas and GET /v1/schemas/<name>.json (media type application/schema+json). */
export function mountSchemaRoutes(app: Express, entries: readonly SchemaEntry[], publicUrl: string): void {
  const byName = new Map(entries.map((e) => [e.name, e]));
  const rendered = new Map<string, string>();
  app.get('/v1/schemas', (_req, res) => {
    res.json({ schemas: entries.map((e) => ({ name: e.name, url: schemaUrl(e.name, publicUrl), title: e.title })) });
  });
  app.get('/v1/schemas/:file', (req, res) => {
    const name = req.params.file.replace(/\.json$/, '');
    const entry = req.params.file.endsWith('.json') ? byName.get(name) : undefined;
    if (!entry) throw notFound(`No schema named ${req.params.file}`);
    let body = rendered.get(name);
    if (!body) {
      body = JSON.stringify(toJsonSchema(entry, publicUrl));
      rendered.set(name, body);
    }
    res.type('application/schema+json').send(body);
  });
}
