import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState, type FormEvent } from 'react';
import { api, type Outputs } from '../api.js';
import { Link, navigate } from '../router.js';
import { Badge, CopyButton, ErrorBox, Field, Loading, Notice, Page, Select, Table, usePaged, when } from '../ui.js';
import { DmarcPanel, TlsPanel } from './domain-reports.js';
import { InboundPolicy } from './inbound-policy.js';
import { ActivityPanel } from './overview.js';

type DomainRow = Outputs['domains']['list'][number];
const CHECKS = [
  ['mx_verified', 'MX'],
  ['spf_verified', 'SPF'],
  ['dkim_verified', 'DKIM'],
  ['dmarc_verified', 'DMARC'],
] as const;

function Checks({ d }: { d: Pick<DomainRow, (typeof CHECKS)[number][0]> }) {
  return (
    <ul className="checks" aria-label="Checks">
      {CHECKS.map(([k, label]) => (
        <li key={k}>
          <Badge tone={d[k] ? 'ok' : 'warn'}>
            {label} {d[k] ? 'passing' : 'not yet'}
          </Badge>
        </li>
      ))}
    </ul>
  );
}

export function Domains() {
  const list = useQuery({ queryKey: ['domains'], queryFn: () => api.domains.list.query() });
  const { slice, controls } = usePaged(list.data);
  return (
    <Page title="Domains">
      {list.isPending ? <Loading /> : <ErrorBox error={list.error} />}
      {list.data && list.data.length === 0 && <p>No domains yet: add yours or claim a hosted subdomain below.</p>}
      {list.data && list.data.length > 0 && (
        <Table label="Domains" head={['Domain', 'Status', 'Checks', 'Inbound webhook']}>
          {slice.map((d) => (
            <tr key={d.id}>
              <td>
                <Link to={`/domains/${d.id}`}>{d.domain}</Link>
              </td>
              <td>
                <Badge tone={d.status === 'verified' ? 'ok' : d.status === 'failed' ? 'bad' : 'warn'}>{d.status}</Badge>
              </td>
              <td>
                <Checks d={d} />
              </td>
              <td>{d.webhookUrl ?? '—'}</td>
            </tr>
          ))}
        </Table>
      )}
      {controls}
      <div className="columns">
        <AddDomain />
        <ClaimSubdomain />
      </div>
    </Page>
  );
}

function AddDomain() {
  const [domain, setDomain] = useState('');
  const add = useMutation({
    mutationFn: () => api.domains.add.mutate({ domain }),
    onSuccess: (r) => navigate(`/domains/${r.domain.id}`),
  });
  return (
    <form
      className="card"
      onSubmit={(e) => {
        e.preventDefault();
        add.mutate();
      }}
    >
      <h2>Add your domain</h2>
      <Field
        label="Domain name"
        placeholder="example.com"
        required
        value={domain}
        onChange={(e) => setDomain(e.target.value)}
      />
      <ErrorBox error={add.error} />
      <button type="submit" disabled={add.isPending}>
        Add domain
      </button>
    </form>
  );
}

function ClaimSubdomain() {
  const suggest = useQuery({ queryKey: ['subdomain-suggest'], queryFn: () => api.subdomains.suggest.query() });
  const [label, setLabel] = useState('');
  const [typed, setTyped] = useState('');
  // Availability is checked as one types (after a short pause).
  useEffect(() => {
    const t = setTimeout(() => setTyped(label.trim()), 300);
    return () => clearTimeout(t);
  }, [label]);
  const check = useQuery({
    queryKey: ['subdomain-check', typed],
    queryFn: () => api.subdomains.check.query({ name: typed }),
    enabled: typed.length > 0,
  });
  const claim = useMutation({
    mutationFn: () => api.subdomains.claim.mutate({ subdomain: label.trim() || suggest.data!.subdomain }),
    onSuccess: (r) => navigate(`/domains/${r.domain.id}`),
  });
  return (
    <form
      className="card"
      onSubmit={(e) => {
        e.preventDefault();
        claim.mutate();
      }}
    >
      <h2>Claim a hosted subdomain</h2>
      <p>Ready at once: its DNS is served by this service{suggest.data ? ` under ${suggest.data.base}` : ''}.</p>
      <Field
        label="Subdomain"
        placeholder={suggest.data?.subdomain ?? ''}
        value={label}
        onChange={(e) => setLabel(e.target.value)}
        hint={suggest.data ? `Leave empty to take ${suggest.data.domain}.` : undefined}
      />
      {typed && check.data && (
        <p role="status">
          {check.data.available
            ? `${check.data.domain} is available.`
            : `${check.data.domain ?? typed}: ${check.data.reason ?? 'not available'}`}
        </p>
      )}
      <ErrorBox error={claim.error ?? suggest.error} />
      <button type="submit" disabled={claim.isPending || (!label && !suggest.data)}>
        Claim subdomain
      </button>
    </form>
  );
}

export function DomainDetail({ id }: { id: string }) {
  const qc = useQueryClient();
  // While verification runs, the status is re-read every 5 seconds: each check turns green as DNS catches up.
  const detail = useQuery({
    queryKey: ['domain', id],
    queryFn: () => api.domains.get.query({ id }),
    refetchInterval: (q) => (q.state.data && q.state.data.domain.status === 'pending' ? 5_000 : false),
  });
  const verify = useMutation({
    mutationFn: () => api.domains.verify.mutate({ id }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['domain', id] }),
  });
  const [deleted, setDeleted] = useState<Outputs['domains']['delete'] | undefined>();
  const remove = useMutation({
    mutationFn: () => api.domains.delete.mutate({ id }),
    onSuccess: (r) => {
      setDeleted(r);
      void qc.invalidateQueries({ queryKey: ['domains'] });
    },
  });
  if (deleted) {
    return (
      <Page title="Domain deleted">
        <h2>Cleanup report</h2>
        <ul>
          <li>
            Provider registrations removed:{' '}
            {deleted.cleanup.deregistered.length ? deleted.cleanup.deregistered.join(', ') : 'none'}
          </li>
          <li>Hosted DNS records deleted: {deleted.cleanup.dnsDeleted}</li>
          {deleted.cleanup.warnings.map((w) => (
            <li key={w}>Warning: {w}</li>
          ))}
        </ul>
        <p>
          <Link to="/domains">Back to domains</Link>
        </p>
      </Page>
    );
  }
  if (!detail.data)
    return <Page title="Domain">{detail.isPending ? <Loading /> : <ErrorBox error={detail.error} />}</Page>;
  const { domain: d, dns } = detail.data;
  return (
    <Page title={d.domain}>
      <section aria-labelledby="status-h">
        <h2 id="status-h">Verification</h2>
        <p role="status">
          Status:{' '}
          <Badge tone={d.status === 'verified' ? 'ok' : d.status === 'failed' ? 'bad' : 'warn'}>{d.status}</Badge> ·
          last checked {when(d.last_checked_at)}
          {d.status === 'pending' ? ' · updating every 5 s' : ''}
        </p>
        <Checks d={d} />
        <button type="button" onClick={() => verify.mutate()} disabled={verify.isPending}>
          Check DNS now
        </button>
        {verify.data && (
          <Notice>
            {verify.data.status === 'verified' ? 'Verified.' : 'Still pending.'} This domain's own MX record{' '}
            {verify.data.checks.mx ? 'found' : 'not found yet'}
            {verify.data.sending.error ? `; sending: ${verify.data.sending.error}` : ''}.
          </Notice>
        )}
        <ErrorBox error={verify.error} />
      </section>
      {dns.length > 0 && (
        <section aria-labelledby="dns-h">
          <h2 id="dns-h">DNS records to publish</h2>
          <Table label="DNS records" head={['Type', 'Name', 'Value', 'Priority']}>
            {dns.map((r) => (
              <tr key={`${r.type}${r.name}${r.value}`}>
                <td>{r.type}</td>
                <td>
                  <code>{r.name}</code> <CopyButton value={r.name} what={`${r.type} name ${r.name}`} />
                </td>
                <td className="wrap">
                  <code>{r.value}</code> <CopyButton value={r.value} what={`${r.type} value for ${r.name}`} />
                </td>
                <td>{r.priority ?? ''}</td>
              </tr>
            ))}
          </Table>
        </section>
      )}
      {dns.length === 0 && <p>A hosted subdomain: its records are served by this service, nothing to publish.</p>}
      <ActivityPanel domainId={d.id} name={d.domain} />
      <DmarcPanel id={d.id} domain={d.domain} />
      <TlsPanel id={d.id} />
      <Webhook domain={d} />
      <InboundPolicy domainId={d.id} />
      <DkimRotation id={d.id} />
      <section aria-labelledby="danger-h">
        <h2 id="danger-h">Delete</h2>
        <p>
          Deleting removes the domain, its routes and keys scoped to it, and tears down provider and hosted DNS records.
        </p>
        <ErrorBox error={remove.error} />
        <button
          type="button"
          className="danger"
          disabled={remove.isPending}
          onClick={() => {
            if (confirm(`Delete ${d.domain}?`)) remove.mutate();
          }}
        >
          Delete {d.domain}
        </button>
      </section>
    </Page>
  );
}

/** POST /api/domains/:id/dkim/rotate: a key under a new selector, published, then signing switches to it (docs/deliverability.md). */
function DkimRotation({ id }: { id: string }) {
  const qc = useQueryClient();
  const rotate = useMutation({
    mutationFn: () => api.domains.rotateDkim.mutate({ id }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['domain', id] }),
  });
  const r = rotate.data?.rotation;
  return (
    <section aria-labelledby="dkim-h">
      <h2 id="dkim-h">DKIM key</h2>
      <p>
        Rotating creates a key under a new selector and switches signing to it once its record resolves; the old
        selector stays published for a grace period, so mail signed before verifies meanwhile.
      </p>
      <ErrorBox error={rotate.error} />
      <button type="button" onClick={() => rotate.mutate()} disabled={rotate.isPending}>
        Rotate DKIM key
      </button>
      {r && (
        <Notice>
          Rotation started: new selector <code>{r.selector}</code> (signing now: <code>{r.previousSelector}</code>).{' '}
          {r.published
            ? 'Published at once in the hosted zone.'
            : 'Publish the new record listed under DNS records; signing switches once it resolves.'}
        </Notice>
      )}
    </section>
  );
}

function Webhook({ domain: d }: { domain: Outputs['domains']['get']['domain'] }) {
  const qc = useQueryClient();
  const [url, setUrl] = useState(d.webhookUrl ?? '');
  const [ackMode, setAckMode] = useState<'lenient' | 'ack'>(d.webhookAckMode ?? 'lenient');
  const set = useMutation({
    mutationFn: (e: FormEvent) => {
      e.preventDefault();
      return api.webhooks.set.mutate({ id: d.id, url, ackMode });
    },
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['domain', d.id] }),
  });
  const test = useMutation({ mutationFn: () => api.webhooks.test.mutate({ id: d.id }) });
  const st = d.webhookStatus;
  return (
    <section aria-labelledby="webhook-h">
      <h2 id="webhook-h">Inbound webhook</h2>
      <p>
        Mail to any address at {d.domain} is posted here (address routes on the <Link to="/inbound">Inbound</Link> page
        take precedence).
      </p>
      <form onSubmit={(e) => set.mutate(e)} className="narrow">
        <Field
          label="Webhook URL"
          type="url"
          required
          placeholder="https://example.com/hooks/mail"
          value={url}
          onChange={(e) => setUrl(e.target.value)}
        />
        <Select
          label="Acknowledgement"
          value={ackMode}
          onChange={(e) => setAckMode(e.target.value as 'lenient' | 'ack')}
          options={[
            ['lenient', 'Any 2xx answer'],
            ['ack', '2xx with {"status":"ok"} or x-svc-ack: ok'],
          ]}
        />
        <ErrorBox error={set.error} />
        <button type="submit" disabled={set.isPending}>
          Save webhook
        </button>
      </form>
      {set.data && (
        <Notice>
          Saved. Signing secret (shown now; also on the Inbound page): <code>{set.data.signingSecret}</code>{' '}
          <CopyButton value={set.data.signingSecret} what="signing secret" />
        </Notice>
      )}
      {d.webhookUrl && (
        <>
          <p>
            Last delivery:{' '}
            {st?.status
              ? `${st.status}${st.code ? ` (HTTP ${st.code})` : ''}${st.message ? `: ${st.message}` : ''} at ${when(st.at)}`
              : 'none yet'}
            {st?.unhealthy ? ` · unhealthy after ${st.consecutiveFailures} failures` : ''}
          </p>
          <button type="button" onClick={() => test.mutate()} disabled={test.isPending}>
            Send a test event
          </button>
          {test.data && (
            <p role="status" className={test.data.ok ? 'ok-text' : 'error'}>
              Test event {test.data.ok ? 'accepted' : 'not accepted'}:{' '}
              {test.data.status ? `HTTP ${test.data.status}` : 'no response'}
            </p>
          )}
          <ErrorBox error={test.error} />
        </>
      )}
    </section>
  );
}
