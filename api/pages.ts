import type { Express } from 'express';

const escape = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Pages mailed links open: sign-in (one button that exchanges the token for a session) and password reset. */
export function mountPages(app: Express): void {
  app.get('/auth/signin', (req, res) => {
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    res.type('html').set('Content-Security-Policy', "default-src 'none'; script-src 'unsafe-inline'; connect-src 'self'; style-src 'unsafe-inline'").send(`<!doctype html>
<html><head><meta charset="utf-8"><title>Sign in</title><meta name="referrer" content="no-referrer"></head>
<body style="font-family:sans-serif;max-width:32rem;margin:4rem auto">
<h1>Sign in</h1>
<p>Continue to sign in with this one-time link.</p>
<button id="go">Sign in</button>
<pre id="out" style="white-space:pre-wrap"></pre>
<script>
document.getElementById('go').onclick = async () => {
  const r = await fetch('/api/auth/signin', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: ${JSON.stringify(escape(token))} }) });
  const body = await r.json();
  document.getElementById('out').textContent = r.ok ? 'Signed in as ' + body.user.email + '.\\nSession token:\\n' + body.token : body.error;
};
</script></body></html>`);
  });

  /** The page a mailed password-reset link opens: a new password, posted with the token. */
  app.get('/auth/reset', (req, res) => {
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    res.type('html').set('Content-Security-Policy', "default-src 'none'; script-src 'unsafe-inline'; connect-src 'self'; style-src 'unsafe-inline'").send(`<!doctype html>
<html><head><meta charset="utf-8"><title>Reset password</title><meta name="referrer" content="no-referrer"></head>
<body style="font-family:sans-serif;max-width:32rem;margin:4rem auto">
<h1>Choose a new password</h1>
<input id="pw" type="password" minlength="8" autocomplete="new-password"> <button id="go">Set password</button>
<pre id="out" style="white-space:pre-wrap"></pre>
<script>
document.getElementById('go').onclick = async () => {
  const password = document.getElementById('pw').value;
  const r = await fetch('/api/auth/password/reset', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: ${JSON.stringify(escape(token))}, password }) });
  const body = await r.json();
  document.getElementById('out').textContent = r.ok ? 'Password set for ' + body.user.email + '. Other sessions were signed out.' : body.error;
};
</script></body></html>`);
  });
}
