import type { ClientRow, ClientService } from './clients.js';
import type { ResourceRules } from './resource.js';
import { parseScope } from './scope.js';

/** A valid authorization request (RFC 6749 §4.1.1 with PKCE S256, RFC 7636). */
export type AuthorizationRequest = {
  client: ClientRow;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  scope: string;
};

/**
 * What to do with an authorization request: go on; redirect an error to the client (its redirect URI is
 * registered, so trusted); or show the error on the page (unknown client or redirect URI: never redirect).
 */
export type AuthorizeCheck =
  | { kind: 'ok'; request: AuthorizationRequest }
  | { kind: 'redirect'; redirectUri: string; state: string | undefined; error: string; description: string }
  | { kind: 'page'; message: string };

const PARAMS = [
  'response_type',
  'client_id',
  'redirect_uri',
  'state',
  'code_challenge',
  'code_challenge_method',
  'scope',
  'resource',
] as const;
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/** Validates the parameters of /oauth/authorize (query on GET, form fields on POST). */
export async function checkAuthorizationRequest(
  input: Record<string, unknown>,
  clients: ClientService,
  resources: ResourceRules,
): Promise<AuthorizeCheck> {
  const p: Partial<Record<(typeof PARAMS)[number], string>> = {};
  const repeated: string[] = [];
  for (const name of PARAMS) {
    const v = input[name];
    if (Array.isArray(v)) repeated.push(name);
    else if (typeof v === 'string' && v !== '') p[name] = v;
  }
  if (!p.client_id) return { kind: 'page', message: 'The app did not say who it is (client_id is missing).' };
  if (repeated.includes('client_id') || repeated.includes('redirect_uri'))
    return { kind: 'page', message: 'client_id and redirect_uri may be given only once.' };
  const client = await clients.get(p.client_id);
  if (!client) return { kind: 'page', message: 'This app is not registered here (unknown client_id).' };
  if (!p.redirect_uri)
    return { kind: 'page', message: 'The app did not say where to return (redirect_uri is missing).' };
  if (!client.redirectUris.includes(p.redirect_uri)) {
    return {
      kind: 'page',
      message:
        'The return address (redirect_uri) does not match any address this app registered, so you were not sent back to it.',
    };
  }
  const redirectUri = p.redirect_uri;
  const state = repeated.includes('state') ? undefined : p.state;
  const fail = (error: string, description: string): AuthorizeCheck => ({
    kind: 'redirect',
    redirectUri,
    state,
    error,
    description,
  });
  if (repeated.length) return fail('invalid_request', `${repeated.join(', ')} given more than once`);
  if (p.response_type !== 'code') {
    return p.response_type
      ? fail('unsupported_response_type', 'Only response_type=code is supported')
      : fail('invalid_request', 'response_type is required');
  }
  if (!p.code_challenge)
    return fail('invalid_request', 'PKCE is required: send code_challenge with code_challenge_method=S256');
  if (p.code_challenge_method !== 'S256')
    return fail('invalid_request', 'code_challenge_method must be S256 (plain is not accepted)');
  if (!CHALLENGE.test(p.code_challenge))
    return fail('invalid_request', 'code_challenge must be the base64url SHA-256 of the verifier (43 characters)');
  const scope = parseScope(p.scope);
  if (!scope) return fail('invalid_scope', 'The only scope is "account" (also accepted as "mcp")');
  // RFC 8707: a resource of someone else's is refused here; the token request names the one its token is for.
  if (!resources.accepts(p.resource))
    return fail('invalid_target', `This server issues tokens for ${resources.mcp} and its API only`);
  return { kind: 'ok', request: { client, redirectUri, state, codeChallenge: p.code_challenge, scope } };
}

/** The redirect URI with `params` added to its query (existing query kept, RFC 6749 §3.1.2). */
export function redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  return url.toString();
}
