import { useMutation, useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api } from '../api.js';
import { Link, navigate, useLocation } from '../router.js';
import { saveSession } from '../session.js';
import { ErrorBox, Field, Notice, Page } from '../ui.js';

type SessionAnswer = { token: string; user: { email: string; emailVerified: boolean } };
const keep = (s: SessionAnswer) =>
  saveSession({ token: s.token, email: s.user.email, emailVerified: s.user.emailVerified });

export function SignUp() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const signup = useMutation({
    mutationFn: () => api.auth.signup.mutate({ email, password, linkTo: 'app' }),
    onSuccess: (s) => {
      keep(s);
      navigate('/');
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    signup.mutate();
  };
  return (
    <Page title="Create an account">
      <form onSubmit={submit} className="narrow">
        <Field
          label="Email"
          type="email"
          autoComplete="email"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        <Field
          label="Password"
          type="password"
          autoComplete="new-password"
          required
          minLength={8}
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          hint="At least 8 characters."
        />
        <ErrorBox error={signup.error} />
        <button type="submit" disabled={signup.isPending}>
          Create account
        </button>
      </form>
      <p>
        Already have an account? <Link to="/signin">Sign in</Link>
      </p>
    </Page>
  );
}

export function SignIn() {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [mode, setMode] = useState<'password' | 'link'>('password');
  const login = useMutation({
    mutationFn: () => api.auth.login.mutate({ email, password }),
    onSuccess: (s) => {
      keep(s);
      navigate('/');
    },
  });
  const link = useMutation({ mutationFn: () => api.auth.signinLink.mutate({ email, linkTo: 'app' }) });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (mode === 'password') login.mutate();
    else link.mutate();
  };
  return (
    <Page title="Sign in">
      <form onSubmit={submit} className="narrow">
        <fieldset>
          <legend>Sign in with</legend>
          <label className="inline">
            <input type="radio" name="mode" checked={mode === 'password'} onChange={() => setMode('password')} /> A
            password
          </label>
          <label className="inline">
            <input type="radio" name="mode" checked={mode === 'link'} onChange={() => setMode('link')} /> A link sent by
            email
          </label>
        </fieldset>
        <Field
          label="Email"
          type="email"
          autoComplete="email"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        {mode === 'password' && (
          <Field
            label="Password"
            type="password"
            autoComplete="current-password"
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
        )}
        <ErrorBox error={mode === 'password' ? login.error : link.error} />
        {link.isSuccess && mode === 'link' && (
          <Notice>If {email} has an account, a sign-in link is on its way. It works once, for 15 minutes.</Notice>
        )}
        <button type="submit" disabled={login.isPending || link.isPending}>
          {mode === 'password' ? 'Sign in' : 'Email me a link'}
        </button>
      </form>
      <p>
        New here? <Link to="/signup">Create an account</Link>
      </p>
    </Page>
  );
}

type LinkDetails = Awaited<ReturnType<typeof api.auth.linkDetails.query>>;
const when = (ms: number) => new Date(ms).toLocaleString();

/**
 * A sign-in link on an account whose address was never proven: what following it revokes (anything made
 * before the owner had the mailbox may be a stranger's), each ticked; unticking one keeps it.
 */
function Revocations({ d, kept, toggle }: { d: LinkDetails; kept: Set<string>; toggle: (id: string) => void }) {
  const list = d.credentials ?? [];
  if (list.length === 0) return null;
  return (
    <fieldset>
      <legend>Revoke when you continue</legend>
      <p>These were made before this address was proven yours. Untick one only if you made it yourself.</p>
      {list.map((c) => (
        <label key={c.id} className="check">
          <input type="checkbox" checked={!kept.has(c.id)} onChange={() => toggle(c.id)} /> {c.label}
        </label>
      ))}
    </fieldset>
  );
}

/** How the account of a mailed link was made and what it holds: shown before the person confirms it is theirs. */
function AccountOrigin({ d, kind }: { d: LinkDetails; kind: 'verify' | 'signin' }) {
  const o = d.origin;
  const how =
    o.via === 'provision'
      ? `from the email address alone${o.channel ? ` (channel ${o.channel})` : ''}`
      : o.via === 'consent'
        ? `on the page where the app “${o.app?.name ?? 'without a name'}” asks to link to an account`
        : o.via === 'signup'
          ? 'by signing up with a password'
          : '';
  const h = d.holdings;
  const items = [
    ...(h.accountKey ? ['The account API key'] : []),
    ...(h.password ? ['A password'] : []),
    ...h.scopedKeys.map((k) => `Domain-scoped key ${k.name ?? ''} for ${k.domain ?? 'a removed domain'}`),
    ...h.appPasswords.map((p) => `App password “${p.label}” for ${p.address}@${p.domain ?? '*'}`),
    ...h.routes.map(
      (r) => `Route ${r.pattern}@${r.domain ?? '?'}: ${r.action}${r.destination ? ` to ${r.destination}` : ''}`,
    ),
    ...h.linkedApps.map((a) => `Linked app ${a.name ?? '(no name)'} since ${when(a.since)}`),
    ...h.domains.map((x) => `Domain ${x.domain} (${x.status})`),
  ];
  return (
    <section aria-labelledby="origin-h">
      <h2 id="origin-h">Is this account yours?</h2>
      <p>
        An account for <strong>{d.email}</strong> was created {how} on {when(o.createdAt)}
        {o.clientIp ? ` from the client address ${o.clientIp}` : ''}.
      </p>
      <h3>What it holds now</h3>
      {items.length ? (
        <ul>
          {items.map((t, i) => (
            <li key={i}>{t}</li>
          ))}
        </ul>
      ) : (
        <p>Nothing yet.</p>
      )}
      <p>
        {kind === 'verify'
          ? 'Continuing confirms the address is yours and keeps all of it working.'
          : 'Continuing signs you in and revokes what is ticked below.'}{' '}
        If you did not make this account, choose “I did not ask for this”: it is deleted with everything it holds.
      </p>
    </section>
  );
}

/**
 * /app/verify?token=… and /app/signin?token=…, the pages mailed links open: for an account not verified yet
 * they first say how it was made and what it holds; nothing changes until a button is pressed (mail scanners
 * open links). Continue confirms the address and signs in; "I did not ask for this" deletes the account.
 */
export function RedeemLink({ kind }: { kind: 'verify' | 'signin' }) {
  const { query } = useLocation();
  const [token] = useState(() => query.get('token') ?? '');
  const [password, setPassword] = useState('');
  const [kept, setKept] = useState<Set<string>>(() => new Set());
  const toggle = (id: string) =>
    setKept((k) => {
      const n = new Set(k);
      if (n.has(id)) n.delete(id);
      else n.add(id);
      return n;
    });
  const details = useQuery({
    queryKey: ['link', token],
    queryFn: () => api.auth.linkDetails.query({ token }),
    enabled: token !== '',
  });
  const done = () => history.replaceState(null, '', `${location.pathname}?done`); // the token is spent: keep it out of the address bar
  const redeem = useMutation({
    mutationFn: () => api.auth.redeemLink.mutate(kind === 'signin' ? { token, keep: [...kept] } : { token }),
    onSuccess: (s) => {
      keep(s);
      done();
    },
  });
  const disown = useMutation({ mutationFn: () => api.auth.disown.mutate({ token }), onSuccess: done });
  const setPw = useMutation({
    mutationFn: () => api.auth.changePassword.mutate({ password }),
    onSuccess: (s) => keep(s),
  });
  if (disown.isSuccess) {
    return (
      <Page title="Account deleted">
        <p>The account for {disown.data.email} and everything it held are deleted.</p>
      </Page>
    );
  }
  if (!token && !redeem.isSuccess) {
    return (
      <Page title="This link is incomplete">
        <p>
          Open the link from your mail again, or <Link to="/signin">sign in</Link>.
        </p>
      </Page>
    );
  }
  if (!redeem.isSuccess) {
    const unverified = details.data && !details.data.emailVerified;
    return (
      <Page title={kind === 'verify' ? 'Verify your email address' : 'Sign in'}>
        <ErrorBox error={details.error} />
        {unverified && <AccountOrigin d={details.data} kind={kind} />}
        {unverified && kind === 'signin' && <Revocations d={details.data} kept={kept} toggle={toggle} />}
        <p>Continue to {kind === 'verify' ? 'verify your address and sign in' : 'sign in'} with this one-time link.</p>
        <ErrorBox error={redeem.error ?? disown.error} />
        <button type="button" onClick={() => redeem.mutate()} disabled={redeem.isPending || details.isPending}>
          Continue
        </button>
        {unverified && (
          <button type="button" className="danger" onClick={() => disown.mutate()} disabled={disown.isPending}>
            I did not ask for this
          </button>
        )}
      </Page>
    );
  }
  return (
    <Page title={kind === 'verify' ? 'Email address verified' : 'Signed in'}>
      <Notice>
        Signed in as {redeem.data.user.email}.{' '}
        {redeem.data.user.emailVerified ? 'Your address is verified: you can send.' : ''}
      </Notice>
      {details.data?.holdings.password === false && (
        <form
          className="narrow"
          onSubmit={(e) => {
            e.preventDefault();
            setPw.mutate();
          }}
        >
          <h2>Set a password (optional)</h2>
          <Field
            label="New password"
            type="password"
            autoComplete="new-password"
            minLength={8}
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
          <ErrorBox error={setPw.error} />
          {setPw.isSuccess && <Notice>Password set.</Notice>}
          <button type="submit" disabled={setPw.isPending}>
            Set password
          </button>
        </form>
      )}
      <p>
        <Link to="/">Go to the dashboard</Link>
      </p>
    </Page>
  );
}
