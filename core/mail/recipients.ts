import type { BounceClass } from './bounce-classes.js';

/** What became of one recipient in one SMTP transaction: 250 (sent), 4xx/network (deferred), 5xx (bounced). */
export type RecipientStatus = 'sent' | 'deferred' | 'bounced';
/** `site`: the shaping site (MX rollup) the transaction went to, for metrics; MX delivery only. */
export type RecipientResult = {
  address: string;
  status: RecipientStatus;
  response: string;
  bounceClass?: BounceClass;
  site?: string;
  /** The egress source and pool the transaction left from (docs/transport-policy.md). */
  source?: string;
  pool?: string;
  /** What the transport policy noted (an MTA-STS `testing` failure, say), kept on the trail entry. */
  tls?: string;
};

/** Where one recipient of an outbound message stands (kept on the message row, shown by GET /api/messages/:id). */
export type RecipientState = {
  status: 'pending' | 'sent' | 'deferred' | 'bounced';
  attempts: number;
  response?: string;
  at?: number;
  /** Why it failed or was deferred (docs/deliverability.md, "Bounce classes"); absent once sent. */
  bounceClass?: BounceClass;
};
export type RecipientStates = Record<string, RecipientState>;
/** One SMTP transaction of a message (the delivery trail): which run, which recipients, what the server answered. */
/**
 * `throttled`: no transaction, its recipients' site could not take it yet (shaping); `response` says what it waits for.
 * `refused`: no transaction, the send gate refused the message as it left (core/gate/departure.ts); `response` says why.
 */
export type TrailEntry = {
  at: number;
  workflowId: string;
  to: string[];
  status: 'sent' | 'deferred' | 'bounced' | 'mixed' | 'throttled' | 'refused';
  response: string;
  /** The egress source the transaction left from (absent for no transaction, capture and older entries). */
  source?: string;
  /** What the transport policy noted (MTA-STS, a domain's TLS requirement). */
  tls?: string;
};
export type MessageStatus = 'sent' | 'deferred' | 'bounced';

/**
 * The bare, lowercased address of `Name <addr>`. Linear: the bracketed part cannot hold `<`, so a search
 * from one `<` stops at the next (with `[^>]`, a run of `<` cost up to 320 steps each).
 */
export const bareAddress = (a: string) => (/<([^<>]{1,320})>/.exec(a)?.[1] ?? a).trim().toLowerCase();
const bare = bareAddress;

/** Every envelope recipient of a message (To, Cc, Bcc), bare and lowercased, each once. */
export function recipientsOf(row: {
  toAddrs: string[];
  ccAddrs?: string[] | null;
  bccAddrs?: string[] | null;
}): string[] {
  return [...new Set([...row.toAddrs, ...(row.ccAddrs ?? []), ...(row.bccAddrs ?? [])].map(bare))];
}

export const isDone = (s: RecipientState | undefined) => s?.status === 'sent' || s?.status === 'bounced';

/** The recipients a (re)try still owes: those with no final outcome recorded. */
export function owed(all: string[], states: RecipientStates | null | undefined): string[] {
  return all.filter((a) => !isDone(states?.[a]));
}

/** Applies one transaction's answers: the new states of its recipients and its trail entry. */
export function applyResults(
  states: RecipientStates,
  results: RecipientResult[],
  workflowId: string,
  at = Date.now(),
): { changed: RecipientStates; entry: TrailEntry } {
  const changed: RecipientStates = {};
  for (const r of results) {
    changed[r.address] = {
      status: r.status,
      attempts: (states[r.address]?.attempts ?? 0) + 1,
      response: r.response.slice(0, 500),
      at,
      ...(r.status !== 'sent' && r.bounceClass ? { bounceClass: r.bounceClass } : {}),
    };
    states[r.address] = changed[r.address]!;
  }
  const kinds = new Set(results.map((r) => r.status));
  const status = kinds.size === 1 ? [...kinds][0]! : 'mixed';
  const response = results.find((r) => r.status !== 'sent')?.response ?? results[0]?.response ?? '';
  const source = results.find((r) => r.source)?.source;
  const tls = results.find((r) => r.tls)?.tls;
  return {
    changed,
    entry: {
      at,
      workflowId,
      to: results.map((r) => r.address),
      status,
      response: response.slice(0, 500),
      ...(source ? { source } : {}),
      ...(tls ? { tls: tls.slice(0, 500) } : {}),
    },
  };
}

/** The message's status from its recipients: any still owed → deferred; else sent if anyone got it, else bounced. */
export function messageStatus(all: string[], states: RecipientStates): MessageStatus {
  if (all.some((a) => !isDone(states[a]))) return 'deferred';
  return all.some((a) => states[a]?.status === 'sent') ? 'sent' : 'bounced';
}
