import { createHash, randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { schema } from '../../db/index.js';
import { freePort } from './ports.js';
import { startStack, type TestStack } from './stack.js';

/** A PKCE pair: a random verifier and its S256 challenge. */
export function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Registers a public client over POST /oauth/register and answers its registration response. */
export async function registerClient(stack: TestStack, redirectUris: string[], name = 'Test App') {
  const res = await stack.api('POST', '/oauth/register', { body: { client_name: name, redirect_uris: redirectUris } });
  if (res.status !== 201) throw new Error(`registration failed: ${JSON.stringify(res.body)}`);
  return res.body as { client_id: string; redirect_uris: string[] };
}

/** A password account whose email is verified (set in the database: the browser test proves the mailed link). */
export async function verifiedAccount(stack: TestStack, email: string, password = 'linking password 1') {
  await stack.api('POST', '/api/auth/signup', { body: { email, password } });
  await stack.service.core.db.update(schema.users).set({ emailVerified: true }).where(eq(schema.users.email, email));
  return { email, password };
}

type Form = { action: string; fields: Record<string, string> };

/** Drives /oauth/authorize over plain HTTP with a cookie jar, the way a browser posts its forms. */
export class ConsentDriver {
  cookies = new Map<string, string>();
  html = '';
  status = 0;
  constructor(readonly stack: TestStack) {}

  async request(method: 'GET' | 'POST', pathOrUrl: string, form?: Record<string, string>): Promise<Response> {
    const headers: Record<string, string> = { cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') };
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
    const url = pathOrUrl.startsWith('http') ? pathOrUrl : this.stack.baseUrl + pathOrUrl;
    const res = await fetch(url, {
      method,
      headers,
      body: form ? new URLSearchParams(form).toString() : undefined,
      redirect: 'manual',
    });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair!.indexOf('=');
      const value = pair!.slice(i + 1);
      if (/expires=Thu, 01 Jan 1970/i.test(c)) this.cookies.delete(pair!.slice(0, i));
      else this.cookies.set(pair!.slice(0, i), value);
    }
    this.status = res.status;
    this.html = res.headers.get('content-type')?.includes('html') ? await res.text() : '';
    return res;
  }

  /** Loads the page and follows same-site redirects (the page's own post-redirect-get). */
  async open(pathOrUrl: string): Promise<Response> {
    let res = await this.request('GET', pathOrUrl);
    while (res.status === 303 && res.headers.get('location')?.startsWith('/oauth/'))
      res = await this.request('GET', res.headers.get('location')!);
    return res;
  }

  /** The form on the current page whose hidden `action` is `action`. */
  form(action: string): Form {
    for (const m of this.html.matchAll(/<form[^>]*>([\s\S]*?)<\/form>/g)) {
      const fields: Record<string, string> = {};
      for (const i of m[1]!.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g))
        fields[decode(i[1]!)] = decode(i[2]!);
      if (fields.action === action) return { action, fields };
    }
    throw new Error(`no "${action}" form on the page:\n${this.html}`);
  }

  /** Submits a form of the page with extra fields; same-site redirects are followed, others answered. */
  async submit(action: string, extra: Record<string, string> = {}): Promise<Response> {
    const res = await this.request('POST', '/oauth/authorize', { ...this.form(action).fields, ...extra });
    const loc = res.headers.get('location');
    if (res.status === 303 && loc?.startsWith('/oauth/')) return this.open(loc);
    return res;
  }
}

const decode = (s: string) => s.replace(/&#(\d+);/g, (_m, n: string) => String.fromCharCode(Number(n)));

/** Signs in with a password on the consent page and approves; answers the redirect back to the app. */
export async function approveOverHttp(
  stack: TestStack,
  authorizeUrl: string,
  account: { email: string; password: string },
): Promise<URL> {
  const d = new ConsentDriver(stack);
  await d.open(authorizeUrl);
  await d.submit('login', { email: account.email, password: account.password });
  const res = await d.submit('approve');
  if (res.status !== 303) throw new Error(`approve answered ${res.status}:\n${d.html}`);
  return new URL(res.headers.get('location')!);
}

/** The authorize URL for a client (S256 challenge, state), as a client library would build it. */
export function authorizeUrl(
  stack: TestStack,
  p: { clientId: string; redirectUri: string; challenge: string; state?: string; extra?: Record<string, string> },
) {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: p.clientId,
    redirect_uri: p.redirectUri,
    code_challenge: p.challenge,
    code_challenge_method: 'S256',
    scope: 'account',
    ...(p.state ? { state: p.state } : {}),
    ...p.extra,
  });
  return `${stack.baseUrl}/oauth/authorize?${q}`;
}

/** Exchanges a code at POST /oauth/token (form-encoded, as RFC 6749 says). */
export async function tokenRequest(stack: TestStack, fields: Record<string, string>) {
  const res = await fetch(`${stack.baseUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any>, headers: res.headers };
}

/** A stack whose PUBLIC_URL (the OAuth issuer) is the loopback address the tests call, as strict clients require. */
export async function startOAuthStack(
  env: Record<string, string> = {},
  roles?: Parameters<typeof startStack>[1],
): Promise<TestStack> {
  const port = await freePort();
  return startStack({ PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}`, ...env }, roles);
}
