import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.js';
import { Link } from '../router.js';
import { Badge, ErrorBox, Field, Loading, Notice, Page, Table, when } from '../ui.js';

const PAGE = 20;
export const tone = (s: string) =>
  ['sent', 'delivered', 'received'].includes(s) ? 'ok' : ['bounced', 'failed'].includes(s) ? 'bad' : 'warn';

/** One page of messages, newest first, with Newer/Older controls over the API's `before` cursor. */
export function useMessagePages(opts: { search?: string; direction?: 'inbound' | 'outbound' }) {
  const [cursors, setCursors] = useState<number[]>([]); // `before` of each page after the first
  const before = cursors.at(-1);
  const list = useQuery({
    queryKey: ['messages', opts.direction, opts.search, before],
    queryFn: () =>
      api.messages.list.query({ limit: PAGE, search: opts.search || undefined, direction: opts.direction, before }),
    placeholderData: keepPreviousData,
  });
  const pager = (
    <nav className="pager" aria-label="Pages">
      <button type="button" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
        Newer
      </button>
      <span>Page {cursors.length + 1}</span>
      <button
        type="button"
        disabled={(list.data?.length ?? 0) < PAGE}
        onClick={() => setCursors([...cursors, list.data!.at(-1)!.created_at])}
      >
        Older
      </button>
    </nav>
  );
  return { list, rows: list.data ?? [], pager, restart: () => setCursors([]) };
}

/** Messages, searched by subject, from or to. */
export function Messages() {
  const [search, setSearch] = useState('');
  const [applied, setApplied] = useState('');
  const { list, rows, pager, restart } = useMessagePages({ search: applied });
  return (
    <Page title="Messages">
      <form
        role="search"
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          restart();
          setApplied(search.trim());
        }}
      >
        <Field
          label="Search subject, from or to"
          type="search"
          value={search}
          onChange={(e) => setSearch(e.target.value)}
        />
        <button type="submit">Search</button>
      </form>
      {list.isPending ? <Loading /> : <ErrorBox error={list.error} />}
      {list.data && rows.length === 0 && <p>No messages{applied ? ` matching “${applied}”` : ''}.</p>}
      {rows.length > 0 && (
        <Table label="Messages" head={['Subject', 'From', 'To', 'Direction', 'Status', 'Created']}>
          {rows.map((m) => (
            <tr key={m.id}>
              <td>
                <Link to={`/messages/${m.id}`}>{m.subject || '(no subject)'}</Link>
              </td>
              <td>{m.from}</td>
              <td>{m.to.join(', ')}</td>
              <td>{m.direction}</td>
              <td>
                <Badge tone={tone(m.status)}>{m.status}</Badge>
              </td>
              <td>{when(m.created_at)}</td>
            </tr>
          ))}
        </Table>
      )}
      {pager}
    </Page>
  );
}

export function MessageDetail({ id }: { id: string }) {
  const qc = useQueryClient();
  // A message still on its way is re-read every 3 seconds, so the trail grows as attempts happen.
  const detail = useQuery({
    queryKey: ['message', id],
    queryFn: () => api.messages.get.query({ id }),
    refetchInterval: (q) =>
      q.state.data &&
      ['queued', 'pending', 'scheduled', 'sending', 'deferred', 'received'].includes(q.state.data.message.status)
        ? 3_000
        : false,
  });
  const replayAll = useMutation({
    mutationFn: () => api.deliveries.retryMany.mutate({ messageIds: [id] }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['message', id] }),
  });
  if (!detail.data)
    return <Page title="Message">{detail.isPending ? <Loading /> : <ErrorBox error={detail.error} />}</Page>;
  const { message: m, trail, runs, events, deliveries, attachments } = detail.data;
  return (
    <Page title={m.subject || '(no subject)'}>
      <dl className="facts">
        <dt>Id</dt>
        <dd>
          <code>{m.id}</code>
        </dd>
        <dt>Direction</dt>
        <dd>{m.direction}</dd>
        <dt>Status</dt>
        <dd>
          <Badge tone={tone(m.status)}>{m.status}</Badge>
          {m.last_error ? ` · ${m.last_error}` : ''}
        </dd>
        <dt>From</dt>
        <dd>{m.from}</dd>
        <dt>To</dt>
        <dd>{m.to.join(', ')}</dd>
        <dt>Created</dt>
        <dd>{when(m.created_at)}</dd>
        {m.spam && (
          <>
            <dt>Spam</dt>
            <dd>
              <SpamVerdict spam={m.spam} />
              {m.spam.scored && m.spam.symbols.length > 0 && (
                <> · {m.spam.symbols.map((s) => `${s.name} (${s.score})`).join(', ')}</>
              )}
            </dd>
          </>
        )}
        {m.sealed && (
          <>
            <dt>Sealed copy</dt>
            <dd>
              <SealedCopy id={m.id} sealed={m.sealed} />
            </dd>
          </>
        )}
        {attachments.length > 0 && (
          <>
            <dt>Attachments</dt>
            <dd>{attachments.map((a) => a.filename).join(', ')}</dd>
          </>
        )}
      </dl>
      {m.recipients.length > 0 && (
        <section aria-labelledby="rcpt-h">
          <h2 id="rcpt-h">Recipients</h2>
          <Table label="Recipients" head={['Address', 'Status', 'Class', 'Attempts', 'Last answer']}>
            {m.recipients.map((r) => (
              <tr key={r.address}>
                <td>{r.address}</td>
                <td>
                  <Badge tone={tone(r.status)}>{r.status}</Badge>
                </td>
                <td>{r.bounceClass ? <code>{r.bounceClass}</code> : '—'}</td>
                <td>{r.attempts}</td>
                <td className="wrap">{r.response ?? '—'}</td>
              </tr>
            ))}
          </Table>
        </section>
      )}
      <section aria-labelledby="trail-h">
        <h2 id="trail-h">Delivery trail</h2>
        {trail.length === 0 ? (
          <p>No attempt yet.</p>
        ) : (
          <Table label="Delivery trail" head={['When', 'Kind', 'Status', 'Answer', 'Run']}>
            {trail.map((t, i) => (
              <tr key={i}>
                <td>{when(t.at)}</td>
                <td>
                  {t.kind === 'smtp'
                    ? `SMTP${t.to ? ` to ${t.to.join(', ')}` : ''}`
                    : `Webhook attempt ${t.attempt ?? ''}`}
                </td>
                <td>
                  <Badge tone={tone(t.status)}>{t.status}</Badge>
                </td>
                <td className="wrap">
                  <code>{t.response}</code>
                </td>
                <td>{t.workflowId ? <RunLink id={t.workflowId} runs={runs} /> : '—'}</td>
              </tr>
            ))}
          </Table>
        )}
      </section>
      {runs.length > 0 && (
        <section aria-labelledby="runs-h">
          <h2 id="runs-h">Workflow runs</h2>
          <ul>
            {runs.map((r) => (
              <li key={r.workflowId}>
                <RunLink id={r.workflowId} runs={runs} />
              </li>
            ))}
          </ul>
        </section>
      )}
      {deliveries.length > 0 && (
        <section aria-labelledby="dlv-h">
          <h2 id="dlv-h">Webhook deliveries</h2>
          <button type="button" onClick={() => replayAll.mutate()} disabled={replayAll.isPending}>
            Replay all deliveries of this message
          </button>
          {replayAll.data && (
            <Notice>
              Replayed: {replayAll.data.delivered} delivered, {replayAll.data.failed} failed, {replayAll.data.skipped}{' '}
              skipped.
            </Notice>
          )}
          <ErrorBox error={replayAll.error} />
          {deliveries.map((d) => (
            <Delivery key={d.id} d={d} messageId={id} />
          ))}
        </section>
      )}
      <section aria-labelledby="events-h">
        <h2 id="events-h">Events</h2>
        {events.length === 0 ? (
          <p>No events yet.</p>
        ) : (
          <Table label="Events" head={['When', 'Event', 'Recipient']}>
            {events.map((e) => (
              <tr key={e.id}>
                <td>{when(e.createdAt)}</td>
                <td>{e.type}</td>
                <td>{e.recipient ?? '—'}</td>
              </tr>
            ))}
          </Table>
        )}
      </section>
    </Page>
  );
}

function RunLink({ id, runs }: { id: string; runs: { workflowId: string; url: string | null }[] }) {
  const url = runs.find((r) => r.workflowId === id)?.url;
  return url ? (
    <a href={url} target="_blank" rel="noreferrer">
      {id} <span className="sr-only">(opens the Temporal UI)</span>
    </a>
  ) : (
    <code>{id}</code>
  );
}

type DeliveryRow = {
  id: string;
  url: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
  next_retry_at: number | null;
};
export function Delivery({ d, messageId }: { d: DeliveryRow; messageId: string }) {
  const qc = useQueryClient();
  const [open, setOpen] = useState(false);
  const attempts = useQuery({
    queryKey: ['attempts', d.id],
    queryFn: () => api.deliveries.attempts.query({ id: d.id }),
    enabled: open,
  });
  const replay = useMutation({
    mutationFn: () => api.deliveries.retry.mutate({ id: d.id }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['message', messageId] }),
  });
  return (
    <div className="card">
      <p>
        <code>{d.id}</code> → {d.url} · <Badge tone={tone(d.status)}>{d.status}</Badge> · {d.attempts} attempts
        {d.last_status_code ? ` · last HTTP ${d.last_status_code}` : ''}
        {d.next_retry_at ? ` · next retry ${when(d.next_retry_at)}` : ''}
      </p>
      <button type="button" className="small" aria-expanded={open} onClick={() => setOpen(!open)}>
        {open ? 'Hide attempts' : 'Show attempts'}
      </button>{' '}
      <button type="button" className="small" onClick={() => replay.mutate()} disabled={replay.isPending}>
        Replay
      </button>
      {replay.data && (
        <Notice>
          Replayed: {replay.data.ok ? 'delivered' : 'failed'} (
          {replay.data.status ? `HTTP ${replay.data.status}` : 'no response'}).
        </Notice>
      )}
      <ErrorBox error={replay.error ?? attempts.error} />
      {open && attempts.data && (
        <Table label={`Attempts of ${d.id}`} head={['#', 'When', 'Outcome', 'Answer', 'Took']}>
          {attempts.data.attempts.map((a) => (
            <tr key={a.id}>
              <td>{a.attempt_number}</td>
              <td>{when(a.requested_at)}</td>
              <td>
                {a.ok ? 'ok' : `failed${a.reason ? ` (${a.reason})` : ''}`}
                {a.control && <> · {controlText(a.control)}</>}
              </td>
              <td className="wrap">
                {a.response_status ? `HTTP ${a.response_status}` : '—'}{' '}
                {a.response_body ? <code>{a.response_body.slice(0, 300)}</code> : null}
              </td>
              <td>{a.duration_ms != null ? `${a.duration_ms} ms` : '—'}</td>
            </tr>
          ))}
        </Table>
      )}
    </div>
  );
}

type Control = { status: string; actions: string[]; applied: string[]; ignored?: string[]; error?: string };

/** A webhook's control reply on an attempt: "control: spam", "control: ok + block-sender", and what was not done. */
export function controlText(c: Control) {
  const skipped = c.actions.filter((a) => !c.applied.includes(a));
  return [
    `control: ${[c.status, ...c.actions].join(' + ')}`,
    c.ignored?.length ? `ignored ${c.ignored.join(', ')}` : skipped.length ? `not applied ${skipped.join(', ')}` : '',
    c.error ? `error: ${c.error}` : '',
  ]
    .filter(Boolean)
    .join(' · ');
}

const SEALED_FILES: Record<string, { ext: string; type: string; opens: string }> = {
  'RSA-OAEP-256': {
    ext: 'json',
    type: 'application/json',
    opens: "Opens with the SDK's decrypt (MailKite.decrypt) and the domain's private key.",
  },
  PGP: { ext: 'asc', type: 'application/pgp-encrypted', opens: "Opens with the domain's PGP private key." },
  'S/MIME': { ext: 'p7m', type: 'application/pkcs7-mime', opens: "Opens with the domain's S/MIME private key." },
};

/** The stored copy of mail to a domain with an encryption key: downloaded as it is; only the domain's key opens it. */
function SealedCopy({ id, sealed }: { id: string; sealed: { alg: string; envelope: string } }) {
  const file = SEALED_FILES[sealed.alg] ?? SEALED_FILES['RSA-OAEP-256']!;
  const download = () => {
    const url = URL.createObjectURL(new Blob([sealed.envelope], { type: file.type }));
    const a = document.createElement('a');
    a.href = url;
    a.download = `${id}.sealed.${file.ext}`;
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };
  return (
    <>
      {sealed.alg}{' '}
      <button type="button" className="small" onClick={download}>
        Download sealed copy
      </button>
      <br />
      <small>{file.opens}</small>
    </>
  );
}

type Spam =
  | { scored: true; score: number; required: number; action: string; symbols: { name: string; score: number }[] }
  | { scored: false; reason: string };

/** rspamd's verdict: score and action, the strongest symbols on hover; unscored mail says why. */
export function SpamVerdict({ spam }: { spam: Spam | null }) {
  if (!spam) return <>—</>;
  if (!spam.scored) return <Badge tone="plain">unscored ({spam.reason.replaceAll('_', ' ')})</Badge>;
  const symbols = spam.symbols
    .filter((s) => s.score !== 0 || spam.symbols.length <= 3)
    .map((s) => `${s.name} (${s.score})`)
    .join(', ');
  const spamTone = ['reject', 'soft reject'].includes(spam.action)
    ? 'bad'
    : spam.action === 'no action'
      ? 'ok'
      : 'warn';
  return (
    <span title={symbols || undefined}>
      <Badge tone={spamTone}>{spam.action}</Badge> {spam.score}
    </span>
  );
}
