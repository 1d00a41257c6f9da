import { createHash } from 'node:crypto';
import type { Resolver } from 'node:dns/promises';
import { and, eq, inArray } from 'drizzle-orm';
import { simpleParser, type ParsedMail } from 'mailparser';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import type { AttachmentService } from '../attachments/service.js';
import type { DomainRow } from '../domains/dto.js';
import { AppError } from '../errors.js';
import type { WorkflowPort } from '../index.js';
import type { Sealer } from '../secrets.js';
import type { UsageService } from '../usage.js';
import type { DeliveryStore } from '../webhooks/deliveries.js';
import type { RouteService } from '../webhooks/routes.js';
import { scoreMessage } from './auth.js';
import type { EncryptionService } from './encryption-service.js';
import type { ReportService } from './report-service.js';
import { parseReport } from './reports.js';
import { receivedPayload, type InboundAttachment } from './payload.js';

const hashId = (prefix: string, ...parts: (string | Buffer)[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return `${prefix}_${h.digest('base64url').slice(0, 24)}`;
};
const split = (address: string) => {
  const at = address.lastIndexOf('@');
  return { local: address.slice(0, at).toLowerCase(), domain: address.slice(at + 1).toLowerCase() };
};
/** Return-path addresses of outbound mail (`bounce+<msg>@bounces.<domain>`): reports, not inbound mail. */
export const isReturnPath = (address: string) => split(address).local.startsWith('bounce+') || split(address).domain.startsWith('bounces.');

export type Envelope = { from: string; rcpts: string[]; ip: string; helo: string };

/** Inbound mail: who may receive, storing what arrives, and turning it into webhook deliveries. */
export function createInboundService(deps: {
  db: Db; sealer: Sealer; resolver: Resolver; serviceDomain: string; attachments: AttachmentService; encryption: EncryptionService;
  routes: RouteService; deliveries: DeliveryStore; usage: UsageService; workflows: WorkflowPort; reports: ReportService;
}) {
  const { db } = deps;
  const d = schema.domains;

  async function receivingDomain(name: string): Promise<DomainRow | undefined> {
    const [row] = await db.select().from(d).where(and(eq(d.domain, name), eq(d.mxVerified, 1))).limit(1);
    return row;
  }

  /** Attachments as the payload carries them: signed URLs, or inline base64 when nothing may be kept in the clear. */
  async function payloadAttachments(mail: ParsedMail, domain: DomainRow, messageId: string, inline: boolean): Promise<InboundAttachment[]> {
    return Promise.all(mail.attachments.map(async (a, i) => {
      const base = { id: `${messageId}_${i}`, filename: a.filename ?? `attachment-${i + 1}`, contentType: a.contentType, size: a.size };
      if (inline) return { ...base, content: a.content.toString('base64') };
      const up = await deps.attachments.upload(domain.userId, { raw: a.content, filename: base.filename, contentType: a.contentType, retentionDays: 30 });
      return { ...base, id: up.id, url: up.url };
    }));
  }

  /** Stores one domain's copy of a message and starts its delivery workflow; idempotent per (message bytes, recipients). */
  async function acceptFor(domain: DomainRow, rcpts: string[], raw: Buffer, mail: ParsedMail, env: Envelope, auth: Record<string, string | null>) {
    const id = hashId('msg', domain.id, rcpts.join(','), raw);
    const [seen] = await db.select({ id: schema.messages.id }).from(schema.messages).where(eq(schema.messages.id, id));
    if (!seen) {
      const keepNothing = domain.zeroRetention === 1;
      const encrypted = Boolean(domain.encPublicKey);
      const receivedAt = Date.now();
      const attachments = await payloadAttachments(mail, domain, id, keepNothing || encrypted);
      const payload = receivedPayload({ id, mail, envelopeFrom: env.from, receivedAt, auth, attachments });
      const sealed = keepNothing ? { content: Buffer.alloc(0), encrypted: false, encAlg: null } : await deps.encryption.sealForDomain(domain, raw);
      const clear = !keepNothing && !encrypted;
      await db.transaction(async (tx) => {
        await tx.insert(schema.messages).values({
          id, userId: domain.userId, direction: 'inbound', kind: 'user', domainId: domain.id, fromAddr: payload.from.address, toAddrs: rcpts,
          subject: clear ? payload.subject : null, text: clear ? payload.text : null, html: clear ? payload.html : null, status: 'received',
          threadId: payload.threadId, auth, envelopeFrom: env.from, receivedAt, sizeBytes: raw.length, createdAt: receivedAt, updatedAt: receivedAt,
        }).onConflictDoNothing();
        await tx.insert(schema.inboundRaw).values({
          messageId: id, content: sealed.content, encrypted: sealed.encrypted, encAlg: sealed.encAlg, payloadSealed: deps.sealer.seal(JSON.stringify(payload)), createdAt: receivedAt,
        }).onConflictDoNothing();
        await deps.usage.consume(tx, domain.userId, 1, { outbound: false });
      });
    }
    await deps.workflows.startInboundDelivery({ messageId: id, userId: domain.userId, domainId: domain.id });
    return id;
  }

  return {
    /** RCPT TO: a mailbox on a domain with verified MX, or a return path of ours; 550 otherwise. */
    async checkRecipient(address: string): Promise<void> {
      const { domain } = split(address);
      const name = isReturnPath(address) && domain.startsWith('bounces.') ? domain.slice('bounces.'.length) : domain;
      // The return path of system mail (bounce+<msg>@bounces.<SERVICE_DOMAIN>): the service domain has no domain row.
      if (isReturnPath(address) && name === deps.serviceDomain) return;
      const [row] = await db.select({ id: d.id, mx: d.mxVerified }).from(d).where(eq(d.domain, name));
      if (!row || (row.mx !== 1 && !isReturnPath(address))) throw new AppError(550, 'unknown_domain', `5.1.2 <${address}>: ${name} is not a verified domain here`);
    },

    /**
     * DATA: a report sent to one of our return paths (bounce, complaint) is applied to the message it
     * is about; mail for the domains' mailboxes is persisted before the 250, then delivered.
     */
    async receive(raw: Buffer, env: Envelope): Promise<string[]> {
      const returnPaths = env.rcpts.filter(isReturnPath);
      if (returnPaths.length > 0) {
        const report = await parseReport(raw, { envelopeTo: returnPaths, serviceDomain: deps.serviceDomain });
        if (report) await deps.reports.apply(report);
      }
      if (returnPaths.length === env.rcpts.length) return [];
      const mail = await simpleParser(raw);
      const auth = await scoreMessage(raw, { ip: env.ip, helo: env.helo, sender: env.from, mta: deps.serviceDomain, resolver: deps.resolver });
      const byDomain = new Map<string, string[]>();
      for (const r of env.rcpts.filter((a) => !isReturnPath(a))) byDomain.set(split(r).domain, [...(byDomain.get(split(r).domain) ?? []), r.toLowerCase()]);
      const ids: string[] = [];
      for (const [name, rcpts] of byDomain) {
        const domain = await receivingDomain(name);
        if (domain) ids.push(await acceptFor(domain, rcpts.sort(), raw, mail, env, auth));
      }
      return ids;
    },

    /** Workflow step: one `dlv_` row per matched route (deterministic ids, so a retry makes no duplicates). */
    async prepareDeliveries(messageId: string): Promise<{ deliveryIds: string[]; keepsNoCopy: boolean }> {
      const [m] = await db.select().from(schema.messages).where(eq(schema.messages.id, messageId));
      if (!m?.domainId || !m.userId) return { deliveryIds: [], keepsNoCopy: false };
      const [dom] = await db.select({ zero: d.zeroRetention, key: d.encPublicKey }).from(d).where(eq(d.id, m.domainId));
      const byRoute = new Map<string, { route: Awaited<ReturnType<RouteService['match']>>; to: string[] }>();
      for (const rcpt of m.toAddrs) {
        const route = await deps.routes.match(m.domainId, split(rcpt).local);
        if (route) byRoute.set(route.id, { route, to: [...(byRoute.get(route.id)?.to ?? []), rcpt] });
      }
      const ids: string[] = [];
      for (const { route, to } of byRoute.values()) {
        const row = await deps.deliveries.create({
          id: hashId('dlv', messageId, route!.id), userId: m.userId, messageId, routeId: route!.id, domainId: m.domainId, url: route!.url,
          kind: 'inbound', payload: { to: to.map((address) => ({ address })) }, workflowId: `inbound-${messageId}`,
        });
        ids.push(row.id);
      }
      return { deliveryIds: ids, keepsNoCopy: dom?.zero === 1 || Boolean(dom?.key) };
    },

    /** Workflow step after the last attempt: zero-retention and encrypted domains keep no clear copy. */
    async finish(messageId: string): Promise<void> {
      const [m] = await db.select({ domainId: schema.messages.domainId }).from(schema.messages).where(eq(schema.messages.id, messageId));
      if (!m?.domainId) return;
      const [dom] = await db.select().from(d).where(eq(d.id, m.domainId));
      if (!dom) return;
      if (dom.zeroRetention === 1) await db.delete(schema.inboundRaw).where(eq(schema.inboundRaw.messageId, messageId));
      else if (dom.encPublicKey) await db.update(schema.inboundRaw).set({ payloadSealed: null }).where(inArray(schema.inboundRaw.messageId, [messageId]));
    },
  };
}
export type InboundService = ReturnType<typeof createInboundService>;
