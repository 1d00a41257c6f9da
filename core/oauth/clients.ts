import { eq } from 'drizzle-orm';
import type { Db } from '../../db/index.js';
import { schema } from '../../db/index.js';
import { newId } from '../ids.js';
import { createSharedRateLimiter } from '../rate-limit.js';
import { oauthError } from './errors.js';
import { checkRedirectUri } from './redirect-uri.js';

export type ClientRow = typeof schema.oauthClients.$inferSelect;

export const GRANT_TYPES = ['authorization_code', 'refresh_token'] as const;
export const RESPONSE_TYPES = ['code'] as const;

/** The RFC 7591 registration response; `client_id_issued_at` in Unix seconds. */
export function clientInfo(c: ClientRow) {
  return {
    client_id: c.id,
    client_id_issued_at: Math.floor(c.createdAt / 1000),
    ...(c.name !== null ? { client_name: c.name } : {}),
    redirect_uris: c.redirectUris,
    grant_types: c.grantTypes,
    response_types: c.responseTypes,
    token_endpoint_auth_method: 'none' as const,
  };
}

/** Dynamic registration of public clients (RFC 7591): no secret, no review, strict redirect URIs. */
export function createClientService(deps: { db: Db }) {
  const registerLimiter = createSharedRateLimiter(deps.db, 'oauth_register', {
    limit: 300,
    windowMs: 3600_000,
    message: 'Too many client registrations from this address; try again later',
    perAddress: true,
  });

  return {
    /** Registers a client from RFC 7591 metadata; unknown metadata is ignored, as the RFC allows. */
    async register(meta: Record<string, unknown>, clientKey: string) {
      await registerLimiter.hit(clientKey);
      const invalid = (why: string) => oauthError('invalid_client_metadata', why);
      if (!Array.isArray(meta.redirect_uris) || meta.redirect_uris.length === 0) {
        throw oauthError('invalid_redirect_uri', 'redirect_uris: at least one redirect URI is required');
      }
      if (meta.redirect_uris.length > 20) throw oauthError('invalid_redirect_uri', 'redirect_uris: at most 20 entries');
      const redirectUris = [...new Set(meta.redirect_uris.map(checkRedirectUri))];
      if (
        meta.client_name !== undefined &&
        (typeof meta.client_name !== 'string' || meta.client_name.trim().length === 0 || meta.client_name.length > 200)
      ) {
        throw invalid('client_name must be a non-empty string of at most 200 characters');
      }
      const grantTypes = listOf(
        meta.grant_types,
        'grant_types',
        GRANT_TYPES,
        ['authorization_code', 'refresh_token'],
        invalid,
      );
      if (!grantTypes.includes('authorization_code')) throw invalid('grant_types must include authorization_code');
      const responseTypes = listOf(meta.response_types, 'response_types', RESPONSE_TYPES, ['code'], invalid);
      const auth = meta.token_endpoint_auth_method;
      if (auth !== undefined && auth !== 'none')
        throw invalid('token_endpoint_auth_method must be "none": clients are public and prove themselves with PKCE');
      const [row] = await deps.db
        .insert(schema.oauthClients)
        .values({
          id: newId('oac'),
          name: typeof meta.client_name === 'string' ? meta.client_name.trim() : null,
          redirectUris,
          grantTypes,
          responseTypes,
          createdAt: Date.now(),
        })
        .returning();
      return clientInfo(row!);
    },

    async get(clientId: string): Promise<ClientRow | undefined> {
      if (!/^oac_[A-Za-z0-9_-]{10,64}$/.test(clientId)) return undefined;
      const [row] = await deps.db.select().from(schema.oauthClients).where(eq(schema.oauthClients.id, clientId));
      return row;
    },
  };
}
export type ClientService = ReturnType<typeof createClientService>;

function listOf(
  value: unknown,
  field: string,
  allowed: readonly string[],
  fallback: string[],
  invalid: (why: string) => Error,
): string[] {
  if (value === undefined) return fallback;
  if (!Array.isArray(value) || value.length === 0 || !value.every((v) => typeof v === 'string'))
    throw invalid(`${field} must be a non-empty array of strings`);
  const unknown = value.filter((v) => !allowed.includes(v));
  if (unknown.length) throw invalid(`${field}: ${unknown.join(', ')} not supported (supported: ${allowed.join(', ')})`);
  return [...new Set(value as string[])];
}
