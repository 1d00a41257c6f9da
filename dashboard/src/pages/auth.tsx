import { useMutation } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api } from '../api.js';
import { Link, navigate, useLocation } from '../router.js';
import { saveSession } from '../session.js';
import { ErrorBox, Field, Notice, Page } from '../ui.js';

type SessionAnswer = { token: string; user: { email: string; emailVerified: boolean } };
const keep = (s: SessionAnswer) => saveSession({ token: s.token, email: s.user.email, emailVerified: s.user.emailVerified });

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
        <Field label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        <Field label="Password" type="password" autoComplete="new-password" required minLength={8} value={password}
          onChange={(e) => setPassword(e.target.value)} hint="At least 8 characters." />
        <ErrorBox error={signup.error} />
        <button type="submit" disabled={signup.isPending}>Create account</button>
      </form>
      <p>Already have an account? <Link to="/signin">Sign in</Link></p>
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
          <label className="inline"><input type="radio" name="mode" checked={mode === 'password'} onChange={() => setMode('password')} /> A password</label>
          <label className="inline"><input type="radio" name="mode" checked={mode === 'link'} onChange={() => setMode('link')} /> A link sent by email</label>
        </fieldset>
        <Field label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.target.value)} />
        {mode === 'password' && (
          <Field label="Password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
        )}
        <ErrorBox error={mode === 'password' ? login.error : link.error} />
        {link.isSuccess && mode === 'link' && <Notice>If {email} has an account, a sign-in link is on its way. It works once, for 15 minutes.</Notice>}
        <button type="submit" disabled={login.isPending || link.isPending}>{mode === 'password' ? 'Sign in' : 'Email me a link'}</button>
      </form>
      <p>New here? <Link to="/signup">Create an account</Link></p>
    </Page>
  );
}

/**
 * /app/verify?token=… and /app/signin?token=…, the pages mailed links open: one button (so a mail scanner
 * fetching the link does not use it up), then a session. A first verification clears the password chosen
 * at sign-up and ends earlier sessions (README: accounts), so a new password can be set here.
 */
export function RedeemLink({ kind }: { kind: 'verify' | 'signin' }) {
  const { query } = useLocation();
  const [token] = useState(() => query.get('token') ?? '');
  const [password, setPassword] = useState('');
  const redeem = useMutation({
    mutationFn: () => api.auth.redeemLink.mutate({ token }),
    onSuccess: (s) => {
      keep(s);
      history.replaceState(null, '', `${location.pathname}?done`); // the token is spent: keep it out of the address bar
    },
  });
  const setPw = useMutation({
    mutationFn: () => api.auth.changePassword.mutate({ password }),
    onSuccess: (s) => keep(s),
  });
  if (!token && !redeem.isSuccess) {
    return <Page title="This link is incomplete"><p>Open the link from your mail again, or <Link to="/signin">sign in</Link>.</p></Page>;
  }
  if (!redeem.isSuccess) {
    return (
      <Page title={kind === 'verify' ? 'Verify your email address' : 'Sign in'}>
        <p>Continue to {kind === 'verify' ? 'verify your address and sign in' : 'sign in'} with this one-time link.</p>
        <ErrorBox error={redeem.error} />
        <button type="button" onClick={() => redeem.mutate()} disabled={redeem.isPending}>Continue</button>
      </Page>
    );
  }
  return (
    <Page title={kind === 'verify' ? 'Email address verified' : 'Signed in'}>
      <Notice>Signed in as {redeem.data.user.email}. {redeem.data.user.emailVerified ? 'Your address is verified: you can send.' : ''}</Notice>
      <form className="narrow" onSubmit={(e) => { e.preventDefault(); setPw.mutate(); }}>
        <h2>Set a password (optional)</h2>
        <p>The first verification of an address clears any password set before it, so that only the address owner holds one.</p>
        <Field label="New password" type="password" autoComplete="new-password" minLength={8} required value={password} onChange={(e) => setPassword(e.target.value)} />
        <ErrorBox error={setPw.error} />
        {setPw.isSuccess && <Notice>Password set.</Notice>}
        <button type="submit" disabled={setPw.isPending}>Set password</button>
      </form>
      <p><Link to="/">Go to the dashboard</Link></p>
    </Page>
  );
}
