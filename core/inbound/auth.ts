import { authenticate } from 'mailauth';
import type { Resolve } from '../dns.js';

/** `arc`: the ARC chain's verdict (`pass`, `fail`, `none` when the message carries no ARC set). */
export type AuthVerdicts = {
  spf: string | null;
  dkim: string | null;
  dmarc: string | null;
  spam: string | null;
  arc: string | null;
};
const NOT_SCORED: AuthVerdicts = { spf: null, dkim: null, dmarc: null, spam: null, arc: null };

/**
 * Scores SPF, DKIM, DMARC and the ARC chain with mailauth, its lookups made by `resolve` (DNS_SERVERS, answers
 * kept a minute: core/inbound/service.ts). Bounded in time: a slow resolver
 * must not hold the SMTP transaction, so after `timeoutMs` the message is delivered unscored (nulls).
 */
export async function scoreMessage(
  raw: Buffer,
  opts: { ip: string; helo: string; sender: string; mta: string; resolve: Resolve; timeoutMs?: number },
): Promise<AuthVerdicts & { dmarcPolicy?: string | null }> {
  const scoring = authenticate(raw, {
    ip: opts.ip,
    helo: opts.helo,
    sender: opts.sender,
    mta: opts.mta,
    resolver: opts.resolve as never,
    disableBimi: true,
  } as never)
    .then((r) => ({
      spf: r.spf ? String(r.spf.status?.result ?? null) : null,
      dkim: r.dkim?.results?.length ? String(r.dkim.results[0]!.status?.result ?? null) : 'none',
      dmarc: r.dmarc ? String(r.dmarc.status?.result ?? null) : null,
      spam: null,
      arc: r.arc ? String(r.arc.status?.result ?? 'none') : null,
      // The From domain's published policy (the inbound policy may refuse a DMARC fail of `p=reject`); not stored.
      dmarcPolicy: r.dmarc && 'policy' in r.dmarc ? ((r.dmarc as { policy?: string }).policy ?? null) : null,
    }))
    .catch(() => NOT_SCORED);
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<AuthVerdicts & { dmarcPolicy?: string | null }>((resolve) => {
    timer = setTimeout(() => resolve(NOT_SCORED), opts.timeoutMs ?? 5000);
  });
  try {
    return await Promise.race([scoring, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
