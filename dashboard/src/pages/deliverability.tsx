import { useQuery } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { Chart, PALETTE } from '../charts.js';
import { Badge, ErrorBox, Field, Loading, Page, Table, when } from '../ui.js';
import { plural, rate, useActivity } from './overview.js';
import { EgressOperator, EgressOutcomes } from './egress.js';

type Site = {
  site: string;
  domains: string[];
  sources: string[];
  limits: Record<string, string | number | null>;
  openConnections: number;
  suspension: { until: number; cause: string; rule: string | null } | null;
  overrides: { name: string; value: string; until: number; cause: string }[];
};
type Action = { site: string; action: string; rule: string; cause: string; createdAt: number; expiresAt: number };
type Report = { shapingFile: string | null; sites: Site[]; recentActions: Action[] };

const TOKEN_KEY = 'svc.operatorToken';

/** GET /api/deliverability/sites with the operator credential (OPERATOR_TOKEN), kept for this tab only. */
async function load(token: string): Promise<Report> {
  const res = await fetch('/api/deliverability/sites', { headers: { authorization: `Bearer ${token}` } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error((body as { error?: string }).error ?? `HTTP ${res.status}`);
  return body as Report;
}

const limitsText = (l: Site['limits']) =>
  Object.entries(l)
    .filter(([, v]) => v !== null)
    .map(([k, v]) => `${k} = ${v}`)
    .join(', ');

const share = (n: number, of: number) => (of ? (n / of) * 100 : null);
const percent = (v: number | null) => (v === null ? '—' : `${v.toFixed(2)}%`);

/**
 * The account's complaint and bounce rates per day (GET /api/metrics), as the complaint guard and the
 * mailbox providers reckon them: complaints / delivered, bounces / (delivered + bounced).
 */
function Rates() {
  const q = useActivity('day');
  const m = q.data;
  const chart = useMemo(
    () =>
      m && {
        times: m.series.map((b) => b.t),
        lines: [
          {
            label: 'Complaint rate',
            color: PALETTE.purple,
            values: m.series.map((b) => share(b.complained, b.delivered)),
          },
          {
            label: 'Bounce rate',
            color: PALETTE.red,
            dash: [8, 4],
            values: m.series.map((b) => share(b.bounced, b.delivered + b.bounced)),
          },
        ],
      },
    [m],
  );
  const t = m?.totals;
  return (
    <section aria-labelledby="rates-h">
      <h2 id="rates-h">Your complaint and bounce rates</h2>
      <p>
        Gmail and Yahoo treat a complaint rate above 0.3% as a reason to block a sender; keep it under 0.1%. A day
        without delivered mail has no rate.
      </p>
      {q.isPending ? <Loading /> : <ErrorBox error={q.error} />}
      {chart && t && (
        <Chart
          title="Complaint and bounce rates per day"
          {...chart}
          format={percent}
          unit="%"
          summary={`Over the last 30 days: complaint rate ${rate(t.complained, t.delivered)} (${plural(t.complained, 'complaint')} of ${t.delivered} delivered), bounce rate ${rate(t.bounced, t.delivered + t.bounced)} (${plural(t.bounced, 'bounce')} of ${t.delivered + t.bounced}).`}
        />
      )}
    </section>
  );
}

/**
 * Traffic shaping per destination site (docs/deliverability.md): limits in force, open connections, suspensions
 * and their causes; outcomes by egress source and pool, and for the operator the sources, pools and assignments.
 */
export function Deliverability() {
  const [token, setToken] = useState(() => sessionStorage.getItem(TOKEN_KEY) ?? '');
  const [draft, setDraft] = useState('');
  const report = useQuery({
    queryKey: ['deliverability', token],
    queryFn: () => load(token),
    enabled: token !== '',
    refetchInterval: 5000,
  });
  if (!token) {
    return (
      <Page title="Deliverability">
        <Rates />
        <EgressOutcomes />
        <h2>Destination sites</h2>
        <p>
          Destination sites, their limits and suspensions, and the egress sources and pools, are for the operator of
          this service.
        </p>
        <form
          className="card narrow"
          onSubmit={(e) => {
            e.preventDefault();
            sessionStorage.setItem(TOKEN_KEY, draft);
            setToken(draft);
          }}
        >
          <Field
            label="Operator token (OPERATOR_TOKEN)"
            type="password"
            required
            value={draft}
            onChange={(e) => setDraft(e.target.value)}
          />
          <button type="submit">Show sites</button>
        </form>
      </Page>
    );
  }
  const forget = () => {
    sessionStorage.removeItem(TOKEN_KEY);
    setToken('');
  };
  return (
    <Page
      title="Deliverability"
      actions={
        <button type="button" className="small" onClick={forget}>
          Forget the token
        </button>
      }
    >
      <Rates />
      <EgressOutcomes />
      <h2>Destination sites</h2>
      {report.isPending ? <Loading /> : <ErrorBox error={report.error} />}
      {report.data && (
        <p>
          Shaping file: <code>{report.data.shapingFile ?? 'built in'}</code>. A site is the set of MX hosts of a
          recipient domain.
        </p>
      )}
      {report.data && report.data.sites.length === 0 && <p>No mail has gone to a remote site yet.</p>}
      {report.data && report.data.sites.length > 0 && (
        <Table label="Destination sites" head={['Site', 'Domains', 'Limits in force', 'Open connections', 'State']}>
          {report.data.sites.map((s) => (
            <tr key={s.site}>
              <td className="wrap">{s.site}</td>
              <td className="wrap">{s.domains.join(', ')}</td>
              <td className="wrap">
                {limitsText(s.limits)}
                {s.overrides.map((o) => (
                  <div key={o.name}>
                    <small>
                      {o.name} = {o.value} until {when(o.until)}: {o.cause}
                    </small>
                  </div>
                ))}
              </td>
              <td>{s.openConnections}</td>
              <td className="wrap">
                {s.suspension ? (
                  <>
                    <Badge tone="bad">suspended until {when(s.suspension.until)}</Badge>{' '}
                    <small>{s.suspension.cause}</small>
                  </>
                ) : (
                  <Badge tone="ok">sending</Badge>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      {report.data && report.data.recentActions.length > 0 && (
        <Table label="Automation actions" head={['When', 'Site', 'Action', 'Until', 'Rule', 'Answer']}>
          {report.data.recentActions.map((a) => (
            <tr key={`${a.site}-${a.createdAt}-${a.action}`}>
              <td>{when(a.createdAt)}</td>
              <td className="wrap">{a.site}</td>
              <td>{a.action}</td>
              <td>{when(a.expiresAt)}</td>
              <td className="wrap">
                <code>{a.rule}</code>
              </td>
              <td className="wrap">{a.cause}</td>
            </tr>
          ))}
        </Table>
      )}
      <EgressOperator token={token} />
    </Page>
  );
}
