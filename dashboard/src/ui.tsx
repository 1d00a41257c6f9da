import {
  useEffect,
  useId,
  useRef,
  useState,
  type InputHTMLAttributes,
  type ReactNode,
  type SelectHTMLAttributes,
  type TextareaHTMLAttributes,
} from 'react';
import { errorMessage } from './api.js';

/** One page: its title (document and h1, focused on arrival so screen readers announce it) and content. */
export function Page({ title, children, actions }: { title: string; children: ReactNode; actions?: ReactNode }) {
  const h1 = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · svc-mail`;
    h1.current?.focus();
  }, [title]);
  return (
    <>
      <div className="page-head">
        <h1 ref={h1} tabIndex={-1}>
          {title}
        </h1>
        {actions}
      </div>
      {children}
    </>
  );
}

/** The API's message for a failed call, announced. */
export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {errorMessage(error)}
    </p>
  );
}

export function Notice({ children }: { children: ReactNode }) {
  return (
    <p className="notice" role="status">
      {children}
    </p>
  );
}

type FieldProps = InputHTMLAttributes<HTMLInputElement> & { label: string; hint?: string };
export function Field({ label, hint, ...input }: FieldProps) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <input id={id} aria-describedby={hint ? `${id}-hint` : undefined} {...input} />
      {hint && <small id={`${id}-hint`}>{hint}</small>}
    </div>
  );
}

type AreaProps = TextareaHTMLAttributes<HTMLTextAreaElement> & { label: string; hint?: string };
export function Area({ label, hint, ...area }: AreaProps) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <textarea id={id} aria-describedby={hint ? `${id}-hint` : undefined} {...area} />
      {hint && <small id={`${id}-hint`}>{hint}</small>}
    </div>
  );
}

type SelectProps = SelectHTMLAttributes<HTMLSelectElement> & {
  label: string;
  options: readonly (readonly [string, string])[];
};
export function Select({ label, options, ...select }: SelectProps) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <select id={id} {...select}>
        {options.map(([value, text]) => (
          <option key={value} value={value}>
            {text}
          </option>
        ))}
      </select>
    </div>
  );
}

/** Copies one value in one click; says so for screen readers too. */
export function CopyButton({ value, what }: { value: string; what: string }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
    } catch {
      // Clipboard refused (insecure origin): select a temporary field and copy from it.
      const t = document.createElement('textarea');
      t.value = value;
      document.body.append(t);
      t.select();
      document.execCommand('copy');
      t.remove();
    }
    setCopied(true);
    setTimeout(() => setCopied(false), 2000);
  };
  return (
    <button
      type="button"
      className="small"
      onClick={() => void copy()}
      aria-label={`${copied ? 'Copied' : 'Copy'} ${what}`}
    >
      {copied ? 'Copied' : 'Copy'}
    </button>
  );
}

/** A table that scrolls sideways on a phone; focusable so a keyboard can scroll it. */
export function Table({ label, head, children }: { label: string; head: readonly string[]; children: ReactNode }) {
  return (
    <div className="table-wrap" role="region" aria-label={label} tabIndex={0}>
      <table>
        <thead>
          <tr>
            {head.map((h) => (
              <th key={h} scope="col">
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/** Pages a list the API answers whole (20 a page). */
export function usePaged<T>(items: readonly T[] | undefined, size = 20) {
  const [page, setPage] = useState(0);
  const all = items ?? [];
  const pages = Math.max(1, Math.ceil(all.length / size));
  const current = Math.min(page, pages - 1);
  const slice = all.slice(current * size, current * size + size);
  const controls =
    pages > 1 ? (
      <nav className="pager" aria-label="Pages">
        <button type="button" onClick={() => setPage(current - 1)} disabled={current === 0}>
          Previous
        </button>
        <span>
          Page {current + 1} of {pages}
        </span>
        <button type="button" onClick={() => setPage(current + 1)} disabled={current >= pages - 1}>
          Next
        </button>
      </nav>
    ) : null;
  return { slice, controls };
}

export const when = (ms: number | null | undefined) => (ms ? new Date(ms).toLocaleString() : '—');

export function Badge({ tone, children }: { tone: 'ok' | 'warn' | 'bad' | 'plain'; children: ReactNode }) {
  return <span className={`badge ${tone}`}>{children}</span>;
}

export function Loading() {
  return <p role="status">Loading…</p>;
}
