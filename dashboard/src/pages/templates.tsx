import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { fillMergeTags, type MergeData } from '../../../core/render/merge.js';
import { api, type Outputs } from '../api.js';
import { Area, ErrorBox, Field, Loading, Notice, Page, Table, usePaged, when } from '../ui.js';

type Template = Outputs['templates']['list'][number];
const TAG_NAMES = /\{\{\{?\s*([A-Za-z0-9_.-]+)\s*\}?\}\}/g;

export function Templates() {
  const qc = useQueryClient();
  const mine = useQuery({ queryKey: ['templates'], queryFn: () => api.templates.list.query() });
  const base = useQuery({ queryKey: ['templates-base'], queryFn: () => api.templates.listBase.query() });
  const [editing, setEditing] = useState<Template | 'new' | undefined>();
  const remove = useMutation({
    mutationFn: (id: string) => api.templates.delete.mutate({ id }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['templates'] }),
  });
  const all = [...(mine.data ?? []), ...(base.data ?? [])];
  const { slice, controls } = usePaged(all);
  return (
    <Page
      title="Templates"
      actions={
        <button type="button" onClick={() => setEditing('new')}>
          New template
        </button>
      }
    >
      {mine.isPending ? <Loading /> : <ErrorBox error={mine.error ?? base.error ?? remove.error} />}
      {slice.length > 0 && (
        <Table label="Templates" head={['Name', 'Subject', 'Updated', '']}>
          {slice.map((t) => (
            <tr key={t.id}>
              <td>
                {t.name}
                {t.base ? ' (built-in)' : ''}
              </td>
              <td>{t.subject ?? '—'}</td>
              <td>{t.base ? '—' : when(t.updated_at)}</td>
              <td>
                <button
                  type="button"
                  className="small"
                  onClick={() => setEditing(t)}
                  aria-label={`${t.base ? 'Start from' : 'Edit'} ${t.name}`}
                >
                  {t.base ? 'Start from' : 'Edit'}
                </button>{' '}
                {!t.base && (
                  <button
                    type="button"
                    className="small danger"
                    onClick={() => remove.mutate(t.id)}
                    aria-label={`Delete ${t.name}`}
                  >
                    Delete
                  </button>
                )}
              </td>
            </tr>
          ))}
        </Table>
      )}
      {controls}
      {editing && (
        <Editor
          key={editing === 'new' ? 'new' : editing.id}
          template={editing === 'new' ? undefined : editing}
          onDone={() => setEditing(undefined)}
        />
      )}
    </Page>
  );
}

/** Edit a template with a live preview: the same merge-tag code the server sends with (core/templates/merge.ts). */
function Editor({ template, onDone }: { template?: Template; onDone: () => void }) {
  const qc = useQueryClient();
  const own = template && !template.base ? template : undefined;
  const [name, setName] = useState(own?.name ?? (template ? `${template.name} copy` : ''));
  const [subject, setSubject] = useState(template?.subject ?? '');
  const [html, setHtml] = useState(template?.html ?? '');
  const [text, setText] = useState(template?.text ?? '');
  const tags = useMemo(
    () => [...new Set([...`${subject}${html}${text}`.matchAll(TAG_NAMES)].map((m) => m[1]!))],
    [subject, html, text],
  );
  const [values, setValues] = useState<MergeData>({});
  const save = useMutation({
    mutationFn: () =>
      own
        ? api.templates.update.mutate({
            id: own.id,
            name,
            subject: subject || null,
            html: html || null,
            text: text || null,
          })
        : api.templates.create.mutate({
            name,
            subject: subject || undefined,
            html: html || undefined,
            text: text || undefined,
          }),
    onSuccess: () => {
      void qc.invalidateQueries({ queryKey: ['templates'] });
      onDone();
    },
  });
  return (
    <section aria-labelledby="edit-h" className="editor">
      <h2 id="edit-h">{own ? `Edit ${own.name}` : 'New template'}</h2>
      <div className="columns">
        <form
          onSubmit={(e) => {
            e.preventDefault();
            save.mutate();
          }}
        >
          <Field label="Name" required value={name} onChange={(e) => setName(e.target.value)} />
          <Field label="Subject" value={subject} onChange={(e) => setSubject(e.target.value)} />
          <Area
            label="HTML body"
            rows={8}
            value={html}
            onChange={(e) => setHtml(e.target.value)}
            hint="{{tag}} is HTML-escaped; {{{tag}}} inserts a value as is."
          />
          <Area label="Text body" rows={5} value={text} onChange={(e) => setText(e.target.value)} />
          <ErrorBox error={save.error} />
          <button type="submit" disabled={save.isPending}>
            Save template
          </button>{' '}
          <button type="button" onClick={onDone}>
            Cancel
          </button>
        </form>
        <div>
          <h3>Preview</h3>
          {tags.length > 0 ? (
            <fieldset>
              <legend>Sample values</legend>
              {tags.map((t) => (
                <Field
                  key={t}
                  label={t}
                  value={String(values[t] ?? '')}
                  onChange={(e) => setValues({ ...values, [t]: e.target.value })}
                />
              ))}
            </fieldset>
          ) : (
            <p>No merge tags.</p>
          )}
          <p>
            <strong>Subject:</strong> {fillMergeTags(subject, values, { html: false })}
          </p>
          {html && (
            <iframe
              title="HTML preview"
              sandbox=""
              className="preview"
              srcDoc={fillMergeTags(html, values, { html: true })}
            />
          )}
          {text && <pre className="preview-text">{fillMergeTags(text, values, { html: false })}</pre>}
          {save.isSuccess && <Notice>Saved.</Notice>}
        </div>
      </div>
    </section>
  );
}
