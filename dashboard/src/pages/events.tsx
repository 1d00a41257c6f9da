import { keepPreviousData, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.js';
import { Link } from '../router.js';
import { ErrorBox, Field, Loading, Page, Table, usePaged, when } from '../ui.js';

const PAGE = 20;

/** Application events (POST /v1/events): the names known, and the recent events filtered by name and address. */
export function Events() {
  const [filter, setFilter] = useState({ name: '', email: '' });
  const [applied, setApplied] = useState(filter);
  const [cursors, setCursors] = useState<string[]>([]);
  const before = cursors.at(-1);
  const list = useQuery({
    queryKey: ['app-events', applied, before],
    queryFn: () =>
      api.events.list.query({
        name: applied.name || undefined,
        email: applied.email || undefined,
        before,
        limit: PAGE,
      }),
    placeholderData: keepPreviousData,
  });
  const names = useQuery({ queryKey: ['app-event-names'], queryFn: () => api.events.names.query() });
  const named = usePaged(names.data?.events);
  const rows = list.data?.events ?? [];
  const filterBy = (name: string) => {
    const f = { name, email: '' };
    setFilter(f);
    setApplied(f);
    setCursors([]);
  };
  return (
    <Page title="Events">
      <p>
        Events your application records with <code>POST /v1/events</code> (an API key): they start{' '}
        <Link to="/sequences">sequences</Link> and wake enrolments waiting for them.
      </p>
      <h2 id="names-h">Event names</h2>
      {names.isPending ? <Loading /> : <ErrorBox error={names.error} />}
      {names.data && names.data.events.length === 0 && <p>No events recorded and none declared by a sequence.</p>}
      {named.slice.length > 0 && (
        <Table label="Event names" head={['Name', 'Recorded', 'Last seen', 'Used by']}>
          {named.slice.map((n) => (
            <tr key={n.name}>
              <td>
                <button
                  type="button"
                  className="small"
                  onClick={() => filterBy(n.name)}
                  aria-label={`Show events named ${n.name}`}
                >
                  {n.name}
                </button>
              </td>
              <td>{n.count}</td>
              <td>{when(n.lastSeenAt)}</td>
              <td>{n.usedBy.join(', ') || '—'}</td>
            </tr>
          ))}
        </Table>
      )}
      {named.controls}
      <h2>Recent events</h2>
      <form
        role="search"
        aria-label="Filter events"
        className="row"
        onSubmit={(e) => {
          e.preventDefault();
          setCursors([]);
          setApplied({ name: filter.name.trim(), email: filter.email.trim() });
        }}
      >
        <Field
          label="Name"
          value={filter.name}
          maxLength={64}
          onChange={(e) => setFilter({ ...filter, name: e.target.value })}
        />
        <Field
          label="Address"
          type="search"
          maxLength={254}
          value={filter.email}
          onChange={(e) => setFilter({ ...filter, email: e.target.value })}
        />
        <button type="submit">Filter</button>
      </form>
      {list.isPending ? <Loading /> : <ErrorBox error={list.error} />}
      {list.data && rows.length === 0 && <p>No events{applied.name || applied.email ? ' matching the filter' : ''}.</p>}
      {rows.length > 0 && (
        <Table label="Recent events" head={['Name', 'Address', 'Payload', 'Dedupe key', 'Recorded']}>
          {rows.map((e) => (
            <tr key={e.id}>
              <td>{e.name}</td>
              <td className="wrap">
                {e.email}
                {e.contactId ? '' : ' (no contact)'}
              </td>
              <td className="wrap">
                <code>{e.payload ? JSON.stringify(e.payload) : '—'}</code>
              </td>
              <td>{e.dedupeKey ?? '—'}</td>
              <td>{when(e.createdAt)}</td>
            </tr>
          ))}
        </Table>
      )}
      <nav className="pager" aria-label="Event pages">
        <button type="button" disabled={cursors.length === 0} onClick={() => setCursors(cursors.slice(0, -1))}>
          Newer
        </button>
        <span>Page {cursors.length + 1}</span>
        <button type="button" disabled={rows.length < PAGE} onClick={() => setCursors([...cursors, rows.at(-1)!.id])}>
          Older
        </button>
      </nav>
    </Page>
  );
}
