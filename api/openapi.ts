import type { Express } from 'express';
import { z } from 'zod';
import { CONTRACT_VERSION, idempotencyKeyField, type Operation } from './contract.js';

type Json = Record<string, unknown>;

/** JSON Schema 2020-12 (OpenAPI 3.1's dialect) of a zod schema, without its own `$schema` key. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Json {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  }) as Json;
  return rest;
}

const errorBody = {
  type: 'object',
  required: ['error'],
  properties: { error: { type: 'string' }, code: { type: 'string' } },
};

/** One operation as an OpenAPI Operation Object: parameters, request body, the success response and the error body. */
function operationObject(op: Operation): Json {
  const parameters: Json[] = [];
  for (const [where, obj] of [
    ['path', op.params],
    ['query', op.query],
  ] as const) {
    if (!obj) continue;
    for (const [name, field] of Object.entries(obj.shape as Record<string, z.ZodType>)) {
      const schema = jsonSchema(field, 'input');
      parameters.push({
        name,
        in: where,
        required: where === 'path' || !field.safeParse(undefined).success,
        schema,
        ...(typeof schema.description === 'string' ? { description: schema.description } : {}),
      });
    }
  }
  if (op.idempotencyKey) {
    parameters.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      schema: jsonSchema(idempotencyKeyField, 'input'),
      description: idempotencyKeyField.description,
    });
  }
  const status = String(op.status ?? 200);
  return {
    operationId: op.name,
    summary: op.summary,
    tags: [op.name.split('.')[0]!],
    ...(parameters.length ? { parameters } : {}),
    ...(op.body
      ? { requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(op.body, 'input') } } } }
      : {}),
    responses: {
      [status]: {
        description: 'Success',
        content: { 'application/json': { schema: jsonSchema(op.output, 'output') } },
      },
      default: {
        description: 'Error: {"error", "code"} with the HTTP status (docs/api.md, Errors)',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      },
    },
    security: op.auth === 'public' ? [] : [{ bearer: [] }],
    'x-credential-kinds': op.auth === 'public' ? ['public'] : [...op.auth],
  };
}

/** The OpenAPI 3.1 document of every operation, generated from the same definitions as the routes and /v1/schemas. */
export function openApiDocument(ops: readonly Operation[], publicUrl: string): Json {
  const paths: Record<string, Json> = {};
  for (const op of ops) {
    const path = op.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    paths[path] = { ...paths[path], [op.method.toLowerCase()]: operationObject(op) };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc mail API',
      version: CONTRACT_VERSION,
      description:
        'Every REST operation of the service; the same operations are tRPC procedures at /trpc (operationId).',
    },
    servers: [{ url: publicUrl }],
    paths,
    components: {
      schemas: { Error: errorBody },
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'API key (svc_live_…), session token, OAuth access token, or app password (mailbox API)',
        },
      },
    },
  };
}

/** GET /v1/openapi.json, rendered once. */
export function mountOpenApi(app: Express, ops: readonly Operation[], publicUrl: string): void {
  let body: string | undefined;
  app.get('/v1/openapi.json', (_req, res) => {
    body ??= JSON.stringify(openApiDocument(ops, publicUrl));
    res.type('application/json').send(body);
  });
}
