import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.js';
import { Link } from '../router.js';
import { SpamVerdict, tone, useMessagePages } from './messages.js';
import { Badge, CopyButton, ErrorBox, Field, Loading, Notice, Page, Select, Table, usePaged, when } from '../ui.js';

export function Inbound() {
  return (
    <Page title="Inbound">
      <p>
        Mail to your domains goes to webhooks: a domain's catch-all webhook (set on its{' '}
        <Link to="/domains">domain page</Link>, with “Send a test event”) and address routes here, the most specific
        pattern first.
      </p>
      <Routes />
      <HeldMail />
      <InboundMessages />
    </Page>
  );
}

function Routes() {
  const qc = useQueryClient();
  const routes = useQuery({ queryKey: ['routes'], queryFn: () => api.routes.list.query() });
  const domains = useQuery({ queryKey: ['domains'], queryFn: () => api.domains.list.query() });
  const [domainId, setDomainId] = useState('');
  const [address, setAddress] = useState('');
  const [action, setAction] = useState('webhook');
  const [destination, setDestination] = useState('');
  const create = useMutation({
    mutationFn: () =>
      api.routes.create.mutate({
        domainId: domainId || domains.data?.[0]?.id,
        address,
        action,
        destination: destination || undefined,
      }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['routes'] }),
  });
  const remove = useMutation({
    mutationFn: (id: string) => api.routes.delete.mutate({ id }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['routes'] }),
  });
  const { slice, controls } = usePaged(routes.data);
  return (
    <section aria-labelledby="routes-h">
      <h2 id="routes-h">Routes</h2>
      {routes.isPending ? <Loading /> : <ErrorBox error={routes.error ?? remove.error} />}
      {routes.data && routes.data.length === 0 && <p>No routes yet.</p>}
      {slice.length > 0 && (
        <Table label="Routes" head={['Pattern', 'Action', 'Destination', 'Signing secret', '']}>
          {slice.map((r) => (
            <tr key={r.id}>
              <td>
                <code>{r.match_pattern}</code>
              </td>
              <td>{r.action}</td>
              <td className="wrap">{r.destination ?? '—'}</td>
              <td>
                {r.action === 'webhook' ? (
                  <CopyButton value={r.signing_secret} what={`signing secret of ${r.match_pattern}`} />
                ) : (
                  '—'
                )}
              </td>
              <td>
                <button
                  type="button"
                  className="small danger"
                  onClick={() => remove.mutate(r.id)}
                  aria-label={`Delete route ${r.match_pattern}`}
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      {controls}
      <form
        className="card"
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <h3>Add a route</h3>
        <Select
          label="Domain"
          value={domainId}
          onChange={(e) => setDomainId(e.target.value)}
          options={(domains.data ?? []).map((d) => [d.id, d.domain] as const)}
        />
        <Field
          label="Address pattern"
          required
          placeholder="support-*"
          value={address}
          onChange={(e) => setAddress(e.target.value)}
          hint="*, an exact local part, or one wildcard at the start or end."
        />
        <Select
          label="Action"
          value={action}
          onChange={(e) => setAction(e.target.value)}
          options={[
            ['webhook', 'Post to a webhook'],
            ['forward', 'Forward to an address'],
            ['store', 'Keep in the mailbox'],
            ['drop', 'Drop'],
          ]}
        />
        {(action === 'webhook' || action === 'forward') && (
          <Field
            label={action === 'webhook' ? 'Webhook URL' : 'Forward to'}
            required
            value={destination}
            onChange={(e) => setDestination(e.target.value)}
          />
        )}
        <ErrorBox error={create.error} />
        {create.data && <Notice>Route added for {create.data.match_pattern}.</Notice>}
        <button type="submit" disabled={create.isPending}>
          Add route
        </button>
      </form>
    </section>
  );
}

/** Recent inbound messages with their delivery state; replay one (on its page) or many (selected here). */
function InboundMessages() {
  const qc = useQueryClient();
  const { list, rows: inbound, pager } = useMessagePages({ direction: 'inbound' });
  const [picked, setPicked] = useState<Set<string>>(new Set());
  const replay = useMutation({
    mutationFn: () => api.deliveries.retryMany.mutate({ messageIds: [...picked] }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['messages'] }),
  });
  const toggle = (id: string) => {
    const next = new Set(picked);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setPicked(next);
  };
  return (
    <section aria-labelledby="in-h">
      <h2 id="in-h">Received messages</h2>
      {list.isPending ? <Loading /> : <ErrorBox error={list.error} />}
      {list.data && inbound.length === 0 && <p>No inbound mail yet.</p>}
      {inbound.length > 0 && (
        <Table label="Received messages" head={['Replay', 'Subject', 'From', 'To', 'Status', 'Spam', 'Received']}>
          {inbound.map((m) => (
            <tr key={m.id}>
              <td>
                <input
                  type="checkbox"
                  aria-label={`Select ${m.subject ?? m.id}`}
                  checked={picked.has(m.id)}
                  onChange={() => toggle(m.id)}
                />
              </td>
              <td>
                <Link to={`/messages/${m.id}`}>{m.subject || '(no subject)'}</Link>
              </td>
              <td>{m.from}</td>
              <td>{m.to.join(', ')}</td>
              <td>
                <Badge tone={tone(m.status)}>{m.status}</Badge>
              </td>
              <td>
                <SpamVerdict spam={m.spam ?? null} />
              </td>
              <td>{when(m.created_at)}</td>
            </tr>
          ))}
        </Table>
      )}
      {pager}
      {inbound.length > 0 && (
        <button type="button" disabled={picked.size === 0 || replay.isPending} onClick={() => replay.mutate()}>
          Replay selected ({picked.size})
        </button>
      )}
      {replay.data && (
        <Notice>
          Replayed {replay.data.requested}: {replay.data.delivered} delivered, {replay.data.failed} failed,{' '}
          {replay.data.skipped} skipped.
        </Notice>
      )}
      <ErrorBox error={replay.error} />
    </section>
  );
}

/** Mail a domain's inbound policy held (quarantine): release delivers it as if it had just arrived. */
function HeldMail() {
  const qc = useQueryClient();
  const held = useQuery({ queryKey: ['held'], queryFn: () => api.heldMessages.list.query({}) });
  const refresh = () => {
    void qc.invalidateQueries({ queryKey: ['held'] });
    void qc.invalidateQueries({ queryKey: ['messages'] });
  };
  const [done, setDone] = useState('');
  const release = useMutation({
    mutationFn: (id: string) => api.heldMessages.release.mutate({ id }),
    onSuccess: (r) => {
      setDone(`Released ${r.message.subject || r.message.id}: delivered as if it had just arrived.`);
      refresh();
    },
  });
  const remove = useMutation({
    mutationFn: (id: string) => api.heldMessages.delete.mutate({ id }),
    onSuccess: () => {
      setDone('Held message deleted.');
      refresh();
    },
  });
  const list = held.data?.data ?? [];
  const busy = release.isPending || remove.isPending;
  return (
    <section aria-labelledby="held-h">
      <h2 id="held-h">Held mail</h2>
      <p>
        Mail your domains' inbound policy held, kept until the date shown and then deleted. Thresholds are set on each{' '}
        <Link to="/domains">domain page</Link>.
      </p>
      {held.isPending ? <Loading /> : <ErrorBox error={held.error ?? release.error ?? remove.error} />}
      {held.data && list.length === 0 && <p>No held mail.</p>}
      {list.length > 0 && (
        <Table label="Held messages" head={['From', 'Subject', 'To', 'Reason', 'Held until', '']}>
          {list.map((m) => {
            const name = m.subject || m.id;
            return (
              <tr key={m.id}>
                <td>{m.from ?? m.envelope_from ?? '—'}</td>
                <td>{m.subject ?? '—'}</td>
                <td>{m.to.join(', ')}</td>
                <td className="wrap">{m.held_reason ?? '—'}</td>
                <td>{when(m.held_until)}</td>
                <td>
                  <button
                    type="button"
                    className="small"
                    disabled={busy}
                    onClick={() => release.mutate(m.id)}
                    aria-label={`Release ${name}`}
                  >
                    Release
                  </button>{' '}
                  <button
                    type="button"
                    className="small danger"
                    disabled={busy}
                    onClick={() => {
                      if (confirm(`Delete the held message ${name}?`)) remove.mutate(m.id);
                    }}
                    aria-label={`Delete ${name}`}
                  >
                    Delete
                  </button>
                </td>
              </tr>
            );
          })}
        </Table>
      )}
      {done && <Notice>{done}</Notice>}
    </section>
  );
}
