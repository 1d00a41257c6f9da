import { useMutation, useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api.js';
import { Link } from '../router.js';
import { Area, ErrorBox, Loading, Notice, Page } from '../ui.js';
import { ActivityPanel } from './overview.js';

/** Bytes as MiB with one decimal. */
const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** The overview: the account, and usage against its plan. */
export function Usage() {
  const me = useQuery({ queryKey: ['me'], queryFn: () => api.me.get.query() });
  const usage = useQuery({ queryKey: ['usage'], queryFn: () => api.billing.usage.query() });
  const u = usage.data;
  const pct = u && u.emails.included ? Math.min(100, Math.round((u.emails.used / u.emails.included) * 100)) : undefined;
  const storagePct =
    u && u.storage.quota ? Math.min(100, Math.round((u.storage.used / u.storage.quota) * 100)) : undefined;
  return (
    <Page title="Overview">
      {me.isPending || usage.isPending ? <Loading /> : <ErrorBox error={me.error ?? usage.error} />}
      {me.data && (
        <dl className="facts">
          <dt>Account</dt>
          <dd>
            {me.data.email} ({me.data.emailVerified ? 'verified' : 'not verified yet'})
          </dd>
          <dt>Plan</dt>
          <dd>{me.data.plan}</dd>
          <dt>Sending domains</dt>
          <dd>
            {me.data.sendingDomains.length ? (
              me.data.sendingDomains.join(', ')
            ) : (
              <>
                none yet: <Link to="/domains">add one</Link>
              </>
            )}
          </dd>
        </dl>
      )}
      <ActivityPanel name="The account" />
      {u && (
        <section aria-labelledby="usage-h">
          <h2 id="usage-h">Usage this month</h2>
          <p>
            Emails (inbound and outbound): {u.emails.used}
            {u.emails.included != null ? ` of ${u.emails.included}` : ' (unlimited)'}
          </p>
          {pct !== undefined && (
            <progress max={100} value={pct} aria-label="Emails used of the plan">
              {pct}%
            </progress>
          )}
          <p>AI actions: {u.aiActions.used}</p>
          {u.overage.over && (
            <p className="error" role="alert">
              Over the plan
              {u.overage.blocked ? ': sending is blocked' : u.overage.metered ? ': overage is metered' : ''}.
            </p>
          )}
          <h2 id="storage-h">Storage</h2>
          <p>
            Mailboxes and attachments: {mib(u.storage.used)} of {mib(u.storage.quota)} (mailboxes{' '}
            {mib(u.storage.mailboxes)}, attachments {mib(u.storage.attachments)})
          </p>
          {storagePct !== undefined && (
            <progress max={100} value={storagePct} aria-label="Storage used of the quota">
              {storagePct}%
            </progress>
          )}
          {u.storage.used >= u.storage.quota && (
            <p className="error" role="alert">
              Storage is full: IMAP APPEND and COPY and new attachments are refused until something is deleted.
            </p>
          )}
        </section>
      )}
      <Settings />
    </Page>
  );
}

/** Account settings: the postal address that new broadcast drafts put in their CAN-SPAM footer. */
function Settings() {
  const settings = useQuery({ queryKey: ['settings'], queryFn: () => api.account.settings.query() });
  if (!settings.data) return settings.isPending ? null : <ErrorBox error={settings.error} />;
  return <FooterAddress initial={settings.data.footerAddress ?? ''} />;
}

function FooterAddress({ initial }: { initial: string }) {
  const [address, setAddress] = useState(initial);
  const save = useMutation({
    mutationFn: () => api.account.updateSettings.mutate({ footerAddress: address.trim() || null }),
  });
  return (
    <form
      className="card narrow"
      onSubmit={(e) => {
        e.preventDefault();
        save.mutate();
      }}
    >
      <h2>Broadcast footer</h2>
      <Area
        label="Postal address"
        rows={3}
        value={address}
        onChange={(e) => setAddress(e.target.value)}
        hint="Shown in the footer of broadcasts (CAN-SPAM); new drafts start with it. Empty: the operator's default."
      />
      <ErrorBox error={save.error} />
      {save.isSuccess && <Notice>Saved.</Notice>}
      <button type="submit" disabled={save.isPending}>
        Save footer address
      </button>
    </form>
  );
}
