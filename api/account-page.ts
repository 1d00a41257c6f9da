import type { LinkDetails } from '../core/accounts.js';
import type { UnprovenCredential } from '../core/unproven-credentials.js';
import { esc } from './oauth/page.js';

const when = (ms: number) =>
  new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC');
const list = (items: string[], none: string) =>
  items.length ? `<ul>${items.map((i) => `<li>${i}</li>`).join('')}</ul>` : `<p class="muted">${none}</p>`;

/** One sentence on how the account was made: the channel, the app's consent page, when, from which client address. */
export function originHtml(d: LinkDetails): string {
  const o = d.origin;
  const how =
    o.via === 'provision'
      ? `was created from the email address alone (<code>POST /api/v1/provision</code>${o.channel ? `, channel <strong>${esc(o.channel)}</strong>` : ''})`
      : o.via === 'consent'
        ? `was created on the page where <strong>${esc(o.app?.name ?? 'an app that gave no name')}</strong> asks to link to an account (the app chose that name itself)`
        : o.via === 'signup'
          ? 'was created by signing up with a password'
          : 'was created';
  const from = o.clientIp ? ` from the client address <span class="host">${esc(o.clientIp)}</span>` : '';
  return `<p>An account for <strong>${esc(d.email)}</strong> ${how}, on ${esc(when(o.createdAt))}${from}.</p>`;
}

/** Everything the account already holds that someone could be using: keys, passwords, routes, linked apps, domains. */
export function holdingsHtml(d: LinkDetails): string {
  const h = d.holdings;
  const items = [
    ...(h.accountKey ? ['The account API key (<code>svc_live_…</code>)'] : []),
    ...(h.password ? ['A password'] : []),
    ...h.scopedKeys.map(
      (k) => `Domain-scoped key ${k.name ? `“${esc(k.name)}” ` : ''}for ${esc(k.domain ?? 'a removed domain')}`,
    ),
    ...h.appPasswords.map((p) => `App password “${esc(p.label)}” for ${esc(p.address)}@${esc(p.domain ?? '*')}`),
    ...h.routes.map(
      (r) =>
        `Route ${esc(r.pattern)}@${esc(r.domain ?? '?')}: ${esc(r.action)}${r.destination ? ` to <span class="host">${esc(r.destination)}</span>` : ''}`,
    ),
    ...h.linkedApps.map(
      (a) => `Linked app ${a.name ? `<strong>${esc(a.name)}</strong>` : '(no name)'} since ${esc(when(a.since))}`,
    ),
    ...h.domains.map((x) => `Domain ${esc(x.domain)} (${esc(x.status)})`),
  ];
  return `<section class="card" aria-labelledby="holds-h"><h2 id="holds-h">What it holds now</h2>
${list(items, 'Nothing yet: no keys, passwords, routes, linked apps or domains.')}
<p class="muted">Confirming keeps all of it working for you. If you did not make this account, someone else may hold these credentials.</p></section>`;
}

/** The form of one action on a mailed link: posted back to /auth/verify with the link's token and the CSRF token. */
export function actionForm(
  action: 'confirm' | 'disown',
  token: string,
  csrf: string,
  label: string,
  cls: string,
  back?: string,
): string {
  const hidden = Object.entries({ token, csrf, action, ...(back ? { back } : {}) })
    .map(([k, v]) => `<input type="hidden" name="${k}" value="${esc(v)}">`)
    .join('');
  return `<form method="post" action="/auth/verify" aria-label="${esc(label)}">${hidden}<button type="submit" class="${cls}">${esc(label)}</button></form>`;
}

/** The page a verification link opens: how the account was made, what it holds, and the two answers. */
export function verifyPageBody(d: LinkDetails, token: string, csrf: string): string {
  if (d.emailVerified) {
    return `<h1>This address is verified</h1><p><strong>${esc(d.email)}</strong> was confirmed already. Nothing to do here.</p>`;
  }
  return `<h1>Is this account yours?</h1>
${originHtml(d)}
${holdingsHtml(d)}
<section class="card" aria-labelledby="answer-h"><h2 id="answer-h">Your answer</h2>
<div class="actions">
${actionForm('confirm', token, csrf, 'Yes, it is mine: verify it', 'primary')}
${actionForm('disown', token, csrf, 'I did not ask for this', 'secondary')}
</div>
<p class="muted">“I did not ask for this” deletes the account with everything it holds (keys, sessions, app passwords, routes, linked apps, domains). Nothing happens until you choose.</p>
</section>`;
}

/** The part of the sign-in and reset pages for an account not verified yet: what it is, and the way to disown it. */
export function unverifiedNotice(d: LinkDetails, token: string, csrf: string): string {
  return `<section class="card" aria-labelledby="unverified-h"><h2 id="unverified-h">This account is not verified yet</h2>
${originHtml(d)}
${holdingsHtml(d)}
<p>Continuing confirms the address is yours and revokes the credentials ticked in the form below. If you did not make this account at all:</p>
${actionForm('disown', token, csrf, 'I did not ask for this', 'secondary')}
</section>`;
}

/** Most credentials the page offers to keep one by one: the form stays under the body parser's field limit; the rest are revoked. */
const MAX_CHOICES = 40;

/**
 * Inside the sign-in or reset form of an address never proven: every credential the account holds, ticked
 * (revoked). The owner unticks one they made themselves to keep it. `listed` says what the page showed, so a
 * credential made after it was shown is revoked too.
 */
export function revokeChoices(credentials: UnprovenCredential[]): string {
  if (credentials.length === 0) return '';
  const shown = credentials.slice(0, MAX_CHOICES);
  const rest = credentials.length - shown.length;
  const rows = shown
    .map(
      (c) =>
        `<li><label><input type="checkbox" name="revoke" value="${esc(c.id)}" checked> ${esc(c.label)}</label></li>`,
    )
    .join('');
  return `<fieldset><legend>Revoked when you continue</legend>
<p class="muted">This address was never confirmed, so anyone could have made these. Untick one only if you made it yourself.</p>
<input type="hidden" name="listed" value="${esc(shown.map((c) => c.id).join(' '))}"><ul>${rows}</ul>
${rest > 0 ? `<p class="muted">And ${rest} more, revoked too (keep them from the API with <code>keep</code>).</p>` : ''}</fieldset>`;
}

/** What the owner keeps from a posted form: the credentials it listed that were unticked. */
export function keptFrom(body: Record<string, unknown>): string[] {
  const values = (v: unknown) => (Array.isArray(v) ? v : [v]).filter((x): x is string => typeof x === 'string');
  const revoked = new Set(values(body.revoke));
  return values(body.listed)
    .join(' ')
    .split(' ')
    .filter((id) => id !== '' && !revoked.has(id));
}
