import { useQuery } from '@tanstack/react-query';
import { useMemo } from 'react';
import { api, type Outputs } from '../api.js';
import { Chart, PALETTE } from '../charts.js';
import { Badge, ErrorBox, Loading, Table, when } from '../ui.js';
import { plural, rate } from './overview.js';

type Dmarc = Outputs['domains']['dmarc'];
type Tls = Outputs['domains']['tlsReports'];

const DAY = 86_400_000;
/** Every UTC day of `[from, to)` with the row the summary has for it (the summaries list only days with reports). */
function everyDay<R extends { day: number }>(from: number, to: number, rows: R[]) {
  const byDay = new Map(rows.map((r) => [r.day, r]));
  const days: { day: number; row: R | undefined }[] = [];
  for (let day = Math.floor(from / DAY) * DAY; day < to; day += DAY) days.push({ day, row: byDay.get(day) });
  return days;
}

/** GET /api/domains/:id/dmarc: what receivers report about mail sent as the domain, over 30 days. */
export function DmarcPanel({ id, domain }: { id: string; domain: string }) {
  const q = useQuery({ queryKey: ['dmarc', id], queryFn: () => api.domains.dmarc.query({ id, days: 30 }) });
  return (
    <section aria-labelledby="dmarc-h">
      <h2 id="dmarc-h">DMARC reports</h2>
      <p>
        Aggregate reports receivers send to the <code>rua</code> address of the DMARC record: who sends as {domain}, and
        whether it passes aligned.
      </p>
      {q.isPending ? <Loading /> : <ErrorBox error={q.error} />}
      {q.data && (q.data.totals.reports === 0 ? <p>No DMARC report received in 30 days.</p> : <Dmarc d={q.data} />)}
    </section>
  );
}

function Dmarc({ d }: { d: Dmarc }) {
  const chart = useMemo(() => {
    const days = everyDay(d.from, d.to, d.days);
    return {
      times: days.map((x) => x.day),
      lines: [
        { label: 'Aligned', color: PALETTE.green, values: days.map((x) => x.row?.aligned ?? 0) },
        { label: 'Failed', color: PALETTE.red, dash: [8, 4], values: days.map((x) => x.row?.failed ?? 0) },
      ],
    };
  }, [d]);
  const t = d.totals;
  return (
    <>
      <Chart
        title="DMARC per day"
        {...chart}
        summary={`DMARC over 30 days: ${t.messages} messages reported, ${t.aligned} aligned (${rate(t.aligned, t.messages)}), ${t.messages - t.aligned} failed, in ${plural(t.reports, 'report')}.`}
      />
      <Table
        label="Sources sending as the domain"
        head={[
          'Source IP',
          'Messages',
          'Aligned',
          'DKIM aligned',
          'SPF aligned',
          'None / quarantine / reject',
          'Reporters',
        ]}
      >
        {d.sources.map((s) => (
          <tr key={s.source_ip}>
            <td>
              <code>{s.source_ip}</code> {s.platform ? <Badge tone="ok">this platform</Badge> : null}
            </td>
            <td>{s.messages}</td>
            <td>
              {s.aligned} ({rate(s.aligned, s.messages)})
            </td>
            <td>{s.dkim_aligned}</td>
            <td>{s.spf_aligned}</td>
            <td>
              {s.dispositions.none} / {s.dispositions.quarantine} / {s.dispositions.reject}
            </td>
            <td className="wrap">{s.reporters.join(', ')}</td>
          </tr>
        ))}
      </Table>
      {d.failing.length > 0 && (
        <p role="note">
          Sending as the domain without passing:{' '}
          {d.failing.map((f) => `${f.source_ip}${f.platform ? ' (this platform)' : ''}: ${f.messages}`).join('; ')}.
        </p>
      )}
      <Table label="Reporters" head={['Reporter', 'Reports', 'Messages', 'Last report']}>
        {d.reporters.map((r) => (
          <tr key={r.reporter}>
            <td className="wrap">{r.reporter}</td>
            <td>{r.reports}</td>
            <td>{r.messages}</td>
            <td>{when(r.last_report_at)}</td>
          </tr>
        ))}
      </Table>
    </>
  );
}

/** GET /api/domains/:id/tls-reports: receivers' RFC 8460 reports of TLS sessions with the domain's MX hosts. */
export function TlsPanel({ id }: { id: string }) {
  const q = useQuery({ queryKey: ['tls-reports', id], queryFn: () => api.domains.tlsReports.query({ id, days: 30 }) });
  return (
    <section aria-labelledby="tls-h">
      <h2 id="tls-h">TLS reports</h2>
      {q.isPending ? <Loading /> : <ErrorBox error={q.error} />}
      {q.data && (q.data.totals.reports === 0 ? <p>No TLS report received in 30 days.</p> : <TlsReports t={q.data} />)}
    </section>
  );
}

function TlsReports({ t }: { t: Tls }) {
  const chart = useMemo(() => {
    const days = everyDay(t.from, t.to, t.days);
    return {
      times: days.map((x) => x.day),
      lines: [
        { label: 'Successful sessions', color: PALETTE.green, values: days.map((x) => x.row?.success ?? 0) },
        { label: 'Failed sessions', color: PALETTE.red, dash: [8, 4], values: days.map((x) => x.row?.failure ?? 0) },
      ],
    };
  }, [t]);
  const { success, failure, reports } = t.totals;
  return (
    <>
      <Chart
        title="TLS sessions per day"
        {...chart}
        summary={`TLS over 30 days: ${success} successful and ${failure} failed sessions (${rate(failure, success + failure)} failed), in ${plural(reports, 'report')}.`}
      />
      {t.failure_types.length > 0 ? (
        <Table label="TLS failures by type" head={['Result type', 'Sessions']}>
          {t.failure_types.map((f) => (
            <tr key={f.result_type}>
              <td>
                <code>{f.result_type}</code>
              </td>
              <td>{f.sessions}</td>
            </tr>
          ))}
        </Table>
      ) : (
        <p>No failed session reported.</p>
      )}
    </>
  );
}
