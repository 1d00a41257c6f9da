import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { api } from '../api.js';
import { Area, ErrorBox, Field, Loading, Page, Table, usePaged, when } from '../ui.js';

export function Lists() {
  const qc = useQueryClient();
  const lists = useQuery({ queryKey: ['lists'], queryFn: () => api.lists.list.query() });
  const [name, setName] = useState('');
  const create = useMutation({
    mutationFn: () => api.lists.create.mutate({ name }),
    onSuccess: () => {
      setName('');
      void qc.invalidateQueries({ queryKey: ['lists'] });
    },
  });
  const [importing, setImporting] = useState<string | undefined>();
  const { slice, controls } = usePaged(lists.data);
  return (
    <Page title="Lists">
      {lists.isPending ? <Loading /> : <ErrorBox error={lists.error} />}
      {lists.data && lists.data.length === 0 && <p>No lists yet.</p>}
      {slice.length > 0 && (
        <Table label="Lists" head={['Name', 'Contacts', 'Created', '']}>
          {slice.map((l) => (
            <tr key={l.id}>
              <td>{l.name}</td>
              <td>{l.contact_count}</td>
              <td>{when(l.created_at)}</td>
              <td>
                <button
                  type="button"
                  className="small"
                  onClick={() => setImporting(l.id)}
                  aria-label={`Import CSV into ${l.name}`}
                >
                  Import CSV
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      {controls}
      {importing && <Import key={importing} listId={importing} />}
      <form
        className="card narrow"
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <Field label="New list name" required value={name} onChange={(e) => setName(e.target.value)} />
        <ErrorBox error={create.error} />
        <button type="submit" disabled={create.isPending}>
          Create list
        </button>
      </form>
    </Page>
  );
}

/** A CSV import runs as a workflow; its counts are re-read every second until it is done. */
function Import({ listId }: { listId: string }) {
  const qc = useQueryClient();
  const [csv, setCsv] = useState('');
  const start = useMutation({ mutationFn: () => api.lists.import.mutate({ id: listId, csv }) });
  const importId = start.data?.id;
  const status = useQuery({
    queryKey: ['import', importId],
    enabled: Boolean(importId),
    queryFn: () => api.lists.importStatus.query({ id: listId, importId: importId! }),
    refetchInterval: (q) => (q.state.data?.status === 'running' || !q.state.data ? 1_000 : false),
  });
  const s = status.data ?? start.data;
  const finished = s !== undefined && s.status !== 'running';
  useEffect(() => {
    if (finished) void qc.invalidateQueries({ queryKey: ['lists'] }); // the list's size changed
  }, [finished, qc]);
  const readFile = async (file: File | undefined) => {
    if (file) setCsv(await file.text());
  };
  return (
    <section className="card" aria-labelledby="import-h">
      <h2 id="import-h">Import contacts</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          start.mutate();
        }}
      >
        <Field
          label="CSV file"
          type="file"
          accept=".csv,text/csv"
          onChange={(e) => void readFile(e.target.files?.[0])}
        />
        <Area
          label="Or paste CSV"
          rows={5}
          value={csv}
          onChange={(e) => setCsv(e.target.value)}
          hint="A header row with an email column; name; other columns become attributes."
        />
        <ErrorBox error={start.error ?? status.error} />
        <button type="submit" disabled={!csv || start.isPending || s?.status === 'running'}>
          Start import
        </button>
      </form>
      {s && (
        <div role="status" aria-live="polite">
          <p>
            Import {s.status}: {s.rows_read} rows read, {s.created} created, {s.updated} updated, {s.rejected} rejected.
          </p>
          {s.rejections.length > 0 && (
            <ul>
              {s.rejections.slice(0, 20).map((r) => (
                <li key={r.row}>
                  Line {r.row}: {r.reason}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </section>
  );
}
