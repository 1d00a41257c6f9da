import type { Db } from '../../db/index.js';
import type { TokenService } from '../tokens.js';
import { checkAuthorizationRequest } from './authorize-request.js';
import { createClientService } from './clients.js';
import { createGrantStore } from './grants.js';
import { createResourceRules } from './resource.js';
import { serverMetadata } from './metadata.js';
import { createTokenExchange } from './token-exchange.js';

/** Account linking over OAuth 2.1: registration, authorization requests, tokens, grants (SPEC.md, Account linking). */
export function createOAuthService(deps: {
  db: Db;
  tokens: TokenService;
  publicUrl: string;
  accessTtlSeconds: number;
  appsCap?: number;
}) {
  const clients = createClientService({ db: deps.db });
  const grants = createGrantStore({ db: deps.db, cap: deps.appsCap });
  const resources = createResourceRules(deps.publicUrl);
  const exchange = createTokenExchange({
    db: deps.db,
    tokens: deps.tokens,
    grants,
    accessTtlSeconds: deps.accessTtlSeconds,
    resources,
  });
  return {
    metadata: () => serverMetadata(deps.publicUrl),
    clients,
    grants,
    exchange,
    resources,
    checkAuthorizationRequest: (input: Record<string, unknown>) => checkAuthorizationRequest(input, clients, resources),
  };
}
export type OAuthService = ReturnType<typeof createOAuthService>;
