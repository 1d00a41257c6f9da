import { SCOPE_DESCRIPTION } from '../../core/oauth/scope.js';

/** Escapes text for HTML element content and double-quoted attributes. */
export const esc = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** What every form of one authorization request carries: the request itself and its CSRF token. */
export type FormContext = { fields: Record<string, string>; csrf: string };

export type Notice = { kind: 'error' | 'info'; text: string };

const STYLE = `
*{box-sizing:border-box}
body{margin:0;font:1rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1b1b1f;background:#f4f5f7}
main{max-width:30rem;margin:0 auto;padding:1.5rem 1rem 3rem}
.card{background:#fff;border:1px solid #d0d4da;border-radius:.75rem;padding:1.25rem;margin:0 0 1rem}
h1{font-size:1.5rem;line-height:1.25;margin:0 0 1rem}
h2{font-size:1.15rem;margin:0 0 .75rem}
p{margin:0 0 .75rem}
ul{margin:0 0 1rem;padding-left:1.25rem}
label{display:block;font-weight:600;margin:.75rem 0 .25rem}
input[type=email],input[type=password]{width:100%;font:inherit;padding:.7rem .75rem;border:1px solid #6b7280;border-radius:.5rem;background:#fff;color:#1b1b1f}
button{font:inherit;font-weight:600;min-height:2.75rem;padding:.6rem 1.1rem;border-radius:.5rem;border:2px solid #0b4fc4;cursor:pointer;margin:.75rem .5rem 0 0}
.primary{background:#0b4fc4;color:#fff}
.secondary{background:#fff;color:#0b4fc4}
.link{border:0;background:none;color:#0b4fc4;text-decoration:underline;padding:.25rem 0;min-height:auto}
:focus-visible{outline:3px solid #b45309;outline-offset:2px}
.notice{padding:.75rem 1rem;border-radius:.5rem;margin:0 0 1rem;border:1px solid}
.error{background:#fdecea;border-color:#b3261e;color:#7a1610}
.info{background:#e8f0fe;border-color:#0b4fc4;color:#0a3a8c}
.muted{color:#4b5563;font-size:.95rem}
.host{font-family:ui-monospace,monospace;overflow-wrap:anywhere}
.actions{display:flex;flex-wrap:wrap;align-items:center;gap:.5rem}
.actions button{margin-right:0}
hr{border:0;border-top:1px solid #d0d4da;margin:1.25rem 0 .5rem}
@media (max-width:24rem){button{width:100%;margin-right:0}}
`;

/** A whole page: viewport for phones, one stylesheet allowed by nonce, nothing else loaded. */
export function renderPage(title: string, body: string, nonce: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${esc(title)}</title>
<style nonce="${nonce}">${STYLE}</style></head>
<body><main>${body}</main></body></html>`;
}

/** A message above the forms: errors are announced at once (`alert`), information politely (`status`). */
export const noticeHtml = (n: Notice | undefined) =>
  n ? `<div class="notice ${n.kind}" role="${n.kind === 'error' ? 'alert' : 'status'}">${esc(n.text)}</div>` : '';

/** A form posting one action of the authorization request back to /oauth/authorize. */
export function form(ctx: FormContext, action: string, inner: string, label?: string): string {
  const hidden = Object.entries({ ...ctx.fields, csrf: ctx.csrf })
    .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
    .join('');
  return `<form method="post" action="/oauth/authorize"${label ? ` aria-label="${esc(label)}"` : ''}>${hidden}<input type="hidden" name="action" value="${esc(action)}">${inner}</form>`;
}

/** Who is asking: the app's own name (marked as self-declared) and where it will send you back. */
export function appHeader(clientName: string | null, redirectHost: string): string {
  const name = clientName ? `<strong>${esc(clientName)}</strong>` : '<strong>An app that gave no name</strong>';
  return `<p>${name} wants to link to your account.</p>
<p class="muted">After you decide, you will be sent back to <span class="host">${esc(redirectHost)}</span>. The name is the one the app chose for itself.</p>
<section class="card" aria-labelledby="scope-h">
<h2 id="scope-h">If you approve, it will be able to</h2>
<ul>${SCOPE_DESCRIPTION.map((d) => `<li>${esc(d)}</li>`).join('')}</ul>
<p class="muted">You can unlink it at any time; its access stops at once.</p>
</section>`;
}

/** The consent screen (what the app may do is listed above it): Approve or Deny. */
export function consentSection(ctx: FormContext, email: string): string {
  return `<section class="card" aria-labelledby="consent-h">
<h2 id="consent-h">Allow this app to act on your account?</h2>
<div class="actions">
${form(ctx, 'approve', '<button type="submit" class="primary">Approve</button>', 'Approve')}
${form(ctx, 'deny', '<button type="submit" class="secondary">Deny</button>', 'Deny')}
</div></section>
${signedInAs(ctx, email)}`;
}

/** Shown to a signed-in account whose email is not verified yet: approval waits for the mailed link. */
export function verifySection(ctx: FormContext, email: string): string {
  return `<section class="card" aria-labelledby="verify-h">
<h2 id="verify-h">Verify your email to continue</h2>
<p>We sent a link to <strong>${esc(email)}</strong>. Open it in this browser: it brings you back here to approve.</p>
${form(ctx, 'link', `<input type="hidden" name="email" value="${esc(email)}"><button type="submit" class="secondary">Send the link again</button>`, 'Send the link again')}
${form(ctx, 'deny', '<button type="submit" class="link">Cancel and go back to the app</button>', 'Deny')}
</section>
${signedInAs(ctx, email)}`;
}

/** Not signed in: sign in with a password or a mailed link, or create an account, all on this page. */
export function signinSections(ctx: FormContext, email = ''): string {
  const emailInput = (id: string, auto: string) =>
    `<label for="${id}">Email</label><input id="${id}" name="email" type="email" autocomplete="${auto}" required value="${esc(email)}">`;
  return `<section class="card" aria-labelledby="signin-h">
<h2 id="signin-h">Sign in</h2>
${form(
  ctx,
  'login',
  `${emailInput('signin-email', 'username')}
<label for="signin-password">Password</label><input id="signin-password" name="password" type="password" autocomplete="current-password" required>
<button type="submit" class="primary">Sign in</button>`,
  'Sign in',
)}
<hr><p class="muted">No password, or forgot it? We can email you a link that signs you in and brings you back here.</p>
${form(ctx, 'link', `${emailInput('link-email', 'email')}<button type="submit" class="secondary">Email me a sign-in link</button>`, 'Email me a sign-in link')}
</section>
<section class="card" aria-labelledby="signup-h">
<h2 id="signup-h">New here? Create an account</h2>
${form(
  ctx,
  'signup',
  `${emailInput('signup-email', 'email')}
<label for="signup-password">Choose a password</label><input id="signup-password" name="password" type="password" autocomplete="new-password" minlength="8" required aria-describedby="signup-hint">
<p id="signup-hint" class="muted">At least 8 characters. We will email you a link to verify the address.</p>
<button type="submit" class="primary">Create account</button>`,
  'Create account',
)}
</section>
${form(ctx, 'deny', '<button type="submit" class="link">Cancel and go back to the app</button>', 'Deny')}`;
}

/**
 * A mailed link opened: one button signs in, so a mail scanner fetching the link cannot use it up. For an
 * account not verified yet, `unverified` says how it was made and what it holds, and "I did not ask for this" deletes it.
 */
export function redeemSection(ctx: FormContext, token: string, unverified?: string, choices = ''): string {
  const tokenField = `<input type="hidden" name="login_token" value="${esc(token)}">`;
  // A verification link keeps what the account holds; a sign-in link on an address never proven revokes what is ticked.
  const outcome = choices ? 'revokes the credentials ticked below' : 'keeps everything the account holds';
  return `<section class="card" aria-labelledby="redeem-h">
<h2 id="redeem-h">Continue with your emailed link</h2>
${unverified ? `${unverified}<p>Continuing confirms the address is yours and ${outcome}.</p>` : ''}
<div class="actions">
${form(ctx, 'redeem', `${tokenField}${choices}<button type="submit" class="primary">Continue</button>`, 'Continue')}
${unverified ? form(ctx, 'disown', `${tokenField}<button type="submit" class="secondary">I did not ask for this</button>`, 'I did not ask for this') : ''}
</div>
</section>`;
}

function signedInAs(ctx: FormContext, email: string): string {
  return `<p class="muted">Signed in as <strong>${esc(email)}</strong>.</p>
${form(ctx, 'logout', '<button type="submit" class="link">Not you? Sign out</button>', 'Sign out')}`;
}

/** An error that must not be sent to the app (unknown app or return address, forged form). */
export function errorBody(message: string): string {
  return `<h1>This link to your account cannot continue</h1>${noticeHtml({ kind: 'error', text: message })}
<p>Go back to the app and start again. If it keeps happening, the app may be misconfigured.</p>`;
}
