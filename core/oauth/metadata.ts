import { GRANT_TYPES, RESPONSE_TYPES } from './clients.js';
import { SCOPE } from './scope.js';

/**
 * The authorization server metadata (RFC 8414), served at both well-known paths. `issuer` is PUBLIC_URL;
 * code flow only, PKCE S256 only, public clients (`none`), one account-wide scope.
 */
export function serverMetadata(publicUrl: string) {
  return {
    issuer: publicUrl,
    authorization_endpoint: `${publicUrl}/oauth/authorize`,
    token_endpoint: `${publicUrl}/oauth/token`,
    registration_endpoint: `${publicUrl}/oauth/register`,
    revocation_endpoint: `${publicUrl}/oauth/revoke`,
    scopes_supported: [SCOPE],
    response_types_supported: [...RESPONSE_TYPES],
    response_modes_supported: ['query'],
    grant_types_supported: [...GRANT_TYPES],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    // RFC 9207: the redirect back carries `iss`, so a client talking to several servers cannot be mixed up.
    authorization_response_iss_parameter_supported: true,
    service_documentation: `${publicUrl}/v1/schemas`,
  };
}
