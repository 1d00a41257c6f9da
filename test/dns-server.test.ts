import dgram from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import * as dnsPacket from 'dns-packet';
import type { DecodedPacket, Packet } from 'dns-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDnsServer, type DnsServer } from '../dns/server.js';
import { createStaticZone } from '../dns/static-zone.js';

// A 2048-bit DKIM public key is ~400 characters: more than one 255-byte TXT character-string.
const DKIM = `v=DKIM1; k=rsa; p=${randomBytes(294).toString('base64')}`;

const zone = createStaticZone([
  { name: 'example.test', type: 'MX', value: 'mx1.example.test', priority: 10 },
  { name: 'example.test', type: 'MX', value: 'mx2.example.test', priority: 20 },
  { name: 'example.test', type: 'A', value: '192.0.2.1' },
  { name: 'example.test', type: 'TXT', value: 'v=spf1 -all' },
  { name: 'sel._domainkey.example.test', type: 'TXT', value: DKIM },
  { name: 'www.example.test', type: 'CNAME', value: 'example.test' },
  { name: 'bounce.example.test', type: 'CNAME', value: 'elsewhere.invalid' },
]);

let server: DnsServer;
/** A fresh resolver per query so c-ares' own answer cache never hides a zone change. */
const resolver = () => {
  const r = new Resolver({ timeout: 2_000, tries: 1 });
  r.setServers([server.address]);
  return r;
};
const query = (name: string, type: 'A' | 'MX' | 'TXT', id = 42): Packet => ({
  type: 'query',
  id,
  flags: dnsPacket.RECURSION_DESIRED,
  questions: [{ name, type }],
});

function udpQuery(wire: Buffer): Promise<DecodedPacket> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket('udp4');
    const timer = setTimeout(() => {
      socket.close();
      reject(new Error('UDP query timed out'));
    }, 2_000);
    socket.on('message', (msg) => {
      clearTimeout(timer);
      socket.close();
      resolve(dnsPacket.decode(msg));
    });
    socket.send(wire, server.port, server.host);
  });
}

function tcpQuery(packet: Packet): Promise<DecodedPacket> {
  return new Promise((resolve, reject) => {
    const conn = net.connect(server.port, server.host, () => conn.write(dnsPacket.streamEncode(packet)));
    let received = Buffer.alloc(0);
    conn.on('data', (data) => {
      received = Buffer.concat([received, data]);
      const reply = dnsPacket.streamDecode(received);
      if (reply) {
        conn.end();
        resolve(reply as DecodedPacket);
      }
    });
    conn.on('error', reject);
  });
}

describe('authoritative DNS server', () => {
  beforeAll(async () => {
    server = await startDnsServer({ port: 0, lookup: zone.lookup });
  });
  afterAll(async () => {
    await server?.close();
    await server?.close();
  }); // close() is idempotent.

  it('listens on loopback with one port for UDP and TCP', () => {
    expect(server.host).toBe('127.0.0.1');
    expect(server.port).toBeGreaterThan(0);
    expect(server.address).toBe(`127.0.0.1:${server.port}`);
  });

  it('fails to start on a fixed port that is taken', async () => {
    await expect(startDnsServer({ port: server.port, lookup: zone.lookup })).rejects.toMatchObject({
      code: 'EADDRINUSE',
    });
  });

  it('answers MX with priorities', async () => {
    const mx = await resolver().resolveMx('example.test');
    expect(mx.sort((a, b) => a.priority - b.priority)).toEqual([
      { exchange: 'mx1.example.test', priority: 10 },
      { exchange: 'mx2.example.test', priority: 20 },
    ]);
  });

  it('splits a long TXT value into 255-byte strings that join back to the original', async () => {
    expect(DKIM.length).toBeGreaterThan(255);
    const txt = await resolver().resolveTxt('sel._domainkey.example.test');
    expect(txt).toHaveLength(1);
    expect(txt[0]!.length).toBeGreaterThan(1);
    expect(txt[0]!.every((chunk) => Buffer.byteLength(chunk) <= 255)).toBe(true);
    expect(txt[0]!.join('')).toBe(DKIM);
  });

  it('answers A and CNAME, following an in-zone CNAME for other types', async () => {
    expect(await resolver().resolve4('example.test')).toEqual(['192.0.2.1']);
    expect(await resolver().resolveCname('www.example.test')).toEqual(['example.test']);
    expect(await resolver().resolve4('www.example.test')).toEqual(['192.0.2.1']);
    const reply = await udpQuery(dnsPacket.encode(query('bounce.example.test', 'A')));
    expect(reply.answers).toMatchObject([{ type: 'CNAME', name: 'bounce.example.test', data: 'elsewhere.invalid' }]);
  });

  it('returns NXDOMAIN for unknown names and NODATA for a missing type', async () => {
    await expect(resolver().resolve4('nope.example.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(resolver().resolve6('example.test')).rejects.toMatchObject({ code: 'ENODATA' });
  });

  it('sees records change between queries', async () => {
    zone.set('dyn.example.test', 'TXT', [{ value: 'first' }]);
    expect(await resolver().resolveTxt('dyn.example.test')).toEqual([['first']]);
    zone.set('dyn.example.test', 'TXT', [{ value: 'second' }]);
    expect(await resolver().resolveTxt('dyn.example.test')).toEqual([['second']]);
    zone.remove('dyn.example.test');
    await expect(resolver().resolveTxt('dyn.example.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('matches names case-insensitively and ignores the trailing dot', async () => {
    expect(await resolver().resolve4('ExAmPlE.TeSt.')).toEqual(['192.0.2.1']);
    const reply = await udpQuery(dnsPacket.encode(query('EXAMPLE.test.', 'A', 777)));
    expect(reply).toMatchObject({ id: 777, flag_aa: true, rcode: 'NOERROR' });
    expect(reply.questions).toEqual([{ name: 'EXAMPLE.test', type: 'A', class: 'IN' }]);
  });

  it('answers over TCP', async () => {
    const reply = await tcpQuery(query('sel._domainkey.example.test', 'TXT', 1234));
    expect(reply).toMatchObject({ id: 1234, flag_aa: true, rcode: 'NOERROR' });
    const data = (reply.answers?.[0] as { data: Buffer[] }).data;
    expect(Buffer.concat(data).toString()).toBe(DKIM);
  });

  it('sets TC on a UDP reply too big for a client without EDNS', async () => {
    zone.set(
      'big.example.test',
      'TXT',
      Array.from({ length: 4 }, () => ({ value: DKIM })),
    );
    const reply = await udpQuery(dnsPacket.encode(query('big.example.test', 'TXT')));
    expect(reply).toMatchObject({ flag_tc: true, answers: [] });
    expect(await resolver().resolveTxt('big.example.test')).toHaveLength(4); // c-ares retries over TCP.
  });

  it('refuses names it is not authoritative for', async () => {
    const other = await startDnsServer({
      port: 0,
      lookup: async () => ({ records: [], authoritative: false, nameExists: false }),
    });
    try {
      const r = new Resolver({ timeout: 2_000, tries: 1 });
      r.setServers([other.address]);
      await expect(r.resolve4('example.org')).rejects.toMatchObject({ code: 'EREFUSED' });
    } finally {
      await other.close();
    }
  });

  it('survives garbage packets', async () => {
    const socket = dgram.createSocket('udp4');
    for (const junk of [randomBytes(3), randomBytes(64), Buffer.alloc(12, 0xff)]) {
      await new Promise<void>((resolve) => socket.send(junk, server.port, server.host, () => resolve()));
    }
    socket.close();
    const conn = net.connect(server.port, server.host, () => conn.end(Buffer.from([0x00, 0x05, 1, 2, 3, 4, 5])));
    await new Promise((resolve) => conn.on('close', resolve));
    expect(await resolver().resolveMx('example.test')).toHaveLength(2);
  });
});
