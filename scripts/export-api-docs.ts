import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import express from 'express';
import { allSchemas } from '../api/app.js';
import type { Operation } from '../api/contract.js';
import { toolName } from '../api/mcp/tools.js';
import { mountOpenApi } from '../api/openapi.js';
import { operations } from '../api/ops/index.js';
import { mountSchemaRoutes } from '../api/schemas.js';

/**
 * `npm run docs:api`: writes what the server serves at GET /v1/openapi.json and GET /v1/schemas/<name>.json to
 * docs/reference/, and the endpoint index of docs/api.md. test/docs-reference.test.ts fails when they differ.
 */

export const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The PUBLIC_URL the reference is rendered with: the default of `npm start`. */
export const REFERENCE_URL = 'http://localhost:3000';
export const OPENAPI_FILE = 'docs/reference/openapi.json';
export const SCHEMAS_DIR = 'docs/reference/schemas';
export const API_DOC = 'docs/api.md';
const INDEX_START = '<!-- endpoints: written by npm run docs:api -->';
const INDEX_END = '<!-- end of endpoints -->';

const pretty = (body: string) => `${JSON.stringify(JSON.parse(body), null, 2)}\n`;

/** Fetches the OpenAPI document and every JSON Schema from the routes the server mounts, on a loopback port. */
export async function servedReference(): Promise<Map<string, string>> {
  const app = express();
  mountSchemaRoutes(app, allSchemas(), REFERENCE_URL);
  mountOpenApi(app, operations, REFERENCE_URL);
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const get = async (path: string) => {
    const res = await fetch(base + path);
    if (!res.ok) throw new Error(`GET ${path}: ${res.status}`);
    return res.text();
  };
  try {
    const files = new Map<string, string>([[OPENAPI_FILE, pretty(await get('/v1/openapi.json'))]]);
    const list = JSON.parse(await get('/v1/schemas')) as { schemas: { name: string }[] };
    for (const { name } of list.schemas) {
      files.set(`${SCHEMAS_DIR}/${name}.json`, pretty(await get(`/v1/schemas/${name}.json`)));
    }
    return files;
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/** Which page of docs/ explains each area (the first part of an operation's name). */
const AREA_DOCS: Record<string, string> = {
  auth: 'accounts.md',
  account: 'accounts.md',
  keys: 'accounts.md',
  scopedKeys: 'domains.md',
  me: 'accounts.md',
  billing: 'accounts.md',
  oauthGrants: 'accounts.md',
  outbox: 'accounts.md',
  attachments: 'sending.md',
  subdomains: 'domains.md',
  registration: 'domains.md',
  domains: 'domains.md',
  templates: 'sending.md',
  send: 'sending.md',
  smtpSettings: 'smtp-submission.md',
  metrics: 'api.md',
  scheduled: 'sending.md',
  messages: 'sending.md',
  events: 'sequences.md',
  suppressions: 'sending.md',
  webhooks: 'receiving.md',
  routes: 'receiving.md',
  deliveries: 'receiving.md',
  engagement: 'sending.md',
  appPasswords: 'mailboxes.md',
  mailbox: 'mailboxes.md',
  contacts: 'broadcasts.md',
  lists: 'broadcasts.md',
  broadcasts: 'broadcasts.md',
  sequences: 'sequences.md',
  enrolments: 'sequences.md',
  inboundPolicy: 'inbound-policy.md',
  senderRules: 'inbound-policy.md',
  heldMessages: 'inbound-policy.md',
  inbound: 'receiving.md',
};

/** The page an operation is explained on; `events.timeline` (GET /api/events) is the delivery timeline. */
export function areaDoc(op: Operation): string {
  if (op.name === 'events.timeline') return 'sending.md';
  if (op.name === 'domains.startWarmup' || op.name === 'domains.stopWarmup') return 'deliverability.md';
  if (op.name === 'domains.resumeSending') return 'deliverability.md';
  if (op.name === 'metrics.egress') return 'deliverability.md';
  if (op.name === 'domains.dmarc' || op.name === 'domains.tlsReports') return 'feedback.md';
  const doc = AREA_DOCS[op.name.split('.')[0]!];
  if (!doc) throw new Error(`no page in docs/ for the area of ${op.name}: add it to AREA_DOCS`);
  return doc;
}

const CREDENTIAL: Record<string, string> = {
  public: 'none',
  session: 'session',
  oauth: 'OAuth',
  account_key: 'account key',
  scoped_key: 'scoped key',
  app_password: 'app password',
};

const METHOD_ORDER = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
const byPath = (a: Operation, b: Operation) =>
  a.path.localeCompare(b.path) || METHOD_ORDER.indexOf(a.method) - METHOD_ORDER.indexOf(b.method);

/** The endpoint index of docs/api.md: every operation, grouped by the page that explains it, by path. */
export function endpointIndex(): string {
  const byPage = new Map<string, Operation[]>();
  for (const op of [...operations].sort(byPath)) byPage.set(areaDoc(op), [...(byPage.get(areaDoc(op)) ?? []), op]);
  const lines: string[] = [];
  for (const [page, ops] of [...byPage].sort(([a], [b]) => a.localeCompare(b))) {
    lines.push('', `**[${page.replace(/\.md$/, '')}](${page})**`, '');
    lines.push('| Method and path | What | Credentials | Idempotency-Key | MCP tool |', '|---|---|---|---|---|');
    for (const op of ops) {
      const kinds = op.auth === 'public' ? ['public'] : [...op.auth];
      const summary = op.summary.replaceAll('|', '\\|').replaceAll('\n', ' ');
      const tool = op.mcp ? `\`${toolName(op)}\`` : '';
      const who = kinds.map((k) => CREDENTIAL[k] ?? k).join(', ');
      lines.push(`| \`${op.method} ${op.path}\` | ${summary} | ${who} | ${op.idempotencyKey ? 'yes' : ''} | ${tool} |`);
    }
  }
  return `${INDEX_START}\n${lines.join('\n')}\n\n${INDEX_END}`;
}

/** docs/api.md with its endpoint index replaced by the current one. */
export function withEndpointIndex(doc: string): string {
  const start = doc.indexOf(INDEX_START);
  const end = doc.indexOf(INDEX_END);
  if (start < 0 || end < start) throw new Error(`${API_DOC} has no endpoint index markers`);
  return doc.slice(0, start) + endpointIndex() + doc.slice(end + INDEX_END.length);
}

/** Writes docs/reference/ (dropping schemas the server no longer serves) and the index of docs/api.md. */
export async function exportApiDocs(): Promise<number> {
  const files = await servedReference();
  rmSync(join(ROOT, SCHEMAS_DIR), { recursive: true, force: true });
  for (const [path, body] of files) {
    mkdirSync(dirname(join(ROOT, path)), { recursive: true });
    writeFileSync(join(ROOT, path), body);
  }
  const doc = join(ROOT, API_DOC);
  writeFileSync(doc, withEndpointIndex(readFileSync(doc, 'utf8')));
  return files.size;
}

/** The files under docs/reference/ now, relative to the repository. */
export function committedReference(): string[] {
  const schemas = readdirSync(join(ROOT, SCHEMAS_DIR)).map((f) => `${SCHEMAS_DIR}/${f}`);
  return [OPENAPI_FILE, ...schemas];
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const n = await exportApiDocs();
  console.log(`export-api-docs: ${n} files in docs/reference/, endpoint index in ${API_DOC}`);
}
