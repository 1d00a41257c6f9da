import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.js';
import { Link, navigate } from '../router.js';
import { Area, Badge, ErrorBox, Field, Loading, Notice, Page, Select, Table, usePaged, when } from '../ui.js';

const tone = (s: string) => (s === 'sent' ? 'ok' : s === 'failed' || s === 'canceled' ? 'bad' : 'warn');

export function Broadcasts() {
  const list = useQuery({ queryKey: ['broadcasts'], queryFn: () => api.broadcasts.list.query() });
  const { slice, controls } = usePaged(list.data);
  return (
    <Page title="Broadcasts">
      {list.isPending ? <Loading /> : <ErrorBox error={list.error} />}
      {list.data && list.data.length === 0 && <p>No broadcasts yet.</p>}
      {slice.length > 0 && (
        <Table label="Broadcasts" head={['Name', 'Subject', 'Status', 'Sent', 'Created']}>
          {slice.map((b) => (
            <tr key={b.id}>
              <td>
                <Link to={`/broadcasts/${b.id}`}>{b.name || b.subject || b.id}</Link>
              </td>
              <td>{b.subject}</td>
              <td>
                <Badge tone={tone(b.status)}>{b.status}</Badge>
              </td>
              <td>
                {b.sent_count}
                {b.audience_count != null ? ` of ${b.audience_count}` : ''}
              </td>
              <td>{when(b.created_at)}</td>
            </tr>
          ))}
        </Table>
      )}
      {controls}
      <Compose />
    </Page>
  );
}

function Compose() {
  const qc = useQueryClient();
  const lists = useQuery({ queryKey: ['lists'], queryFn: () => api.lists.list.query() });
  const [f, setF] = useState({ name: '', from: '', subject: '', html: '', audience: 'all', listId: '', query: '' });
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => setF({ ...f, [k]: e.target.value });
  const create = useMutation({
    mutationFn: () =>
      api.broadcasts.create.mutate({
        name: f.name || undefined,
        from: f.from,
        subject: f.subject,
        html: f.html || undefined,
        audience:
          f.audience === 'list'
            ? { type: 'list', id: f.listId || lists.data?.[0]?.id }
            : f.audience === 'filter'
              ? { type: 'filter', query: f.query }
              : { type: 'all' },
      }),
    onSuccess: (b) => {
      void qc.invalidateQueries({ queryKey: ['broadcasts'] });
      navigate(`/broadcasts/${b.id}`);
    },
  });
  return (
    <form
      className="card"
      onSubmit={(e) => {
        e.preventDefault();
        create.mutate();
      }}
    >
      <h2>Compose a broadcast</h2>
      <Field label="Name" value={f.name} onChange={set('name')} />
      <Field label="From" required placeholder="News <news@your-domain>" value={f.from} onChange={set('from')} />
      <Field label="Subject" required value={f.subject} onChange={set('subject')} />
      <Area
        label="HTML body"
        rows={6}
        value={f.html}
        onChange={set('html')}
        hint="Merge tags: {{name}}, {{first_name}}, {{email}}, {{unsubscribe_url}} and contact attributes."
      />
      <Select
        label="Audience"
        value={f.audience}
        onChange={set('audience')}
        options={[
          ['all', 'All subscribed contacts'],
          ['list', 'A list'],
          ['filter', 'A filter on contacts'],
        ]}
      />
      {f.audience === 'list' && (
        <Select
          label="List"
          value={f.listId}
          onChange={set('listId')}
          options={(lists.data ?? []).map((l) => [l.id, `${l.name} (${l.contact_count})`] as const)}
        />
      )}
      {f.audience === 'filter' && (
        <Field label="Filter" placeholder='attributes.plan = "pro"' value={f.query} onChange={set('query')} />
      )}
      <ErrorBox error={create.error} />
      <button type="submit" disabled={create.isPending}>
        Save draft
      </button>
    </form>
  );
}

/** A broadcast: send now or schedule, and while it sends, its progress re-read every 2 seconds. */
export function BroadcastDetail({ id }: { id: string }) {
  const qc = useQueryClient();
  const b = useQuery({
    queryKey: ['broadcast', id],
    queryFn: () => api.broadcasts.get.query({ id }),
    refetchInterval: (q) => (q.state.data && ['sending', 'scheduled'].includes(q.state.data.status) ? 2_000 : false),
  });
  const [at, setAt] = useState('');
  const refresh = () => void qc.invalidateQueries({ queryKey: ['broadcast', id] });
  const send = useMutation({
    mutationFn: (scheduledAt?: string) => api.broadcasts.send.mutate({ id, scheduledAt }),
    onSuccess: refresh,
  });
  const cancel = useMutation({ mutationFn: () => api.broadcasts.cancel.mutate({ id }), onSuccess: refresh });
  const remove = useMutation({
    mutationFn: () => api.broadcasts.delete.mutate({ id }),
    onSuccess: () => navigate('/broadcasts'),
  });
  if (!b.data) return <Page title="Broadcast">{b.isPending ? <Loading /> : <ErrorBox error={b.error} />}</Page>;
  const d = b.data;
  const p = d.progress;
  const total = d.audience_count ?? 0;
  return (
    <Page title={d.name || d.subject}>
      <dl className="facts">
        <dt>Status</dt>
        <dd>
          <Badge tone={tone(d.status)}>{d.status}</Badge>
          {d.scheduled_at ? ` · scheduled for ${when(d.scheduled_at)}` : ''}
        </dd>
        <dt>From</dt>
        <dd>{d.from_addr}</dd>
        <dt>Subject</dt>
        <dd>{d.subject}</dd>
        <dt>Footer address</dt>
        <dd>{d.footer_address ?? "the operator's default"}</dd>
        <dt>Audience</dt>
        <dd>
          <code>{d.audience}</code>
          {d.audience_count != null ? ` · ${d.audience_count} recipients` : ''}
        </dd>
      </dl>
      {d.status !== 'draft' && (
        <section aria-labelledby="progress-h">
          <h2 id="progress-h">Progress</h2>
          {total > 0 && <progress max={total} value={p.sent + p.failed + p.skipped} aria-label="Recipients done" />}
          <p role="status" aria-live="polite">
            {p.sent} sent, {p.failed} failed, {p.skipped} skipped{p.remaining != null ? `, ${p.remaining} to go` : ''}
            {p.live ? ' (live)' : ''}.
          </p>
        </section>
      )}
      {d.status === 'draft' && (
        <section aria-labelledby="send-h">
          <h2 id="send-h">Send</h2>
          <button type="button" onClick={() => send.mutate(undefined)} disabled={send.isPending}>
            Send now
          </button>
          <form
            className="row"
            onSubmit={(e) => {
              e.preventDefault();
              send.mutate(at);
            }}
          >
            <Field
              label="Or schedule for"
              placeholder="in 2 hours, or 2026-01-01T09:00:00Z"
              required
              value={at}
              onChange={(e) => setAt(e.target.value)}
            />
            <button type="submit" disabled={send.isPending}>
              Schedule
            </button>
          </form>
          <button type="button" className="danger" onClick={() => remove.mutate()} disabled={remove.isPending}>
            Delete draft
          </button>
        </section>
      )}
      {(d.status === 'sending' || d.status === 'scheduled') && (
        <button type="button" className="danger" onClick={() => cancel.mutate()} disabled={cancel.isPending}>
          Cancel broadcast
        </button>
      )}
      {send.data && (
        <Notice>
          {send.data.status === 'scheduled' ? `Scheduled for ${when(send.data.scheduledAt)}` : 'Sending'} to{' '}
          {send.data.audienceCount} recipients.
        </Notice>
      )}
      <ErrorBox error={send.error ?? cancel.error ?? remove.error} />
      {d.html && (
        <>
          <h2>Content</h2>
          <iframe title="Broadcast content" sandbox="" className="preview" srcDoc={d.html} />
        </>
      )}
    </Page>
  );
}
