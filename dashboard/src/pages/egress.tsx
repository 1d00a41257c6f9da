import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.js';
import { Badge, ErrorBox, Field, Loading, Notice, Select, Table, when } from '../ui.js';

type Counts = { sent: number; deferred: number; bounced: number };
type OutcomeRow = Counts & { source: string; pool: string };
type Relay = { host: string; port: number; security: string };
type Source = {
  name: string;
  bind_address: string | null;
  ehlo_name: string | null;
  relay: Relay | null;
  suspended: { site: string; until: number; cause: string }[];
};
type Pool = { name: string; label: string; type: string; sources: { name: string; weight: number }[] };
/** GET /api/operator/egress (docs/egress.md): the operator's sources, pools, streams and assignments. */
type EgressView = {
  sources: Source[];
  pools: Pool[];
  streams: { transactional: string; bulk: string };
  assignments: { account_id: string; email: string; stream: string; pool: string }[];
  domains: { id: string; domain: string; account_id: string; pool: string }[];
};

const deliveredShare = (r: Counts) => {
  const all = r.sent + r.deferred + r.bounced;
  return all ? `${((r.sent / all) * 100).toFixed(1)}%` : '—';
};

/** Rows of outcomes per source and pool, with a total row. */
function OutcomeTable({ label, rows, totals }: { label: string; rows: OutcomeRow[]; totals: Counts }) {
  if (rows.length === 0) return <p>No mail has left through an egress source in this period.</p>;
  return (
    <Table label={label} head={['Source', 'Pool', 'Sent', 'Deferred', 'Bounced', 'Accepted']}>
      {rows.map((r) => (
        <tr key={`${r.source}/${r.pool}`}>
          <td>{r.source}</td>
          <td>{r.pool}</td>
          <td>{r.sent}</td>
          <td>{r.deferred}</td>
          <td>{r.bounced}</td>
          <td>{deliveredShare(r)}</td>
        </tr>
      ))}
      <tr>
        <th scope="row" colSpan={2}>
          Total
        </th>
        <td>{totals.sent}</td>
        <td>{totals.deferred}</td>
        <td>{totals.bounced}</td>
        <td>{deliveredShare(totals)}</td>
      </tr>
    </Table>
  );
}

/** The account's outcomes per egress source and pool over the last 24 hours (GET /api/metrics/egress). */
export function EgressOutcomes() {
  const q = useQuery({ queryKey: ['metrics', 'egress'], queryFn: () => api.metrics.egress.query({}) });
  return (
    <section aria-labelledby="egress-h">
      <h2 id="egress-h">By source and pool</h2>
      <p>
        Your recipients over the last 24 hours by the egress source their mail left from and the pool it was routed to:
        sent (the receiving server accepted), deferred (retried later), bounced (refused).
      </p>
      {q.isPending ? <Loading /> : <ErrorBox error={q.error} />}
      {q.data && <OutcomeTable label="Your outcomes by source and pool" rows={q.data.rows} totals={q.data.totals} />}
    </section>
  );
}

/** An operator route with the operator credential: its JSON answer, or its error message thrown. */
async function operator<T>(token: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const answer = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error((answer as { error?: string }).error ?? `HTTP ${res.status}`);
  return answer as T;
}

const relayText = (r: Relay) => `${r.host}:${r.port} (${r.security})`;

/** Assigns a pool to an account (per stream) or to a domain; the empty choice removes the assignment. */
function AssignForm({ token, pools }: { token: string; pools: Pool[] }) {
  const client = useQueryClient();
  const [target, setTarget] = useState<'account' | 'domain'>('account');
  const [id, setId] = useState('');
  const [stream, setStream] = useState('all');
  const [pool, setPool] = useState('');
  const assign = useMutation({
    mutationFn: () =>
      operator(
        token,
        '/api/operator/egress/assign',
        target === 'account'
          ? { account_id: id.trim(), stream, pool: pool || null }
          : { domain_id: id.trim(), pool: pool || null },
      ),
    onSuccess: () => void client.invalidateQueries({ queryKey: ['egress-operator'] }),
  });
  return (
    <form
      className="card narrow"
      aria-labelledby="egress-assign-h"
      onSubmit={(e) => {
        e.preventDefault();
        assign.mutate();
      }}
    >
      <h3 id="egress-assign-h">Assign a pool</h3>
      <Select
        label="Assign to"
        value={target}
        onChange={(e) => setTarget(e.target.value as 'account' | 'domain')}
        options={[
          ['account', 'An account'],
          ['domain', 'A domain'],
        ]}
      />
      <Field
        label={target === 'account' ? 'Account id' : 'Domain id'}
        required
        value={id}
        onChange={(e) => setId(e.target.value)}
        hint={target === 'account' ? 'usr_…' : 'dom_…'}
      />
      {target === 'account' && (
        <Select
          label="Stream"
          value={stream}
          onChange={(e) => setStream(e.target.value)}
          options={[
            ['all', 'All mail'],
            ['transactional', 'Transactional'],
            ['bulk', 'Broadcasts and sequences'],
          ]}
        />
      )}
      <Select
        label="Pool"
        value={pool}
        onChange={(e) => setPool(e.target.value)}
        options={[['', 'None (back to the default)'], ...pools.map((p) => [p.name, `${p.label} (${p.name})`] as const)]}
      />
      <button type="submit" disabled={assign.isPending}>
        Save the assignment
      </button>
      <ErrorBox error={assign.error} />
      {assign.isSuccess && (
        <Notice>
          Saved: new mail of this {target} leaves from {pool || 'the default pool'}.
        </Notice>
      )}
    </form>
  );
}

/** The operator's egress view: sources, pools, streams, assignments and outcomes over every account. */
export function EgressOperator({ token }: { token: string }) {
  const view = useQuery({
    queryKey: ['egress-operator', token],
    queryFn: () => operator<EgressView>(token, '/api/operator/egress'),
  });
  const outcomes = useQuery({
    queryKey: ['egress-operator', 'outcomes', token],
    queryFn: () => operator<{ rows: OutcomeRow[]; totals: Counts }>(token, '/api/operator/egress/outcomes?hours=24'),
  });
  const v = view.data;
  return (
    <section aria-labelledby="egress-op-h">
      <h2 id="egress-op-h">Egress sources and pools</h2>
      {view.isPending ? <Loading /> : <ErrorBox error={view.error} />}
      {v && (
        <>
          <p>
            Transactional mail leaves from pool <strong>{v.streams.transactional}</strong>, broadcasts and sequences
            from pool <strong>{v.streams.bulk}</strong>, unless an account or a domain is assigned another.
          </p>
          <Table label="Egress sources" head={['Source', 'Bind address', 'EHLO name', 'Relay', 'State']}>
            {v.sources.map((s) => (
              <tr key={s.name}>
                <td>{s.name}</td>
                <td>{s.bind_address ?? 'default route'}</td>
                <td className="wrap">{s.ehlo_name ?? 'service domain'}</td>
                <td className="wrap">{s.relay ? relayText(s.relay) : '—'}</td>
                <td className="wrap">
                  {s.suspended.length === 0 ? (
                    <Badge tone="ok">sending</Badge>
                  ) : (
                    s.suspended.map((x) => (
                      <div key={x.site}>
                        <Badge tone="bad">
                          suspended for {x.site} until {when(x.until)}
                        </Badge>{' '}
                        <small>{x.cause}</small>
                      </div>
                    ))
                  )}
                </td>
              </tr>
            ))}
          </Table>
          <Table label="Egress pools" head={['Pool', 'Label', 'Type', 'Sources (weight)']}>
            {v.pools.map((p) => (
              <tr key={p.name}>
                <td>{p.name}</td>
                <td>{p.label}</td>
                <td>{p.type}</td>
                <td className="wrap">{p.sources.map((s) => `${s.name} (${s.weight})`).join(', ')}</td>
              </tr>
            ))}
          </Table>
          {v.assignments.length > 0 && (
            <Table label="Accounts assigned a pool" head={['Account', 'Email', 'Stream', 'Pool']}>
              {v.assignments.map((a) => (
                <tr key={`${a.account_id}/${a.stream}`}>
                  <td>{a.account_id}</td>
                  <td className="wrap">{a.email}</td>
                  <td>{a.stream}</td>
                  <td>{a.pool}</td>
                </tr>
              ))}
            </Table>
          )}
          {v.domains.length > 0 && (
            <Table label="Domains pinned to a pool" head={['Domain', 'Id', 'Account', 'Pool']}>
              {v.domains.map((d) => (
                <tr key={d.id}>
                  <td className="wrap">{d.domain}</td>
                  <td>{d.id}</td>
                  <td>{d.account_id}</td>
                  <td>{d.pool}</td>
                </tr>
              ))}
            </Table>
          )}
          <AssignForm token={token} pools={v.pools} />
        </>
      )}
      <h3>Outcomes over every account, last 24 hours</h3>
      {outcomes.isPending ? <Loading /> : <ErrorBox error={outcomes.error} />}
      {outcomes.data && <OutcomeTable label="Outcomes by source and pool, every account" {...outcomes.data} />}
    </section>
  );
}
