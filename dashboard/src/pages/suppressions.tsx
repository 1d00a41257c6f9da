import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.js';
import { ErrorBox, Field, Loading, Page, Table, usePaged, when } from '../ui.js';

export function Suppressions() {
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['suppressions'], queryFn: () => api.suppressions.list.query() });
  const [email, setEmail] = useState('');
  const add = useMutation({
    mutationFn: () => api.suppressions.add.mutate({ email }),
    onSuccess: () => {
      setEmail('');
      void qc.invalidateQueries({ queryKey: ['suppressions'] });
    },
  });
  const remove = useMutation({
    mutationFn: (address: string) => api.suppressions.remove.mutate({ email: address }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['suppressions'] }),
  });
  const { slice, controls } = usePaged(list.data);
  return (
    <Page title="Suppressions">
      <p>Sends to these addresses are refused: hard bounces and complaints are added on their own.</p>
      {list.isPending ? <Loading /> : <ErrorBox error={list.error ?? remove.error} />}
      {list.data && list.data.length === 0 && <p>No suppressed addresses.</p>}
      {slice.length > 0 && (
        <Table label="Suppressed addresses" head={['Address', 'Reason', 'Detail', 'Since', '']}>
          {slice.map((s) => (
            <tr key={s.id}>
              <td>{s.email}</td>
              <td>{s.reason}</td>
              <td className="wrap">{s.detail ?? '—'}</td>
              <td>{when(s.createdAt)}</td>
              <td>
                <button
                  type="button"
                  className="small"
                  onClick={() => remove.mutate(s.email)}
                  aria-label={`Allow again: ${s.email}`}
                >
                  Allow again
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      {controls}
      <form
        className="card narrow"
        onSubmit={(e) => {
          e.preventDefault();
          add.mutate();
        }}
      >
        <Field
          label="Suppress an address"
          type="email"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        <ErrorBox error={add.error} />
        <button type="submit" disabled={add.isPending}>
          Suppress
        </button>
      </form>
    </Page>
  );
}
