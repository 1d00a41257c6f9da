import dgram from 'node:dgram';
import net from 'node:net';
import * as dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, Packet, Question } from 'dns-packet';

/** One resource record. SOA `value` is zone-file style: "mname rname [serial refresh retry expire minimum]". */
export type DnsRecord = {
  name: string;
  type: 'A' | 'AAAA' | 'MX' | 'TXT' | 'CNAME' | 'NS' | 'SOA' | 'PTR';
  value: string;
  priority?: number;
  ttl?: number;
};
/** Answers one question; `name` arrives lowercased without the trailing dot. */
export type DnsLookup = (
  name: string,
  type: DnsRecord['type'] | string,
) => Promise<{ records: DnsRecord[]; authoritative: boolean; nameExists: boolean }>;
export type DnsServer = { port: number; host: string; address: string; close(): Promise<void> };

const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5 } as const;
const DEFAULT_TTL = 300;
const CLASSIC_UDP_LIMIT = 512;
const OUR_EDNS_UDP_SIZE = 1232; // the DNS flag day 2020 value: avoids IP fragmentation.
const MAX_CNAME_CHAIN = 8;
const TCP_IDLE_MS = 10_000;
const BIND_ATTEMPTS = 5;

/** `(?<!\.)` lets a match start only at the first dot of a run, so the search stays linear. */
const normalize = (name: string): string => name.toLowerCase().replace(/(?<!\.)\.+$/, '');

/** Splits a TXT value into <=255-byte character-strings: one string can't be longer on the wire (long DKIM keys). */
function txtChunks(value: string): Buffer[] {
  const bytes = Buffer.from(value, 'utf8');
  const chunks: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) chunks.push(bytes.subarray(i, i + 255));
  return chunks.length ? chunks : [Buffer.alloc(0)];
}

function parseSoa(value: string) {
  const [mname = '', rname = '', ...nums] = value.trim().split(/\s+/);
  const [serial = 1, refresh = 3600, retry = 600, expire = 604800, minimum = 60] = nums.map(Number);
  return { mname, rname, serial, refresh, retry, expire, minimum };
}

function toAnswer(record: DnsRecord, ownerName: string): Answer | undefined {
  const base = { name: ownerName, ttl: record.ttl ?? DEFAULT_TTL, class: 'IN' as const };
  switch (record.type) {
    case 'A':
    case 'AAAA':
    case 'CNAME':
    case 'NS':
    case 'PTR':
      return { ...base, type: record.type, data: record.value };
    case 'MX':
      return { ...base, type: 'MX', data: { preference: record.priority ?? 10, exchange: record.value } };
    case 'TXT':
      return { ...base, type: 'TXT', data: txtChunks(record.value) };
    case 'SOA':
      return { ...base, type: 'SOA', data: parseSoa(record.value) };
    default:
      return undefined; // a lookup returning a type we can't encode should not break the reply.
  }
}

type Resolution = { rcode: number; aa: boolean; answers: Answer[] };

/** Resolves one question, following CNAMEs that stay inside our own data, as RFC 1034 4.3.2 asks of authoritative servers. */
async function resolve(lookup: DnsLookup, question: Question): Promise<Resolution> {
  const qtype = String(question.type).toUpperCase();
  const answers: Answer[] = [];
  let owner = question.name; // echo the asker's spelling for the first owner name.
  for (let hop = 0; hop < MAX_CNAME_CHAIN; hop++) {
    const name = normalize(owner);
    const result = await lookup(name, qtype);
    if (!result.authoritative) {
      // Not ours: refuse outright; an out-of-zone CNAME target is left for the resolver to chase.
      return hop === 0 ? { rcode: RCODE.REFUSED, aa: false, answers: [] } : { rcode: RCODE.NOERROR, aa: true, answers };
    }
    let records = result.records.filter((r) => r.type === qtype);
    if (!records.length && qtype !== 'CNAME' && result.nameExists) {
      const alias = result.records.filter((r) => r.type === 'CNAME');
      records = alias.length ? alias : (await lookup(name, 'CNAME')).records.filter((r) => r.type === 'CNAME');
    }
    for (const record of records) {
      const answer = toAnswer(record, owner);
      if (answer) answers.push(answer);
    }
    const cname = qtype !== 'CNAME' && records[0]?.type === 'CNAME' ? records[0] : undefined;
    if (!cname) {
      const nx = hop === 0 && !result.nameExists;
      return { rcode: nx ? RCODE.NXDOMAIN : RCODE.NOERROR, aa: true, answers };
    }
    owner = normalize(cname.value);
  }
  return { rcode: RCODE.NOERROR, aa: true, answers };
}

/** Builds the wire reply to one query, or undefined when the packet isn't something we should answer. */
async function answerQuery(lookup: DnsLookup, raw: Buffer, transport: 'udp' | 'tcp'): Promise<Buffer | undefined> {
  let query: DecodedPacket & { opcode?: string };
  try {
    query = dnsPacket.decode(raw);
  } catch {
    return undefined; // malformed: stay silent, like most servers, so we can't be used to reflect junk.
  }
  if (query.flag_qr) return undefined;
  const questions = query.questions ?? [];
  const edns = query.additionals?.find((a) => a.type === 'OPT');
  const rd = (query.flags ?? 0) & dnsPacket.RECURSION_DESIRED; // echoed, per RFC 1035; RA stays clear: we don't recurse.
  const reply = (rcode: number, aa: boolean, answers: Answer[]): Packet => ({
    type: 'response',
    id: query.id ?? 0,
    flags: rd | (aa ? dnsPacket.AUTHORITATIVE_ANSWER : 0) | rcode,
    questions,
    answers,
    additionals: edns
      ? [
          {
            type: 'OPT',
            name: '.',
            udpPayloadSize: OUR_EDNS_UDP_SIZE,
            extendedRcode: 0,
            ednsVersion: 0,
            flags: 0,
            flag_do: false,
            options: [],
          },
        ]
      : [],
  });
  let packet: Packet;
  const question = questions[0];
  if (query.opcode !== undefined && query.opcode !== 'QUERY') packet = reply(RCODE.NOTIMP, false, []);
  else if (questions.length !== 1 || !question) packet = reply(RCODE.FORMERR, false, []);
  else if (question.class !== undefined && question.class !== 'IN')
    packet = reply(RCODE.REFUSED, false, []); // e.g. CHAOS version.bind probes.
  else {
    try {
      const { rcode, aa, answers } = await resolve(lookup, question);
      packet = reply(rcode, aa, answers);
    } catch {
      packet = reply(RCODE.SERVFAIL, false, []);
    }
  }
  return encodeWithinLimit(packet, transport === 'tcp' ? undefined : udpLimit(edns));
}

/** The largest UDP reply the client accepts: 512 bytes unless it advertised more via EDNS (capped at ours). */
function udpLimit(edns: Answer | undefined): number {
  if (!edns || !('udpPayloadSize' in edns)) return CLASSIC_UDP_LIMIT;
  return Math.min(Math.max(edns.udpPayloadSize, CLASSIC_UDP_LIMIT), OUR_EDNS_UDP_SIZE);
}

/** Encodes the reply; over UDP a too-big one goes out empty with TC set so the client retries over TCP. */
function encodeWithinLimit(packet: Packet, limit: number | undefined): Buffer {
  try {
    const wire = dnsPacket.encode(packet);
    if (limit === undefined || wire.length <= limit) return wire;
    return dnsPacket.encode({ ...packet, flags: (packet.flags ?? 0) | dnsPacket.TRUNCATED_RESPONSE, answers: [] });
  } catch {
    return dnsPacket.encode({
      ...packet,
      flags: ((packet.flags ?? 0) & ~0xf & ~dnsPacket.AUTHORITATIVE_ANSWER) | RCODE.SERVFAIL,
      answers: [],
    });
  }
}

function serveUdp(socket: dgram.Socket, lookup: DnsLookup): void {
  socket.on('message', (msg, rinfo) => {
    void answerQuery(lookup, msg, 'udp')
      .then((wire) => {
        if (wire) socket.send(wire, rinfo.port, rinfo.address, () => undefined);
      })
      .catch(() => undefined);
  });
  socket.on('error', () => undefined); // e.g. ICMP port unreachable surfacing as an error: not fatal for a server.
}

/** Handles one TCP connection: a stream of 2-byte length-prefixed messages (RFC 1035 4.2.2), answered in order. */
function serveTcpConnection(conn: net.Socket, lookup: DnsLookup): void {
  let pending = Buffer.alloc(0);
  let chain: Promise<void> = Promise.resolve();
  conn.setTimeout(TCP_IDLE_MS, () => conn.destroy());
  conn.on('error', () => undefined);
  conn.on('data', (data) => {
    pending = Buffer.concat([pending, data]);
    while (pending.length >= 2) {
      const length = pending.readUInt16BE(0);
      if (pending.length < 2 + length) break;
      const message = pending.subarray(2, 2 + length);
      pending = pending.subarray(2 + length);
      chain = chain
        .then(async () => {
          const wire = await answerQuery(lookup, message, 'tcp');
          if (!wire || conn.destroyed) return;
          const prefix = Buffer.alloc(2);
          prefix.writeUInt16BE(wire.length);
          conn.write(Buffer.concat([prefix, wire]));
        })
        .catch(() => undefined);
    }
  });
}

function bindUdp(host: string, port: number): Promise<dgram.Socket> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    const onError = (err: Error) => {
      socket.close();
      reject(err);
    };
    socket.once('error', onError);
    socket.bind(port, host, () => {
      socket.off('error', onError);
      resolve(socket);
    });
  });
}

function listenTcp(server: net.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** Starts an authoritative DNS server answering from `lookup` over UDP and TCP on one port. */
export async function startDnsServer(opts: { port: number; host?: string; lookup: DnsLookup }): Promise<DnsServer> {
  const host = opts.host ?? '127.0.0.1';
  const connections = new Set<net.Socket>();
  for (let attempt = 1; ; attempt++) {
    const udp = await bindUdp(host, opts.port);
    serveUdp(udp, opts.lookup); // right away, so its error handler is in place from the start.
    const port = udp.address().port;
    const tcp = net.createServer((conn) => {
      connections.add(conn);
      conn.on('close', () => connections.delete(conn));
      serveTcpConnection(conn, opts.lookup);
    });
    try {
      await listenTcp(tcp, host, port);
    } catch (err) {
      udp.close();
      // With port 0 the kernel picked a UDP port whose TCP twin may be taken: just try another.
      if (opts.port === 0 && attempt < BIND_ATTEMPTS) continue;
      throw err;
    }
    let closing: Promise<void> | undefined;
    return {
      port,
      host,
      address: net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`,
      close: () => {
        if (!closing) {
          // idempotent: a second dgram close() would throw.
          for (const conn of connections) conn.destroy(); // tcp.close() would otherwise wait for them.
          closing = Promise.all([
            new Promise<void>((resolve) => udp.close(() => resolve())),
            new Promise<void>((resolve) => tcp.close(() => resolve())),
          ]).then(() => undefined);
        }
        return closing;
      },
    };
  }
}
