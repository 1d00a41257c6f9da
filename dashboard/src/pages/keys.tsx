import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, type Outputs } from '../api.js';
import { CopyButton, ErrorBox, Field, Loading, Notice, Page, Select, Table, usePaged, when } from '../ui.js';

export function Keys() {
  return (
    <Page title="Keys">
      <AccountKey />
      <ScopedKeys />
      <SmtpSettings />
      <AppPasswords />
    </Page>
  );
}

/** The account key is read from the API only when revealed, and kept in this component's memory only. */
function AccountKey() {
  const [key, setKey] = useState<string | undefined>();
  const reveal = useMutation({ mutationFn: () => api.keys.get.query(), onSuccess: (r) => setKey(r.key) });
  const rotate = useMutation({ mutationFn: () => api.keys.rotate.mutate(), onSuccess: (r) => setKey(r.key) });
  return (
    <section aria-labelledby="acct-h">
      <h2 id="acct-h">Account key</h2>
      <p>
        The unrestricted key of the account: it sends from every domain and manages everything. Keep it on servers only.
      </p>
      {key ? (
        <p className="secret">
          <code data-testid="account-key">{key}</code> <CopyButton value={key} what="account key" />{' '}
          <button type="button" className="small" onClick={() => setKey(undefined)}>
            Hide
          </button>
        </p>
      ) : (
        <button type="button" onClick={() => reveal.mutate()} disabled={reveal.isPending}>
          Reveal account key
        </button>
      )}{' '}
      <button
        type="button"
        className="danger"
        disabled={rotate.isPending}
        onClick={() => {
          if (confirm('Rotate the account key? The current key stops working at once.')) rotate.mutate();
        }}
      >
        Rotate account key
      </button>
      {rotate.isSuccess && <Notice>Rotated: the previous key no longer works. The new key is shown above.</Notice>}
      <ErrorBox error={reveal.error ?? rotate.error} />
    </section>
  );
}

function ScopedKeys() {
  const qc = useQueryClient();
  const keys = useQuery({ queryKey: ['scoped-keys'], queryFn: () => api.scopedKeys.list.query() });
  const domains = useQuery({ queryKey: ['domains'], queryFn: () => api.domains.list.query() });
  const [domainId, setDomainId] = useState('');
  const [name, setName] = useState('');
  const create = useMutation({
    mutationFn: () =>
      api.scopedKeys.create.mutate({ domainId: domainId || domains.data![0]!.id, name: name || undefined }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['scoped-keys'] }),
  });
  const revoke = useMutation({
    mutationFn: (id: string) => api.scopedKeys.revoke.mutate({ id }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['scoped-keys'] }),
  });
  const { slice, controls } = usePaged(keys.data);
  return (
    <section aria-labelledby="scoped-h">
      <h2 id="scoped-h">Domain-scoped keys</h2>
      <p>A scoped key sends from and manages one domain only.</p>
      {keys.isPending ? <Loading /> : <ErrorBox error={keys.error ?? revoke.error} />}
      {slice.length > 0 && (
        <Table label="Scoped keys" head={['Name', 'Domain', 'Key', 'Last used', '']}>
          {slice.map((k) => (
            <tr key={k.id}>
              <td>{k.name}</td>
              <td>{k.domain}</td>
              <td>
                <code>{k.key.slice(0, 12)}…</code> <CopyButton value={k.key} what={`key ${k.name}`} />
              </td>
              <td>{when(k.last_used_at)}</td>
              <td>
                <button
                  type="button"
                  className="small danger"
                  onClick={() => revoke.mutate(k.id)}
                  aria-label={`Revoke key ${k.name}`}
                >
                  Revoke
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      {controls}
      {domains.data && domains.data.length > 0 ? (
        <form
          className="card"
          onSubmit={(e) => {
            e.preventDefault();
            create.mutate();
          }}
        >
          <h3>New scoped key</h3>
          <Select
            label="Domain"
            value={domainId}
            onChange={(e) => setDomainId(e.target.value)}
            options={domains.data.map((d) => [d.id, d.domain] as const)}
          />
          <Field label="Name" value={name} onChange={(e) => setName(e.target.value)} />
          <ErrorBox error={create.error} />
          <button type="submit" disabled={create.isPending}>
            Create key
          </button>
        </form>
      ) : (
        <p>Add a domain first to create scoped keys.</p>
      )}
    </section>
  );
}

type Smtp = Outputs['smtpSettings']['get'];
const useSmtpSettings = () => useQuery({ queryKey: ['smtp-settings'], queryFn: () => api.smtpSettings.get.query() });

/** Host, the two ports and their TLS modes: what every SMTP client asks first. */
function SmtpServer({ s }: { s: Smtp }) {
  return (
    <>
      <dt>Server</dt>
      <dd>
        <code>{s.host}</code> <CopyButton value={s.host} what="SMTP server" />
      </dd>
      <dt>Port and security</dt>
      <dd>
        <code>{s.starttls_port}</code> with STARTTLS, or <code>{s.tls_port}</code> with SSL/TLS (implicit TLS)
      </dd>
      <dt>Authentication</dt>
      <dd>Normal password ({s.auth_methods.join(' or ')}), only over TLS</dd>
    </>
  );
}

/** SMTP submission settings for applications that send with an API key as the password. */
function SmtpSettings() {
  const settings = useSmtpSettings();
  return (
    <section aria-labelledby="smtp-h">
      <h2 id="smtp-h">Send with SMTP</h2>
      <p>
        Applications that speak SMTP can send with the account key or a scoped key instead of the HTTP API: same sending
        domains, limits, events and webhooks.
      </p>
      {settings.isPending ? (
        <Loading />
      ) : settings.data ? (
        <dl className="facts">
          <SmtpServer s={settings.data} />
          <dt>User name</dt>
          <dd>Anything (for example your account email): it is not checked with a key</dd>
          <dt>Password</dt>
          <dd>
            The account key above, or a domain-scoped key (<code>svc_live_…</code>) to send from its one domain only
          </dd>
          <dt>Limits</dt>
          <dd>
            {Math.floor(settings.data.max_message_bytes / 1_048_576)} MiB per message, {settings.data.max_recipients}{' '}
            recipients per message
          </dd>
        </dl>
      ) : (
        <ErrorBox error={settings.error} />
      )}
      <p>
        To send as one mailbox (with a copy in its Sent folder), create an app password below with SMTP checked and log
        in with the mailbox&apos;s full address.
      </p>
    </section>
  );
}

function AppPasswords() {
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['app-passwords'], queryFn: () => api.appPasswords.list.query() });
  const domains = useQuery({ queryKey: ['domains'], queryFn: () => api.domains.list.query() });
  const [domainId, setDomainId] = useState('');
  const [address, setAddress] = useState('*');
  const [label, setLabel] = useState('');
  const [imap, setImap] = useState(true);
  const [apiAccess, setApiAccess] = useState(false);
  const [smtp, setSmtp] = useState(false);
  const settings = useSmtpSettings();
  const create = useMutation({
    mutationFn: () =>
      api.appPasswords.create.mutate({
        domainId: domainId || domains.data![0]!.id,
        address,
        label: label || undefined,
        protocols: [
          ...(imap ? ['imap' as const] : []),
          ...(apiAccess ? ['api' as const] : []),
          ...(smtp ? ['smtp' as const] : []),
        ],
      }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['app-passwords'] }),
  });
  const remove = useMutation({
    mutationFn: (id: string) => api.appPasswords.delete.mutate({ id }),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['app-passwords'] }),
  });
  const { slice, controls } = usePaged(list.data);
  return (
    <section aria-labelledby="apw-h">
      <h2 id="apw-h">App passwords</h2>
      <p>
        Mailbox passwords for IMAP clients, the mailbox API and sending with SMTP, each for one domain and an address
        pattern.
      </p>
      {list.isPending ? <Loading /> : <ErrorBox error={list.error ?? remove.error} />}
      {slice.length > 0 && (
        <Table label="App passwords" head={['Label', 'Domain', 'Addresses', 'Protocols', 'Last used', '']}>
          {slice.map((p) => (
            <tr key={p.id}>
              <td>{p.label}</td>
              <td>{p.domain}</td>
              <td>
                <code>{p.address}</code>
              </td>
              <td>{p.protocols.join(', ')}</td>
              <td>{when(p.last_used_at)}</td>
              <td>
                <button
                  type="button"
                  className="small danger"
                  onClick={() => remove.mutate(p.id)}
                  aria-label={`Delete app password ${p.label}`}
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </Table>
      )}
      {controls}
      {domains.data && domains.data.length > 0 ? (
        <form
          className="card"
          onSubmit={(e) => {
            e.preventDefault();
            create.mutate();
          }}
        >
          <h3>New app password</h3>
          <Select
            label="Domain"
            value={domainId}
            onChange={(e) => setDomainId(e.target.value)}
            options={domains.data.map((d) => [d.id, d.domain] as const)}
          />
          <Field
            label="Address pattern"
            value={address}
            onChange={(e) => setAddress(e.target.value)}
            hint="*, an exact local part, support-*, *-agent (no @)."
          />
          <Field label="Label" value={label} onChange={(e) => setLabel(e.target.value)} />
          <fieldset>
            <legend>Protocols</legend>
            <label className="inline">
              <input type="checkbox" checked={imap} onChange={(e) => setImap(e.target.checked)} /> IMAP
            </label>
            <label className="inline">
              <input type="checkbox" checked={apiAccess} onChange={(e) => setApiAccess(e.target.checked)} /> Mailbox API
            </label>
            <label className="inline">
              <input type="checkbox" checked={smtp} onChange={(e) => setSmtp(e.target.checked)} /> SMTP
            </label>
          </fieldset>
          {smtp && settings.data && (
            <dl className="facts">
              <SmtpServer s={settings.data} />
              <dt>User name</dt>
              <dd>
                The full address of a mailbox the pattern covers (e.g.{' '}
                <code>
                  {(address || '*').replace('*', 'name')}@
                  {domains.data.find((d) => d.id === domainId)?.domain ?? domains.data[0]!.domain}
                </code>
                ); messages must come from addresses it covers
              </dd>
              <dt>Password</dt>
              <dd>The app password, shown once after you create it</dd>
            </dl>
          )}
          <ErrorBox error={create.error} />
          <button type="submit" disabled={create.isPending}>
            Create app password
          </button>
        </form>
      ) : (
        <p>Add a domain first to create app passwords.</p>
      )}
      {create.data && (
        <div className="secret" role="status">
          <p>Your new app password, shown this once: copy it now.</p>
          <p>
            <code data-testid="app-password">{create.data.secret}</code>{' '}
            <CopyButton value={create.data.secret} what="app password" />
          </p>
        </div>
      )}
    </section>
  );
}
