import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parse } from 'smol-toml';

/**
 * Egress sources and pools (docs/transport-policy.md), read from EGRESS_FILE (default the shipped
 * egress.toml). A source is where a transaction leaves from: a local address to bind with the EHLO name
 * to announce, or a smarthost relay. A pool groups sources with weights; the two streams map to pools.
 */
export type RelaySettings = {
  host: string;
  port: number;
  /** `tls`: implicit TLS on connect (port 465); `starttls`: STARTTLS required; `none`: opportunistic. */
  security: 'tls' | 'starttls' | 'none';
  username?: string;
  password?: string;
};
/** A DNS record a relay provider needs published beside the domain's own (names relative to the domain). */
export type ProviderRecord = { type: 'TXT' | 'CNAME'; name: string; value: string };
export type EgressSource = {
  name: string;
  /** The local address connections are bound to; unset: the host's default route. */
  bindAddress?: string;
  /** The name announced in EHLO; unset: SERVICE_DOMAIN. */
  ehloName?: string;
  /** Set for a smarthost source: every transaction goes to this relay, whatever the recipient domain. */
  relay?: RelaySettings;
  /** The relay provider's SPF include (merged into the domain's SPF record). */
  spfInclude?: string;
  /** Records the relay provider needs (its DKIM names, say). */
  records: ProviderRecord[];
};
export type EgressPool = { name: string; label: string; sources: { source: string; weight: number }[] };
export const STREAMS = ['transactional', 'bulk'] as const;
export type Stream = (typeof STREAMS)[number];
export type EgressConfig = {
  file: string | null;
  sources: Map<string, EgressSource>;
  pools: Map<string, EgressPool>;
  streams: Record<Stream, string>;
};

/** The source every transaction used before egress.toml existed: the host's own address, EHLO SERVICE_DOMAIN. */
export const DEFAULT_SOURCE = 'default';

/** What the shipped egress.toml says: one source (the host's address), a pool per stream on it. */
export function defaultEgress(): EgressConfig {
  const on = (name: string, label: string): EgressPool => ({
    name,
    label,
    sources: [{ source: DEFAULT_SOURCE, weight: 1 }],
  });
  return {
    file: null,
    sources: new Map([[DEFAULT_SOURCE, { name: DEFAULT_SOURCE, records: [] }]]),
    pools: new Map([
      ['transactional', on('transactional', 'Transactional')],
      ['bulk', on('bulk', 'Broadcasts and sequences')],
    ]),
    streams: { transactional: 'transactional', bulk: 'bulk' },
  };
}

export class EgressFileError extends Error {}

/** `env` holds the variables relay passwords are read from (`password_env`). */
export function loadEgressFile(file: string, env: Record<string, string | undefined>): EgressConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new EgressFileError(`EGRESS_FILE ${file}: cannot read it (${(err as Error).message})`);
  }
  return parseEgress(text, file, env);
}

const NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const HOST = /^[a-z0-9-]{1,63}(\.[a-z0-9-]{1,63}){0,10}$/;
const isTable = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Parses egress.toml text; every mistake names its table and key. */
export function parseEgress(
  text: string,
  file: string | null = null,
  env: Record<string, string | undefined> = {},
): EgressConfig {
  const where = file ?? 'egress.toml';
  let doc: Record<string, unknown>;
  try {
    doc = parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new EgressFileError(`${where}: not valid TOML: ${(err as Error).message}`);
  }
  const fail = (table: string, msg: string): never => {
    throw new EgressFileError(`${where}: [${table}] ${msg}`);
  };
  for (const key of Object.keys(doc))
    if (!['source', 'pool', 'streams'].includes(key)) fail(key, 'unknown table (source.<name>, pool.<name>, streams)');
  const sources = new Map<string, EgressSource>();
  const pools = new Map<string, EgressPool>();
  if (!isTable(doc.source) || Object.keys(doc.source).length === 0) fail('source', 'at least one [source.<name>]');
  for (const [name, value] of Object.entries(doc.source as Record<string, unknown>))
    sources.set(name, sourceOf(`source.${name}`, name, value, fail, env));
  if (!isTable(doc.pool) || Object.keys(doc.pool).length === 0) fail('pool', 'at least one [pool.<name>]');
  for (const [name, value] of Object.entries(doc.pool as Record<string, unknown>)) {
    const t = `pool.${name}`;
    if (!NAME.test(name)) fail(t, 'names are lowercase letters, digits, - and _');
    if (!isTable(value)) fail(t, 'must be a table');
    const v = value as Record<string, unknown>;
    for (const key of Object.keys(v)) if (!['label', 'sources'].includes(key)) fail(t, `unknown key ${key}`);
    if (!Array.isArray(v.sources) || v.sources.length === 0)
      fail(t, 'needs sources = [{ name = "…", weight = 1 }, …] (or ["name", …])');
    const members = (v.sources as unknown[]).map((m) => {
      const entry = typeof m === 'string' ? { name: m, weight: 1 } : isTable(m) ? m : fail(t, 'bad sources item');
      const source = String((entry as Record<string, unknown>).name ?? '');
      const weight = Number((entry as Record<string, unknown>).weight ?? 1);
      if (!sources.has(source)) fail(t, `names source "${source}", which is not defined`);
      if (!Number.isInteger(weight) || weight < 1 || weight > 1000) fail(t, `weight of "${source}" must be 1 to 1000`);
      return { source, weight };
    });
    if (new Set(members.map((m) => m.source)).size !== members.length) fail(t, 'a source is listed twice');
    pools.set(name, { name, label: typeof v.label === 'string' ? v.label : name, sources: members });
  }
  const streams = {} as Record<Stream, string>;
  const st = isTable(doc.streams) ? doc.streams : {};
  for (const key of Object.keys(st))
    if (!(STREAMS as readonly string[]).includes(key)) fail('streams', `unknown stream ${key}`);
  for (const stream of STREAMS) {
    const pool = st[stream] ?? (pools.size === 1 ? [...pools.keys()][0] : undefined);
    if (typeof pool !== 'string') fail('streams', `${stream} = "<pool>" is required when there is more than one pool`);
    if (!pools.has(pool as string)) fail('streams', `${stream} names pool "${String(pool)}", which is not defined`);
    streams[stream] = pool as string;
  }
  return { file, sources, pools, streams };
}

function sourceOf(
  t: string,
  name: string,
  value: unknown,
  fail: (t: string, m: string) => never,
  env: Record<string, string | undefined>,
): EgressSource {
  if (!NAME.test(name)) fail(t, 'names are lowercase letters, digits, - and _');
  if (!isTable(value)) fail(t, 'must be a table');
  const v = value as Record<string, unknown>;
  const known = ['bind_address', 'ehlo_name', 'relay', 'spf_include', 'records'];
  for (const key of Object.keys(v)) if (!known.includes(key)) fail(t, `unknown key ${key} (${known.join(', ')})`);
  const source: EgressSource = { name, records: [] };
  if (v.bind_address !== undefined) {
    if (typeof v.bind_address !== 'string' || !isIP(v.bind_address)) fail(t, 'bind_address must be an IP address');
    source.bindAddress = v.bind_address as string;
  }
  if (v.ehlo_name !== undefined) {
    const ehlo = String(v.ehlo_name).toLowerCase();
    if (!HOST.test(ehlo)) fail(t, 'ehlo_name must be a host name');
    source.ehloName = ehlo;
  }
  if (v.relay !== undefined) {
    if (!isTable(v.relay)) fail(t, 'relay must be a table { host, port, security, username, password_env }');
    const r = v.relay as Record<string, unknown>;
    for (const key of Object.keys(r))
      if (!['host', 'port', 'security', 'username', 'password_env'].includes(key)) fail(t, `relay: unknown key ${key}`);
    const host = String(r.host ?? '').toLowerCase();
    if (!HOST.test(host) && !isIP(host)) fail(t, 'relay.host must be a host name or address');
    const security = (r.security ?? 'starttls') as RelaySettings['security'];
    if (!['tls', 'starttls', 'none'].includes(security)) fail(t, 'relay.security is tls, starttls or none');
    const port = Number(r.port ?? (security === 'tls' ? 465 : 587));
    if (!Number.isInteger(port) || port < 1 || port > 65535) fail(t, 'relay.port must be a port number');
    let password: string | undefined;
    if (r.password_env !== undefined) {
      password = env[String(r.password_env)];
      if (!password) fail(t, `relay.password_env names ${String(r.password_env)}, which is not set`);
    }
    source.relay = {
      host,
      port,
      security,
      ...(r.username !== undefined ? { username: String(r.username) } : {}),
      ...(password ? { password } : {}),
    };
  }
  if (v.spf_include !== undefined) {
    const inc = String(v.spf_include).toLowerCase();
    if (!HOST.test(inc)) fail(t, 'spf_include must be a host name');
    source.spfInclude = inc;
  }
  if (v.records !== undefined) {
    if (!Array.isArray(v.records)) fail(t, 'records = [{ type = "CNAME", name = "…", value = "…" }, …]');
    for (const rec of v.records as unknown[]) {
      const r = isTable(rec) ? rec : fail(t, 'records items are tables');
      const type = String((r as Record<string, unknown>).type ?? '').toUpperCase();
      const rname = String((r as Record<string, unknown>).name ?? '');
      const rvalue = String((r as Record<string, unknown>).value ?? '');
      if (type !== 'TXT' && type !== 'CNAME') fail(t, 'records: type is TXT or CNAME');
      if (!rname || !rvalue || rname.length > 253 || rvalue.length > 1024) fail(t, 'records: name and value required');
      source.records.push({ type: type as 'TXT' | 'CNAME', name: rname, value: rvalue });
    }
  }

  return source;
}

/** The provider type a pool shows as on a domain row: `relay` when any of its sources is a smarthost, else the built-in MTA's `svc`. */
export const providerTypeOf = (config: EgressConfig, pool: string): string =>
  config.pools.get(pool)?.sources.some((m) => config.sources.get(m.source)?.relay) ? 'relay' : 'svc';

/**
 * The shaping key of a site as seen from a source: limits, leases and suspensions are per (source, site),
 * as in KumoMTA. The default source keeps the bare site key, so shaping state from before sources existed
 * still applies.
 */
export const sourceSiteKey = (source: string, siteKey: string): string =>
  source === DEFAULT_SOURCE ? siteKey : `${source}|${siteKey}`;
