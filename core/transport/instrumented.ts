import { inSpan } from '../tracing.js';
import { deliverDuration, egressLabel, egressResults, recipientOutcomes, siteOf, since } from '../metrics.js';
import type { EgressCounter } from '../egress/counters.js';
import type { RecipientResult } from '../mail/recipients.js';
import { isThrottled, type OutboundTransport } from './transport.js';

/** The outcome of a whole transaction: its recipients' shared status, or `mixed`. */
const transactionResult = (results: RecipientResult[]) => {
  const kinds = new Set(results.map((r) => r.status));
  return kinds.size === 1 ? [...kinds][0]! : 'mixed';
};

/**
 * A transport that counts what it does: each transaction's duration (svc_deliver_duration_seconds) and
 * each recipient's outcome by site (svc_recipient_outcomes_total) and by egress source and pool
 * (svc_egress_results_total, and per account in `egress`: core/egress/counters.ts), and a span around the
 * transaction. A result without a source (capture mode) is not counted by source.
 */
export function instrumentTransport(inner: OutboundTransport, egress?: EgressCounter): OutboundTransport {
  return {
    group: (recipients) => inner.group(recipients),
    close: () => inner.close(),
    async send(messageId, envelope, raw, subject, ctx) {
      const started = performance.now();
      const attributes = {
        'svc.message_id': messageId,
        'svc.site': siteOf(envelope.to[0] ?? ''),
        'svc.recipients': envelope.to.length,
      };
      const results = await inSpan('smtp transaction', attributes, () =>
        inner.send(messageId, envelope, raw, subject, ctx),
      );
      // Held back by shaping: no transaction was made; each recipient counts as throttled.
      if (isThrottled(results)) {
        for (const to of envelope.to) recipientOutcomes.inc({ result: 'throttled', site: siteOf(to, results.site) });
        return results;
      }
      deliverDuration.observe({ result: transactionResult(results) }, since(started));
      for (const r of results) {
        recipientOutcomes.inc({ result: r.status, site: siteOf(r.address, r.site) });
        if (!r.source) continue;
        const pool = r.pool ?? '';
        egressResults.inc({ source: egressLabel(r.source), pool: egressLabel(pool), result: r.status });
        egress?.count(ctx?.owner, r.source, pool, r.status);
      }
      return results;
    },
  };
}
